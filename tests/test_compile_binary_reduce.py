"""ops/binary.py and ops/reduce.py under the step compiler: for every op, a compiled step gives what
the eager step gives, bit for bit (loss, gradients and the no-grad outputs: masks and indices), on
its capturing call and on a replay with new input values, in float32 and float64."""
import numpy as np
import pytest

from tinygrad_lite import Tensor, no_grad
from tinygrad_lite.compiler import compile
from tinygrad_lite.optim import SGD

SHAPES = {"w": (4, 1), "v": (5,), "p": (3,), "q": (1,), "m": (2, 1, 5, 3), "n": (3, 3, 4), "k": (5, 3),
          "u": (3,)}
POSITIVE = ("p", "q")  # bases and divisors, kept away from 0


def params(dtype, seed=0):
    r = np.random.default_rng(seed)
    values = {name: r.standard_normal(shape) for name, shape in SHAPES.items()}
    for name in POSITIVE:
        values[name] = np.abs(values[name]) + 0.5
    return {name: Tensor(v.astype(dtype), requires_grad=True) for name, v in values.items()}


def inputs(dtype, seed):
    """x (3, 4, 5), y (4, 5), z (5,). x has ties: x[0, :, 0] equals w (maximum's half-and-half gradient),
    row x[1, 2] is one value and x[2, 3, 1] == x[2, 3, 4] (max's shared gradient)."""
    r = np.random.default_rng(seed)
    x = r.standard_normal((3, 4, 5))
    x[0, :, 0] = params(np.float64)["w"].data[:, 0]
    x[1, 2, :] = 0.75
    x[2, 3, 1] = x[2, 3, 4]
    return x.astype(dtype), r.standard_normal((4, 5)).astype(dtype), r.standard_normal(5).astype(dtype)


def weights(shape, dtype=np.float64):
    return np.random.default_rng(sum(shape) + 7 * len(shape)).standard_normal(shape).astype(dtype)


def ws(t):
    """A weighted sum of t's entries, by fixed weights (a constant leaf), so no gradient is all ones."""
    return (t * weights(t.shape, t.dtype)).sum()


def minus_inf_row(dtype):
    c = np.zeros((3, 4, 5), dtype)
    c[1, 1, :] = -np.inf
    return c


# each case: (params, x, y, z) -> the loss (a 0-d tensor), or a tuple of it and no-grad outputs to compare too
CASES = {
    "add": lambda P, x, y, z: ws(P["w"] + x + P["v"]) + ws(y + P["w"]),
    "add a number": lambda P, x, y, z: ws(P["w"] + 2.5 + (1.5 + P["v"]) + x),
    "sub": lambda P, x, y, z: ws(x - P["w"] - P["v"]) + ws(P["v"] - y),
    "sub a number": lambda P, x, y, z: ws((P["w"] - 0.5) * (3.0 - P["v"]) + x),
    "mul": lambda P, x, y, z: ws(P["w"] * x * P["v"]) + ws(y * z),
    "mul a number": lambda P, x, y, z: ws((P["w"] * 3.0 + 0.25 * P["v"]) * x),
    "div": lambda P, x, y, z: ws(x / P["q"]) + ws(P["w"] / P["p"]),
    "div a number": lambda P, x, y, z: ws((P["w"] / 4.0 + 2.0 / P["p"].sum()) * x),
    "pow a number": lambda P, x, y, z: ws((P["w"] ** 3 + P["q"] ** 0.5 + P["v"] ** 2) * x + P["p"].sum() ** -1),
    "pow a tensor": lambda P, x, y, z: ws(P["p"] ** P["w"]) + ws((2.0 ** P["w"]) * x) + ws(P["q"] ** z),
    "maximum and minimum": lambda P, x, y, z: ws(P["w"].maximum(x) + P["v"].minimum(x * 0.5))
    + ws(P["w"].maximum(0.0) * P["v"].minimum(0.1)),
    "matmul 2-D": lambda P, x, y, z: ws(y @ P["k"]) + ws(P["k"] @ P["u"].maximum(P["p"])),
    "matmul batched": lambda P, x, y, z: ws(x @ P["m"]) + ws(P["m"] @ P["n"]),
    "matmul 1-D": lambda P, x, y, z: ws(P["v"] @ P["k"] * P["p"]) + ws(y @ P["v"] * P["w"]) + P["v"] @ z
    + ws(P["m"] @ P["u"]) + ws(z @ P["m"]),
    "ndarray operands": lambda P, x, y, z: ws(np.ones((4, 5), y.dtype) @ P["k"]) + ws(np.full((3, 4, 5), 2.0, x.dtype)
                                                                                    - P["w"] * x),
    "sum": lambda P, x, y, z: (P["w"] * x).sum(dim=1).sum() + ws((P["v"] * x).sum(dim=(0, 2), keepdim=True) * P["w"])
    + ws((P["m"] * P["v"].sum()).sum(-1)),
    "mean": lambda P, x, y, z: (P["w"] * x).mean() + ws((P["v"] * x).mean(dim=-1, keepdim=True)).mean()
    + ws((P["w"] * y).mean(dim=(0, 1))),
    "var and std": lambda P, x, y, z: ws((P["w"] * x).var(dim=2)) + ws((P["v"] * x).std(dim=(0, 1), correction=0))
    + (P["w"] + x).var() + (P["v"] * z).std(),
    "max and min": lambda P, x, y, z: (P["w"] * x).max() + ws((P["v"] + x).max(dim=1).values)
    + ws((P["w"] * x).min(dim=-1, keepdim=True).values) + (P["v"] - x).min() + ws((P["w"] * x).amax(dim=(0, 2))),
    "logsumexp": lambda P, x, y, z: ws((P["w"] * x + minus_inf_row(x.dtype)).logsumexp(dim=-1).maximum(-1e3))
    + ws((P["v"] + x).logsumexp(dim=0, keepdim=True)),
    "comparisons and logic": lambda P, x, y, z: (
        ws(P["w"] * x),
        P["w"] > x, P["w"] >= x, x < P["v"], x <= 0.75, P["w"] == x, x != 0.75,
        ~(x > P["w"]), (P["w"] > x) & (x > 0), (P["v"] < x) | True, (y > 0) & np.array(True)),
    "argmax and argmin": lambda P, x, y, z: (
        ws(P["v"] * x),
        (P["v"] * x).argmax(), (P["w"] + x).argmax(dim=1), x.argmin(dim=-1, keepdim=True), (P["w"] * x).argmin(),
        (P["v"] + x).max(dim=2).indices, (P["w"] - x).min(dim=0).indices),
}


def make_step(P, case):
    opt = SGD(list(P.values()), lr=0.1)  # only its zero_grad, which a replay makes (`p.grad = None` it would not)

    def step(x, y, z):
        opt.zero_grad()
        out = CASES[case](P, x, y, z)
        (out[0] if isinstance(out, tuple) else out).backward()
        return out
    return step


def tensors(arrays):
    return [Tensor(a.copy()) for a in arrays]


def assert_same(compiled, eager):
    compiled = compiled if isinstance(compiled, tuple) else (compiled,)
    eager = eager if isinstance(eager, tuple) else (eager,)
    assert len(compiled) == len(eager)
    for c, e in zip(compiled, eager):
        assert c.dtype == e.dtype and c.shape == e.shape
        np.testing.assert_array_equal(c.data, e.data)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("case", sorted(CASES))
def test_compiled_op_equals_eager_bit_for_bit(case, dtype):
    eager_params, compiled_params = params(dtype), params(dtype)
    eager, compiled = make_step(eager_params, case), compile(make_step(compiled_params, case))
    for seed in (1, 2):  # the capturing call, then a replay on new values
        arrays = inputs(dtype, seed)
        assert_same(compiled(*tensors(arrays)), eager(*tensors(arrays)))
        for name in SHAPES:
            pe, pc = eager_params[name], compiled_params[name]
            assert (pc.grad is None) == (pe.grad is None), name
            if pe.grad is not None:
                assert pc.grad.dtype == dtype and pc.grad.shape == SHAPES[name]
                np.testing.assert_array_equal(pc.grad, pe.grad, err_msg=name)
    assert compiled.captures == 1


def test_the_cases_reach_every_parameter_and_a_replay_sees_new_values():
    """The cases test something: each parameter gets a non-zero gradient from some case, and a replay on
    new values gives new results, not the captured ones."""
    reached = set()
    for case in CASES:
        P = params(np.float64)
        make_step(P, case)(*tensors(inputs(np.float64, 1)))
        reached |= {name for name, p in P.items() if p.grad is not None and np.any(p.grad != 0)}
    assert reached == set(SHAPES)
    P = params(np.float64)
    step = compile(make_step(P, "matmul batched"))
    first, grad_first = step(*tensors(inputs(np.float64, 1))).data.copy(), P["m"].grad.copy()
    second = step(*tensors(inputs(np.float64, 2))).data
    assert first != second and not np.array_equal(grad_first, P["m"].grad)


def test_unbroadcast_sums_are_replayed():
    """w (4, 1) and v (5,) added to x (3, 4, 5): each gradient is the upstream one summed over the axes
    its parameter was broadcast along (unbroadcast), on the capturing call and on a replay."""
    P = params(np.float64)
    step = compile(make_step(P, "add"))
    g_x, g_y = weights((3, 4, 5)), weights((4, 5))
    for seed in (1, 2):
        step(*tensors(inputs(np.float64, seed)))
        np.testing.assert_allclose(P["w"].grad, g_x.sum(axis=(0, 2))[:, None] + g_y.sum(axis=1, keepdims=True),
                                   rtol=1e-12)
        np.testing.assert_allclose(P["v"].grad, g_x.sum(axis=(0, 1)), rtol=1e-12)


def test_no_grad_step_with_number_operands():
    """Under no_grad, `t + c` and `t * c` with Python numbers, replayed the same."""
    w = Tensor(np.random.default_rng(4).standard_normal((4, 5)).astype(np.float32))

    def step(x):
        with no_grad():
            return ((x * 3.0 + 0.5) * w - 1.0) / 7.0, (x + 2) * w > 1.0

    compiled = compile(step)
    for seed in (1, 2):
        x = np.random.default_rng(seed).standard_normal((4, 5)).astype(np.float32)
        assert_same(compiled(Tensor(x)), step(Tensor(x.copy())))
    assert compiled.captures == 1


def test_a_comparison_of_a_grad_tensor_is_a_no_grad_leaf():
    w = Tensor(np.array([1.0, -2.0, 3.0]), requires_grad=True)
    for out in (w > 0, w == 3.0, ~(w < 0), (w > 0) & (w < 2), w.argmax(), w.max(dim=0).indices):
        assert not out.requires_grad and out.is_leaf and out.op == "" and out.inputs == ()
    np.testing.assert_array_equal((w > 0).data, [True, False, True])


def test_backward_computes_only_the_gradients_inputs_need():
    """`needs` reaches each op: an input that needs no gradient gets None from backward, not an array."""
    r = np.random.default_rng(5)
    w = Tensor(r.standard_normal((4, 1)) + 3.0, requires_grad=True)
    k = Tensor(r.standard_normal((5, 2)), requires_grad=True)
    x = Tensor(r.standard_normal((3, 4, 5)) + 3.0)
    for out in (w + x, x + w, w - x, x - w, w * x, x * w, w / x, x / w, w ** x, x ** w, x @ k, x[0, 0] @ k):
        grads = out.vjp(np.ones(out.shape))
        for p, g in zip(out.inputs, grads):
            assert (g is None) == (not p.requires_grad), out.op
            assert g is None or g.shape == p.shape
        assert sum(g is None for g in grads) == 1
