"""Activation gradients: the gradient of each recorded module output, summarized like a value.

When a recorded module call returns, each output tensor that requires grad gets a tensor
hook (`Tensor.register_hook`). When backward computes that tensor's gradient, the hook
writes it as a slot of role "grad" on the module call, with the same index and path as the
output slot (`out`, `out[0]`), through the same SlotMaker (capture mode, values cap, one
summary for a tensor seen twice: a Sequential's output is its last layer's).

Why tensor hooks and not module full-backward hooks: those wrap outputs in a
BackwardHookFunction, which breaks on outputs modified in place (ReLU(inplace=True)).

Semantics worth knowing (torch's, checked in tests/record/test_gradients.py):
- A tensor modified in place after the module returned (an in-place ReLU) keeps its hook on
  the node that produced it, so the grad is the one of the value the module returned.
- A view output (`x[:, :4]`) modified in place afterwards, directly or through its base or
  another view of it, gets a new grad_fn: its hook never runs and it has no grad slot (a
  plain `register_hook` sees nothing either); the base's own call still gets its grad.
- The grad of a tensor is complete when its hook runs (contributions are summed first).
- Outputs that are never backpropagated: the hook never runs, nothing is written.
- Leaf outputs (a module returning a tensor that has no grad_fn) are skipped: a hook on a
  leaf outlives the step and would fire on every later backward.
- retain_graph / a second backward through the same graph: only the first grad is kept.
- Only grads computed inside backward() are recorded: `torch.autograd.grad` (a gradient
  penalty with create_graph=True) runs the same hooks with other grad_outputs, and is skipped.
- Reentrant checkpointing: outputs made under no_grad need no hook; the recompute's calls
  (phase "backward") get the grads. Non-reentrant: the recompute's outputs are not
  backpropagated through, the original calls get the grads.
- Under a GradScaler the loss is scaled before backward, and so are these grads (the
  `param_grad` slots of the optimizer step are read after the scaler unscaled them).
- On CUDA the autograd engine runs hooks on its device threads: tvis's time there is
  counted on that thread, so it is not taken off the backward call's duration.

A hook holds the call's seq and the slot's path, never the tensor or the graph; it returns
None (the gradient is never changed) and is guarded like every tvis hook.
"""

from __future__ import annotations

import sys
import weakref
from typing import TYPE_CHECKING, Any, Callable, Iterator

import torch

from tvis_tui.record.slots import MAX_SLOTS

if TYPE_CHECKING:
    from tvis_tui.record.recorder import Recorder


class ActivationGrads:
    """Registers the per-output tensor hooks and writes the grad slots they see."""

    def __init__(self, recorder: Recorder) -> None:
        self._recorder = weakref.ref(recorder)  # a tensor kept past the run keeps no recorder
        self.closed = False
        # backward() calls running now, on any thread (CUDA runs hooks on device threads).
        self._backward_depth = 0
        self._scaled_depth = 0  # those of them from a loss a GradScaler scaled

    def during_backward(self, backward: Callable[..., Any], *args: Any, scaled: bool = False,
                        **kwargs: Any) -> Any:
        """Run torch.autograd.backward: only grads computed inside it are recorded.
        `scaled`: of a loss a GradScaler scaled, whose Inf gradients (the scale too high,
        in a run's first steps) are the scaler's signal to skip the step, not a finding:
        they mark no call (the step says it was skipped)."""
        self._backward_depth += 1
        self._scaled_depth += scaled
        try:
            return backward(*args, **kwargs)
        finally:
            self._backward_depth -= 1
            self._scaled_depth -= scaled

    def close(self) -> None:
        """After this, hooks still attached to live tensors do nothing (the store is shut)."""
        self.closed = True

    def watch(self, seq: int, outputs: Iterator[tuple[str, Any]], nonfinite_output: bool = False) -> None:
        """Hook every output tensor of call `seq` that backward may reach. A NaN/Inf in their
        gradients marks the call, unless its outputs already hold one (`nonfinite_output`)."""
        for index, (path, value) in enumerate(outputs):
            if index >= MAX_SLOTS:  # slots past the cap were not recorded either
                break
            if isinstance(value, torch.Tensor) and value.requires_grad and value.grad_fn is not None:
                try:
                    value.register_hook(_GradHook(self, seq, index, path, not nonfinite_output))
                except RuntimeError as exc:  # functorch-wrapped tensors and the like
                    self._warn(f"an output gradient will not be recorded: {exc}")

    def record(self, seq: int, index: int, path: str, grad: torch.Tensor, mark: bool) -> None:
        """Write `grad` as the "grad" slot `index` of call `seq` (runs inside backward);
        `mark`: a NaN/Inf in it marks the call (`c` in the viewer stops there)."""
        recorder = self._recorder()
        if recorder is None:
            return
        if recorder.log.put_slots(seq, "grad", iter(((path, grad),)), index) and mark:
            recorder.log.writer.put_nonfinite_grad(seq)

    def _warn(self, message: str) -> None:
        recorder = self._recorder()
        if recorder is not None:
            recorder.warn(message)


class _GradHook:
    """One output's hook: small, holding no tensor; records the first grad it sees."""

    __slots__ = ("owner", "seq", "index", "path", "mark", "fired")

    def __init__(self, owner: ActivationGrads, seq: int, index: int, path: str, mark: bool) -> None:
        self.owner, self.seq, self.index, self.path, self.mark = owner, seq, index, path, mark
        self.fired = False

    def __call__(self, grad: torch.Tensor) -> None:
        owner = self.owner
        if self.fired or owner.closed or grad is None or not owner._backward_depth:
            return None  # torch.autograd.grad (a gradient penalty) is not the loss's backward
        self.fired = True
        recorder = owner._recorder()
        if recorder is None or torch.compiler.is_compiling():
            return None
        tracing = sys.gettrace()  # paused inline, as hook_base.untraced does for the hooks
        paused = tracing is not None and tracing is recorder.functions.trace
        if paused:
            sys.settrace(None)
        try:
            if recorder._active():
                recorder._guard(owner.record, self.seq, self.index, self.path, grad,
                                self.mark and not owner._scaled_depth)
        finally:
            if paused:
                recorder.functions.resume(tracing)
        return None  # never replace the gradient
