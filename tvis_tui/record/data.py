"""The data half of a recording: samples, batches, tokenizer calls and predictions.

`DataCapture` is installed by the Recorder next to its own hooks and writes through the
same sink (sink.py) into the extension databases of tvis_tui.store.samples. It wraps:

- torch's dataset fetchers' `fetch` (main process and workers alike; samples.py),
- `_MultiProcessingDataLoaderIter._process_data`, to take worker results apart, and torch's
  `_worker_loop`, so that spawned workers observe as forked ones do (workers.py),
- `F.cross_entropy` / `F.nll_loss` (the loss modules call them), for predictions (decoding.py),
- `builtins.__build_class__`, to watch tokenizer classes as they are defined (tokenizers.py).

Observing draws no random numbers, makes no iterator, and hands the script the very
objects torch produced; every value is copied when it is seen.
"""

from __future__ import annotations

import builtins
import functools
import itertools
import sys
from typing import TYPE_CHECKING, Any, Callable

import torch
import torch.nn.functional as F
import torch.utils.data.dataloader as dataloader_module
from torch._utils import ExceptionWrapper
from torch.utils.data._utils import worker as worker_module

from tvis_tui.record import decoding, workers
from tvis_tui.record.describe import Budget
from tvis_tui.record.samples import DETAILED_SAMPLES, observed_fetch, to_current_capture
from tvis_tui.record.tokenizers import TokenizerWatch, vocab_size, weak_ref
from tvis_tui.record.tvis_frames import without_tvis_frames
from tvis_tui.store import samples as store

if TYPE_CHECKING:
    from tvis_tui.record.recorder import Recorder

BATCH_BYTES = 16 << 20
"""Values and images kept per batch at most; past it samples keep statistics only."""

TOKEN_CALLS_PER_STEP = 256
"""Tokenizer calls recorded per step outside data loading (a logging loop may decode a lot)."""

PREDICTION_LOSSES = ("cross_entropy", "nll_loss", "binary_cross_entropy_with_logits", "binary_cross_entropy")
LABEL_LOSSES = {"binary_cross_entropy_with_logits": False, "binary_cross_entropy": True}
"""Binary cross-entropies, and whether their input is probabilities (else logits)."""


class DataCapture:
    def __init__(self, recorder: "Recorder") -> None:
        self._rec = recorder
        self._order = itertools.count(1)
        self._tokens_in_step: dict[int, int] = {}
        self._predicted_step = 0
        self._predicted_trains = False  # the decoded loss's logits required grad
        self._dataset: Any = None
        self._batch_size: int | None = None
        self._tokenizer_copies = decoding.TokenizerCopies()
        self._predicted_with: Callable[[], Any] | None = None
        self.tokens = TokenizerWatch(self._on_tokens, self._is_user_file,
                                     lambda undo: recorder._undo.append(undo),
                                     lambda: recorder._reentry.inside)
        recorder.writer.put_meta(data_detail_samples=DETAILED_SAMPLES)

    def install(self, wrap: Callable[[Any, str, Callable[..., Any]], None]) -> None:
        wrap(builtins, "__build_class__", self.tokens.build_class)
        for fetcher in workers.FETCHERS:
            wrap(fetcher, "fetch", self._fetch)
        wrap(dataloader_module._MultiProcessingDataLoaderIter, "_process_data", self._process_data)
        worker_module._worker_loop = workers.WorkerLoop(self._worker_settings)
        self._rec._undo.append(lambda: setattr(worker_module, "_worker_loop", workers.TORCH_WORKER_LOOP))
        for name in PREDICTION_LOSSES:
            wrap(F, name, functools.partial(self._loss, name))

    def _worker_settings(self) -> workers.WorkerSettings:
        """For a worker spawned now (workers.py)."""
        classes = {(cls.__module__, cls.__qualname__) for cls in self.tokens.patched_classes()
                   if "<locals>" not in cls.__qualname__}
        return workers.WorkerSettings(BATCH_BYTES, self._rec.log.slots.max_bytes, tuple(sorted(classes)))

    def _is_user_file(self, path: str) -> bool:
        return self._rec.sites.user_path(path) is not None

    def _budget(self) -> Budget:
        return Budget(BATCH_BYTES, self._rec.log.slots.max_bytes)

    def _open_batch_seq(self) -> int | None:
        """The seq of the DataLoader call being recorded on this thread, if any."""
        stack = self._rec.log.stack
        if stack and stack[-1].record.kind == "data" and self._rec._active():
            return stack[-1].record.seq
        return None

    @property
    def batch_size(self) -> int | None:
        """The samples in the last batch the DataLoader delivered (None before one)."""
        return self._batch_size

    # -- fetching ------------------------------------------------------------------------

    def _fetch(self, original: Callable[..., Any], fetcher: Any, index: Any) -> Any:
        if self._rec.in_recording_process():
            seq = self._open_batch_seq()
            if seq is None:
                return original(fetcher, index)
            batch, capture = observed_fetch(original, fetcher, index, self._budget(), self._rec._guard)
            self._rec._guard(self._deliver, seq, capture.batch_record(), capture.samples, fetcher.dataset)
            return batch
        if workers.worker_id() is None:  # some other fork of the script: not ours to record
            return original(fetcher, index)
        return workers.fetch(original, fetcher, index, self._budget())

    def _process_data(self, original: Callable[..., Any], iterator: Any, data: Any, worker: int) -> Any:
        if isinstance(data, ExceptionWrapper):  # re-raised by torch with the worker's traceback
            data.exc_msg = without_tvis_frames(data.exc_msg)
        if not isinstance(data, workers.Carrier):
            return original(iterator, data, worker)
        result = original(iterator, data.batch, worker)
        seq = self._open_batch_seq()
        if seq is not None:
            capture = data.capture
            self._rec._guard(self._deliver, seq, capture["batch"], capture["samples"],
                             getattr(iterator, "_dataset", None))
        return result

    def _deliver(self, seq: int, batch: dict[str, Any], samples: list[dict[str, Any]], dataset: Any) -> None:
        step = self._rec.steps.step
        batch = {**batch, "seq": seq, "step": step, "dataset": type(dataset).__name__}
        self._dataset, self._batch_size = dataset, len(samples) or None
        self._rec.writer.call(store.put_batch, batch)
        held = {id(obj): obj for obj in (vars(dataset).values() if hasattr(dataset, "__dict__") else ())
                if self.tokens.consider(obj)}  # a tokenizer the dataset holds
        if len(held) < 2:  # with two (source and target text), which ids are whose is unknown
            self._decode_samples(samples, next(iter(held.values())) if held else self._tokenizer())
        for sample in samples:
            self._rec.writer.call(store.put_sample, seq, sample)

    def _decode_samples(self, samples: list[dict[str, Any]], tokenizer: Any) -> None:
        """Token ids among the samples' values get their text, as predictions do."""
        decoder = self._tokenizer_copies.of(tokenizer) if tokenizer is not None else None
        if decoder is not None:
            for sample in samples:
                decoding.decode_sample(sample.get("item"), decoder, vocab_size(tokenizer),
                                       decoding.tokenizer_name(tokenizer))

    def _tokenizer(self) -> Any:
        """The tokenizer that decoded the last predictions, else the last one called."""
        for ref in (self._predicted_with, self.tokens.last):
            tokenizer = ref() if ref is not None else None
            if tokenizer is not None:
                return tokenizer
        return None

    # -- tokenizers ----------------------------------------------------------------------

    def _on_tokens(self, tok: Any, make: Callable[[], dict[str, Any]]) -> None:
        if to_current_capture(make) or not self._rec._active():
            return
        step = self._rec.steps.step
        count = self._tokens_in_step.get(step, 0)
        if count < TOKEN_CALLS_PER_STEP:
            self._tokens_in_step[step] = count + 1
            self._rec._guard(self._put_tokens, step, make)

    def _put_tokens(self, step: int, make: Callable[[], dict[str, Any]]) -> None:
        entry = {**make(), "step": step, "after_seq": self._rec.log.last_seq}
        self._rec.writer.call(store.put_tokens, next(self._order), entry)

    # -- predictions ---------------------------------------------------------------------

    def _loss(self, name: str, original: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
        result = original(*args, **kwargs)
        if self._rec._active() and self._wanted(args[0] if args else kwargs.get("input")):
            self._rec._guard(self._predict, name, args, kwargs, sys._getframe(1))
        return result

    def _loss_name(self, name: str) -> str:
        """The loss as the script called it: `CrossEntropyLoss` calls F.cross_entropy."""
        stack = self._rec.log.stack
        if stack and stack[-1].record.kind == "module" and stack[-1].criterion:
            return stack[-1].record.type
        return f"F.{name}"

    def _loss_seq(self) -> int:
        """The loss call being decoded: the criterion module around F.cross_entropy, or
        the F.cross_entropy call itself, closed by now (the recorder's wrapper is inside
        this one)."""
        log = self._rec.log
        criterion = next((c for c in reversed(log.stack) if c.criterion), None)
        return criterion.record.seq if criterion is not None else log.last_seq

    def _wanted(self, logits: Any) -> bool:
        """A step's predictions are its last training loss's, else its last loss's (the
        call its per-sample loss comes from, per_sample_loss.attach): a metric on detached
        logits logged after optimizer.step() must not stand for the predictions the step
        trained on, nor a validation loss computed with autograd on before the training
        batch (nanoGPT's) for them."""
        trains = isinstance(logits, torch.Tensor) and logits.requires_grad and torch.is_grad_enabled()
        step = self._rec.steps.step
        if self._predicted_step == step and self._predicted_trains and not trains:
            return False
        self._predicted_step, self._predicted_trains = step, trains
        return True

    def _predict(self, name: str, args: tuple, kwargs: dict, frame: Any) -> None:
        logits = args[0] if args else kwargs.get("input")
        target = args[1] if len(args) > 1 else kwargs.get("target")
        frames = decoding.user_frames(frame, self._is_user_file)
        names, tokenizer = decoding.discover(frames, [self._dataset, *self._rec.names.roots()])
        if tokenizer is None and self.tokens.last is not None:
            tokenizer = self.tokens.last()
        if tokenizer is not None:
            self.tokens.consider(tokenizer)
            # The script's tokenizer is not kept alive by tvis; an IdTable is tvis's own.
            self._predicted_with = ((lambda: tokenizer) if isinstance(tokenizer, decoding.IdTable)
                                    else weak_ref(tokenizer))
        if name in LABEL_LOSSES:
            record = decoding.label_predictions(logits, target, names, LABEL_LOSSES[name])
        else:
            record = decoding.predictions(logits, target, names, tokenizer, self._batch_size,
                                          kwargs.get("ignore_index", -100), self._tokenizer_copies)
        if record is not None:
            record.update(step=self._rec.steps.step, loss=self._loss_name(name),
                          after_seq=self._rec.log.last_seq, loss_seq=self._loss_seq())
            self._rec.writer.call(store.put_prediction, record)
