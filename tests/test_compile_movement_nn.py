"""The step compiler on the movement ops (reshape ... cat, t[...]), the nn ops (softmax, layer_norm,
dropout, gather, masked_fill, where) and Tensor's conversions (detach, clone, casts): a compiled step
gives the eager step's loss and gradients bit for bit, on its first call and on replays with new
values, and an op's check on its index values runs at each replay."""
import numpy as np
import pytest

import tinygrad_lite as tl
from tinygrad_lite import Tensor
from tinygrad_lite.compiler import compile

DTYPES = [np.float32, np.float64]


def rand(shape, dtype, seed):
    return np.random.default_rng(seed).standard_normal(shape).astype(dtype)


def twins(shapes, dtype, seed=0):
    """Two copies of the same parameters: one for the eager step, one for the compiled step."""
    values = [rand(s, dtype, seed + i) for i, s in enumerate(shapes)]
    return [[Tensor(v.copy(), requires_grad=True) for v in values] for _ in range(2)]


def check(loss_fn, shapes, calls, dtype):
    """loss_fn(params, *args) as a step (forward and backward), eager and compiled, on each call's args:
    the losses and every parameter's .grad agree bit for bit, and one capture serves every call."""
    eager_params, compiled_params = twins(shapes, dtype)

    def make_step(params):
        def step(*args):
            loss = loss_fn(params, *args)
            loss.backward()
            return loss
        return step
    eager, compiled = make_step(eager_params), compile(make_step(compiled_params))
    losses = []
    for args in calls:
        for p in eager_params + compiled_params:
            p.grad = None
        loss_e, loss_c = eager(*args), compiled(*args)
        assert loss_c.dtype == loss_e.dtype == dtype
        np.testing.assert_array_equal(loss_c.data, loss_e.data)
        for pe, pc in zip(eager_params, compiled_params):
            assert pe.grad is not None and pe.grad.dtype == dtype
            np.testing.assert_array_equal(pc.grad, pe.grad)
        losses.append(loss_e.data.item())
    assert compiled.captures == 1
    assert len(set(losses)) == len(losses)  # each call ran on new values, not a frozen first call
    return compiled


def inputs(shape, dtype, n=2, seed=10):
    return [(Tensor(rand(shape, dtype, seed + i)),) for i in range(n)]


# ---------------------------------------------------------------- movement

MOVEMENT = {
    "reshape": lambda h: h.reshape(4, -1, 2),
    "view_flatten": lambda h: h.view(6, 4).flatten(),
    "unsqueeze_squeeze": lambda h: h.unsqueeze(1).squeeze(1).squeeze(),
    "permute": lambda h: h.permute(2, 0, 1),
    "transpose": lambda h: h.transpose(0, 2),
    "T": lambda h: h.T,
    "t": lambda h: h[0].t(),
    "expand": lambda h: h[:, :1].expand(2, 5, 4),
    "getitem_slices": lambda h: h[1:, ::2, -3:],
    "getitem_int_and_none": lambda h: h[1, None, :, 2],
    "getitem_list": lambda h: h[:, [2, 0, 2]],
    "split": lambda h: h.split([1, 2], dim=1)[1] * h.split(1, dim=1)[0],
    "chunk": lambda h: h.chunk(2, dim=2)[1],
}


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("op", sorted(MOVEMENT))
def test_movement_ops_compile_bit_identical(op, dtype):
    weights = Tensor(rand((2, 3, 4), dtype, 99))  # a constant: the loss weighs each output element differently
    check(lambda ps, x: (MOVEMENT[op](x * ps[0]) * MOVEMENT[op](weights)).sum(), [(2, 3, 4)],
          inputs((2, 3, 4), dtype), dtype)


@pytest.mark.parametrize("dtype", DTYPES)
def test_getitem_with_an_integer_array_index_that_changes_per_call(dtype):
    def loss(ps, x, idx):  # idx: a step input, repeated entries add their gradients
        return ((x * ps[0])[idx] * x[idx]).sum() + (ps[0][:, idx] * x[:, idx]).sum()
    calls = [(Tensor(rand((5, 5), dtype, i)), np.array(idx)) for i, idx in enumerate([[0, 3, 3, 1], [4, 4, 2, 0]])]
    check(loss, [(5, 5)], calls, dtype)


@pytest.mark.parametrize("dtype", DTYPES)
def test_getitem_with_a_tensor_index(dtype):
    def loss(ps, x, idx):
        return (ps[0][idx] * x).sum()
    calls = [(Tensor(rand((3, 2, 4), dtype, i)), Tensor(np.array([[1, 1], [0, 2], [2, 2]][i]))) for i in range(2)]
    check(loss, [(3, 4)], calls, dtype)


def test_getitem_checks_its_index_at_each_replay():
    w = Tensor(np.ones((3, 2)), requires_grad=True)

    def step(idx):
        loss = w[idx].sum()
        loss.backward()
        return loss
    compiled = compile(step)
    compiled(np.array([0, 2]))
    with pytest.raises(IndexError, match=r"getitem: index tensor\(shape=\(2,\), min=0, max=7\) .* shape \(3, 2\)"):
        compiled(np.array([0, 7]))
    assert compiled.captures == 1


@pytest.mark.parametrize("dtype", DTYPES)
def test_cat_and_stack(dtype):
    def loss(ps, x):
        a, b, c = ps
        joined = Tensor.cat([a * x, b, c * x[:, :1]], dim=1)           # sizes 3, 2, 1 along dim 1
        stacked = tl.stack([a * x, a, x], dim=1)
        return (joined * joined).sum() + (stacked * stacked.sum(0)).sum()
    check(loss, [(4, 3), (4, 2), (4, 1)], inputs((4, 3), dtype), dtype)


# ---------------------------------------------------------------- nn

def masks(shape, seed):
    """A boolean mask that changes per call, with row 0 masked in full."""
    m = np.random.default_rng(seed).random(shape) > 0.4
    m[0] = False
    return m


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("dim, scale", [(-1, 1.0), (1, 0.5), (0, 2.0)])
def test_softmax_compiles_bit_identical(dim, scale, dtype):
    weights = Tensor(rand((4, 5, 6), dtype, 98))
    check(lambda ps, x: (((x * ps[0]).softmax(dim, scale=scale)) * weights).sum(), [(4, 5, 6)],
          inputs((4, 5, 6), dtype), dtype)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("dim", [-1, 1])
def test_softmax_with_a_boolean_mask_and_a_fully_masked_row(dim, dtype):
    weights = Tensor(rand((4, 5, 6), dtype, 98))
    seen = []

    def loss(ps, x, mask):  # mask: a step input broadcast over dim 0; its row 0 is all False
        y = (x * ps[0]).softmax(dim, scale=0.5, mask=mask)
        seen.append(y)
        return (y * weights).sum()
    calls = [(Tensor(rand((4, 5, 6), dtype, 10 + i)), masks((5, 6), i)) for i in range(2)]
    check(loss, [(4, 5, 6)], calls, dtype)
    assert seen[0].op == "softmax (masked)"
    if dim == -1:
        np.testing.assert_array_equal(seen[-1].data[:, 0], 0)  # a row masked in full gives zeros, not NaN


@pytest.mark.parametrize("dtype", DTYPES)
def test_softmax_with_an_additive_mask_as_a_tensor(dtype):
    weights = Tensor(rand((3, 4), dtype, 98))

    def loss(ps, x, mask):
        return ((x * ps[0]).softmax(-1, mask=mask) * weights).sum()
    calls = [(Tensor(rand((3, 4), dtype, i)), Tensor(np.where(masks((3, 4), i), 0.0, -np.inf).astype(dtype)))
             for i in range(2)]
    check(loss, [(3, 4)], calls, dtype)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("dim", [-1, 0])
def test_log_softmax(dim, dtype):
    weights = Tensor(rand((3, 7), dtype, 98))
    check(lambda ps, x: ((x * ps[0]).log_softmax(dim) * weights).sum(), [(3, 7)], inputs((3, 7), dtype), dtype)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("normalized, affine", [((6,), "both"), ((5, 6), "both"), ((6,), "weight"), ((6,), "bias")])
def test_layer_norm_compiles_bit_identical(normalized, affine, dtype):
    weights = Tensor(rand((2, 5, 6), dtype, 98))
    shapes = [(2, 5, 6)] + ([normalized] if affine != "bias" else []) + ([normalized] if affine != "weight" else [])

    def loss(ps, x):
        w = ps[1] if affine != "bias" else None
        b = ps[-1] if affine != "weight" else None
        return ((x * ps[0]).layer_norm(normalized, weight=w, bias=b, eps=1e-5) * weights).sum()
    check(loss, shapes, inputs((2, 5, 6), dtype), dtype)


@pytest.mark.parametrize("dtype", DTYPES)
def test_dropout_draws_the_eager_masks_at_each_replay(dtype):
    """From one seed, three eager calls and three compiled calls draw the same masks, a fresh one per call."""
    (w_eager,), (w_compiled,) = twins([(6, 40)], dtype)
    weights = Tensor(rand((6, 40), dtype, 98))

    def make_step(w):
        def step(x):
            y = (x * w).dropout(0.3)
            loss = (y * weights).sum()
            loss.backward()
            return loss, y
        return step
    calls = [Tensor(rand((6, 40), dtype, i)) for i in range(3)]
    results = []
    for w, step in ((w_eager, make_step(w_eager)), (w_compiled, compile(make_step(w_compiled)))):
        tl.manual_seed(7)
        runs = []
        for x in calls:
            w.grad = None
            loss, y = step(x)
            runs.append((loss.data, y.data, w.grad))
        results.append(runs)
    for (loss_e, y_e, g_e), (loss_c, y_c, g_c) in zip(*results):
        np.testing.assert_array_equal(loss_c, loss_e)
        np.testing.assert_array_equal(y_c, y_e)
        np.testing.assert_array_equal(g_c, g_e)
        assert 0 < (y_e == 0).mean() < 0.6
    kept = [y != 0 for _, y, _ in results[1]]
    assert (kept[0] != kept[1]).any() and (kept[1] != kept[2]).any()


@pytest.mark.parametrize("dtype", DTYPES)
def test_gather_with_an_index_that_changes_per_call(dtype):
    def loss(ps, x, idx):
        return ((x * ps[0]).gather(1, idx) * x.gather(1, idx)).sum()
    r = np.random.default_rng(0)
    calls = [(Tensor(rand((4, 5), dtype, i)), Tensor(r.integers(-5, 5, (4, 3)))) for i in range(2)]
    check(loss, [(4, 5)], calls, dtype)


def test_gather_checks_its_index_at_each_replay():
    w = Tensor(np.ones((2, 3)), requires_grad=True)

    def step(idx):
        loss = w.gather(1, idx).sum()
        loss.backward()
        return loss
    compiled = compile(step)
    compiled(np.array([[0], [2]]))
    with pytest.raises(IndexError, match=r"gather: index values must be in \[-3, 2\].*max 3"):
        compiled(np.array([[0], [3]]))


@pytest.mark.parametrize("dtype", DTYPES)
def test_masked_fill_and_where_with_masks_that_change_per_call(dtype):
    def loss(ps, x, mask):  # mask (5,) broadcasts over x's rows; the condition of where is a comparison op's output
        a, b = ps
        filled = (x * a).masked_fill(mask, -2.5)
        chosen = Tensor.where(x > 0, filled, b)                           # b (5,) broadcasts too
        return (filled * x).sum() + (chosen * chosen).sum() + (tl.where(mask, 1.5, a) * x).sum()
    calls = [(Tensor(rand((3, 5), dtype, i)), masks((5,), i + 1)) for i in range(2)]
    check(loss, [(3, 5), (5,)], calls, dtype)


# ---------------------------------------------------------------- Tensor's conversions

@pytest.mark.parametrize("dtype", DTYPES)
def test_detach_clone_and_casts(dtype):
    other = np.float32 if dtype == np.float64 else np.float64

    def loss(ps, x, ids):
        w = ps[0]
        h = (x * w).clone() * w.detach()                                  # detach: w's gradient flows once
        cast = (h.to(other) * h.to(other)).sum().to(dtype)
        floats = (h.float() * x.float()).sum().double().to(dtype)
        ints = (ids * w).sum() + (w * ids).sum()                          # int operands become constants
        picked = w.gather(1, x.detach().abs().clamp(0, 2.9).long())
        return cast + floats + ints + picked.sum()
    calls = [(Tensor(rand((2, 3), dtype, i) * 2), Tensor(np.arange(6).reshape(2, 3) * (i + 1))) for i in range(2)]
    check(loss, [(2, 3)], calls, dtype)


def test_detach_and_long_are_outside_the_graph():
    w = Tensor(np.array([1.5, -2.0]), requires_grad=True)
    for t in (w.detach(), w.long(), (w * 2).detach()):
        assert not t.requires_grad and t.is_leaf and t.inputs == () and t.op == ""
    assert w.detach().data is w.data and w.long().dtype == np.int64
    assert (w * 1.0).to(np.float32).op == "cast" and w.clone().op == "clone"
