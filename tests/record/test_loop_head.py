"""A step ends where its iteration does: the calls after `optimizer.step()` in the same
pass of the training loop (an evaluation forward, a metric function, a scheduler step)
belong to the step they report on, not to the next one."""

from __future__ import annotations

PREAMBLE = """
import sys
import torch
from torch import nn

torch.manual_seed(0)
model = nn.Linear(4, 2)
opt = torch.optim.SGD(model.parameters(), lr=0.1)
data = torch.utils.data.TensorDataset(torch.randn(40, 4), torch.randint(0, 2, (40,)))
loader = torch.utils.data.DataLoader(data, batch_size=8)

def accuracy(out, y):
    return (out.argmax(1) == y).float().mean()

def train_step(x, y):
    loss = nn.functional.cross_entropy(model(x), y)
    opt.zero_grad()
    loss.backward()
    opt.step()
    return loss
"""


def _steps(run) -> list[list[tuple[str, str]]]:
    """Each step's top-level calls, (kind, name), in order."""
    return [[(c.kind, c.name) for c in run.calls(s.first_seq, s.last_seq) if c.depth == 0]
            for s in run.steps()]


ONE_ITERATION = [("data", "DataLoader"), ("function", "train_step"), ("module", "Linear"),
                 ("function", "accuracy")]


def test_calls_after_the_optimizer_step_stay_in_its_step(run_inprocess):
    code, run = run_inprocess(PREAMBLE + """
for x, y in loader:
    train_step(x, y)
    with torch.no_grad():
        accuracy(model(x), y)  # an evaluation of the step just taken
""")
    assert code == 0
    # The loader running out is a last, unfinished step of its own (as always).
    assert _steps(run) == [ONE_ITERATION] * 5 + [[("data", "DataLoader")]]
    assert [s.complete for s in run.steps()] == [True] * 5 + [False]


def test_a_while_loop_and_a_step_taken_inline(run_inprocess):
    code, run = run_inprocess(PREAMBLE + """
it = iter(loader)
while True:
    try:
        x, y = next(it)
    except StopIteration:
        break
    loss = nn.functional.cross_entropy(model(x), y)
    opt.zero_grad()
    loss.backward()
    opt.step()
    accuracy(model(x), y)
""")
    assert code == 0
    kinds = [[kind for kind, _ in step] for step in _steps(run)]
    assert kinds == [["data", "module", "function", "backward", "optimizer", "module", "function"]] * 5 + [["data"]]


def test_with_steps_n_the_last_iteration_finishes_and_the_next_batch_is_never_drawn(run_inprocess):
    code, run = run_inprocess(PREAMBLE + """
drawn = 0
for x, y in loader:
    drawn += 1
    train_step(x, y)
    accuracy(model(x), y)
    print("iteration", drawn, "done", flush=True)
""", steps=2)
    assert code == 0
    assert _steps(run) == [ONE_ITERATION] * 2  # no third batch drawn
    assert run.call(run.call_count()).name == "accuracy"


def test_with_steps_n_nothing_of_the_next_iteration_runs(run_inprocess, capfd):
    # Code at the top of the loop (a checkpoint, pruning, a print) comes before any call
    # tvis records: the script stops at the loop's head.
    code, run = run_inprocess(PREAMBLE + """
for it in range(5):
    print("top of", it, flush=True)
    x, y = torch.randn(8, 4), torch.randint(0, 2, (8,))
    train_step(x, y)
""", steps=2)
    assert code == 0
    assert capfd.readouterr().out == "top of 0\ntop of 1\n"
    assert len(run.steps()) == 2 and run.meta()["status"] == "ok"


def test_with_steps_n_a_generator_loops_consumer_handles_the_last_step(run_inprocess, capfd):
    # The step is taken inside a generator that yields it: its consumer's code for the
    # last step (a print, a checkpoint) runs before the script stops.
    code, run = run_inprocess(PREAMBLE + """
def train(n):
    for it in range(n):
        x, y = torch.randn(8, 4), torch.randint(0, 2, (8,))
        yield it, train_step(x, y)

for it, loss in train(5):
    print("done", it, flush=True)
""", steps=2)
    assert code == 0
    assert capfd.readouterr().out == "done 0\ndone 1\n"
    assert len(run.steps()) == 2


EVALUATION = """
val_loader = torch.utils.data.DataLoader(data, batch_size=16)  # 3 batches

@torch.no_grad()
def evaluate():
    return sum(accuracy(model(x), y) for x, y in val_loader)

for i, (x, y) in enumerate(loader):
    train_step(x, y)
    if i % 2 == 1:
        print("step", i + 1, "val", round(float(evaluate()), 3), flush=True)
"""


def test_an_evaluation_loop_after_the_step_stays_in_its_step(run_inprocess, capfd):
    # The evaluation's batches come after the step is complete: they do not feed it, so
    # the second of them is not "the next batch" that ends it.
    code, run = run_inprocess(PREAMBLE + EVALUATION)
    assert code == 0
    steps = _steps(run)
    assert steps[:2] == [ONE_ITERATION[:2], ONE_ITERATION[:2] + [("function", "evaluate")]]
    second = run.calls(run.steps()[1].first_seq, run.steps()[1].last_seq)
    assert len([c for c in second if c.kind == "data"]) == 5  # its batch, 3 to evaluate, the end
    assert len(run.steps()) == 6 and all(s.complete for s in run.steps()[:5])
    assert capfd.readouterr().out.count("val") == 2


def test_with_steps_n_an_evaluation_after_the_last_step_runs_to_its_end(run_inprocess, capfd):
    code, run = run_inprocess(PREAMBLE + EVALUATION, steps=2)
    assert code == 0
    assert capfd.readouterr().out.startswith("step 2 val")
    assert len(run.steps()) == 2
    last = run.call(run.call_count())
    assert last.kind == "data" and last.extra.get("exhausted")  # the evaluation's loader ran out


def test_without_a_loop_in_user_code_a_step_ends_at_the_optimizer_step(run_inprocess):
    # The loop is map's, in C: nothing marks where an iteration ends, so the step ends at
    # step() and the metric after it is the next step's first call, as before.
    code, run = run_inprocess(PREAMBLE + """
def iteration(batch):
    x, y = batch
    train_step(x, y)
    accuracy(model(x), y)

batches = [(torch.randn(8, 4), torch.randint(0, 2, (8,))) for _ in range(3)]
list(map(iteration, batches))
""")
    assert code == 0
    steps = _steps(run)
    assert len(steps) == 4 and not run.steps()[-1].complete
    assert steps[0][-1] == ("optimizer", "SGD")
    assert steps[1][:2] == [("module", "Linear"), ("module", "Linear")]  # the metric's forward first
    assert steps[3] == [("module", "Linear")]


def test_a_while_condition_loop_inside_an_epoch_loop(run_inprocess):
    # On 3.11 `while cond:` closes with a conditional backward jump: still the loop.
    code, run = run_inprocess(PREAMBLE + """
for epoch in range(2):
    it = iter(loader)
    i = 0
    while i < 3:
        x, y = next(it)
        train_step(x, y)
        accuracy(model(x), y)
        i += 1
""")
    assert code == 0
    assert _steps(run) == [ONE_ITERATION] * 6


def test_a_library_loop_between_the_step_and_a_user_loop_ends_the_step_at_once(run_inprocess, tmp_path):
    """A sweep around a trainer's fit(): the sweep loop is not the iteration. The library
    runs the training loop, so the step ends at step() (and the next batch from the same
    loader ends it at the latest)."""
    library = tmp_path.parent / f"{tmp_path.name}_site"
    library.mkdir()
    (library / "minitrainer.py").write_text(
        "def fit(opt, loader, training_step):\n"
        "    for batch in loader:\n"
        "        loss = training_step(batch)\n"
        "        opt.zero_grad()\n"
        "        loss.backward()\n"
        "        opt.step()\n")
    code, run = run_inprocess(f"import sys\nsys.path.insert(0, {str(library)!r})\nimport minitrainer\n"
                              + PREAMBLE + """
for lr in (0.1, 0.01):
    minitrainer.fit(opt, loader, lambda batch: nn.functional.cross_entropy(model(batch[0]), batch[1]))
""", steps=3)
    assert code == 0
    kinds = [[kind for kind, _ in step] for step in _steps(run)]
    assert kinds == [["data", "module", "function", "backward", "optimizer"]] * 3  # no 4th batch


def test_the_loop_heads_line_shapes_belong_to_the_batch_it_draws(run_inprocess, tmp_path):
    code, run = run_inprocess(PREAMBLE + """
for x, y in loader:
    train_step(x, y)
""", steps=3)
    assert code == 0
    script = str(tmp_path / "train.py")
    lines = (tmp_path / "train.py").read_text().splitlines()
    head = lines.index("for x, y in loader:") + 1
    for step in (1, 2, 3):
        shapes = run.line_shapes(script, step)[head]
        assert [(s.name, s.shape, s.hits) for s in shapes] == [("x", (8, 4), 1), ("y", (8,), 1)]


def test_a_break_ends_the_step_where_the_loop_is_left(run_inprocess):
    code, run = run_inprocess(PREAMBLE + """
for epoch in range(2):
    for i, (x, y) in enumerate(loader):
        train_step(x, y)
        if i == 1:
            break
    accuracy(model(x), y)  # after the loop: not part of the iteration that broke out
""")
    assert code == 0
    steps = _steps(run)
    assert [names.count(("data", "DataLoader")) for names in steps] == [1, 1, 1, 1, 0]
    assert steps[1][-1] == ("function", "train_step") and steps[2][0] == ("module", "Linear")
    assert steps[4] == [("module", "Linear"), ("function", "accuracy")] and not run.steps()[4].complete


def test_a_continue_in_a_while_loop_does_not_end_the_step_before_its_evaluation(run_inprocess, capfd):
    # 3.11 jumps back to the top test from the `continue` and to the body from the bottom
    # test: two heads of one loop. Taking the continue's as the loop cut the step before
    # the evaluation after `step += 1`.
    code, run = run_inprocess(PREAMBLE + """
step = 0
while step < 4:
    try:
        x, y = torch.randn(8, 4), torch.randint(0, 2, (8,))
        train_step(x, y)
    except RuntimeError:
        continue
    step += 1
    print("step", step, round(float(accuracy(model(x), y)), 3), flush=True)
""", steps=2)
    assert code == 0
    assert [line.split()[:2] for line in capfd.readouterr().out.splitlines()] == [["step", "1"], ["step", "2"]]
    assert _steps(run) == [[("function", "train_step"), ("module", "Linear"), ("function", "accuracy")]] * 2
