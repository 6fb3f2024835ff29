"""The static estimate: follow the script, then turn what it does into a peak and its parts."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from tvis_tui.vram.api import Api
from tvis_tui.vram.facts import WORLD_NAMES, Facts, Settings
from tvis_tui.vram.functional import cross_entropy
from tvis_tui.vram.interp import OutOfBudget
from tvis_tui.vram.memory import (Peak, backward_peak, grad_bytes, optimizer_bytes,
                                  optimizer_key, optimizer_peak, scaled)
from tvis_tui.vram.source import read_script
from tvis_tui.vram.tape import Tape
from tvis_tui.vram.values import ITEMSIZE, Instance, Module, Optimizer, Param, Tensor

MIB = 1024 ** 2
CUDA_CONTEXT = 500 * MIB
"""CUDA context with cuBLAS/cuDNN kernels loaded: 300-800 MiB depending on GPU and driver;
no tensor holds it, nvidia-smi shows it."""
ALLOCATOR_OVERHEAD = 0.07
"""The caching allocator's rounding and fragmentation over the tensor peak, as a fraction."""

OVERHEAD_NOTE = (f"CUDA context {CUDA_CONTEXT // MIB} MiB and allocator overhead "
                 f"{ALLOCATOR_OVERHEAD:.0%} of the tensor peak (typical values, not read)")

ASSUMED_WORLD = 8
"""GPUs assumed for an FSDP script whose world size comes from the launcher."""

NO_MODEL = "no model found in the script"
MODEL_NOT_FOLLOWED = "the model could not be followed (built by code tvis vram does not read)"
"""Why an estimate has no model (Facts.no_model): the second has a training loop or an
optimizer, so running the script (--trace) can still measure it."""

PARTS = ("parameters", "gradients", "optimizer_state", "activations", "workspace",
         "cuda_context", "allocator_overhead")


@dataclass
class Estimate:
    """A peak and its parts, with what was read from the script and what was assumed."""

    script: str
    breakdown: dict[str, int]
    phase: str
    read: list[str]
    assumptions: list[str]
    confidence: str
    facts: Facts
    settings: Settings
    notes: list[str] = field(default_factory=list)

    @property
    def peak_bytes(self) -> int:
        return sum(self.breakdown.values())

    @property
    def tensor_bytes(self) -> int:
        """The peak that tensors hold: what a CPU measurement of live storage sees."""
        return self.peak_bytes - self.breakdown["cuda_context"] - self.breakdown["allocator_overhead"]


def estimate(path: str | Path, settings: Settings | None = None) -> Estimate:
    """The static estimate for the script at `path`; UnreadableScript (a TvisError) when the
    file is not Python source that parses."""
    settings = settings or Settings()
    path = Path(path)
    tape = Tape(device=settings.device, fused_attention=settings.fused_attention)
    facts = Facts(settings, path)
    facts._tape = tape
    tree = read_script(path)
    with Api(facts, tape) as api:
        api.interp.run_module(tree.root_node, api.globals)
        if api.interp.out_of_budget:
            facts.assume("the script is too long to follow in full; read up to the budget")
        if facts.snapshot is None:
            api.interp.restart_budget()
            try:
                _assumed_step(api, facts)
            except OutOfBudget:
                facts.assume("the model's forward is too long to follow; activations partial")
                facts.snapshot = list(tape.ops)
    return _breakdown(facts, tape, settings, str(path))


def _assumed_step(api: Api, facts: Facts) -> None:
    """No backward was followed: run one forward of the biggest model, a loss and backward."""
    tape = api.tape
    candidates = [facts.model] if facts.model is not None else []
    candidates += sorted(facts.models, key=lambda m: -_param_count(m))
    if not candidates:
        if api.interp.training_loops or facts.optimizers:
            facts.no_model = MODEL_NOT_FOLLOWED
        else:
            facts.no_model = NO_MODEL
        facts.assume(f"{facts.no_model}; activations not counted")
        return
    model = candidates[0]
    facts.assume(f"one training step of {model.kind} (the script's own step was not followed)")
    facts.model = None
    tape.ops, tape.grad_enabled = [], True
    if facts.autocast and tape.autocast is None:
        tape.autocast = facts.autocast
    out = api.call_module(model, [], {}, model.line)
    if isinstance(out, Instance):
        out = out.attrs.get("loss", out.attrs.get("logits"))
    if isinstance(out, tuple):
        out = next((o for o in out if isinstance(o, Tensor)), None)
    loss = out
    if isinstance(out, Tensor) and out.shape:
        loss = cross_entropy(api, [out], {}, model.line)
    facts.snapshot = list(tape.ops)
    facts.held = [t for t in facts.inputs + [out, loss] if isinstance(t, Tensor)]


def _param_count(model: Module) -> int:
    return sum(p.numel for p in model.params())


def _params(facts: Facts, settings: Settings) -> list[Param]:
    """Every parameter resident through the step: the model's, and those any optimizer
    steps besides (a GAN's second model)."""
    model = facts.model or (max(facts.models, key=_param_count) if facts.models else None)
    if settings.params is not None:
        dtype = settings.dtype if settings.dtype in ("float16", "bfloat16") else "float32"
        return [Param((settings.params,), dtype)]
    found = {id(p): p for p in (model.params() if model is not None else [])}
    for opt in facts.trained_optimizers():
        for p in opt.params:
            found.setdefault(id(p), p)
    return list(found.values())


def _untrained(facts: Facts, settings: Settings, params: list[Param]) -> list[Param]:
    """Parameters (and buffers) of the models the training loop calls that neither the
    model nor an optimizer holds: a frozen encoder run under no_grad, a LightningModule's
    parts. Resident through the step; never given a gradient."""
    if settings.params is not None:
        return []
    seen = {id(p) for p in params}
    found: dict[int, Param] = {}
    for module in facts.called_models():
        for p in module.params():
            if id(p) not in seen:
                found.setdefault(id(p), p)
    return list(found.values())


def _optimizer_state(facts: Facts, settings: Settings, trainable: list[Param]) -> tuple[int, int]:
    """(state bytes, step temporaries) of the script's optimizers, each over the parameters
    it steps. Parameters no optimizer is read to step go to one whose own could not be
    read, or to the only optimizer assumed when none was. Temporaries are one optimizer's
    at a time: they step one after the other."""
    ids, claimed = {id(p) for p in trainable}, set()
    shares: list[tuple[Optimizer | None, list[Param]]] = []
    readable = settings.params is None  # --params stands for the model, not for an optimizer's
    optimizers = facts.trained_optimizers()
    for opt in optimizers if readable else ():
        mine = [p for p in opt.params if id(p) in ids and id(p) not in claimed]
        claimed.update(id(p) for p in mine)
        if opt.params:
            shares.append((opt, mine))
    rest = [p for p in trainable if id(p) not in claimed]
    unread = next((o for o in optimizers if not (readable and o.params)), None)
    if rest and (unread is not None or not shares):
        shares.append((unread, rest))
    state = temp = 0
    for opt, params in shares:
        key, kwargs = _optimizer(facts, settings, opt)
        s_bytes, t_bytes = optimizer_bytes(key, params, settings.device, kwargs)
        state, temp = state + s_bytes, max(temp, t_bytes)
    return state, temp


def _optimizer(facts: Facts, settings: Settings, opt: Optimizer | None) -> tuple[str, dict]:
    if settings.optimizer:
        return settings.optimizer, {}
    if opt is not None:
        return optimizer_key(opt.kind, opt.kwargs), opt.kwargs
    facts.assume("optimizer AdamW (none found in the script)")
    return "adamw", {}


def _breakdown(facts: Facts, tape: Tape, settings: Settings, script: str) -> Estimate:
    params = _params(facts, settings)
    base, grads, temp = _resident(facts, settings, params, _untrained(facts, settings, params))
    if settings.accumulation:
        facts.accumulation = max(facts.accumulation, settings.accumulation)
    set_to_none = settings.set_to_none if settings.set_to_none is not None else facts.set_to_none
    grads_present = not set_to_none or facts.accumulation > 1 or not facts.zero_grad_line
    grads_at_forward = grads_present or facts.forward_line < facts.zero_grad_line < facts.backward_line
    ops, held = facts.snapshot or [], facts.held
    scale = _batch_scale(facts, settings)
    if scale != 1.0:
        ops, held = scaled(ops, held, scale)
    share = 1 / _shards(facts, settings)
    peak = max(backward_peak(ops, held, base, grads, grads_present, grads_at_forward, share),
               optimizer_peak(base, grads, held, temp), key=lambda p: p.total)
    parts = {"parameters": peak.parameters, "gradients": peak.gradients,
             "optimizer_state": peak.optimizer_state, "activations": peak.activations,
             "workspace": peak.workspace, "cuda_context": 0, "allocator_overhead": 0}
    assumptions = list(facts.assumed)
    if settings.device == "cuda":
        parts["cuda_context"] = CUDA_CONTEXT
        parts["allocator_overhead"] = int(peak.total * ALLOCATOR_OVERHEAD)
        assumptions.append(OVERHEAD_NOTE)
    from tvis_tui.vram.report import confidence, read_list

    return Estimate(script, parts, peak.phase, read_list(facts, params, tape),
                    assumptions, confidence(facts, tape), facts, settings)


def _resident(facts: Facts, settings: Settings, params: list[Param],
              untrained: list[Param]) -> tuple[Peak, int, int]:
    """What stays in memory through the step, per GPU: parameters (`untrained` ones too)
    and optimizer state (and DDP's gradient buckets), with the full gradient size and the
    optimizer's temporaries."""
    if settings.freeze_embeddings:
        for p in params:
            p.trainable = p.trainable and not getattr(p, "embedding", False)
    trainable = [p for p in params if p.trainable and not p.buffer]
    shards = _shards(facts, settings)
    p_bytes = sum(p.numel * ITEMSIZE.get(p.dtype, 4) for p in params + untrained)
    g_bytes = grad_bytes(trainable)
    s_bytes, temp = _optimizer_state(facts, settings, trainable)
    base = Peak(parameters=p_bytes // shards, optimizer_state=s_bytes // shards)
    if facts.sharding == "ddp" and settings.device == "cuda":
        base.workspace = g_bytes  # DDP's gradient buckets, a second copy of the gradients
    return base, g_bytes // shards, temp // shards


def _shards(facts: Facts, settings: Settings) -> int:
    """GPUs that FSDP shards over: --what-if, the script's world size, or an assumed 8."""
    if settings.shards > 1:
        return settings.shards
    if facts.sharding != "fsdp":
        return 1
    world = facts.named_value(WORLD_NAMES)
    if world:
        return world
    facts.assume(f"FSDP over {ASSUMED_WORLD} GPUs (world size not found in the script)")
    return ASSUMED_WORLD


def _batch_scale(facts: Facts, settings: Settings) -> float:
    """A --batch-size the script's own names did not take (a literal batch dimension)
    scales every batch-sized tensor instead."""
    if settings.batch_size is None or not facts.inputs or not facts.inputs[0].shape:
        return 1.0
    read = facts.inputs[0].shape[0]
    return settings.batch_size / read if read and read != settings.batch_size else 1.0
