"""``statectl browse``: an interactive inspector in the terminal (Textual).

A tree of operators and their states on the left (stateless operators folded into one node);
the entries of the selected state on the right, a page of key groups at a time (only those key
groups are read); the selected entry in full below them. Keyboard only:

====================  =======================================================================
``↑ ↓ ← →`` / Enter   move in the tree and the table; Enter opens a state
``Tab``               the tree, the entries, the entry's detail (arrows scroll it)
``n`` / ``p``         the next / previous page of key groups
``/``                 go to a key (typed as ``inspect --key`` takes it: only its key group)
``f``                 find the next key containing a text (page after page)
``g``                 the key-group chart of the selected state's operator
``?``                 help; ``q`` quits
====================  =======================================================================

With ``--against B`` each row of a state is compared with the same operator's state in B
(matched by OperatorID, as ``diff`` matches them), for the key groups shown: ``+`` added (only
in the snapshot browsed), ``-`` removed (only in B: shown with B's value), ``~`` changed (the
detail shows this snapshot's entry, then B's).

The tree takes the width its lines need, up to 40% of the screen (32 columns at 80x24).

What is read: opening reads the metadata (of a Flink snapshot: ``_metadata`` and the keyed
streams' headers), so the tree shows at once; a state's page reads its key groups alone
(statectl's format: only their rows; a Flink snapshot: only their bytes, decoded then, see
:meth:`formats.model.checkpoint.Checkpoint.keyed_table_in`). A Flink snapshot's rows per key group
are not known before they are decoded, so its pages are cut by the key groups' bytes (all the
handle's states together, :meth:`formats.model.checkpoint.Checkpoint.key_group_estimates`); a page
without entries of the state is passed over. The key-group chart needs the counts: a Flink
snapshot is decoded whole for it, once, on a worker thread (the screen stays responsive and
says so); only the chart's numbers are kept, the pages stay as they were cut (going to the
chart and back keeps the state, the page and the entry selected).
"""

from __future__ import annotations

import io
import json
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, ClassVar

from rich.cells import cell_len
from rich.console import Console
from rich.text import Text
from textual import events, work
from textual.app import App, ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, Vertical, VerticalScroll
from textual.message import Message
from textual.screen import ModalScreen
from textual.widgets import DataTable, Footer, Header, Input, Static, Tree
from textual.widgets.tree import TreeNode

from cli.values import format_duration, format_size, format_value
from cli.views.inspect import draw_key_groups, ttl_time
from formats.model.arrow_types import pyrows, value_from_text, with_field_names
from formats.model.checkpoint import Checkpoint
from formats.model.columns import value_spec
from formats.ops.diff import canonical
from formats.ops.export import column_decoders, jsonable
from formats.ops.inspect import summarize
from formats.ops.key_group_stats import KeyGroupHistogram, key_group_histograms
from formats.ops.query import rows_per_key_group, state_table
from statecore.checkpoint import OperatorMetadata, StateMetadata
from statecore.errors import InvalidArgumentError, StatectlError
from statecore.serializers import VOID_NAMESPACE

__all__ = ["PAGE_ROWS", "BrowseApp", "Page"]

#: About how many entries a page shows: whole key groups until at least this many.
PAGE_ROWS = 200
#: Where the rows per key group are not known before decoding (a Flink snapshot): whole key
#: groups until at least this many of their bytes (all the handle's states together).
PAGE_BYTES = 32 << 10
#: Pages without entries of the state passed over at most, on the way to one with some.
SKIP_EMPTY = 32
#: Characters of a value in the table (the detail pane shows it whole).
CELL = 36


@dataclass
class Page:
    """One page of a state: its key groups and rows (each a dict of the decoded columns)."""

    number: int
    key_groups: tuple[int, ...]
    rows: list[dict[str, Any]]
    #: per row: ``+`` ``-`` ``~`` or ``""`` against the other snapshot (empty without one)
    marks: list[str] = field(default_factory=list)
    #: per row: the other snapshot's row of the same key and namespace (``~``), else None
    others: list[dict[str, Any] | None] = field(default_factory=list)


@dataclass
class StateView:
    """A state being browsed: its pages (key groups in order, whole groups per page)."""

    op: OperatorMetadata
    state: StateMetadata
    pages: list[tuple[int, ...]]
    #: pages cut by estimated bytes (rows per key group not known): some may be empty
    estimated: bool = False

    def page_of(self, key_group: int) -> int | None:
        return next((i for i, groups in enumerate(self.pages) if key_group in groups), None)


def paginate(counts: list[tuple[int, int]], rows: int = PAGE_ROWS) -> list[tuple[int, ...]]:
    """Key groups (``(group, rows)`` in order) cut into pages of whole groups, >= ``rows``."""
    pages: list[tuple[int, ...]] = []
    current: list[int] = []
    filled = 0
    for group, count in counts:
        current.append(group)
        filled += count
        if filled >= rows:
            pages.append(tuple(current))
            current, filled = [], 0
    if current:
        pages.append(tuple(current))
    return pages


def _decoded(checkpoint: Checkpoint, op: OperatorMetadata, state: StateMetadata,
             rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Arrow rows with statectl's values (tuples, instants, windows...) in their columns."""
    decoders = column_decoders(op, state)
    spec = value_spec(state) if state.scope == "keyed" else state.value_type
    named = with_field_names(spec) if op.plan is not None else None
    if named is not None and "value" in decoders:  # a row the job's plan named (--plan)
        plain = decoders["value"]
        decoders["value"] = lambda v: named(plain(v))  # noqa: E731
    namespace = checkpoint.namespace_reader(op, state)
    if namespace is not None:
        decoders["namespace"] = namespace
    out = []
    for row in rows:
        decoded = dict(row)
        for name, decode in decoders.items():
            if decoded.get(name) is not None:
                decoded[name] = decode(decoded[name])
        if state.namespace_type == "void":
            decoded["namespace"] = VOID_NAMESPACE
        out.append(decoded)
    return out


def expiry_of(timestamp: Any, ttl: int | None) -> Any:
    """When a value of last access ``timestamp`` expires under ``ttl`` (ms).

    Flink's rule, last access + TTL (``TtlUtils.expired``); a list's or map's per element.
    ``None`` without a known TTL.
    """
    if ttl is None or ttl <= 0 or timestamp is None:
        return None
    if isinstance(timestamp, dict):
        return {k: v + ttl for k, v in timestamp.items() if isinstance(v, int)}
    if isinstance(timestamp, list | tuple):
        return [v + ttl for v in timestamp if isinstance(v, int)]
    return timestamp + ttl if isinstance(timestamp, int) else None


def detail_text(row: dict[str, Any], mark: str = "", other: dict[str, Any] | None = None,
                width: int | None = None, ttl: int | None = None) -> str:
    """An entry in full: key, namespace, value, TTL, where it is stored.

    ``ttl`` (ms, the state's, stored or given with ``--ttl``): when the value expires, too.

    The value is on one line when that fits in ``width`` columns, else pretty-printed over
    several (and always without ``width``). ``mark`` (against another snapshot) says what it
    means; a changed entry's ``other`` (the other snapshot's row) follows: its value, TTL
    and place, in the same form.
    """
    lines = [f"key        {format_value(row.get('key'))}"]
    if row.get("namespace") is not VOID_NAMESPACE:
        lines.append(f"namespace  {format_value(row.get('namespace'))}")
    lines += _stored_lines(row, width, ttl)
    if mark == "~" and other is not None:
        lines.append("changed: the snapshot compared with holds")
        lines += _stored_lines(other, width, ttl)
    elif mark:
        lines.append({"+": "added: not in the snapshot compared with",
                      "-": "removed: only in the snapshot compared with (its value)",
                      "~": "changed: the snapshot compared with holds another value"}[mark])
    return "\n".join(lines)


def _stored_lines(row: dict[str, Any], width: int | None, ttl: int | None = None
                  ) -> list[str]:
    """An entry's value, TTL's last access and place, a line each (a value may take more)."""
    lines = []
    marker = row.get("value_undecodable")
    if marker:
        lines.append("value      not decoded: " + json.dumps(jsonable(marker, strict=False),
                                                             ensure_ascii=False))
    else:
        text = format_value(row.get("value"))
        if width is None or cell_len(text) > width - 11 or "\n" in text:
            text = format_value(row.get("value"), indent=2)
        lines.append("value      " + text.replace("\n", "\n           "))
    if row.get("ttl_timestamp") is not None:
        lines.append(f"last access {ttl_time(row['ttl_timestamp'])}")
        expiry = expiry_of(row["ttl_timestamp"], ttl)
        if expiry is not None:
            lines.append(f"expires    {ttl_time(expiry)}")
    where = [f"subtask {row['subtask']}"]
    if row.get("key_group") is not None:
        where.insert(0, f"key group {row['key_group']}")
    lines.append("stored     " + ", ".join(where))
    return lines


def _cell(value: Any) -> str:
    if value is VOID_NAMESPACE:
        return ""
    text = format_value(value)
    return text if len(text) <= CELL else text[:CELL - 1] + "…"


class PromptScreen(ModalScreen[str | None]):
    """One line of input (a key, a text to find); Escape cancels."""

    BINDINGS: ClassVar = [Binding("escape", "cancel", "cancel")]

    def __init__(self, prompt: str) -> None:
        super().__init__()
        self.prompt = prompt

    def compose(self) -> ComposeResult:
        with Vertical(id="prompt"):
            yield Static(self.prompt)
            yield Input(id="answer")

    def on_input_submitted(self, event: Input.Submitted) -> None:
        self.dismiss(event.value)

    def action_cancel(self) -> None:
        self.dismiss(None)


class DetailPane(VerticalScroll):
    """The pane of the entry in full; it says when its size changed.

    A value is on one line when it fits, so the entry is drawn again at a new width.
    """

    class Resized(Message):
        """The pane has another width."""

    _width = 0

    def on_resize(self, event: events.Resize) -> None:
        if event.size.width != self._width:  # not when its content grows or shrinks
            self._width = event.size.width
            self.post_message(self.Resized())


class TextScreen(ModalScreen[None]):
    """A page of text (help, the key-group chart); any of Escape, q, ? closes it."""

    BINDINGS: ClassVar = [Binding("escape,q,question_mark", "close", "close")]

    def __init__(self, text: Text | str) -> None:
        super().__init__()
        self.text = text

    def compose(self) -> ComposeResult:
        yield Static(self.text, id="text")

    def action_close(self) -> None:
        self.dismiss(None)


HELP = """statectl browse: the keys

  arrows, Enter   move in the tree and the table; Enter opens a state
  Tab             the tree / the entries / the entry (arrows scroll it)
  n  p            next / previous page (whole key groups, ~200 entries)
  /               go to a key (typed as inspect --key takes it)
  f               find the next key containing a text
  g               the key-group chart of the state's operator
  ?               this help;  q  quit

With --against B: + added (only here), - removed (only in B),
~ changed (the entry shows B's value after this one's).
Escape closes this."""


class BrowseApp(App[None]):
    """Browse one snapshot (``checkpoint``), optionally against another (``against``)."""

    TITLE = "statectl browse"
    CSS = """
    #tree { width: auto; min-width: 16; max-width: 40%; border-right: solid $accent; }
    #entries { height: 1fr; }
    #detail-pane { height: 9; border-top: solid $accent; }
    #status { height: 1; background: $boost; }
    #prompt { width: 70; height: 5; border: solid $accent; background: $surface; }
    #text { width: auto; height: auto; border: solid $accent; background: $surface;
            padding: 0 1; }
    PromptScreen, TextScreen { align: center middle; }
    """
    BINDINGS: ClassVar = [
        Binding("q", "quit", "quit"),
        Binding("question_mark", "help", "help"),
        Binding("n", "page(1)", "next page"),
        Binding("p", "page(-1)", "prev page"),
        Binding("slash", "go_to_key", "key"),
        Binding("f", "find", "find"),
        Binding("g", "chart", "key groups"),
    ]

    def __init__(self, checkpoint: Checkpoint, location: str, *,
                 decoded: Callable[[], Checkpoint] | None = None,
                 against: Checkpoint | None = None) -> None:
        super().__init__()
        self.checkpoint, self.location, self.against = checkpoint, location, against
        self._decode = decoded  # a Flink snapshot opened with its keyed state decoded
        self.view: StateView | None = None
        self.page: Page | None = None
        #: the key-group chart's numbers, once counted (a Flink snapshot: decoded whole once)
        self._histograms: tuple[KeyGroupHistogram, ...] | None = None
        self._counting = False  # a worker is decoding the snapshot for the chart
        self._status_text = ""

    # -- layout -----------------------------------------------------------------------------

    def compose(self) -> ComposeResult:
        yield Header()
        with Horizontal():
            yield Tree("operators", id="tree")
            with Vertical():
                yield DataTable(id="entries", cursor_type="row", zebra_stripes=True)
                with DetailPane(id="detail-pane"):
                    yield Static("", id="detail")
        yield Static("", id="status")
        yield Footer()

    def on_mount(self) -> None:
        metadata = self.checkpoint.metadata
        self.sub_title = (f"{metadata.kind.value} {metadata.checkpoint_id}  {self.location}"
                          + ("  (against another)" if self.against else ""))
        tree: Tree[tuple[OperatorMetadata, StateMetadata] | None] = self.query_one("#tree",
                                                                                   Tree)
        tree.show_root = False
        summary = summarize(self.checkpoint, self.location)
        sizes = {(op.uid, s.name): s for op in summary.operators for s in op.states}
        stateless = []
        for op in metadata.operators:
            if not op.states:
                stateless.append(op)
                continue
            node = tree.root.add(Text(op.identity.label), expand=True)
            for state in op.states:
                shown = sizes.get((op.uid, state.name))
                label = Text(state.name)
                label.append(f" {state.kind}", style="dim")
                if shown is not None and shown.entries is not None:
                    label.append(f" {shown.entries:,}")
                if shown is not None and shown.bytes is not None:
                    label.append(f" {format_size(shown.bytes)}", style="dim")
                if state.ttl is not None:  # a Flink snapshot's TTL: only if given (--ttl)
                    label.append(f" TTL {format_duration(state.ttl)}" if state.ttl > 0
                                 else " TTL ? (--ttl)", style="dim")
                node.add_leaf(label, data=(op, state))
        if stateless:
            folded = tree.root.add(f"{len(stateless)} without state", expand=False)
            for op in stateless:
                folded.add_leaf(Text(op.identity.label))
        if self.against is not None:  # a changed entry is shown with the other's
            self.query_one("#detail-pane", DetailPane).styles.height = 12
        self._status("select a state (Enter); ? for help")
        tree.focus()

    def _status(self, text: str) -> None:
        self._status_text = text
        self.query_one("#status", Static).update(Text(text))

    def on_tree_node_expanded(self) -> None:
        self.query_one("#tree", Tree).refresh(layout=True)  # its width follows its lines

    def on_tree_node_collapsed(self) -> None:
        self.query_one("#tree", Tree).refresh(layout=True)

    def _show_detail(self, index: int) -> None:
        """The page's row ``index`` in full in the detail pane (scrolled to its top)."""
        page = self.page
        pane = self.query_one("#detail-pane", DetailPane)
        width = pane.scrollable_content_region.width - 2  # room for a scroll bar
        text = "" if page is None or not 0 <= index < len(page.rows) else detail_text(
            page.rows[index], page.marks[index], page.others[index],
            width if width > 20 else None, self.view.state.ttl if self.view else None)
        self.query_one("#detail", Static).update(Text(text))
        pane.scroll_home(animate=False)

    def on_detail_pane_resized(self) -> None:
        if self.page is not None:  # values on one line or over several: as they fit now
            self._show_detail(self.query_one("#entries", DataTable).cursor_row)

    # -- opening a state ----------------------------------------------------------------------

    def on_tree_node_selected(self, event: Tree.NodeSelected[Any]) -> None:
        node: TreeNode[Any] = event.node
        if node.data is not None:
            op, state = node.data
            self.open_state(op, state)

    def open_state(self, op: OperatorMetadata, state: StateMetadata, page: int = 0) -> None:
        """Show ``state``'s page ``page`` (reading only its key groups)."""
        weights: dict[int, int] = {}
        estimated = False
        if state.scope == "keyed":
            # against another snapshot: its key groups too (a group empty here may hold
            # entries there, shown as removed)
            sides: list[tuple[Checkpoint, OperatorMetadata]] = [(self.checkpoint, op)]
            other = self._other(op, state)
            if other is not None and self.against is not None:
                sides.append((self.against, other[0]))
            for n, (checkpoint, side_op) in enumerate(sides):
                for st in side_op.subtasks:
                    for handle in st.keyed:
                        if handle.state != state.name:
                            continue
                        bytes_ = checkpoint.key_group_estimates(side_op.uid, handle)
                        if n == 0:
                            estimated = bytes_ is not None
                        elif (bytes_ is not None) != estimated:  # another measure: its
                            for group, _ in bytes_ or rows_per_key_group(  # groups only
                                    checkpoint, side_op, handle):
                                weights.setdefault(group, 1)
                            continue
                        for group, weight in (bytes_ if bytes_ is not None else
                                              rows_per_key_group(checkpoint, side_op,
                                                                 handle)):
                            weights[group] = weights.get(group, 0) + weight
        self.view = StateView(op, state, paginate(sorted(weights.items()),
                                                  PAGE_BYTES if estimated else PAGE_ROWS)
                              if state.scope == "keyed" else [()], estimated)
        self.show_page(page)

    def show_page(self, number: int, step: int = 1) -> None:
        """Show page ``number`` of the state opened.

        Pages cut by estimate that hold no entry of the state are passed over in the
        direction ``step`` (at most :data:`SKIP_EMPTY`).
        """
        view = self.view
        if view is None:
            return
        number = max(0, min(number, len(view.pages) - 1))
        keyed = view.state.scope == "keyed"
        passed = 0
        while True:
            groups = view.pages[number] if view.pages else ()
            rows = self._rows(self.checkpoint, view.op, view.state, groups if keyed else None)
            page = Page(number, groups, rows, [""] * len(rows), [None] * len(rows))
            if self.against is not None:
                self._compare(page, view, keyed)
            if (page.rows or not view.estimated or passed == SKIP_EMPTY
                    or not 0 <= number + step < len(view.pages)):
                break
            number += step
            passed += 1
        self.page = page
        table = self.query_one("#entries", DataTable)
        table.clear(columns=True)
        columns = ["", "key"] + (["namespace"] if view.state.namespace_type != "void" else [])
        ttl = view.state.ttl if view.state.ttl is not None and view.state.ttl > 0 else None
        columns += ["value", "last access", *(["expires"] if ttl else []), "key group",
                    "subtask"]
        table.add_columns(*columns)
        for mark, row in zip(page.marks, page.rows, strict=True):
            cells = [mark, _cell(row.get("key"))]
            if view.state.namespace_type != "void":
                cells.append(_cell(row.get("namespace")))
            value = "(not decoded)" if row.get("value_undecodable") else _cell(row.get("value"))
            expiry = expiry_of(row.get("ttl_timestamp"), ttl)
            cells += [value, "" if row.get("ttl_timestamp") is None
                      else ttl_time(row["ttl_timestamp"]),
                      *([] if not ttl else ["" if expiry is None else ttl_time(expiry)]),
                      "" if row.get("key_group") is None else str(row["key_group"]),
                      str(row.get("subtask", ""))]
            table.add_row(*(Text(cell) for cell in cells))
        where = (f"key groups {groups[0]}-{groups[-1]}, page {number + 1} of {len(view.pages)}"
                 if keyed and groups else "operator state, all elements" if not keyed
                 else "no entries")
        changes = sum(1 for m in page.marks if m)
        self._status(f"{view.op.identity.label}/{view.state.name}: {where}, "
                     f"{len(rows):,} rows" + (f", {changes} differ" if self.against else "")
                     + "  (n/p pages, / key, f find, ? help)")
        self._show_detail(0)

    def _rows(self, checkpoint: Checkpoint, op: OperatorMetadata, state: StateMetadata,
              groups: tuple[int, ...] | None) -> list[dict[str, Any]]:
        table = state_table(checkpoint, op, state,
                            None if groups is None else frozenset(groups))
        return _decoded(checkpoint, op, state, pyrows(table))

    def _other(self, op: OperatorMetadata, state: StateMetadata
               ) -> tuple[OperatorMetadata, StateMetadata] | None:
        """The same operator (by OperatorID) and state in ``against``, if it has them."""
        if self.against is None:
            return None
        other_op = next((o for o in self.against.metadata.operators
                         if o.identity.id == op.identity.id), None)
        other_state = None if other_op is None else next(
            (s for s in other_op.states if s.name == state.name), None)
        return None if other_op is None or other_state is None else (other_op, other_state)

    def _compare(self, page: Page, view: StateView, keyed: bool) -> None:
        """Mark the page's rows against the same state of ``against`` (same key groups)."""
        assert self.against is not None
        other = self._other(view.op, view.state)
        theirs: list[dict[str, Any]] = []
        if other is not None:
            theirs = self._rows(self.against, other[0], other[1],
                                page.key_groups if keyed else None)

        def ident(row: dict[str, Any]) -> Any:
            return canonical((row.get("key"), row.get("namespace") if row.get(
                "namespace") is not VOID_NAMESPACE else None, None if keyed else row.get(
                "value")))

        def content(row: dict[str, Any]) -> Any:
            return canonical((row.get("value"), row.get("ttl_timestamp")))

        by_ident = {ident(r): r for r in theirs}
        mine = {ident(r) for r in page.rows}
        page.marks = ["+" if ident(r) not in by_ident else
                      "~" if content(by_ident[ident(r)]) != content(r) else ""
                      for r in page.rows]
        page.others = [by_ident.get(ident(r)) if m == "~" else None
                       for r, m in zip(page.rows, page.marks, strict=True)]
        for row in theirs:
            if ident(row) not in mine:
                page.rows.append(row)
                page.marks.append("-")
                page.others.append(None)

    # -- moving -------------------------------------------------------------------------------

    def on_data_table_row_highlighted(self, event: DataTable.RowHighlighted) -> None:
        if self.page is not None and 0 <= event.cursor_row < len(self.page.rows):
            self._show_detail(event.cursor_row)

    def action_page(self, step: int) -> None:
        if self.page is not None and self.view is not None:
            target = self.page.number + step
            if 0 <= target < len(self.view.pages):
                self.show_page(target, step)

    def action_help(self) -> None:
        self.push_screen(TextScreen(HELP))

    def action_go_to_key(self) -> None:
        if self.view is None or self.view.state.scope != "keyed":
            self._status("open a keyed state first (Enter in the tree)")
            return
        self.push_screen(PromptScreen(f"key in {self.view.state.name} "
                                      f"({self.view.op.key_type}):"), self._go_to_key)

    def _go_to_key(self, text: str | None) -> None:
        view = self.view
        if not text or view is None or view.op.key_type is None:
            return
        try:
            key = value_from_text(text, view.op.key_type)
        except InvalidArgumentError as exc:
            self._status(str(exc))
            return
        group = self.checkpoint.key_group_of(view.op, key)
        number = None if group is None else view.page_of(group)
        if number is None:
            self._status(f"no entry for key {text} in {view.state.name}"
                         + ("" if group is None else f" (key group {group} is empty)"))
            return
        self.show_page(number)
        self._select(lambda row: canonical(row.get("key")) == canonical(key),
                     f"no entry for key {text} in {view.state.name} (key group {group})")

    def action_find(self) -> None:
        if self.view is None:
            self._status("open a state first (Enter in the tree)")
            return
        self.push_screen(PromptScreen("find a key containing:"), self._find)

    def _find(self, text: str | None) -> None:
        if not text or self.view is None or self.page is None:
            return
        table = self.query_one("#entries", DataTable)
        start_page, start_row = self.page.number, table.cursor_row + 1
        for number in range(start_page, len(self.view.pages)):
            if number != self.page.number:
                self.show_page(number)
            first = start_row if number == start_page else 0
            for index in range(first, len(self.page.rows)):
                if text in format_value(self.page.rows[index].get("key")):
                    table.move_cursor(row=index)
                    return
        self._status(f"no further key contains {text!r}")

    def _select(self, wanted: Callable[[dict[str, Any]], bool], missing: str) -> None:
        assert self.page is not None
        index = next((i for i, row in enumerate(self.page.rows) if wanted(row)), None)
        if index is None:
            self._status(missing)
            return
        table = self.query_one("#entries", DataTable)
        table.move_cursor(row=index)
        table.focus()

    def action_chart(self) -> None:
        """The key-group chart of the state's operator, over the screen.

        Escape returns to the same place: the pages and the selection are left as they are.
        """
        if self.view is None:
            self._status("open a state first (Enter in the tree)")
            return
        if self._histograms is None and self._decode is not None:
            if not self._counting:
                self._counting = True
                before = self._status_text
                self._status("decoding the snapshot for the key-group chart (a Flink "
                             "snapshot's rows per key group are known once it is decoded: "
                             "whole, once) ...")
                self._count_for_chart(self.view.op, before)
            return
        if self._histograms is None:
            self._histograms = key_group_histograms(self.checkpoint)
        self._show_chart(self.view.op)

    @work(thread=True, exclusive=True)
    def _count_for_chart(self, op: OperatorMetadata, waiting: str) -> None:
        """Decode the snapshot whole (on a worker thread); keep only the chart's numbers.

        The pages shown stay as they were cut, and where they are.
        """
        assert self._decode is not None
        try:
            histograms = key_group_histograms(self._decode())
        except StatectlError as exc:
            self.call_from_thread(self._counted, None, op, f"cannot decode: {exc}")
            return
        self.call_from_thread(self._counted, histograms, op, waiting)

    def _counted(self, histograms: tuple[KeyGroupHistogram, ...] | None, op: OperatorMetadata,
                 status: str) -> None:
        """Back on the app's thread: ``status`` is the error, or what the line said before."""
        self._counting = False
        if histograms is None:
            self._status(status)
            return
        self._histograms = histograms
        if self._status_text.startswith("decoding the snapshot for the key-group chart"):
            self._status(status)
        self._show_chart(op)

    def _show_chart(self, op: OperatorMetadata) -> None:
        assert self._histograms is not None
        histograms = [h for h in self._histograms if h.identity.id == op.identity.id]
        # drawn into a string: never to stdout (with --svg it is the user's stdout)
        console = Console(file=io.StringIO(), record=True, width=76, color_system=None)
        if not histograms:
            console.print(f"{op.identity.label} has no keyed state")
        for histogram in histograms:
            draw_key_groups(console, histogram, "bytes")
        self.push_screen(TextScreen(Text(console.export_text())))
