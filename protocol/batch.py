"""Command batches: many commands from one action node, a few at a time, stoppable.

Owns ``run_command_batch``: it starts the checked items (``protocol.batchitems``)
in input order, at most ``concurrency`` at once, each the leader of its own
process group (``protocol.spawn``) with a per-item timeout and output bounded
per stream, and returns one result per item in input order. The node's stop
event (``ctx.cancel``: a cancel, a park, the node's timeout) stops every
running item's group (SIGTERM, then SIGKILL after ``ITEM_STOP_GRACE_S``) and
cancels the items not started. The calling thread starts every item and
outlives it, so each leader gets SIGKILL from the kernel if the worker dies
(``PR_SET_PDEATHSIG``); what else an item started carries the run's marker in
its environment and is reaped by the runner that takes the run over. The
batch is part of its action's guarded effect: nothing here is durable.
Imports ``protocol.spawn``, ``protocol.states``, ``protocol.current``,
``protocol.batchitems`` and ``protocol.definitions.graph``; never ``worker`` or
``supervisor``.
"""

from __future__ import annotations

import contextlib
import signal
import threading
import time
from collections import deque
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import IO, Any, Literal, TypedDict

from .batchitems import (
    DEFAULT_BATCH_CONCURRENCY,
    DEFAULT_BATCH_OUTPUT_BYTES,
    BatchItem,
    ItemArg,
    check_batch,
)
from .current import current_context
from .definitions.graph import NodeContext
from .spawn import DEVNULL, PIPE, Popen, TimeoutExpired, signal_group, spawn
from .states import Outcome

# How long a timed-out or stopped item gets after SIGTERM before its group gets SIGKILL:
# well inside the worker's own grace for a stopped node (worker.nodes.STOP_GRACE_S).
ITEM_STOP_GRACE_S = 1.0
POLL_S = 0.02

Status = Literal["succeeded", "failed", "timed_out", "cancelled"]


class CommandResult(TypedDict):
    """One item's result. ``exitCode`` is None unless the command exited by itself."""

    status: Status
    exitCode: int | None
    stdout: str
    stderr: str
    truncated: bool
    durationS: float
    error: str | None


def _result(status: Status, *, code: int | None = None, out: bytes = b"", err: bytes = b"",
            truncated: bool = False, duration: float = 0.0,
            error: str | None = None) -> CommandResult:
    return {"status": status, "exitCode": code, "stdout": out.decode(errors="replace"),
            "stderr": err.decode(errors="replace"), "truncated": truncated,
            "durationS": round(duration, 3), "error": error}


class _Capture:
    """One stream of one item, read to its end by a thread; the first ``limit`` bytes kept."""

    def __init__(self, stream: IO[bytes], limit: int) -> None:
        self.kept = bytearray()
        self.total = 0
        self._limit = limit
        self.thread = threading.Thread(target=self._read, args=(stream,), daemon=True,
                                       name="pi-workflows-batch-output")
        self.thread.start()

    def _read(self, stream: Any) -> None:
        with contextlib.suppress(OSError, ValueError):
            while chunk := stream.read1(65536):
                self.total += len(chunk)
                room = self._limit - len(self.kept)
                if room > 0:
                    self.kept.extend(chunk[:room])

    @property
    def truncated(self) -> bool:
        return self.total > self._limit


@dataclass
class _Running:
    item: BatchItem
    proc: Popen[bytes]
    started: float
    out: _Capture
    err: _Capture
    reason: Outcome | None = None  # TIMED_OUT or CANCELLED, once it is being stopped
    term_at: float | None = None
    ended: float | None = None
    extra: list[threading.Thread] = field(default_factory=list)


def _feed(proc: Popen[bytes], text: str) -> None:
    try:
        assert proc.stdin is not None
        proc.stdin.write(text.encode())
        proc.stdin.close()
    except OSError:
        pass  # the command exited without reading all of its input


class _Batch:
    def __init__(self, items: list[BatchItem], concurrency: int, limit: int,
                 stop: threading.Event) -> None:
        self.pending = deque(items)
        self.results: list[CommandResult | None] = [None] * len(items)
        self.running: list[_Running] = []
        self.concurrency, self.limit, self.stop = concurrency, limit, stop

    def run(self) -> list[CommandResult]:
        try:
            while self.pending or self.running:
                if self.stop.is_set():
                    self._stop_all()
                    break
                while self.pending and len(self.running) < self.concurrency:
                    self._start(self.pending.popleft())
                now = time.monotonic()
                for item in list(self.running):
                    self._look_at(item, now)
                if self.running:
                    self.stop.wait(POLL_S)  # a stop wakes it at once
        except BaseException:
            self._stop_all()  # no item outlives a batch that failed (no thread left, say)
            raise
        for waiting in self.pending:
            self.results[waiting.index] = _result(
                "cancelled", error="not started: the node was stopped (cancel, park or"
                                   " timeout)")
        self.pending.clear()
        return [r for r in self.results if r is not None]

    def _start(self, item: BatchItem) -> None:
        started = time.monotonic()
        try:
            # Started from this thread, which outlives the item: the kernel kills the
            # leader if the worker dies (PR_SET_PDEATHSIG tracks the spawning thread).
            proc = spawn(item.argv, cwd=item.cwd, env=item.env,
                         stdin=PIPE if item.stdin is not None else DEVNULL,
                         stdout=PIPE, stderr=PIPE, pdeathsig=signal.SIGKILL)
        except OSError as exc:
            where = "" if exc.filename is None else f": {exc.filename}"
            self.results[item.index] = _result(
                "failed", duration=time.monotonic() - started,
                error=f"could not start: {exc.strerror or exc}{where}")
            return
        try:
            assert proc.stdout is not None and proc.stderr is not None
            running = _Running(item, proc, started, _Capture(proc.stdout, self.limit),
                               _Capture(proc.stderr, self.limit))
            if item.stdin is not None:
                feeder = threading.Thread(target=_feed, args=(proc, item.stdin), daemon=True)
                feeder.start()
                running.extra.append(feeder)
        except BaseException:
            signal_group(proc, signal.SIGKILL)  # started, but cannot be watched
            proc.wait()
            raise
        self.running.append(running)

    def _look_at(self, item: _Running, now: float) -> None:
        if item.proc.poll() is not None:
            self._finish(item)
            return
        timeout = item.item.timeout_s
        if item.reason is None and timeout is not None and now - item.started >= timeout:
            item.reason, item.term_at, item.ended = Outcome.TIMED_OUT, now, now
            signal_group(item.proc, signal.SIGTERM)
        elif item.term_at is not None and now - item.term_at >= ITEM_STOP_GRACE_S:
            signal_group(item.proc, signal.SIGKILL)

    def _finish(self, item: _Running) -> None:
        self.running.remove(item)
        ended = item.ended if item.ended is not None else time.monotonic()
        # What the command left behind in its group (a background child holding the
        # pipes) must not hold the batch.
        signal_group(item.proc, signal.SIGKILL)
        for capture in (item.out, item.err):
            capture.thread.join(ITEM_STOP_GRACE_S)
        code = item.proc.returncode
        truncated = item.out.truncated or item.err.truncated
        common: dict[str, Any] = {"out": bytes(item.out.kept), "err": bytes(item.err.kept),
                                  "truncated": truncated, "duration": ended - item.started}
        timeout = item.item.timeout_s
        if item.reason == Outcome.TIMED_OUT:
            result = _result("timed_out", **common,
                             error=f"the command did not finish within {timeout:g} s")
        elif item.reason == Outcome.CANCELLED:
            result = _result("cancelled", **common,
                             error="stopped: the node was stopped (cancel, park or timeout)")
        elif code == 0:
            result = _result("succeeded", code=0, **common)
        elif code < 0:
            result = _result("failed", code=code, **common,
                             error=f"the command was killed by signal {-code}")
        else:
            result = _result("failed", code=code, **common,
                             error=f"the command exited with status {code}")
        self.results[item.item.index] = result

    def _stop_all(self) -> None:
        now = time.monotonic()
        for item in self.running:
            if item.reason is None:
                item.reason, item.ended = Outcome.CANCELLED, now
            signal_group(item.proc, signal.SIGTERM)
        deadline = now + ITEM_STOP_GRACE_S
        for item in list(self.running):
            try:
                item.proc.wait(max(0.0, deadline - time.monotonic()))
            except TimeoutExpired:
                signal_group(item.proc, signal.SIGKILL)
                item.proc.wait()
            self._finish(item)


def run_command_batch(items: Sequence[ItemArg], *, concurrency: int = DEFAULT_BATCH_CONCURRENCY,
                      timeout: float | None = None,
                      max_output_bytes: int = DEFAULT_BATCH_OUTPUT_BYTES,
                      ctx: NodeContext | None = None) -> list[CommandResult]:
    """Run up to 64 commands, ``concurrency`` (1 to 8) at a time; results in input order.

    Call it from an action node's function (it finds the node's context by
    itself; from a thread of your own, pass ``ctx=``). An item is a string
    (run by ``/bin/sh -c``), an argv list, or a dict ``{"command": ...,
    "cwd": ..., "env": {...}, "stdin": "...", "timeout": seconds}``;
    ``timeout`` is the default per item (None: no limit but the node's).
    Each result is ``{status, exitCode, stdout, stderr, truncated,
    durationS, error}``, ``status`` one of ``succeeded``, ``failed`` (a
    nonzero exit, a signal, or a command that could not start),
    ``timed_out`` or ``cancelled``. Bad arguments raise ``ValueError``
    before anything starts.
    """
    node = ctx if ctx is not None else current_context()
    if node is None:
        raise RuntimeError("run_command_batch: call it from an action node's function"
                           " (or pass ctx=, from a thread of your own)")
    checked = check_batch(items, concurrency=concurrency, timeout=timeout,
                          max_output_bytes=max_output_bytes, project_dir=node.project_dir)
    return _Batch(checked, concurrency, max_output_bytes, node.cancel).run()
