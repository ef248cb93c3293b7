"""compile(fn, any_shape=True) (tinygrad_lite/compiler/shapes.py): a plan serves the shapes in which a second
capture wrote the same program, replaying them bit for bit as eager mode runs them; a program with a constant
made from a shape keeps a plan per shape."""
import numpy as np
import pytest

import tinygrad_lite as tl
from tinygrad_lite import Tensor, nn
from tinygrad_lite.compiler import CompileError, compile
from tinygrad_lite.optim import SGD


def model_and_step(mean: bool = False):
    """A Linear trained by SGD on a loss of x (n, 3): a sum over the rows (no constant holds n), or a mean
    (1/n, a constant made from the shape). Returns the model and its step(x, rows): rows, a tuple of
    index arrays, pick the rows the loss reads."""
    tl.manual_seed(0)
    model = nn.Linear(3, 2)
    opt = SGD(model.parameters(), lr=0.1)

    def step(x, rows):
        picked = Tensor(np.take(x, rows[0], axis=0))
        out = model(picked) * 2.0
        loss = (out * out).mean() if mean else (out * out).sum()
        opt.zero_grad()
        loss.backward()
        opt.step()
        return loss
    return model, step


def batches(shapes, seed=0):
    r = np.random.default_rng(seed)
    return [(r.standard_normal((n, 3)).astype(np.float32), (np.sort(r.choice(n, k, replace=False)),))
            for n, k in shapes]


def train(shapes, compiled: bool, mean: bool = False):
    model, step = model_and_step(mean)
    stepper = compile(step, any_shape=True) if compiled else step
    losses = [stepper(x, rows).data.copy() for x, rows in batches(shapes)]
    return losses, [p.data.copy() for p in model.parameters()], stepper


def assert_same(a, b):
    for x, y in zip(a[0] + a[1], b[0] + b[1]):
        np.testing.assert_array_equal(x, y)


def test_a_shape_free_program_is_captured_twice_and_then_serves_every_shape_bit_for_bit():
    shapes = [(6, 4), (9, 5), (7, 2), (12, 12), (5, 1)]
    compiled, eager = train(shapes, True), train(shapes, False)
    assert_same(compiled, eager)
    step = compiled[2]
    assert step.captures == 2 and step.joined == 1 and len(step.plans) == 1 and step.fallbacks == 0


def test_only_the_dims_seen_to_differ_are_free():
    _, step = model_and_step()
    step = compile(step, any_shape=True)
    (a, ra), (b, rb), (c, rc), (d, rd) = batches([(6, 4), (9, 4), (8, 4), (8, 3)])
    step(a, ra)
    step(b, rb)
    assert step.captures == 2 and step.serves(c, rc) and not step.serves(d, rd)  # n free; the row count not yet
    step(c, rc)
    assert step.captures == 2
    step(d, rd)
    assert step.captures == 3 and step.joined == 2 and step.serves(*batches([(30, 17)])[0])


def test_a_constant_made_from_a_shape_keeps_a_plan_per_shape_bit_for_bit():
    shapes = [(6, 4), (9, 5), (6, 4), (9, 5)]
    compiled, eager = train(shapes, True, mean=True), train(shapes, False, mean=True)
    assert_same(compiled, eager)
    step = compiled[2]
    assert step.captures == 2 and step.joined == 0 and len(step.plans) == 2
    assert step.family(*batches([(6, 4)])[0]) in step.shared.differing and not step.sharing(
        step.family(*batches([(6, 4)])[0]))


def test_without_any_shape_each_shape_is_captured():
    model, step = model_and_step()
    step = compile(step)
    for x, rows in batches([(6, 4), (9, 5), (7, 2)]):
        step(x, rows)
    assert step.captures == 3 and step.shared is None and not step.sharing(step.family(x, rows))


def test_two_parameters_are_never_the_same_program():
    """A step that reads another parameter at another shape writes a program with other leaves."""
    tl.manual_seed(0)
    small, large = nn.Linear(3, 2), nn.Linear(3, 2)

    def step(x):
        layer = small if x.shape[0] < 8 else large  # a Python branch on a shape, seen by the leaves it reads
        return (layer(Tensor(x)) * layer(Tensor(x))).sum()
    step = compile(step, any_shape=True)
    r = np.random.default_rng(0)
    for n in (4, 10, 5, 11):
        x = r.standard_normal((n, 3)).astype(np.float32)
        np.testing.assert_array_equal(step(x).data, ((small if n < 8 else large)(Tensor(x)) ** 2).sum().data)
    assert step.captures == 4 and step.joined == 0


def test_a_module_switched_to_eval_captures_a_new_reference():
    tl.manual_seed(0)
    model = nn.Sequential(nn.Linear(3, 4), nn.Dropout(0.5), nn.Linear(4, 1))
    step = compile(lambda x: model(Tensor(x)).sum(), any_shape=True)
    r = np.random.default_rng(0)
    for n in (4, 6, 8):
        step(r.standard_normal((n, 3)).astype(np.float32))
    assert step.captures == 2
    model.eval()
    x = r.standard_normal((5, 3)).astype(np.float32)
    np.testing.assert_array_equal(step(x).data, model(Tensor(x)).sum().data)
    assert step.captures == 3


def test_a_tuple_argument_holds_arrays_not_tensors():
    step = compile(lambda pair: Tensor(pair[0]).sum() + Tensor(pair[1]).sum())
    assert step((np.ones(3, np.float32), np.ones(2, np.float32))).item() == 5.0
    assert step((np.ones(3, np.float32), np.full(2, 2, np.float32))).item() == 7.0  # read at replay
    with pytest.raises(CompileError, match="compile: argument 0 is a tuple holding a Tensor; pass Tensors as "
                                           "arguments of their own"):
        step((Tensor(np.ones(3)), np.ones(2)))


TABLE = np.random.default_rng(9).standard_normal((64, 3)).astype(np.float32)  # a table read by its first n rows


def table_step(weight: nn.Linear, from_end: bool = False):
    """A step whose constants grow with the shape: x (n, 3) plus the table's first n rows (as a positional
    encoding is added), then a lower-triangular (n, n) mask that mixes the rows (a causal mask); with
    `from_end`, the table's last n rows, whose first rows are not the shorter ones'."""
    def step(x):
        n = x.shape[0]
        rows = TABLE[len(TABLE) - n:] if from_end else TABLE[:n]
        causal = Tensor(np.tril(np.ones((n, n), np.float32)))
        h = weight(Tensor(x) + Tensor(rows))
        loss = (causal @ h * h).sum()
        loss.backward()
        return loss
    return step


def test_constants_that_grow_with_a_shape_are_sliced_from_the_largest_seen():
    tl.manual_seed(0)
    layer = nn.Linear(3, 2)
    compiled, eager = compile(table_step(layer), any_shape=True), table_step(layer)
    r = np.random.default_rng(1)
    for n in (6, 9, 4, 9, 12, 3, 7):
        x = r.standard_normal((n, 3)).astype(np.float32)
        layer.weight.grad = None
        got, grad = compiled(x).data.copy(), layer.weight.grad.copy()
        layer.weight.grad = None
        np.testing.assert_array_equal(got, eager(x).data)
        np.testing.assert_array_equal(grad, layer.weight.grad)
    assert compiled.captures == 3 and compiled.joined == 2 and len(compiled.plans) == 1  # 6; 9 (grew); 12 (grew)
    assert compiled.serves(np.ones((11, 3), np.float32)) and not compiled.serves(np.ones((13, 3), np.float32))


def test_constants_that_change_otherwise_keep_a_plan_per_shape():
    tl.manual_seed(0)
    layer = nn.Linear(3, 2)
    compiled, eager = compile(table_step(layer, from_end=True), any_shape=True), table_step(layer, from_end=True)
    r = np.random.default_rng(1)
    for n in (6, 9, 4):
        x = r.standard_normal((n, 3)).astype(np.float32)
        np.testing.assert_array_equal(compiled(x).data, eager(x).data)
    assert compiled.captures == 3 and compiled.joined == 0


def test_a_grown_axis_follows_the_dims_that_keep_moving_with_it():
    """Two inputs (m, 3) and (n, 3) whose lengths move together at first: the table's rows bind to both, and
    a call where they part is captured, after which only n binds them: also where n is the first capture's,
    so that the table is the same as there and only m moved."""
    tl.manual_seed(0)
    layer = nn.Linear(3, 2)

    def step(y, x):
        loss = (layer(Tensor(x + TABLE[:x.shape[0]])).sum() + Tensor(y).sum())  # an array constant, added to an input
        loss.backward()
        return loss
    compiled = compile(step, any_shape=True)
    r = np.random.default_rng(2)
    for m, n in ((5, 5), (8, 8), (7, 5), (3, 6), (9, 4), (2, 7)):
        y, x = (r.standard_normal((k, 3)).astype(np.float32) for k in (m, n))
        layer.weight.grad = None
        got = compiled(y, x).data.copy()
        np.testing.assert_allclose(got, step(y, x).data, rtol=1e-6)
    family = next(iter(compiled.shared.families.values()))
    assert {j for pairs in family.bound.values() for j, _ in pairs} == {2}  # x's rows, not y's
    assert compiled.captures == 3
