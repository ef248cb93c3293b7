"""Random programs of Tensor ops on random broadcastable shapes: the forward pass matches the
same ops in NumPy, and the backward pass matches central finite differences (float64).

A program starts from one leaf and applies 1–6 steps drawn from tables of unary, binary
(with a new leaf of a shape that broadcasts with the current value, either side), scalar,
reduction and shape ops. Hypothesis draws the structure; the numbers come from a seeded
NumPy generator, so values are continuous (no ties at max/relu kinks) yet reproducible.
Ops with a restricted domain are applied to a positive expression (x² + ½)."""
import math

import numpy as np
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st
from hypothesis.extra.numpy import array_shapes, broadcastable_shapes

from tinygrad_lite import Tensor, gradcheck, no_grad


def _logsumexp(a, axis, keepdims):
    m = np.max(a, axis=axis, keepdims=True)
    out = np.log(np.exp(a - m).sum(axis=axis, keepdims=True)) + m
    return out if keepdims else np.squeeze(out, axis)


def _softmax(a, axis):
    e = np.exp(a - a.max(axis=axis, keepdims=True))
    return e / e.sum(axis=axis, keepdims=True)


def _positive(x):
    return x * x + 0.5


UNARY = {
    "neg": (lambda t: -t, lambda a: -a),
    "exp": (lambda t: t.exp(), np.exp),
    "log": (lambda t: _positive(t).log(), lambda a: np.log(_positive(a))),
    "sqrt": (lambda t: _positive(t).sqrt(), lambda a: np.sqrt(_positive(a))),
    "tanh": (lambda t: t.tanh(), np.tanh),
    "sigmoid": (lambda t: t.sigmoid(), lambda a: 1 / (1 + np.exp(-a))),
    "sin": (lambda t: t.sin(), np.sin),
    "cos": (lambda t: t.cos(), np.cos),
    "abs": (lambda t: t.abs(), np.abs),
    "relu": (lambda t: t.relu(), lambda a: np.maximum(a, 0)),
    "square": (lambda t: t ** 2, lambda a: a ** 2),
    "cube": (lambda t: t ** 3, lambda a: a ** 3),
    "rsqrt": (lambda t: _positive(t) ** -0.5, lambda a: _positive(a) ** -0.5),
    "clamp": (lambda t: t.clamp(-1.0, 1.0), lambda a: np.clip(a, -1.0, 1.0)),
}
SCALAR = {
    "add 1.5": (lambda t: t + 1.5, lambda a: a + 1.5),
    "2 - x": (lambda t: 2.0 - t, lambda a: 2.0 - a),
    "x * -0.7": (lambda t: t * -0.7, lambda a: a * -0.7),
    "1 / (x²+½)": (lambda t: 1.0 / _positive(t), lambda a: 1.0 / _positive(a)),
    "x / 3": (lambda t: t / 3.0, lambda a: a / 3.0),
}
BINARY = {
    "add": (lambda x, y: x + y, np.add),
    "sub": (lambda x, y: x - y, np.subtract),
    "mul": (lambda x, y: x * y, np.multiply),
    "div": (lambda x, y: x / _positive(y), lambda a, b: a / _positive(b)),
    "pow": (lambda x, y: _positive(x) ** y, lambda a, b: _positive(a) ** b),
    "maximum": (lambda x, y: x.maximum(y), np.maximum),
    "minimum": (lambda x, y: x.minimum(y), np.minimum),
}
REDUCTIONS = ("sum", "mean", "max", "min", "var", "logsumexp", "softmax", "log_softmax")
SHAPE_OPS = ("transpose", "permute", "flatten", "unsqueeze", "squeeze", "slice", "flip", "expand", "cat",
             "matmul", "where", "masked_fill")


# ---------------------------------------------------------------- programs
@st.composite
def programs(draw):
    """(first leaf shape, steps); each step is (kind, name, params) and may add a leaf."""
    shape = draw(array_shapes(min_dims=0, max_dims=3, min_side=1, max_side=4))
    first = shape
    steps = []
    for _ in range(draw(st.integers(1, 6))):
        kind = draw(st.sampled_from(["unary", "scalar", "binary", "binary", "reduce", "shape", "shape"]))
        if kind == "unary":
            steps.append(("unary", draw(st.sampled_from(sorted(UNARY))), {}))
        elif kind == "scalar":
            steps.append(("scalar", draw(st.sampled_from(sorted(SCALAR))), {}))
        elif kind == "binary":
            other = draw(broadcastable_shapes(shape, min_dims=0, max_dims=3, min_side=1, max_side=4))
            name = draw(st.sampled_from(sorted(BINARY)))
            steps.append(("binary", name, {"shape": other, "reflected": draw(st.booleans())}))
            shape = np.broadcast_shapes(shape, other)
        elif kind == "reduce":
            name = draw(st.sampled_from(REDUCTIONS))
            keepdim = draw(st.booleans())
            if len(shape) == 0 or name in ("sum", "mean", "max", "min") and draw(st.booleans()):
                dim = None
                if name in ("logsumexp", "softmax", "log_softmax", "var"):
                    name = "sum"
            else:
                dim = draw(st.integers(-len(shape), len(shape) - 1))
            if name == "var" and (dim is None or shape[dim] < 2):
                name = "mean"
            if name in ("max", "min") and dim is None:
                keepdim = False  # like torch, max()/min() over everything give a 0-d tensor
            steps.append(("reduce", name, {"dim": dim, "keepdim": keepdim}))
            shape = _np_reduce(np.zeros(shape), name, dim, keepdim).shape
        else:
            name, params, shape = _draw_shape_op(draw, shape)
            steps.append(("shape", name, params))
        assume(math.prod(shape) <= 64)
    return first, steps


def _draw_shape_op(draw, shape):
    n = len(shape)
    name = draw(st.sampled_from(SHAPE_OPS))
    if n == 0 and name not in ("unsqueeze", "expand", "where", "masked_fill", "flatten"):
        name = "unsqueeze"
    if n < 2 and name in ("transpose", "permute"):
        name = "flip" if n else "unsqueeze"
    params = {}
    if name == "transpose":
        params = {"dims": tuple(draw(st.permutations(range(n)))[:2])}
    elif name == "permute":
        params = {"dims": tuple(draw(st.permutations(range(n))))}
    elif name == "unsqueeze":
        params = {"dim": draw(st.integers(-n - 1, n))}
    elif name in ("slice", "flip", "cat", "matmul"):
        params = {"dim": draw(st.integers(0, n - 1))}
        if name == "slice":
            size = shape[params["dim"]]
            start = draw(st.integers(0, size - 1))
            params.update(start=start, stop=draw(st.integers(start + 1, size)), step=draw(st.sampled_from([1, 2])))
        if name == "matmul":
            params = {"k": draw(st.integers(1, 3))}
    elif name in ("where", "masked_fill"):
        params = {"seed": draw(st.integers(0, 2 ** 16))}
        if name == "where":
            params["shape"] = draw(broadcastable_shapes(shape, min_dims=0, max_dims=3, min_side=1, max_side=4))
    out = _np_shape(np.zeros(shape), name, params, lambda s: np.zeros(s))
    return name, params, out.shape


def _index(params):
    d = params["dim"]
    if "start" in params:
        part = slice(params["start"], params["stop"], params["step"])
    else:
        part = slice(None, None, -1)
    return (slice(None),) * d + (part,)


def _mask(params, shape):
    return np.random.default_rng(params["seed"]).random(shape) < 0.5


def _np_reduce(a, name, dim, keepdim):
    if name == "sum":
        return np.sum(a, axis=dim, keepdims=keepdim)
    if name == "mean":
        return np.mean(a, axis=dim, keepdims=keepdim)
    if name == "max":
        return np.max(a, axis=dim, keepdims=keepdim)
    if name == "min":
        return np.min(a, axis=dim, keepdims=keepdim)
    if name == "var":
        return np.var(a, axis=dim, ddof=1, keepdims=keepdim)
    if name == "logsumexp":
        return _logsumexp(a, dim, keepdim)
    if name == "softmax":
        return _softmax(a, dim)
    return np.log(_softmax(a, dim))


def _tl_reduce(t, name, dim, keepdim):
    if name in ("sum", "mean"):
        return getattr(t, name)(dim, keepdim)
    if name in ("max", "min"):
        return getattr(t, name)() if dim is None else getattr(t, name)(dim, keepdim).values
    if name == "var":
        return t.var(dim, keepdim)
    if name == "logsumexp":
        return t.logsumexp(dim, keepdim)
    return getattr(t, name)(dim)


def _np_shape(a, name, params, leaf):
    if name == "transpose":
        return np.swapaxes(a, *params["dims"])
    if name == "permute":
        return np.transpose(a, params["dims"])
    if name == "flatten":
        return a.reshape(-1)
    if name == "unsqueeze":
        return np.expand_dims(a, params["dim"])
    if name == "squeeze":
        return np.squeeze(a)
    if name in ("slice", "flip"):
        return a[_index(params)]
    if name == "expand":
        return np.broadcast_to(a[None], (2,) + a.shape)
    if name == "cat":
        return np.concatenate([a, a * 2.0], axis=params["dim"])
    if name == "matmul":
        return a @ leaf((a.shape[-1], params["k"]))
    if name == "where":
        other = leaf(params["shape"])
        return np.where(_mask(params, np.broadcast_shapes(a.shape, other.shape)), a, other)
    return np.where(_mask(params, a.shape), 0.25, a)


def _tl_shape(t, name, params, leaf):
    if name == "transpose":
        return t.transpose(*params["dims"])
    if name == "permute":
        return t.permute(*params["dims"])
    if name == "flatten":
        return t.flatten()
    if name == "unsqueeze":
        return t.unsqueeze(params["dim"])
    if name == "squeeze":
        return t.squeeze()
    if name in ("slice", "flip"):
        return t[_index(params)]
    if name == "expand":
        return t.unsqueeze(0).expand(2, *t.shape)
    if name == "cat":
        return Tensor.cat([t, t * 2.0], dim=params["dim"])
    if name == "matmul":
        return t @ leaf((t.shape[-1], params["k"]))
    if name == "where":
        other = leaf(params["shape"])
        return Tensor.where(_mask(params, np.broadcast_shapes(t.shape, other.shape)), t, other)
    return t.masked_fill(_mask(params, t.shape), 0.25)


def run(program, leaves, tensor_ops: bool, seen=None):
    """Evaluate the program on `leaves` (consumed in order) with Tensor ops or with NumPy;
    `seen`, if given, collects every intermediate value."""
    first, steps = program
    queue = iter(leaves)

    def leaf(shape):
        value = next(queue)
        assert value.shape == tuple(shape)
        return value
    x = leaf(first)
    for kind, name, params in steps:
        if kind == "unary":
            x = UNARY[name][0 if tensor_ops else 1](x)
        elif kind == "scalar":
            x = SCALAR[name][0 if tensor_ops else 1](x)
        elif kind == "binary":
            fn = BINARY[name][0 if tensor_ops else 1]
            y = leaf(params["shape"])
            x = fn(y, x) if params["reflected"] else fn(x, y)
        elif kind == "reduce":
            x = (_tl_reduce if tensor_ops else _np_reduce)(x, name, params["dim"], params["keepdim"])
        else:
            x = (_tl_shape if tensor_ops else _np_shape)(x, name, params, leaf)
        if seen is not None:
            seen.append(x)
    return x


def leaf_shapes(program):
    """The shapes of all leaves the program consumes, in order (found by a dry NumPy run)."""
    first, steps = program
    shapes = [tuple(first)]
    x = np.zeros(first)
    for kind, name, params in steps:
        if kind == "binary":
            shapes.append(tuple(params["shape"]))
            x = np.zeros(np.broadcast_shapes(x.shape, params["shape"]))
        elif kind == "reduce":
            x = _np_reduce(x, name, params["dim"], params["keepdim"])
        elif kind == "shape":
            def leaf(shape):
                shapes.append(tuple(shape))
                return np.zeros(shape)
            x = _np_shape(x, name, params, leaf)
    return shapes


def describe(program) -> str:
    first, steps = program
    return f"leaf{first} " + " ".join(f"-> {name}{params or ''}" for _, name, params in steps)


PROPERTY = settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow,
                                                                             HealthCheck.filter_too_much])


@PROPERTY
@given(programs(), st.integers(0, 2 ** 32 - 1), st.sampled_from([0.5, 1.0, 2.0]))
def test_random_programs_match_numpy_forward_and_finite_differences_backward(count_example, program, seed,
                                                                             scale):
    g = np.random.default_rng(seed)
    arrays = [g.standard_normal(s) * scale for s in leaf_shapes(program)]
    intermediates = []
    with np.errstate(all="ignore"):
        expected = run(program, [a.copy() for a in arrays], tensor_ops=False, seen=intermediates)
    assume(all(np.all(np.abs(v) < 1e4) for v in intermediates))  # no overflow on the way
    leaves = [Tensor(a.copy(), requires_grad=True) for a in arrays]
    with no_grad():
        got = run(program, leaves, tensor_ops=True)
    assert got.shape == np.shape(expected), describe(program)
    assert got.dtype == np.float64
    np.testing.assert_allclose(got.data, expected, rtol=1e-7, atol=1e-9, err_msg=describe(program))

    grad_leaves = [Tensor(a.copy(), requires_grad=True) for a in arrays]
    assert gradcheck(lambda *ts: run(program, ts, tensor_ops=True), *grad_leaves), describe(program)
    count_example("random op programs: forward vs NumPy + gradcheck")
