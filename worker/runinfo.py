"""What a node may read about its run, and the run text resolved by the worker.

Owns resolving a workflow's ``title`` once, when a run starts (text, or the
author's function of the validated input, given ``TITLE_TIMEOUT_S`` and
stopped early by a park or cancel; a failing, slow or non-text one leaves
the run untitled, with the reason's code for the trace: the run itself
goes on), a node's ``status_detail`` when it starts (likewise bounded and
failure-tolerant), the run's start time, and ``ctx.state`` / ``ctx.answer``
(``RunInfo`` built from the projection). The engine records every value
here in the bundle before anything acts on it, so a resume reads it back
and never resolves it again. Messages carry codes only: a title may echo
private input. Imports ``protocol`` and ``worker.nodes``/``worker.control``.
"""

from __future__ import annotations

import copy
import datetime
import threading
from collections.abc import Callable, Mapping
from typing import Any

from ..protocol.clock import now_ms
from ..protocol.definitions.graph import (
    MAX_TITLE_CHARS,
    TITLE_TIMEOUT_S,
    Node,
    NodeContext,
    RunInfo,
    Workflow,
)
from ..protocol.definitions.shown import MAX_STATUS_DETAIL_CHARS, shown_text
from ..protocol.states import Outcome
from .control import Control
from .nodes import Watch, run_callable

# A status detail is computed on the way into its node: it gets less time than a title.
STATUS_DETAIL_TIMEOUT_S = 5.0
# How long a stopped (slow) function is waited for before it is abandoned.
GRACE_S = 0.2


def _bounded(fn: Callable[[], Any], control: Control, timeout_s: float,
             limit: int) -> tuple[str | None, str | None]:
    """(the text ``fn`` returns, one line within ``limit``; or None and why not)."""
    watch = Watch(control, threading.Event(), timeout_s, effectful=False, park_grace_s=0.0,
                  stop_grace_s=GRACE_S)
    result = run_callable(fn, watch, timeout_s)
    if result.outcome != Outcome.OK:
        return None, str(result.error_code or result.outcome)
    if result.output is None:
        return None, None
    text = shown_text(result.output, limit)
    if text is None:
        return None, f"not_text: it returned {type(result.output).__name__}, not text"
    return text, None


def resolve_title(workflow: Workflow, run_input: Any, control: Control,
                  timeout_s: float = TITLE_TIMEOUT_S) -> tuple[str | None, str | None]:
    """(the run's title or None, why there is none when the author gave one)."""
    title = workflow.title
    if title is None:
        return None, None
    if not callable(title):
        return shown_text(title, MAX_TITLE_CHARS), None
    frozen = copy.deepcopy(run_input)  # the function cannot change the run's input
    return _bounded(lambda: title(frozen), control, timeout_s, MAX_TITLE_CHARS)


def resolve_status_detail(node: Node, ctx: NodeContext, control: Control,
                          timeout_s: float = STATUS_DETAIL_TIMEOUT_S,
                          ) -> tuple[str | None, str | None]:
    """(the node's status detail or None, why there is none when the author gave one)."""
    detail = getattr(node, "status_detail", None)
    if detail is None:
        return None, None
    if not callable(detail):
        return shown_text(detail, MAX_STATUS_DETAIL_CHARS), None
    return _bounded(lambda: detail(ctx), control, timeout_s, MAX_STATUS_DETAIL_CHARS)


def started_at() -> str:
    """Now, as ``ctx.state.started_at`` shows it: ISO 8601, UTC, to the millisecond."""
    moment = datetime.datetime.fromtimestamp(now_ms() / 1000, tz=datetime.UTC)
    return moment.isoformat(timespec="milliseconds").replace("+00:00", "Z")


def run_info(state: Mapping[str, Any]) -> RunInfo:
    """``ctx.state`` from the projection: a read-only copy, never the projection itself."""
    return RunInfo(run_id=str(state.get("runId")), title=state.get("title"),
                   steps=int(state.get("steps") or 0), started_at=state.get("startedAt"))


def answer(state: Mapping[str, Any]) -> Any:
    """``ctx.answer``: the answer this continuation carries (a copy), else None.

    A fork of a continuation carries the answer its node saw there.
    """
    return copy.deepcopy(state.get("answer"))


def start_fields(workflow: Workflow, run_input: Any, parent_state: Mapping[str, Any] | None,
                 control: Control, timeout_s: float = TITLE_TIMEOUT_S,
                 ) -> tuple[dict[str, Any], dict[str, Any]]:
    """(projection fields, ``run_started`` payload fields) of a run's title and start.

    A continuation keeps its chain's title and start time: nothing is resolved again.
    """
    if parent_state is not None:
        title, why = parent_state.get("title"), None
        started = parent_state.get("startedAt") or started_at()
    else:
        title, why = resolve_title(workflow, run_input, control, timeout_s)
        started = started_at()
    state: dict[str, Any] = {"startedAt": started}
    payload: dict[str, Any] = {}
    if title is not None:
        state["title"] = payload["title"] = title
    if why is not None:
        payload["titleError"] = why  # a code: the function's message may echo the input
    return state, payload


def started_payload(state: Mapping[str, Any]) -> dict[str, Any]:
    """The title part of a ``run_started`` written again from the projection (a resume)."""
    return {"title": state["title"]} if state.get("title") is not None else {}


def node_fields(node: Node, ctx: NodeContext, control: Control,
                ) -> tuple[dict[str, Any], dict[str, Any]]:
    """(projection changes, ``node_started`` payload fields) of a node's status detail."""
    detail, why = resolve_status_detail(node, ctx, control)
    payload: dict[str, Any] = {}
    if detail is not None:
        payload["statusDetail"] = detail
    if why is not None:
        payload["statusDetailError"] = why
    return ({"statusDetail": detail} if detail is not None else {}), payload


def detail_cleared(state: Mapping[str, Any]) -> dict[str, Any]:
    """The change that ends a node's status detail (none when it had none)."""
    return {"statusDetail": None} if state.get("statusDetail") is not None else {}
