"""Starting a controller worker process (``python -m pi_workflows.worker --controllers``).

Owns the one call that spawns controller worker SLOT with the command line,
marker and handed settings ``protocol.wire`` defines, as the leader of its
own process group (``procs.workers.Child``, so the host reaps it with
``poll`` like any worker). Imports ``protocol`` and ``procs.workers``;
never the worker package.
"""

from __future__ import annotations

import os
from pathlib import Path

from ...protocol.spawn import spawn
from ...protocol.wire import NUDGE_SIGNAL, controller_argv, controller_marker, worker_env
from .workers import Child


def spawn_controller_worker(slot: int, *, project: Path, project_key: str, runner_id: str,
                            dirs: tuple[Path, Path], config_json: str = "") -> Child:
    argv = controller_argv(project, runner_id, os.getpid(), slot, workflows_dir=dirs[0],
                           global_dir=dirs[1])
    env = worker_env(controller_marker(project_key, runner_id, slot), config_json=config_json)
    # Ignored until the worker installs its handler: the host's nudge may come first.
    return Child(spawn(argv, cwd=project, env=env, ignore_signals=(NUDGE_SIGNAL,)))
