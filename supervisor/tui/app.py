"""``pi-workflows view``'s full-screen app: the run list, a run's detail, replay.

Owns the Textual app (``ViewerApp``) and its two screens: the run list
(newest first, chains grouped, filters by state, workflow and text, the
keys in the footer) and the run detail (the graph with node states, the
step list, the selected step's inspector, replay with left and right).
Both follow a view stream subscription from a worker thread: ``next()``
blocks there, never on the UI thread, and what it returns reaches the
screen as a message. Reads only. Imports textual, rich, ``views.stream``
(subscriptions, ``apply_ops``) and the viewer's own text modules; never
``cli`` or a sibling wing. Imported only when a terminal app is wanted.
"""

from __future__ import annotations

import copy
import time
from dataclasses import replace
from typing import Any, ClassVar, Protocol

from rich.text import Text
from textual import work
from textual.app import App, ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Horizontal, VerticalScroll
from textual.message import Message
from textual.screen import Screen
from textual.widgets import DataTable, Footer, Input, Static
from textual.worker import get_current_worker

from ..views.stream import ListQuery, apply_ops
from .graphview import graph_rich, graph_text
from .replay import Replay
from .text import LIST_COLUMNS, STEP_COLUMNS, inspector_text, run_cells, run_title, step_cells

POLL_S = 0.25  # how long one next() blocks: also how soon a closed screen's thread ends
RETRY_S = 2.0  # after an error, the stream is opened again this much later


class Sub(Protocol):
    """The part of ``views.stream.Subscription`` the app uses."""

    rev: int
    doc: dict[str, Any]

    def next(self, timeout: float) -> dict[str, Any] | None: ...

    def close(self) -> None: ...


class Source(Protocol):
    """The part of ``views.stream.ViewStream`` the app uses."""

    def subscribe_list(self, query: ListQuery) -> Any: ...

    def subscribe_run(self, run_id: str) -> Any: ...


class DocMessage(Message):
    """A new document (a snapshot) or patch ops for it, from a follow thread."""

    def __init__(self, gen: int, rev: int, doc: dict[str, Any] | None,
                 ops: list[dict[str, Any]] | None) -> None:
        super().__init__()
        self.gen, self.rev, self.doc, self.ops = gen, rev, doc, ops


class FollowError(Message):
    def __init__(self, gen: int, text: str) -> None:
        super().__init__()
        self.gen, self.text = gen, text


class Followed:
    """A document kept up to date from a subscription's messages (one per screen)."""

    def __init__(self) -> None:
        self.gen = 0
        self.rev = -1
        self.doc: dict[str, Any] = {}

    def take(self, msg: DocMessage) -> bool:
        """Apply a message; False when it is stale (an earlier subscription's)."""
        if msg.gen != self.gen:
            return False
        if msg.doc is not None:
            self.doc, self.rev = msg.doc, msg.rev
        elif msg.ops is not None and msg.rev == self.rev + 1:
            self.doc, self.rev = apply_ops(self.doc, msg.ops), msg.rev
        return True


def follow(poster: Any, gen: int, open_sub: Any) -> None:
    """Body of a follow thread: snapshot, then each patch, until the worker is cancelled.

    A patch is posted as ops only when it is the next revision; after a gap
    the whole document is posted again, so the screen never misses a change.
    An error (an unknown run, a store busy past its timeout while rebuilding) is
    shown on the screen and the stream opened again after ``RETRY_S``: a thread
    that raised would end the app with a traceback.
    """
    worker = get_current_worker()
    while not worker.is_cancelled:
        try:
            _follow_once(poster, gen, open_sub, worker)
            return
        except Exception as exc:  # shown on the screen: a thread has nowhere else to say it
            poster.post_message(FollowError(gen, str(exc) or type(exc).__name__))
        waited = 0.0
        while waited < RETRY_S and not worker.is_cancelled:
            time.sleep(POLL_S)  # a cancel is a flag, not an event: looked at each POLL_S
            waited += POLL_S


def _follow_once(poster: Any, gen: int, open_sub: Any, worker: Any) -> None:
    sub = open_sub()
    try:
        rev = sub.rev
        poster.post_message(DocMessage(gen, rev, copy.deepcopy(sub.doc), None))
        while not worker.is_cancelled:
            patch = sub.next(timeout=POLL_S)
            if patch is None or worker.is_cancelled:
                continue
            if patch.get("rev") == rev + 1:
                rev = patch["rev"]
                poster.post_message(DocMessage(gen, rev, None, copy.deepcopy(patch["ops"])))
            else:
                rev = sub.rev
                poster.post_message(DocMessage(gen, rev, copy.deepcopy(sub.doc), None))
    finally:
        sub.close()


class ListScreen(Screen[None]):
    """Every run of the project, newest first, with filters; Enter opens one."""

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("q", "app.quit", "Quit"),
        # Priority: the table's own Enter would hide it from the footer.
        Binding("enter", "open", "Open", priority=True),
        Binding("s", "cycle_state", "State filter"),
        Binding("w", "cycle_workflow", "Workflow filter"),
        Binding("slash", "text_filter", "Text filter", key_display="/"),
        Binding("escape", "clear", "Clear filters"),
    ]

    def __init__(self, query: ListQuery) -> None:
        super().__init__()
        self.query_ = query
        self.followed = Followed()
        self.seen_states: set[str] = set()
        self.seen_workflows: set[str] = set()
        if query.state:
            self.seen_states.add(query.state)
        if query.workflow:
            self.seen_workflows.add(query.workflow)

    def compose(self) -> ComposeResult:
        yield Static(id="filters", markup=False)
        yield Input(placeholder="text filter (Enter or Esc to return to the list)",
                    id="text")
        table: DataTable[str] = DataTable(id="runs", cursor_type="row", zebra_stripes=True)
        yield table
        yield Static(id="status", markup=False)
        yield Footer()

    def on_mount(self) -> None:
        table = self.query_one("#runs", DataTable)
        table.add_columns(*LIST_COLUMNS)
        self.query_one("#text", Input).display = False
        self.restart()
        table.focus()

    def restart(self) -> None:
        self.followed.gen += 1
        self._show_filters()
        self._follow(self.followed.gen, self.query_)

    @work(thread=True, exclusive=True, group="list")
    def _follow(self, gen: int, query: ListQuery) -> None:
        source: Source = self.app.source  # type: ignore[attr-defined]
        follow(self, gen, lambda: source.subscribe_list(query))

    def on_doc_message(self, msg: DocMessage) -> None:
        if self.followed.take(msg):
            self._paint()

    def on_follow_error(self, msg: FollowError) -> None:
        if msg.gen == self.followed.gen:
            self.query_one("#status", Static).update(f"error: {msg.text}")

    def _paint(self) -> None:
        table = self.query_one("#runs", DataTable)
        runs = self.followed.doc.get("runs") or []
        selected = self.selected()
        table.clear()
        for run in runs:
            table.add_row(*run_cells(run), key=str(run.get("runId")))
            self.seen_states.add(str(run.get("state")))
            self.seen_workflows.add(str(run.get("workflow")))
        ids = [str(r.get("runId")) for r in runs]
        if selected in ids:
            table.move_cursor(row=ids.index(selected))
        doc = self.followed.doc
        # The stream reads only the newest LIMIT runs; past them it says only "more".
        more = " (more match: narrow the filters)" if doc.get("truncated") else ""
        shown = f"{len(runs)} runs shown{more}"
        self.query_one("#status", Static).update(shown if runs else "no runs match")

    def _show_filters(self) -> None:
        q = self.query_
        parts = [f"state: {q.state or 'any'}", f"workflow: {q.workflow or 'any'}",
                 f"text: {q.text or '-'}"]
        self.query_one("#filters", Static).update("  ·  ".join(parts))

    def selected(self) -> str | None:
        table = self.query_one("#runs", DataTable)
        if not table.row_count:
            return None
        row_key, _ = table.coordinate_to_cell_key(table.cursor_coordinate)
        return None if row_key.value is None else str(row_key.value)

    def on_data_table_row_selected(self, event: DataTable.RowSelected) -> None:
        self.action_open()  # a click on the highlighted row (Enter is the binding's)

    def action_open(self) -> None:
        if self.query_one("#text", Input).has_focus:  # Enter ends typing the text filter
            self.query_one("#runs", DataTable).focus()
            return
        run_id = self.selected()
        if run_id is not None:
            self.app.push_screen(RunScreen(run_id))

    @staticmethod
    def _cycle(current: str | None, seen: set[str]) -> str | None:
        options: list[str | None] = [None, *sorted(seen)]
        return options[(options.index(current) + 1) % len(options)]

    def action_cycle_state(self) -> None:
        self.query_ = replace(self.query_, state=self._cycle(self.query_.state,
                                                             self.seen_states))
        self.restart()

    def action_cycle_workflow(self) -> None:
        self.query_ = replace(self.query_, workflow=self._cycle(self.query_.workflow,
                                                                self.seen_workflows))
        self.restart()

    def action_text_filter(self) -> None:
        box = self.query_one("#text", Input)
        box.display = True
        box.focus()

    def on_input_changed(self, event: Input.Changed) -> None:
        self.query_ = replace(self.query_, text=event.value or None)
        self.restart()

    def action_clear(self) -> None:
        box = self.query_one("#text", Input)
        if box.has_focus:
            self.query_one("#runs", DataTable).focus()
            return
        box.value = ""
        box.display = False
        self.query_ = replace(self.query_, state=None, workflow=None, text=None)
        self.restart()


class RunScreen(Screen[None]):
    """One run: the graph with node states, its steps, the selected step, replay."""

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("q", "back", "Back"),
        Binding("escape", "back", "Back", show=False),
        Binding("left", "replay_back", "Step back", priority=True),
        Binding("right", "replay_forward", "Step forward", priority=True),
        Binding("l", "live", "Live"),
    ]

    def __init__(self, run_id: str) -> None:
        super().__init__()
        self.run_id = run_id
        self.followed = Followed()
        self.replay = Replay()
        self.shown_steps: list[dict[str, Any]] = []

    def compose(self) -> ComposeResult:
        yield Static(id="head", markup=False)
        with VerticalScroll(id="graph-box"):
            yield Static(id="graph", markup=False)
        with Horizontal(id="lower"):
            table: DataTable[str] = DataTable(id="steps", cursor_type="row")
            yield table
            with VerticalScroll(id="inspector-box"):
                yield Static(id="inspector", markup=False)
        yield Footer()

    def on_mount(self) -> None:
        self.query_one("#steps", DataTable).add_columns(*STEP_COLUMNS)
        self.query_one("#head", Static).update(f"{self.run_id}  (loading)")
        self.followed.gen += 1
        self._follow(self.followed.gen)
        self.query_one("#steps", DataTable).focus()

    @work(thread=True, exclusive=True, group="run")
    def _follow(self, gen: int) -> None:
        source: Source = self.app.source  # type: ignore[attr-defined]
        follow(self, gen, lambda: source.subscribe_run(self.run_id))

    def on_doc_message(self, msg: DocMessage) -> None:
        if self.followed.take(msg):
            self._paint()

    def on_follow_error(self, msg: FollowError) -> None:
        if msg.gen == self.followed.gen:
            self.query_one("#head", Static).update(f"{self.run_id}  error: {msg.text}")

    def shown_graph(self) -> str:
        """What the graph shows now (read by the tests as a person reads the screen)."""
        doc = self.followed.doc
        return graph_text(doc.get("graph"), self.replay.states(doc), width=self._graph_width())

    def _graph_width(self) -> int:
        # As wide as the box it is shown in: a wider drawing becomes one line per node.
        return max(self.query_one("#graph-box").size.width - 2, 40)

    def _paint(self) -> None:
        doc = self.followed.doc
        run = doc.get("run") or {}
        self.query_one("#head", Static).update(
            f"{self.run_id}  {run_title(run)}  {run.get('state') or '?'}"
            f"  ·  {self.replay.label(doc)}")
        self.query_one("#graph", Static).update(
            graph_rich(doc.get("graph"), self.replay.states(doc), width=self._graph_width()))
        table = self.query_one("#steps", DataTable)
        row = table.cursor_row
        steps = self.replay.steps(doc)
        self.shown_steps = steps
        table.clear()
        for index, step in enumerate(steps):
            table.add_row(*step_cells(index, step), key=str(index))
        if steps:
            table.move_cursor(row=min(max(row, 0), len(steps) - 1))
        self._inspect()

    def on_resize(self) -> None:
        if self.followed.doc:
            self._paint()

    def _inspect(self) -> None:
        table = self.query_one("#steps", DataTable)
        steps = self.shown_steps
        step = steps[table.cursor_row] if steps and 0 <= table.cursor_row < len(steps) else None
        self.query_one("#inspector", Static).update(
            Text(inspector_text(self.followed.doc, step)))

    def on_data_table_row_highlighted(self, event: DataTable.RowHighlighted) -> None:
        self._inspect()

    def action_back(self) -> None:
        self.workers.cancel_group(self, "run")
        self.app.pop_screen()

    def action_replay_back(self) -> None:
        self.replay.back(self.followed.doc)
        self._paint()

    def action_replay_forward(self) -> None:
        self.replay.forward(self.followed.doc)
        self._paint()

    def action_live(self) -> None:
        self.replay.follow()
        self._paint()


class ViewerApp(App[None]):
    """The run list, opened on one run when ``run_id`` is given."""

    TITLE = "pi-workflows view"
    CSS = """
    #filters, #status, #head { height: 1; padding: 0 1; }
    #filters { background: $boost; }
    #runs { height: 1fr; }
    #graph-box { height: 1fr; border: round $primary; }
    #lower { height: 1fr; }
    #steps { width: 1fr; border: round $secondary; }
    #inspector-box { width: 2fr; border: round $secondary; }
    """

    def __init__(self, source: Source, query: ListQuery, run_id: str | None = None) -> None:
        super().__init__()
        self.source = source
        self.initial_query = query
        self.initial_run = run_id

    def on_mount(self) -> None:
        self.push_screen(ListScreen(self.initial_query))
        if self.initial_run is not None:
            self.push_screen(RunScreen(self.initial_run))
