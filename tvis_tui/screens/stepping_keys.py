"""The debugger's keys and the actions behind them.

Keys follow habits people already have: pdb/gdb (`n` over, `s` into, `f`/`r` out, `c`
continue; a capital letter steps the other way, as in gdb's single-key mode) and VS Code
(F10 over, F11 into, Shift+F11 out, F5 continue). Stepping keys are priority bindings so
they work whichever pane has focus. Each action only computes a target seq and sets the
screen's `seq`; the panes follow from there.
"""

from __future__ import annotations

from collections.abc import Callable

from textual.binding import Binding

from tvis_tui.screens.prompt import PromptScreen
from tvis_tui.screens.stepping import Stepper

PHASE_KEYS = {"1": "data", "2": "forward", "3": "loss", "4": "backward", "5": "optimizer", "6": "no_grad"}


def _step(keys: str, action: str, label: str, help_text: str, show: bool = False) -> Binding:
    """A priority binding: `label` is for the footer, `help_text` for the help screen."""
    return Binding(keys, action, label, show=show, priority=True, tooltip=help_text)


STEPPING_BINDINGS = [
    _step("s,f11", "into", "into", "Step into: the next call", show=True),
    _step("S", "back_into", "back", "Step back: the previous call", show=True),
    _step("n,f10", "over", "over", "Step over: the next call at this level or above", show=True),
    _step("N,shift+f10", "back_over", "back over", "Back over: the previous call at this level, else the caller"),
    _step("f,r,shift+f11", "finish", "out", "Step out: the first call after the caller returns", show=True),
    _step("F,u", "out", "caller", "Out to the caller"),
    _step("c,f5", "cont", "continue", "Continue to the next call with NaN/Inf (output or gradient), or the failure", show=True),
    _step("C,shift+f5", "cont_back", "rev continue", "Reverse continue to the previous NaN/Inf call"),
    _step("o", "optimizer(True)", "next opt", "Next optimizer step"),
    _step("O", "optimizer(False)", "prev opt", "Previous optimizer step"),
    _step("right_square_bracket", "step_start(True)", "next step", "First call of the next training step"),
    _step("left_square_bracket", "step_start(False)", "prev step", "First call of the previous training step"),
    *(_step(key, f"phase('{phase}')", phase, f"First call of the {phase} phase of this step")
      for key, phase in PHASE_KEYS.items()),
    _step("exclamation_mark", "first_nonfinite", "first NaN", "First call with NaN/Inf (output or gradient)"),
    _step("e", "failure", "failure", "Jump to the call that raised (crashed run)"),
    _step("t,ctrl+f10", "to_line(True)", "to line", "Run forward to the next call from the source cursor's line"),
    _step("T", "to_line(False)", "back to line", "Run backward to the previous call from the source cursor's line"),
    _step("g,colon", "goto", "go to", "Go to call number…", show=True),
    _step("slash", "search", "search", "Search calls by name or module path…", show=True),
    _step("semicolon", "search_again(True)", "next match", "Next search match"),
    _step("comma", "search_again(False)", "prev match", "Previous search match"),
    _step("alt+left,less_than_sign", "history(-1)", "jump back", "Back to where you jumped from"),
    _step("alt+right,greater_than_sign", "history(1)", "jump fwd", "Forward again"),
    _step("ctrl+r", "refresh", "reload", "Reload the run (it may still be recording)"),
]


class SteppingActions:
    """Mixed into the debugger screen, which provides `seq`, `stepper`, `jump` and `move`."""

    seq: int
    stepper: Stepper
    search_text: str = ""
    move: Callable[[int | None, str], None]
    """Go to a call (or say that there is `what` no further that way)."""
    jump: Callable[[int | None, str], None]
    """`move`, remembering where we were for back/forward."""

    def action_into(self) -> None:
        self.move(self.stepper.next(self.seq), "later call")

    def action_back_into(self) -> None:
        self.move(self.stepper.prev(self.seq), "earlier call")

    def action_over(self) -> None:
        self.move(self.stepper.over(self.seq), "later call at this level")

    def action_back_over(self) -> None:
        self.move(self.stepper.back_over(self.seq), "earlier call at this level")

    def action_finish(self) -> None:
        self.move(self.stepper.finish(self.seq), "call after the caller returns")

    def action_out(self) -> None:
        self.move(self.stepper.out(self.seq), "caller: this is a top-level call")

    def action_cont(self) -> None:
        self.jump(self.stepper.stop(self.seq), "later call with NaN/Inf")

    def action_cont_back(self) -> None:
        self.jump(self.stepper.stop(self.seq, forward=False), "earlier call with NaN/Inf")

    def action_optimizer(self, forward: bool) -> None:
        self.jump(self.stepper.optimizer(self.seq, forward=forward),
                  f"{'later' if forward else 'earlier'} optimizer step")

    def action_step_start(self, forward: bool) -> None:
        self.jump(self.stepper.step_start(self.seq, forward=forward),
                  f"{'later' if forward else 'earlier'} training step")

    def action_phase(self, phase: str) -> None:
        self.jump(self.stepper.phase_start(self.seq, phase), f"{phase} phase in this step")

    def action_first_nonfinite(self) -> None:
        self.jump(self.stepper.first_nonfinite(), "call with NaN/Inf")

    def action_goto(self) -> None:
        def done(text: str | None) -> None:
            if text is None:
                return
            value = text.strip().lstrip("#").replace(",", "").replace("_", "")
            if not (value.isascii() and value.isdigit()) or not 1 <= int(value) <= self.stepper.total:
                self.app.notify(f"not a call number: {text!r} (1 to {self.stepper.total:,})",  # type: ignore[attr-defined]
                                severity="error", markup=False)
                return
            self.jump(int(value), "call")

        self.app.push_screen(PromptScreen(f"Go to call (1–{self.stepper.total:,}):"), done)  # type: ignore[attr-defined]

    def action_search(self) -> None:
        def done(text: str | None) -> None:
            if text and text.strip():
                self.search_text = text.strip()
                self.action_search_again(True)

        self.app.push_screen(PromptScreen("Search calls (name or module path):", self.search_text), done)  # type: ignore[attr-defined]
