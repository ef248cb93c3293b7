"""A compiled step's memory (tinygrad_lite.compiler): a capture's arrays go as soon as its plan is made,
not when Python's cycle collector next runs; a plan keeps none of them; and replays hold no more
memory after many calls than after a few, nor more at their peak than the eager step does.

Weak references and tracemalloc (NumPy's arrays; Numba's own allocations are not traced, on either
side), with margins far below what one leaked activation a call would add. No timings."""
import gc
import tracemalloc
import weakref

import numpy as np
import pytest

import tinygrad_lite as tl
from tinygrad_lite import Tensor, fast
from tinygrad_lite.autograd import recorded
from tinygrad_lite.compiler import compile
from tinygrad_lite.compiler import step as step_module
from tinygrad_lite.compiler.capture import Capture
from tinygrad_lite.compiler.traced import plain
from tinygrad_lite.nn import functional as F
from tinygrad_lite.optim import Adam

ROWS, WIDTH, HIDDEN = 256, 64, 512   # a hidden activation: 512 KiB in float32
CALLS = 30
MARGIN = 256 * 1024                   # bytes: half a hidden activation; a leak of one a call adds 60 times this


class Watched(Capture):
    """A capture that keeps weak references to itself and to the array of every op it runs."""

    captures: list = []
    arrays: list = []
    alive_at_second: list = []  # for each capture with rewrites: how many earlier captures' op arrays were alive

    def __init__(self, rewrites=None, rows=None, forward_only=False):
        if rewrites:
            Watched.alive_at_second.append(sum(ref() is not None for ref in Watched.arrays))
        super().__init__(rewrites, rows, forward_only)
        Watched.captures.append(weakref.ref(self))

    def apply(self, fn, op, parents, args):
        out = super().apply(fn, op, parents, args)
        if isinstance(plain(out.data), np.ndarray):  # (NumPy scalars take no weak reference)
            Watched.arrays.append(weakref.ref(plain(out.data)))
        return out


@pytest.fixture
def watched(monkeypatch):
    """Captures made by compile are Watched, and the cycle collector is off while the test runs."""
    for name in ("captures", "arrays", "alive_at_second"):
        setattr(Watched, name, [])
    monkeypatch.setattr(step_module, "Capture", Watched)
    gc.collect()
    gc.disable()
    try:
        yield Watched
    finally:
        gc.enable()


def training_step(seed=0):
    """An FFN (linear -> ReLU -> dropout -> linear, which rule linear_relu_dropout fuses), a loss that
    ignores the targets above 2, a look at the loss (a recorded call, as the trainers' plug-ins make), and Adam."""
    r = np.random.default_rng(seed)
    w1 = Tensor((r.standard_normal((HIDDEN, WIDTH)) * 0.1).astype(np.float32), requires_grad=True)
    b1 = Tensor(np.zeros(HIDDEN, np.float32), requires_grad=True)
    w2 = Tensor((r.standard_normal((WIDTH, HIDDEN)) * 0.1).astype(np.float32), requires_grad=True)
    opt = Adam([w1, b1, w2], lr=1e-3)

    def step(x, y):
        h = F.dropout(F.linear(x, w1, b1).relu(), 0.1, True)
        error = (F.linear(h, w2) - y).masked_fill(y.data > 2.0, 0.0)  # a mask made from an input, an op's argument
        loss = (error ** 2).mean()
        opt.zero_grad()
        loss.backward()
        seen(loss)
        opt.step()
        return loss
    return step


@recorded
def seen(loss):
    return loss.item()


def batches(n, seed=1):
    r = np.random.default_rng(seed)
    return [(Tensor(r.standard_normal((ROWS, WIDTH)).astype(np.float32)),
             Tensor(r.standard_normal((ROWS, WIDTH)).astype(np.float32))) for _ in range(n)]


def test_a_captures_arrays_go_when_its_plan_is_made(watched):
    tl.manual_seed(0)
    compiled = compile(training_step())
    (x, y), = batches(1)
    compiled(x, y)
    assert compiled.captures == 1 and len(watched.arrays) >= 5
    assert [ref() for ref in watched.captures] == [None] * len(watched.captures)
    alive = [ref() for ref in watched.arrays if ref() is not None]
    assert alive == [], f"{len(alive)} of the capture's {len(watched.arrays)} op arrays outlive it: " \
                        f"{[(a.shape, a.dtype) for a in alive[:5]]}"


def test_the_first_captures_arrays_are_gone_before_the_second_runs(watched):
    if not fast.TRICKS.fused_ffn:
        pytest.skip("rule linear_relu_dropout is off (fast.plain): one capture, no second")
    tl.manual_seed(0)
    compile(training_step())(*batches(1)[0])
    assert len(watched.captures) == 2 and len(watched.arrays) >= 5
    assert watched.alive_at_second == [0]


def traced_memory(run) -> tuple:
    """(bytes held after `run()` beyond before it, the peak beyond before it), by tracemalloc."""
    start = tracemalloc.get_traced_memory()[0]
    tracemalloc.reset_peak()
    run()
    now, peak = tracemalloc.get_traced_memory()
    return now - start, peak - start


@pytest.fixture
def traced():
    tracemalloc.start()
    try:
        yield
    finally:
        tracemalloc.stop()


def test_replays_hold_no_more_memory_after_many_calls(traced):
    tl.manual_seed(0)
    compiled = compile(training_step())
    data = batches(4)
    for x, y in data:
        compiled(x, y)

    def replays():
        for i in range(CALLS):
            compiled(*data[i % len(data)])
    grown, _ = traced_memory(replays)
    assert compiled.captures == 1
    assert grown < MARGIN, f"{CALLS} replays hold {grown / 1024:.0f} KiB more than before them"


def test_a_replays_peak_is_no_higher_than_the_eager_steps(traced):
    tl.manual_seed(0)
    eager, compiled = training_step(), compile(training_step())
    (x, y), = batches(1)
    for _ in range(2):
        eager(x, y)
        compiled(x, y)
    _, eager_peak = traced_memory(lambda: eager(x, y))
    _, replay_peak = traced_memory(lambda: compiled(x, y))
    assert eager_peak > 4 * MARGIN
    print(f"peaks: replay {replay_peak / 2**20:.2f} MiB, eager {eager_peak / 2**20:.2f}")
    assert replay_peak <= eager_peak + MARGIN, f"replay {replay_peak / 2**20:.2f} MiB, eager {eager_peak / 2**20:.2f}"
