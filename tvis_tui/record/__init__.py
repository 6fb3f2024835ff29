"""Recording a training script as it runs (`tvis run`); the only part of tvis that imports torch.

runner.py   runs the script as python would and turns how it ended into run metadata;
            terminations.py: SIGTERM/SIGHUP close the run as Ctrl-C does; uncaught.py: a
            script's exception shown and described as python would
options.py  what the flags ask to capture (values or summary, lines, include/exclude patterns)
recorder.py the hooks put together, installed and undone; hook_base.py what they share (the
            guard), module_hooks.py, optimizer_hooks.py, backward_hooks.py, batch_hooks.py,
            function_hooks.py (functional losses, gradient clipping) one kind of hook each
calls.py    numbering, nesting and timing calls on every thread
steps.py    where a training step ends (the step rule) and what it measured
slots.py    flattening nested inputs/outputs into slots; stats.py summarizes one tensor
names.py    qualified module and parameter names; sites.py user files, call and def sites
memory.py   peak memory per step: live_tensors.py the tensor storages tvis has seen alive,
            saved.py what autograd holds for backward, followed node by node
timing.py   CUDA-event durations and tvis's own overhead; sink.py commits the run from a thread
data.py     samples and batches: transforms.py, images.py, tokenizers.py, describe.py,
            samples.py, workers.py (DataLoader workers), decoding.py (top-k predictions)
functions.py user functions as calls, via sys.settrace (traced_frame.py: one frame's tracer);
            lines.py the tensors each user line bound
gradients.py activation gradients (tensor hooks on module outputs); updates.py optimizer updates
module_config.py a module call's settings (extra_repr) and an RNN fed its batch as time
per_sample_loss.py the per-sample loss of a recorded standard criterion (slots of role per_sample)
warning_sites.py warnings torch raises about its caller name the script's line, not a recorder frame
"""
