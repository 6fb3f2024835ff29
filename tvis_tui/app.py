"""The tvis viewer: a run picker over a folder of runs, or the debugger over one run."""

from __future__ import annotations

from pathlib import Path

from textual.app import App
from textual.binding import Binding

from tvis_tui.errors import TvisError
from tvis_tui.messages import RunClosed
from tvis_tui.store import RunReader
from tvis_tui.store.runs import RunSummary, find_runs, readable_run


class TvisApp(App[None]):
    CSS_PATH = "tvis.tcss"
    TITLE = "tvis"
    ENABLE_COMMAND_PALETTE = False
    BINDINGS = [Binding("question_mark,f1", "help", "help", show=True, tooltip="Help: every key"),
                Binding("q,ctrl+q", "quit", "Quit", show=True),
                Binding("ctrl+z", "suspend_process", "Suspend (fg resumes)", show=False)]

    def __init__(self, target: Path, *, runs: list[RunSummary] | None = None, start: int | None = None) -> None:
        super().__init__()
        self.target = target
        self.runs = runs
        self.start = start
        self.damage: str | None = None  # why the app closed a run opened on its own

    def _handle_exception(self, error: Exception) -> None:
        """A run found damaged while shown (a malformed record: bit rot, a run made by
        hand; the reader raises TvisError) closes with its one-line reason: back to the
        run list, or out of the app with `tvis: error: ...`. Anything else is a bug and
        ends the app as Textual does, with its traceback."""
        from textual.worker import WorkerFailed

        from tvis_tui.screens.debugger import DebuggerScreen

        damage = error.error if isinstance(error, WorkerFailed) else error
        shown = [s for s in self.screen_stack if isinstance(s, DebuggerScreen)]
        if not isinstance(damage, TvisError) or not shown:
            super()._handle_exception(error)
            return
        if self.screen_stack.index(shown[0]) > 1:  # a run list beneath it
            while self.screen is not shown[0]:
                self.pop_screen()
            self.pop_screen()
        self._damaged(damage)

    def _damaged(self, damage: TvisError) -> None:
        """Says why a run could not be shown: beside the run list, or on leaving the app
        when the run was opened on its own (`tvis tui RUN`: exit 2)."""
        if self.runs is not None:
            self.notify(str(damage), severity="error", markup=False, timeout=10)
        else:
            self.damage = str(damage)
            self.exit(return_code=2)

    def on_mount(self) -> None:
        if self.runs is not None:
            from tvis_tui.screens.run_picker import RunPickerScreen

            self.push_screen(RunPickerScreen(self.target, self.runs))
        else:
            self.open_run(self.target, start=self.start)

    def action_help(self) -> None:
        from tvis_tui.screens.help import HelpScreen

        if not isinstance(self.screen, HelpScreen):
            self.push_screen(HelpScreen(getattr(self.screen, "HELP_SECTIONS", ())))

    def on_run_closed(self, _: RunClosed) -> None:
        """Back from a run, once its reader is closed, the run list is read again (the run
        may have been reloaded there, others recorded since). Not on screen resume: the
        run's screen still held it open then, and it read "already open in this process"."""
        from tvis_tui.screens.run_picker import RunPickerScreen

        for screen in self.screen_stack:
            if isinstance(screen, RunPickerScreen):
                screen.reload()

    def open_run(self, path: Path, *, start: int | None = None) -> None:
        from tvis_tui.screens.debugger import DebuggerScreen

        try:
            reader = RunReader(path)
        except TvisError as exc:
            self.notify(str(exc), severity="error", markup=False)
            return
        try:  # it reads the run's steps: a malformed one is found here
            screen = DebuggerScreen(reader, start=start)
        except TvisError as exc:
            reader.close()
            self._damaged(exc)
            return
        self.push_screen(screen)


def make_app(path: str | Path, *, start: int | None = None) -> TvisApp:
    """The app for `path`, a run or a folder of runs. Raises TvisError (one line) for a path
    that is neither, before any terminal setup happens."""
    target = Path(path)
    if not target.exists():
        raise TvisError(f"{target}: no such run or folder")
    if readable_run(target):
        with RunReader(target) as reader:
            total = reader.call_count()
        if start is not None and not 1 <= start <= total:
            has = f"has calls 1 to {total}" if total else "has no calls"
            raise TvisError(f"--call {start}: {target} {has}")
        return TvisApp(target, start=start)
    if start is not None and target.is_dir():  # the picker would drop it without a word
        raise TvisError(f"--call {start}: {target} is a folder, not a run; give one run "
                        f"(tvis tui {target / '<run>'} --call {start})")
    runs = find_runs(target)
    if not runs:
        raise TvisError(f"{target}: no tvis runs here (record one with `tvis run`)")
    return TvisApp(target, runs=runs)
