"""Rule flat_optimizer (tinygrad_lite/compiler/rules/flat_optimizer.py): a compiled step's Adam over flat
arrays gives the plain loop's weights and state to the last bit, on either backend, and whatever replaces
an array between steps."""
import gc
import weakref

import numpy as np
import pytest

import tinygrad_lite as tl
from tinygrad_lite import fast, kernels, nn
from tinygrad_lite.compiler import compile
from tinygrad_lite.optim import SGD, Adam, AdamW, CombinedOptimizer, Muon
from transformer.gpt.model import GPT, GPTConfig

RULES_BUT_FLAT = ("fused_residual", "fused_ffn", "fused_attention", "skip_padding")


def mlp(seed=0, dtype=np.float32):
    tl.manual_seed(seed)
    model = nn.Sequential(nn.Linear(5, 16), nn.ReLU(), nn.Linear(16, 3))
    return model.to(dtype) if dtype != np.float32 else model


def batches(n, dtype=np.float32):
    r = np.random.default_rng(3)
    return [(r.standard_normal((8, 5)).astype(dtype), r.integers(0, 3, 8)) for _ in range(n)]


def update_of(model, optimizer):
    def update(x, y):
        loss = nn.functional.cross_entropy(model(tl.Tensor(x)), y)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        return loss
    return update


def run(make_optimizer, flat: bool, steps=6, dtype=np.float32, between=None):
    """(weights, optimizer state, losses) after `steps` compiled steps with the rule on or off."""
    model = mlp(dtype=dtype)
    optimizer = make_optimizer(model)
    update = compile(update_of(model, optimizer))
    losses = []
    switch = fast.tricks_on if flat else fast.tricks_off
    with switch("flat_optimizer"):
        for i, (x, y) in enumerate(batches(steps, dtype)):
            losses.append(update(x, y).item())
            if between is not None:
                between(i, model, optimizer)
    return [p.data.copy() for p in model.parameters()], optimizer.state_dict(), losses, model


def assert_bit_identical(a, b):
    weights_a, state_a, losses_a, _ = a
    weights_b, state_b, losses_b, _ = b
    assert losses_a == losses_b
    for wa, wb in zip(weights_a, weights_b):
        np.testing.assert_array_equal(wa, wb)
    assert_same_state(state_a, state_b)


def assert_same_state(a, b):
    if isinstance(a, dict):
        assert a.keys() == b.keys()
        for k in a:
            assert_same_state(a[k], b[k])
    elif isinstance(a, (list, tuple)):
        assert len(a) == len(b)
        for x, y in zip(a, b):
            assert_same_state(x, y)
    elif isinstance(a, np.ndarray):
        np.testing.assert_array_equal(a, b)
    else:
        assert a == b


ADAMS = {
    "adam": lambda m: Adam(m.parameters(), lr=1e-2, betas=(0.9, 0.98), eps=1e-9),
    "adam_l2": lambda m: Adam(m.parameters(), lr=1e-2, weight_decay=0.1),
    "adamw_groups": lambda m: AdamW([{"params": [p for p in m.parameters() if p.ndim == 2], "weight_decay": 0.1},
                                     {"params": [p for p in m.parameters() if p.ndim < 2], "weight_decay": 0.0,
                                      "lr": 3e-3}], lr=1e-2),
    "muon_and_adamw": lambda m: CombinedOptimizer(Muon([p for p in m.parameters() if p.ndim == 2], lr=0.02),
                                                  AdamW([p for p in m.parameters() if p.ndim < 2], lr=1e-2)),
}


@pytest.mark.parametrize("backend", ["numba", "numpy"])
@pytest.mark.parametrize("name", sorted(ADAMS))
def test_the_flat_step_gives_the_loops_bits(name, backend):
    with kernels.use_backend(backend):
        flat, loop = run(ADAMS[name], True), run(ADAMS[name], False)
    assert_bit_identical(flat, loop)
    model = flat[3]
    adams = [p for p in model.parameters() if p.ndim < 2] if name == "muon_and_adamw" else list(model.parameters())
    assert all(p.data.base is not None for p in adams)          # the Adam's parameters are views of a flat array
    assert len({id(p.data.base) for p in adams}) <= 2           # one a group
    others = [p for p in model.parameters() if p.ndim == 2] if name == "muon_and_adamw" else []
    assert all(p.data.base is None for p in others)             # Muon's stay their own arrays


def test_float64_parameters_too():
    assert_bit_identical(run(ADAMS["adam"], True, dtype=np.float64), run(ADAMS["adam"], False, dtype=np.float64))


def test_arrays_replaced_between_steps_are_taken_back_into_the_views():
    def between(i, model, optimizer):
        if i == 2:  # a checkpoint loaded: new arrays for every weight and every m and v
            model.load_state_dict({k: v.copy() for k, v in model.state_dict().items()})
            optimizer.load_state_dict(optimizer.state_dict())
            for p in model.parameters():
                p.data = p.data.copy()
        if i == 3:
            for p in model.parameters():  # gradients replaced (as an all-reduce does) before the next step
                p.grad = None if p.grad is None else p.grad.copy()
    assert_bit_identical(run(ADAMS["adamw_groups"], True, between=between),
                         run(ADAMS["adamw_groups"], False, between=between))


def test_a_parameter_without_a_gradient_leaves_the_step_plain():
    def make(model):
        spare = nn.Parameter(np.ones(4, np.float32))
        model.spare = spare  # in the optimizer, in no loss
        return Adam(model.parameters(), lr=1e-2)
    flat, loop = run(make, True), run(make, False)
    assert_bit_identical(flat, loop)
    assert flat[3].spare.data.base is None and np.array_equal(flat[3].spare.data, np.ones(4))


def test_step_counts_that_differ_run_the_loop():
    def between(i, model, optimizer):
        if i == 1:
            first = next(iter(model.parameters()))
            optimizer.state[first]["step"] += 5  # one parameter ahead of the others
    assert_bit_identical(run(ADAMS["adam"], True, between=between), run(ADAMS["adam"], False, between=between))


def test_other_optimizers_are_not_touched():
    make = lambda m: SGD(m.parameters(), lr=0.1, momentum=0.9)  # noqa: E731
    flat = run(make, True)
    assert_bit_identical(flat, run(make, False))
    assert all(p.data.base is None for p in flat[3].parameters())


def test_the_gpt_with_muon_and_adamw_matches_its_eager_step():
    """The GPT's default optimizers, compiled with every rule against the eager loop: the same bits
    (nothing in a GPT's recipe step is fused by the other rules without dropout, so the products agree)."""
    config = GPTConfig(vocab_size=13, block_size=8, n_layer=1, n_head=2, n_embd=16, dropout=0.0)
    r = np.random.default_rng(0)
    ids = [r.integers(0, 13, (2, 9)) for _ in range(4)]

    def train(compiled):
        tl.manual_seed(0)
        model = GPT(config)
        matrices = model.block_matrices()
        inside = {id(p) for p in matrices}
        rest = [{**g, "params": [p for p in g["params"] if id(p) not in inside]} for g in model.param_groups(0.1)]
        optimizer = CombinedOptimizer(Muon(matrices, lr=0.02, weight_decay=0.1), AdamW(rest, lr=3e-3))

        def update(x, y):
            loss = nn.functional.cross_entropy(model(x).reshape(-1, 13), y.reshape(-1))
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
            return loss
        step = compile(update) if compiled else update
        with fast.tricks_on("flat_optimizer"), fast.tricks_off(*RULES_BUT_FLAT):
            losses = [step(batch[:, :-1], batch[:, 1:]).item() for batch in ids]
        return [p.data.copy() for p in model.parameters()], optimizer.state_dict(), losses, model
    compiled = train(True)
    assert_bit_identical(compiled, train(False))
    assert any(p.data.base is not None for p in compiled[3].parameters())


def test_large_parameters_keep_the_loop():
    def make(model):
        return Adam(model.parameters(), lr=1e-2)
    from tinygrad_lite.compiler.rules import flat_optimizer
    before = flat_optimizer.PAYS_BELOW
    flat_optimizer.PAYS_BELOW = 8  # every parameter of the MLP counts as large
    try:
        flat = run(make, True)
    finally:
        flat_optimizer.PAYS_BELOW = before
    assert_bit_identical(flat, run(make, False))
    assert all(p.data.base is None for p in flat[3].parameters())


def test_an_optimizer_and_its_flat_arrays_go_when_nothing_else_holds_them():
    refs = []

    def make(model):
        optimizer = Adam(model.parameters(), lr=1e-2)
        refs.append(weakref.ref(optimizer))
        return optimizer
    run(make, True)
    gc.collect()
    assert refs[0]() is None
