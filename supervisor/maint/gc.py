"""Retention of settled runs: ``pi-workflows gc --older-than DURATION``.

Owns reading a duration, deciding which runs go and in what order, so that
a gc killed at any point leaves nothing half-removed and a rerun finishes:

1. finish what a killed gc left: a journalled run whose queue row is gone
   loses its bundle; the trash is emptied; the journal cleared;
2. plan: the store's chain rule (``protocol.store.retention.blocker``),
   plus what only the disk and the process table know (a path that is not
   safe to delete, a run a live process uses, a bundle that says it waits);
3. journal every run id about to go (fsynced), then, chain by chain: take
   its bundle locks, delete its rows in one transaction that checks the
   rule again, and move each bundle whole into the trash and delete it;
4. clear the journal.

A queued, starting, running or parked run is never a candidate, so a host
claiming runs meanwhile never meets a removed row. Imports ``protocol``,
``supervisor.maint.gc_bundles`` and ``views.timefmt``; never ``session``,
``host`` or ``cli``.
"""

from __future__ import annotations

import os
import sys
import threading
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from ...protocol.bundle import Bundle, BundleCorrupt
from ...protocol.errors import LimitError, UsageError
from ...protocol.paths import Paths, project_key
from ...protocol.settingspec import SettingsLike
from ...protocol.states import TERMINAL, QueueState, RunStatus, display_state, seen_status
from ...protocol.store import Chain, ChainMember, Hold, Store
from ...protocol.store.retention import blocker
from ...protocol.tempdirs import sweep_tempdirs
from ..views import timefmt
from .gc_bundles import (
    NotABundle,
    bundle_dir,
    clear_journal,
    discard,
    empty_trash,
    gc_lock,
    lock_bundle,
    read_journal,
    runs_in_use,
    tree_bytes,
    write_journal,
)

PAUSE_ENV = "PI_WORKFLOWS_GC_PAUSE"  # test seam: journaled | deleted | trashed


def parse_duration(text: str) -> int:
    """``--older-than``: ``30d``, ``12h``, ``1h30m`` ... (as ``list --since``) -> milliseconds."""
    ms = int(timefmt.parse_duration(text, "--older-than") * 1000)
    if ms <= 0:  # "older than nothing" would be every settled run: never by accident
        raise UsageError(f"--older-than {text!r} is zero: give how old a settled run must be,"
                         " such as 30d", code="invalid_duration")
    return ms


def format_bytes(n: int) -> str:
    for unit, size in (("GB", 1 << 30), ("MB", 1 << 20), ("KB", 1 << 10)):
        if n >= size:
            return f"{n / size:.1f} {unit}"
    return f"{n} B"


@dataclass(frozen=True)
class RunLine:
    run_id: str
    workflow: str
    state: str  # as `status` shows it
    settled_at: int
    age_ms: int
    bytes: int = 0
    has_bundle: bool = False
    reason: str | None = None  # kept: a Hold code
    detail: str | None = None

    def as_json(self) -> dict[str, Any]:
        data: dict[str, Any] = {"runId": self.run_id, "workflow": self.workflow,
                                "state": self.state, "settledAt": self.settled_at,
                                "ageMs": self.age_ms, "age": timefmt.duration(self.age_ms)}
        if self.reason is None:
            data.update(bundle=self.has_bundle, bytes=self.bytes)
        else:
            data.update(reason=self.reason, detail=self.detail)
        return data


@dataclass
class Report:
    dry_run: bool
    older_than: str
    cutoff: int
    now: int
    removed: list[RunLine] = field(default_factory=list)
    kept: list[RunLine] = field(default_factory=list)
    finished: list[str] = field(default_factory=list)  # an interrupted gc's leftovers
    chains: int = 0
    temp_dirs: int = 0  # dead workers' pwb-* / pi-workflows-pi-* directories removed
    controller_events: int = 0  # events of deleted controller resources, past the cutoff

    def as_json(self) -> dict[str, Any]:
        return {"dryRun": self.dry_run, "olderThan": self.older_than, "cutoff": self.cutoff,
                "now": self.now, "removed": [r.as_json() for r in self.removed],
                "kept": [k.as_json() for k in self.kept], "finished": self.finished,
                "tempDirsRemoved": self.temp_dirs,
                "controllerEventsRemoved": self.controller_events,
                "summary": {"runs": len(self.removed), "chains": self.chains,
                            "bytes": sum(r.bytes for r in self.removed),
                            "kept": len(self.kept)}}


@dataclass
class Candidate:
    chain: Chain
    lines: list[RunLine]
    dirs: dict[str, Path]


def pause_at(point: str) -> None:
    """The crash drill's seam: stop here (until killed) when ``PI_WORKFLOWS_GC_PAUSE`` says so."""
    if os.environ.get(PAUSE_ENV) == point:
        sys.stderr.write(f"pi-workflows gc: paused at {point}\n")
        sys.stderr.flush()
        threading.Event().wait()


def _status(runs_dir: Path, run_id: str) -> str | None:
    bundle = Bundle(runs_dir, run_id)
    try:
        return bundle.raw_state().get("status") if bundle.exists() else None
    except (BundleCorrupt, OSError):
        return None


def _disk_hold(runs_dir: Path, chain: Chain, statuses: dict[str, str | None],
               in_use: set[str]) -> tuple[Hold | None, dict[str, Path]]:
    dirs: dict[str, Path] = {}
    live_children = {m.parent_run_id for m in chain.members
                     if m.state not in (QueueState.FAILED, QueueState.CANCELLED)}
    for m in chain.members:
        if m.run_id in in_use:
            return Hold("in_use", f"a live process uses {m.run_id}"), {}
        seen = seen_status(m.state, statuses[m.run_id], m.cancel_requested)
        if seen == RunStatus.WAITING and m.run_id not in live_children:
            return Hold("waiting", f"{m.run_id} waits at a checkpoint for an answer"), {}
        try:
            found = bundle_dir(runs_dir, m.run_id)
        except (NotABundle, OSError) as exc:
            return Hold("unsafe", f"not removed, check it by hand: {exc}"), {}
        if found is not None:
            dirs[m.run_id] = found
    return None, dirs


def _line(m: ChainMember, status: str | None, now: int) -> RunLine:
    shown = display_state(m.state, seen_status(m.state, status, m.cancel_requested))
    return RunLine(m.run_id, m.workflow, shown, m.settled_at,
                   now - m.settled_at)


def consider(paths: Paths, chain: Chain, cutoff: int, now: int,
             in_use: set[str]) -> tuple[Candidate | None, Hold | None, list[RunLine]]:
    """One chain: the candidate to remove (with its bundles), or why it stays; its lines."""
    statuses = {m.run_id: _status(paths.runs_dir, m.run_id) for m in chain.members}
    lines = [_line(m, statuses[m.run_id], now) for m in chain.members]
    hold = blocker(chain, cutoff)
    dirs: dict[str, Path] = {}
    if hold is None:
        hold, dirs = _disk_hold(paths.runs_dir, chain, statuses, in_use)
    if hold is not None:
        return None, hold, [replace(line, reason=hold.code, detail=hold.detail)
                            for line in lines]
    lines = [replace(line, has_bundle=line.run_id in dirs,
                     bytes=tree_bytes(dirs[line.run_id]) if line.run_id in dirs else 0)
             for line in lines]
    return Candidate(chain, lines, dirs), None, lines


def plan(store: Store, paths: Paths, cutoff: int, now: int) -> tuple[list[Candidate],
                                                                     list[RunLine]]:
    """The chains that may go (with their bundles) and the old settled runs that stay."""
    in_use = in_use_now(paths)
    candidates: list[Candidate] = []
    kept: list[RunLine] = []
    for chain in store.chains():
        old = {m.run_id for m in chain.members if m.state in TERMINAL and m.settled_at < cutoff}
        if not old:
            continue
        cand, _, lines = consider(paths, chain, cutoff, now, in_use)
        if cand is None:
            kept += [line for line in lines if line.run_id in old]
        else:
            candidates.append(cand)
    return candidates, kept


def in_use_now(paths: Paths) -> set[str]:
    """The project's runs a live process works on now (they are never removed)."""
    return runs_in_use(paths.runs_dir, project_key(paths.project))


def gc_store(settings: SettingsLike, store_file: Path) -> Store:
    """The store as gc and delete open it: FULL, so a deleted row is on disk before its
    bundle goes, even after a power cut."""
    return Store(store_file, lease_ms=settings.lease_ms,
                 busy_timeout_ms=settings.busy_timeout_ms, synchronous="FULL",
                 url=settings.store_url)


def _known(store: Store, run_id: str) -> bool:
    try:
        return store.get(run_id) is not None
    except LimitError:
        return True  # not a run id: never ours to touch


def finish(store: Store, runs_dir: Path) -> list[str]:
    """Complete an interrupted gc: bundles of journalled runs whose rows are gone."""
    done = []
    for run_id in read_journal(runs_dir):
        if _known(store, run_id):
            continue  # its rows stayed: this gc's plan decides again
        try:
            found = bundle_dir(runs_dir, run_id)
        except (NotABundle, OSError):
            continue
        if found is not None:
            discard(runs_dir, found)
            done.append(run_id)
    empty_trash(runs_dir)
    clear_journal(runs_dir)
    return done


def _remove(store: Store, runs_dir: Path, cand: Candidate, cutoff: int,
            pause: Callable[[str], None]) -> Hold | None:
    fds: list[int] = []
    try:
        for run_id, path in cand.dirs.items():
            try:
                if bundle_dir(runs_dir, run_id) != path:
                    return Hold("changed", f"the bundle of {run_id} changed meanwhile")
                fd = lock_bundle(path)
            except BlockingIOError:
                return Hold("in_use", f"the bundle of {run_id} is locked by a writer")
            except (NotABundle, OSError) as exc:
                return Hold("unsafe", f"not removed, check it by hand: {exc}")
            if fd is not None:
                fds.append(fd)
        hold = store.remove_chain(cand.chain.run_ids, cutoff)
        if hold is not None:
            return hold
        pause("deleted")
        for path in cand.dirs.values():
            discard(runs_dir, path, lambda: pause("trashed"))
        return None
    finally:
        for fd in fds:
            os.close(fd)


def collect_garbage(store: Store, paths: Paths, *, older_than: str, now: int, dry_run: bool,
                    pause: Callable[[str], None] = pause_at) -> Report:
    cutoff = now - parse_duration(older_than)
    report = Report(dry_run, older_than, cutoff, now)
    runs_dir = paths.runs_dir
    if dry_run:
        report.finished = [i for i in read_journal(runs_dir)
                           if not _known(store, i) and (runs_dir / i).is_dir()]
        candidates, report.kept = plan(store, paths, cutoff, now)
        report.removed = [line for c in candidates for line in c.lines]
        report.chains = len(candidates)
        report.controller_events = store.gone_resource_events(cutoff)
        return report
    with gc_lock(runs_dir):
        report.finished = finish(store, runs_dir)
        candidates, report.kept = plan(store, paths, cutoff, now)
        removed, kept, report.chains = remove_planned(store, runs_dir, candidates, cutoff, now,
                                                      pause)
        report.removed += removed
        report.kept += kept
        report.controller_events = store.gone_resource_events(cutoff, remove=True)
    report.temp_dirs = sweep_tempdirs()  # only directories whose owner is provably dead
    return report


def remove_planned(store: Store, runs_dir: Path, candidates: list[Candidate], cutoff: int,
                   now: int, pause: Callable[[str], None] = pause_at,
                   ) -> tuple[list[RunLine], list[RunLine], int]:
    """Journal the candidates' run ids, remove each chain, clear the journal (under
    ``gc_lock``): the lines removed, the lines kept (a chain that changed meanwhile)
    and how many chains went."""
    removed: list[RunLine] = []
    kept: list[RunLine] = []
    chains = 0
    if candidates:
        write_journal(runs_dir, [i for c in candidates for i in c.chain.run_ids], now)
        pause("journaled")
    for cand in candidates:
        hold = _remove(store, runs_dir, cand, cutoff, pause)
        if hold is None:
            removed += cand.lines
            chains += 1
        elif hold.code != "gone":
            kept += [replace(line, reason=hold.code, detail=hold.detail) for line in cand.lines]
    clear_journal(runs_dir)
    return removed, kept, chains
