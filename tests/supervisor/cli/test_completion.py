"""Shell completion: each shell gets its own script, and a TAB offers run ids and names.

The candidates are asked for the way each script asks (its environment
variables), in process; the scripts are also loaded by the shell itself
when that shell is installed.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from pi_workflows.protocol.paths import resolve_paths
from pi_workflows.protocol.settings import load_settings
from pi_workflows.protocol.store import Store

from tests.helpers.cli import CliResult, run_cli
from tests.helpers.store import put_in_state

pytestmark = pytest.mark.timeout(60)

OLD = "20990101T000000Z-review-0000abcd"
NEW = "20990102T000000Z-deploy-1111abcd"
OTHER = "20980101T000000Z-review-2222abcd"


@pytest.fixture
def project(tmp_path: Path) -> Path:
    root = tmp_path / "proj"
    flows = root / ".pi" / "workflows"
    flows.mkdir(parents=True)
    for name in ("review", "release", "deploy"):
        # Never imported to be listed: a file that raises still completes.
        (flows / f"{name}.workflow.py").write_text("raise SystemExit('imported!')\n")
    paths = resolve_paths(load_settings(), root)
    paths.store_file.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    with Store(paths.store_file) as store:
        for run_id in (OTHER, OLD, NEW):
            put_in_state(store, run_id, "queued")
    return root


def _env(home: Path, **extra: str) -> dict[str, str]:
    # HOME is a temporary directory: completion must never touch the real one.
    return {**os.environ, "HOME": str(home), **extra}


def _bash(cwd: Path, line: str, home: Path) -> list[str]:
    words = line.split(" ")
    out = run_cli(cwd=cwd, env=_env(home, _PI_WORKFLOWS_COMPLETE="complete_bash",
                                    COMP_WORDS=line, COMP_CWORD=str(len(words) - 1)))
    assert out.returncode == 0 and out.stderr == "", out.stderr
    return out.stdout.split()


def _typed(shell: str, cwd: Path, line: str, home: Path) -> CliResult:
    return run_cli(cwd=cwd, env=_env(home, _PI_WORKFLOWS_COMPLETE=f"complete_{shell}",
                                     _TYPER_COMPLETE_ARGS=line,
                                     _TYPER_COMPLETE_FISH_ACTION="get-args"))


@pytest.mark.parametrize(("shell", "marks"), [
    ("bash", ["complete -o default -F _pi_workflows_completion pi-workflows",
              "_PI_WORKFLOWS_COMPLETE=complete_bash"]),
    ("zsh", ["#compdef pi-workflows", "compdef _pi_workflows_completion pi-workflows",
             "_PI_WORKFLOWS_COMPLETE=complete_zsh"]),
    ("fish", ["complete --command pi-workflows", "_PI_WORKFLOWS_COMPLETE=complete_fish"]),
])
def test_each_shell_gets_its_own_script(tmp_path: Path, shell: str, marks: list[str]) -> None:
    shown = run_cli("--show-completion", shell, env=_env(tmp_path))
    assert shown.returncode == 0, shown.stderr
    assert all(mark in shown.stdout for mark in marks), shown.stdout
    others = {"bash": "complete -o default", "zsh": "compdef", "fish": "complete --command"}
    assert not any(text in shown.stdout for name, text in others.items() if name != shell)
    assert list(tmp_path.iterdir()) == []  # showing installs nothing
    binary = shutil.which(shell)
    if binary is not None:  # the shell itself reads it without a syntax error
        checked = subprocess.run([binary, "-n"], input=shown.stdout, text=True,
                                 capture_output=True, timeout=30)
        assert checked.returncode == 0, checked.stderr


@pytest.mark.parametrize(("shell", "path"), [
    ("zsh", ".zfunc/_pi-workflows"), ("fish", ".config/fish/completions/pi-workflows.fish"),
    ("bash", ".bash_completions/pi-workflows.sh"),
])
def test_install_writes_that_shells_script_under_home(
        tmp_path: Path, shell: str, path: str) -> None:
    installed = run_cli("--install-completion", shell, env=_env(tmp_path))
    assert installed.returncode == 0, installed.stderr
    assert (tmp_path / path).read_text().strip() == run_cli(
        "--show-completion", shell, env=_env(tmp_path)).stdout.strip()


def test_a_bare_option_takes_this_shell_and_an_unknown_one_is_refused(tmp_path: Path) -> None:
    shown = run_cli("--show-completion", env=_env(tmp_path, SHELL="/usr/bin/fish"))
    assert shown.returncode == 0, shown.stderr
    assert shown.stdout.startswith("complete ") or "_pi_workflows_completion" in shown.stdout
    bad = run_cli("--show-completion", "tcsh", env=_env(tmp_path))
    assert bad.returncode == 2 and bad.stdout == ""
    assert bad.stderr == ("pi-workflows: error: --show-completion: unknown shell 'tcsh'; give one"
                          " of bash, zsh, fish, such as --show-completion zsh\n")


@pytest.mark.parametrize("command", ["status", "watch", "logs", "answer", "cancel", "resume",
                                     "fork", "chat", "export", "delete"])
def test_a_run_completes_to_its_ids_newest_first(
        project: Path, tmp_path: Path, command: str) -> None:
    assert _bash(project, f"pi-workflows {command} 2099", tmp_path) == [NEW, OLD]
    assert _bash(project, f"pi-workflows {command} ", tmp_path) == [NEW, OLD, OTHER]
    assert _bash(project, f"pi-workflows {command} 20990101", tmp_path) == [OLD]


def test_zsh_and_fish_get_the_same_candidates_with_their_workflow(
        project: Path, tmp_path: Path) -> None:
    zsh = _typed("zsh", project, "pi-workflows cancel 2099", tmp_path)
    assert zsh.returncode == 0, zsh.stderr
    assert zsh.stdout.startswith("_arguments ")
    assert f'"{NEW}":"deploy"' in zsh.stdout and f'"{OLD}":"review"' in zsh.stdout
    fish = _typed("fish", project, "pi-workflows run re", tmp_path)
    assert fish.returncode == 0, fish.stderr
    assert fish.stdout.splitlines() == ["release\tproject workflow", "review\tproject workflow"]


def test_workflow_names_complete_without_importing_the_files(
        project: Path, tmp_path: Path) -> None:
    assert _bash(project, "pi-workflows run re", tmp_path) == ["release", "review"]
    assert _bash(project, "pi-workflows start d", tmp_path) == ["deploy"]
    assert _bash(project, "pi-workflows validate ", tmp_path) == ["deploy", "release", "review"]
    assert _bash(project, "pi-workflows list --workflow de", tmp_path) == ["deploy"]


def test_project_given_before_the_run_is_the_one_searched(
        project: Path, tmp_path: Path) -> None:
    line = f"pi-workflows status --project {project} 2099"
    assert _bash(tmp_path, line, tmp_path) == [NEW, OLD]


def test_no_project_no_store_or_broken_settings_offer_nothing(
        project: Path, tmp_path: Path) -> None:
    empty = tmp_path / "empty"
    empty.mkdir()
    assert _bash(empty, "pi-workflows status 2", tmp_path) == []
    assert not resolve_paths(load_settings(), empty).store_file.exists()  # none created
    assert _bash(empty, "pi-workflows run ", tmp_path) == []
    broken = run_cli(cwd=project, env=_env(tmp_path, _PI_WORKFLOWS_COMPLETE="complete_bash",
                                           COMP_WORDS="pi-workflows status 2", COMP_CWORD="2",
                                           PI_WORKFLOWS_LEASE_MS="abc"))
    assert broken.returncode == 0 and broken.stdout.split() == []
    assert "Traceback" not in broken.stderr


def _console_script() -> Path:
    script = Path(shutil.which("pi-workflows", path=str(Path(sys.executable).parent)) or "")
    if not script.name:
        pytest.skip("no pi-workflows console script beside this interpreter")
    return script


@pytest.mark.parametrize(("shell", "ask"), [
    ("bash", 'COMP_WORDS=(pi-workflows cancel 2099); COMP_CWORD=2;'
             ' _pi_workflows_completion pi-workflows; printf "%s\\n" "${COMPREPLY[@]}"'),
    ("fish", 'complete -C "pi-workflows cancel 2099"'),
])
@pytest.mark.timeout(120)
def test_the_shell_itself_completes_a_run_id_with_the_script(
        project: Path, tmp_path: Path, shell: str, ask: str) -> None:
    binary = shutil.which(shell)
    if binary is None:
        pytest.skip(f"{shell} is not installed")
    script = tmp_path / f"completion.{shell}"
    script.write_text(run_cli("--show-completion", shell, env=_env(tmp_path)).stdout)
    env = _env(tmp_path, PATH=f"{_console_script().parent}{os.pathsep}{os.environ['PATH']}")
    done = subprocess.run([binary, "-c", f"source {script}; {ask}"], cwd=project, env=env,
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert sorted(line.split("\t")[0] for line in done.stdout.split("\n") if line) == [OLD, NEW]
