"""The debugger screen: call tree, source, inspector and status line over one run.

One var (a reactive that repaints nothing), `seq`, holds the current call. Stepping only
changes it; `watch_seq` starts a worker that reads the call from the store and posts
`CallLoaded`, which every pane draws.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from rich.text import Text
from textual import events, work
from textual.actions import parse
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, Vertical
from textual.reactive import var
from textual.screen import Screen
from textual.widgets import Footer
from textual.worker import Worker, get_current_worker

from tvis_tui.errors import TvisError
from tvis_tui.messages import CallLoaded, JumpFound, RowsChanged, RunClosed, ValuesRequested
from tvis_tui.screens.call_view import CallViewLoader
from tvis_tui.screens.stepping import Stepper
from tvis_tui.screens.stepping_keys import STEPPING_BINDINGS, SteppingActions
from tvis_tui.store import CallRecord, RunReader
from tvis_tui.store.runs import incomplete_reason, run_status, stop_reason
from tvis_tui.text import printable
from tvis_tui.widgets.call_rows import CallRows
from tvis_tui.widgets.call_tree import CallTree
from tvis_tui.widgets.inspector import Inspector
from tvis_tui.widgets.source_pane import SourcePane
from tvis_tui.widgets.status_line import StatusLine

HISTORY_LIMIT = 200
LIVE_CHECK_S = 1.0
"""How often a run opened while it is recorded checks that its recorder still runs."""


class DebuggerScreen(SteppingActions, Screen):
    HELP_SECTIONS = ("Stepping (from any pane)", "Call tree", "Source pane", "Inspector")  # help lists these first
    BINDINGS = [
        *STEPPING_BINDINGS,
        Binding("v", "values", "Values of the selected tensor", show=False),
        Binding("p", "step_view", "This step: the loss over all steps, the predictions, each sample", show=False),
        Binding("w", "params_view", "Every parameter across the optimizer steps: gradient norm, update/weight, "
                "weight norm", show=False),
        Binding("d", "definition", "Source: the called code's own lines and the shapes they bound "
                "(a function of yours), or back to where it was called", show=False),
        Binding("x", "exception", "The whole exception this call raised, or the one a crashed run ended with",
                show=False),
        Binding("escape", "close", "Back to the run list (when the run was opened from one)", show=False),
    ]

    # A var, not a reactive: the screen draws nothing itself, and a reactive's repaint of it
    # repainted every widget on each step (the panes that change refresh themselves).
    seq = var(0, init=False)

    def __init__(self, reader: RunReader, *, start: int | None = None) -> None:
        super().__init__()
        self.reader = reader
        self.stepper = Stepper(reader)
        self.rows = CallRows(self.stepper)
        self.loader = CallViewLoader(self.stepper, self.rows)
        self.meta: dict = {}
        self.status = self.status_text = ""
        self._read_status()
        self.start = start
        self.history: list[int] = []
        self.future: list[int] = []
        self._reveal = True
        self._ending: Worker | None = None
        """The reload that reads the end of a run recorded while it is open."""
        self.definition = False
        """The source pane shows the called code's definition, not the call site (`d`)."""
        self.loaded_seq = 0
        """The call the panes show now (lags `seq` while a load is in flight)."""
        self.loaded_call: CallRecord | None = None
        self._edges: tuple[bool, ...] = ()

    def compose(self) -> ComposeResult:
        with Horizontal(id="panes"):
            yield CallTree(id="tree")
            with Vertical(id="right"):
                yield SourcePane(id="source")
                yield Inspector(id="inspector")
        yield StatusLine(id="status")
        yield Footer()

    def on_mount(self) -> None:
        # Text, not a str: a str title is markup, and the run's name is anyone's
        self.query_one(CallTree).border_title = Text(printable(self.reader.path.name))
        self.query_one(Inspector).border_title = "inspector"
        self.query_one(CallTree).focus()
        if self.status == "running":
            self._recording = self.set_interval(LIVE_CHECK_S, self._check_still_recording)
        if self.stepper.total == 0:
            self._show_no_calls()
            return
        self.open_at_start()

    def _read_status(self) -> None:
        """The run's meta, status and the status line's word for it, read at one moment (a
        recorder that ends between two reads would show as running and killed at once)."""
        self.meta = self.reader.meta()
        self.status = run_status(self.meta)
        reasons = [r for r in (stop_reason(self.meta) if self.status == "stopped" else None,
                               incomplete_reason(self.meta)) if r]
        self.status_text = f"{self.status}: {', '.join(reasons)}" if reasons else self.status

    def _check_still_recording(self) -> None:
        """Once the process recording this run is gone, read the run again: its end (and
        the calls it added) show without a key, and never as a killed recorder. Checked
        until a reload has read the end: a move's load cancels a reload not yet begun."""
        if self.status != "running":
            self._recording.stop()
        elif (self._ending is None or self._ending.is_finished) and run_status(self.meta) != "running":
            self._ending = self.reload(ended=True)

    def _show_no_calls(self) -> None:
        self.query_one(StatusLine).update(Text(f"{printable(self.reader.path.name)}: " + (
            "no calls recorded yet (ctrl+r reloads)" if self.status == "running"
            else f"{self.status_text}, no calls were recorded")))

    @work(thread=True, exclusive=True, group="open")
    def open_at_start(self) -> None:
        start = self.start
        if start is None and self.status == "crashed":
            # The script's own code raised, outside every call: the last call is where
            # the run was when it failed.
            start = self.stepper.failure() or self.stepper.total
        self.app.call_from_thread(setattr, self, "seq", start or 1)

    def on_unmount(self) -> None:
        # LMDB allows one handle per run per process: reopening this run needs it closed.
        self.workers.cancel_all()
        self.reader.close()
        self.app.post_message(RunClosed())

    # -- moving ----------------------------------------------------------------------------

    def move(self, target: int | None, what: str) -> None:
        if target is None:
            self.app.bell()
            self.notify(f"no {what}", timeout=2, markup=False)
        else:
            self.seq = target

    def jump(self, target: int | None, what: str) -> None:
        """A move that goes on the back/forward history."""
        if target is not None and target != self.seq:
            self.history = [*self.history[-HISTORY_LIMIT:], self.seq]
            self.future = []
        self.move(target, what)

    def watch_seq(self, seq: int) -> None:
        reveal, self._reveal = self._reveal, True
        self.load(seq, reveal)
        # Re-check which keys can act (the footer greys the others) only when that can
        # have changed: refreshing bindings on every step would rebuild the footer.
        edges = (seq <= 1, seq >= self.stepper.total, bool(self.history), bool(self.future))
        if edges != self._edges:
            self._edges = edges
            self.refresh_bindings()

    @work(thread=True, exclusive=True, group="load")
    def load(self, seq: int, reveal: bool) -> None:
        message = self.loader.load(seq, reveal=reveal, definition=self.definition)
        if message is not None and not get_current_worker().is_cancelled:
            self.post_message(message)

    def on_call_loaded(self, message: CallLoaded) -> None:
        if message.seq != self.seq:
            return
        self.loaded_seq = message.seq
        self.loaded_call = call = message.call
        if message.row is not None:
            self.query_one(CallTree).show(message.rows, message.row)
        site = message.site
        note = " · definition" if message.definition else (
            " · call site (definition not in the run)" if self.definition else "")
        self.query_one(SourcePane).show(site.file if site else "", message.source, site.line if site else 0,
                                        message.line_shapes, note)
        self.query_one(Inspector).show(message.seq, message.slots, message.call)
        self.query_one(StatusLine).show(printable(self.reader.path.name), call, message.total, message.step,
                                        self.status_text,
                                        message.nonfinite_grad)

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        """Grey out moves that cannot go anywhere from here (`on_key` still answers them)."""
        if action == "back_into" and self.seq <= 1:
            return None
        if action == "into" and self.seq >= self.stepper.total:
            return None
        if action in ("failure", "exception") and self.status != "crashed" and not (
                action == "exception" and self.loaded_call is not None and self.loaded_call.error):
            return None
        if action == "history":
            return bool(self.history if parameters[0] == -1 else self.future) or None
        return True

    def on_key(self, event: events.Key) -> None:
        """A greyed-out key still answers: its action says why it cannot move (a key that
        does nothing reads as a key the app did not get)."""
        for binding in self.BINDINGS:
            if event.key not in [key.strip() for key in binding.key.split(",")]:
                continue
            _, name, parameters = parse(binding.action)
            if self.check_action(name, parameters) is None:
                event.stop()
                # Called directly: run_action would ask check_action again and do nothing.
                getattr(self, f"action_{name}")(*parameters)
            return

    # -- the tree --------------------------------------------------------------------------

    def on_call_tree_row_chosen(self, message: CallTree.RowChosen) -> None:
        if message.seq != self.seq:
            self._reveal = False
            self.seq = message.seq

    def on_call_tree_toggle_requested(self, message: CallTree.ToggleRequested) -> None:
        self.toggle_row(message.index, message.expand)

    @work(thread=True, exclusive=True, group="tree")
    def toggle_row(self, index: int, expand: bool) -> None:
        (self.rows.expand if expand else self.rows.collapse)(index)
        self.post_message(RowsChanged(self.rows.rows, index))

    def on_rows_changed(self, message: RowsChanged) -> None:
        self.query_one(CallTree).show(message.rows, min(message.cursor, len(message.rows) - 1))

    # -- slower jumps (workers) ------------------------------------------------------------

    def action_failure(self) -> None:
        what = "call that raised"
        site = self.meta.get("failing_site")
        if site and self.meta.get("failing_seq") is None:  # the script raised outside any call
            what += f": the script raised at {Path(site).name}, outside the calls recorded (x shows it)"
        self.find(lambda: self.stepper.failure(), what)

    def action_to_line(self, forward: bool) -> None:
        pane = self.query_one(SourcePane)
        if not pane.path:
            self.move(None, "source line here")
            return
        line, seq = pane.cursor_line, self.seq
        self.find(lambda: self.stepper.at_line(pane.path, line, seq, forward=forward),
                  f"{'later' if forward else 'earlier'} call from line {line}")

    def action_search_again(self, forward: bool) -> None:
        if not self.search_text:
            self.action_search()
            return
        text, seq = self.search_text, self.seq
        self.find(lambda: self.stepper.search(text, seq, forward=forward), f"call matching {text!r}",
                  start=seq, forward=forward)

    @work(thread=True, exclusive=True, group="find")
    def find(self, search: Callable[[], int | None], what: str, start: int | None = None,
             forward: bool = True) -> None:
        self.post_message(JumpFound(search(), what, start, forward))

    def on_jump_found(self, message: JumpFound) -> None:
        found, start = message.seq, message.start
        if found is not None and start is not None:
            if found == start:
                self.notify(f"the only {message.what}", timeout=2, markup=False)
            elif (found < start) == message.forward:  # past the last match: from the other end
                self.notify(f"search wrapped to the {'start' if message.forward else 'end'} of the run",
                            timeout=2)
        self.jump(found, message.what)

    def action_history(self, direction: int) -> None:
        source, target = (self.history, self.future) if direction < 0 else (self.future, self.history)
        if not source:
            self.move(None, "place to go " + ("back to" if direction < 0 else "forward to"))
            return
        target.append(self.seq)
        self.seq = source.pop()

    # -- everything else -------------------------------------------------------------------

    def action_refresh(self) -> None:
        self.reload()

    @work(thread=True, exclusive=True, group="load")
    def reload(self, ended: bool = False) -> None:
        try:
            self.stepper.refresh()
            self.rows.reload()
            self._read_status()
        except TvisError as exc:  # cut short since it was opened: reading on would crash
            self.app.call_from_thread(self._damaged, str(exc))
            return
        if get_current_worker().is_cancelled:  # closed, or a move came first
            return
        target = max(1, min(self.seq, self.stepper.total))
        said = f"recording ended ({self.status_text})" if ended else "reloaded"
        self.app.call_from_thread(self.notify, f"{said}: {self.stepper.total:,} calls", timeout=3,
                               markup=False)
        if not self.stepper.total:
            self.app.call_from_thread(self._show_no_calls)
            return
        if target != self.seq:
            # Opened before its first call (seq 0): going to call 1 loads it, as a move does.
            self.app.call_from_thread(setattr, self, "seq", target)
            return
        message = self.loader.load(target, definition=self.definition)
        if message is not None:
            self.post_message(message)

    def _damaged(self, message: str) -> None:
        if not self.is_mounted:
            return  # closed while the reload read: the reader is gone, and so is the run's view
        if self.is_current:  # not another screen on top of it (the step view)
            self.action_close()
        self.app.notify(f"cannot reload: {message}", severity="error", markup=False, timeout=10)

    def action_definition(self) -> None:
        self.definition = not self.definition
        self.load(self.seq, False)

    def action_values(self) -> None:
        inspector = self.query_one(Inspector)
        if inspector.slots and inspector.cursor_row < len(inspector.slots):
            inspector.action_select_cursor()

    def action_exception(self) -> None:
        """The current call's exception when it raised one the script caught (its whole
        message); else the one a crashed run ended with (message and traceback)."""
        from tvis_tui.screens.exception import ExceptionScreen

        meta = self.meta
        call = self.loaded_call
        # The failing call's ancestors carry the same error: theirs is the run's exception.
        if call is not None and call.error and call.seq != meta.get("failing_seq") \
                and call.error != meta.get("exception"):
            text = call.extra.get("error_text") or call.error
            self.app.push_screen(ExceptionScreen(text, f"call {call.seq:,} {call.name}"))
            return
        text = meta.get("traceback") or meta.get("exception")
        if not text:
            reason = stop_reason(meta)
            self.move(None, f"exception: the run was stopped ({reason})" if reason
                      else "exception recorded for this run")
            return
        site = meta.get("failing_site")
        if site:
            file, _, line = site.rpartition(":")
            site = f"{Path(file).name}:{line}"
        self.app.push_screen(ExceptionScreen(text, site))

    def action_step_view(self) -> None:
        from tvis_tui.screens.step_view import StepScreen

        if self.loaded_call is None:
            self.move(None, "call loaded yet")
            return
        self.app.push_screen(StepScreen(self.reader, self.loaded_call.step))

    def action_params_view(self) -> None:
        from tvis_tui.screens.params_view import ParamsScreen

        self.app.push_screen(ParamsScreen(self.reader, self.loaded_call.step if self.loaded_call else None))

    def on_values_requested(self, message: ValuesRequested) -> None:
        from tvis_tui.screens.values import ValuesScreen

        self.app.push_screen(ValuesScreen(self.reader, message.seq, message.slot))

    def action_close(self) -> None:
        if len(self.app.screen_stack) > 2:
            self.app.pop_screen()
        else:  # opened on its own (`tvis tui RUN`): say so rather than nothing
            self.notify("this run was opened on its own: there is no run list to go back to "
                        "(`tvis tui` on its folder lists its runs; ctrl+q quits)", timeout=4)
