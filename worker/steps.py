"""Executing one node attempt by kind: compute, action, shell, notify, agent.

Owns turning a node definition and its context into a ``NodeOutcome``:
callables and shell commands under a ``Watch``, action/shell effects under
the guard, notify messages, and the agent conversation through an
``AgentExecutor``. Writes nothing itself: trace events go through the
``StepHost`` the engine passes in. Imports ``protocol`` and worker helpers.
"""

from __future__ import annotations

import hashlib
import threading
from typing import Any, Protocol

from ..protocol.current import call_in_node
from ..protocol.definitions.graph import (
    ActionNode,
    AgentNode,
    ComputeNode,
    Node,
    NodeContext,
    NotifyNode,
    ShellNode,
    resolve_value,
)
from ..protocol.definitions.verdicts import read_verdict
from ..protocol.diskfull import is_disk_full
from ..protocol.limits import safe_error_message
from ..protocol.states import Outcome
from ..protocol.updates import UpdateError, event_payload, normalize_update
from .agent import AgentExecutor, AgentRequest, schema_problem, with_contract
from .effects import EffectStore, run_guarded
from .lines import LineTap, OutputTap
from .nodes import (
    NodeOutcome,
    Watch,
    default_cwd,
    error_outcome,
    run_callable,
    run_shell,
    shell_argv,
    shell_env,
)
from .shellparse import shaped
from .stream import OutputStreams
from .updates import AttemptUpdates


class StepHost(Protocol):
    """What a step needs from the engine."""

    run_id: str
    token: str
    workflow_name: str | None
    effects: EffectStore
    agent: AgentExecutor | None
    output: OutputStreams | None  # a live copy of shell output, when the bundle takes one

    def note(self, event_type: str, payload: dict[str, Any], node_id: str,
             attempt_id: str) -> None: ...
    def keep(self, value: Any) -> Any: ...
    def restore(self, value: Any) -> Any: ...
    def notify(self, node_id: str, idx: int, kind: str, message: str) -> None: ...


class _Hooks:
    """Agent callbacks; inert once the node attempt is over (an abandoned thread)."""

    def __init__(self, host: StepHost, node: AgentNode, ctx: NodeContext) -> None:
        self.host, self.node, self.ctx = host, node, ctx
        self.live = True
        self.lock = threading.Lock()
        # (the accepted submission, the value its ``validate`` replaced it with)
        self.replaced: tuple[Any, Any] | None = None

    def _note(self, event_type: str, payload: dict[str, Any]) -> None:
        with self.lock:
            if self.live:
                # The node's own id: inside an include ``ctx.node_id`` is the child's.
                self.host.note(event_type, payload, self.node.id, self.ctx.attempt_id)

    def prompt_sent(self, prompt: str, via: str = "headless") -> None:
        # The bundle keeps a digest, not the prompt: prompts may carry private input.
        # ``via`` records where the conversation happens: a headless Pi or the session.
        digest = hashlib.sha256(prompt.encode()).hexdigest()
        self._note("agent_prompt_sent", {"promptSha256": digest, "chars": len(prompt),
                                         "via": via})

    def update(self, message: Any) -> str | None:
        """A model's progress (text, or ``{"progress": ..., "message": ...}``); the reason
        it was refused, or None."""
        try:
            if isinstance(self.ctx.updates, AttemptUpdates):  # bounded, rate-limited, deduped
                with self.lock:
                    if self.live:
                        self.ctx.updates(message)
            else:  # a context built without the engine's updates
                self._note("update_published", event_payload(normalize_update(message)))
        except UpdateError as exc:
            return str(exc)
        return None

    def check(self, submission: Any) -> str | None:
        self.replaced = None
        schema = self.node.expected_output
        if schema:
            problem = schema_problem(submission, schema)
            if problem:
                return problem
        if self.node.validate is not None:
            try:
                verdict = read_verdict(self.node.validate(submission, self.ctx))
            except Exception as exc:
                return safe_error_message(f"validation raised {type(exc).__name__}: {exc}")
            if verdict.refusal is not None:
                return verdict.refusal
            if verdict.replaced:
                self.replaced = (submission, verdict.value)
        return None

    def output_for(self, submission: Any) -> Any:
        """What the node outputs for an accepted ``submission``: ``validate``'s
        replacement of it, if it made one, else the submission itself."""
        replaced = self.replaced
        return replaced[1] if replaced is not None and replaced[0] is submission else submission

    def close(self) -> None:
        with self.lock:
            self.live = False


def run_step(host: StepHost, node: Node, ctx: NodeContext, watch: Watch,
             timeout_s: float | None, step: int) -> NodeOutcome:
    """One attempt of any node but a checkpoint (the engine settles those itself)."""
    if isinstance(node, ComputeNode):
        fn = node.fn
        return run_callable(lambda: fn(ctx), watch, timeout_s)
    if isinstance(node, NotifyNode):
        try:
            message = str(resolve_value(node.message, ctx))
        except Exception as exc:
            return error_outcome(exc)
        host.notify(node.id, step, node.notify_kind, message)
        return NodeOutcome(Outcome.OK, output={"message": message, "kind": node.notify_kind})
    if isinstance(node, AgentNode):
        return _agent(host, node, ctx, watch, timeout_s)
    if isinstance(node, ActionNode | ShellNode):
        return _effect(host, node, ctx, watch, timeout_s, step)
    return NodeOutcome(Outcome.FAILED, error_code="node_kind_unknown",
                       error=f"node {node.id!r} has an unknown kind {node.kind!r}")


def _effect(host: StepHost, node: ActionNode | ShellNode, ctx: NodeContext, watch: Watch,
            timeout_s: float | None, step: int) -> NodeOutcome:
    if isinstance(node, ActionNode):
        request: dict[str, Any] = {"kind": "action", "node": node.id, "step": step}
        fn = node.fn

        def execute() -> NodeOutcome:
            # The node's context is the thread's current one: run_command_batch finds it.
            done = run_callable(lambda: call_in_node(ctx, fn), watch, timeout_s)
            if isinstance(ctx.updates, AttemptUpdates):
                ctx.updates.flush()  # its last progress, before its effect is recorded
            return done
    else:
        shell_node = node
        try:
            argv = shell_argv(resolve_value(node.command, ctx))
            cwd = default_cwd(resolve_value(node.cwd, ctx), str(ctx.project_dir))
            env = shell_env(resolve_value(node.env, ctx))
            stdin = resolve_value(node.stdin, ctx)
        except Exception as exc:
            return error_outcome(exc)
        request = {"kind": "shell", "argv": argv, "cwd": cwd, "env": env, "stdin": stdin,
                   "step": step}

        def execute() -> NodeOutcome:
            live: OutputTap | None = None if host.output is None else host.output.open(
                node.id, ctx.attempt_id, shell_node.max_output_bytes)
            if shell_node.updates is not None and isinstance(ctx.updates, AttemptUpdates):
                live = LineTap(shell_node.updates, ctx.updates, live)
            return run_shell(argv, cwd=cwd, env=env, stdin=stdin,
                             max_output_bytes=shell_node.max_output_bytes,
                             allow_nonzero_exit=shell_node.allow_nonzero_exit, watch=watch,
                             timeout_s=timeout_s, live=live)

    def note(what: str, payload: dict[str, Any]) -> None:
        host.note("effect_recorded", {"effect": what, **payload}, node.id, ctx.attempt_id)

    outcome = run_guarded(host.effects, run_id=host.run_id, token=host.token,
                          node_id=node.id, effect_key=f"step-{step}", request=request,
                          attempt_id=ctx.attempt_id, idempotent=bool(node.idempotent),
                          execute=execute, keep=host.keep, restore=host.restore, note=note)
    if isinstance(node, ShellNode) and node.parse is not None:
        # After the effect: its record keeps the raw result, parsed again on a resume.
        outcome = shaped(node.parse, node.id, outcome, ctx, watch, timeout_s)
    return outcome


def _agent(host: StepHost, node: AgentNode, ctx: NodeContext, watch: Watch,
           timeout_s: float | None) -> NodeOutcome:
    if host.agent is None:
        return NodeOutcome(Outcome.FAILED, error_code="agent_unavailable",
                           error="no agent executor is configured for agent steps")
    executor = host.agent
    try:
        prompt = str(resolve_value(node.prompt, ctx))
    except Exception as exc:
        return error_outcome(exc)
    contract = with_contract(prompt, node.expected_output, workflow=host.workflow_name,
                             step=node.id, attempt=ctx.attempt_id,
                             interrupted=ctx.interrupted_attempt)
    request = AgentRequest(ctx.run_id, node.id, ctx.attempt_id, contract, node.expected_output,
                           timeout_s)
    hooks = _Hooks(host, node, ctx)
    full: list[OSError] = []

    def call() -> Any:
        try:
            return executor.run(request, hooks, ctx.cancel)
        except OSError as exc:
            if is_disk_full(exc):
                full.append(exc)
            raise

    try:
        outcome = run_callable(call, watch, timeout_s)
    finally:
        hooks.close()
    if full:
        # The agent's machinery (its process records, its session files in the
        # bundle) met a full disk: not the step's failure; the run waits for space.
        raise full[0]
    if outcome.outcome != Outcome.OK:
        return outcome
    result = outcome.output
    output = result.output
    if result.outcome == Outcome.OK:
        # A judge that knows ``output_for`` applied it already; one that does not
        # (a scripted executor) returns the submission, replaced here.
        output = hooks.output_for(output)
        if hooks.replaced is not None:
            host.note("agent_output_replaced", {"by": "validate"}, node.id, ctx.attempt_id)
    return NodeOutcome(result.outcome, output=output, error_code=result.error_code,
                       error=None if result.error is None else safe_error_message(result.error))
