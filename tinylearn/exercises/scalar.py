"""Exercises 1-3, the scalar floor (tinygrad_lite/scalar.py): a product that remembers its slopes, tanh,
and the topological order the backward pass walks. Each ends with XOR trained with the learner's piece."""
from __future__ import annotations

import math

from tinygrad_lite.scalar import Value

from ..exercise import Case, Check, Exercise, Mistake
from ..grading import close
from ..pictures import draw_order, draw_value_op
from .scalar_runs import order_summary, reference_order, xor_check

SCALAR_IMPORTS = "from tinygrad_lite.scalar import Value\n"


def value_summary(out, **inputs) -> dict:
    """A Value's number, how many inputs it recorded, and its slope d(out)/d(each named input), read
    through the public API (inputs, vjp)."""
    slopes = {f"d/d{name}": 0.0 for name in inputs}
    for node, slope in zip(out.inputs, out.vjp(1.0)):
        for name, value in inputs.items():
            if node is value:
                slopes[f"d/d{name}"] += slope
    return {"data": out.data, "inputs": len(out.inputs), **slopes}


def call_mul(fn, case):
    a_data, b_data, kind = case.args
    a = Value(a_data)
    if kind == "number":
        return value_summary(fn(a, b_data), a=a)
    if kind == "same":
        return value_summary(fn(a, a), a=a)
    b = Value(b_data)
    return value_summary(fn(a, b), a=a, b=b)


MUL = Exercise(
    number=1, name="mul", title="a product that remembers its slopes (Value.__mul__)",
    reads="tinygrad_lite/scalar.py (Value.__mul__)", function="mul", imports=SCALAR_IMPORTS,
    stub='''def mul(a, b):
    """a · b as a Value that remembers how it was made, as Value.__mul__ does.

    a: a Value; b: a Value or a plain number (make it a Value first).
    Returns Value(a.data * b.data, (a, b), "*", slopes): the product, its inputs in order, the op's name,
    and the local slopes (d out/d a, d out/d b), which backward() multiplies the upstream gradient by.
    """''',
    hints=("The slope of a·b with respect to a is b, and with respect to b is a.",
           "Record both inputs, (a, b), in the order the slopes are given: backward pairs them up.",
           "If b is a number, b = Value(b) first, so it has a .data."),
    solution=lambda a, b: a * b, shown=Value.__mul__,
    why="The slopes are computed once, when the product is made: backward then needs no code per op, only "
        "one loop of the chain rule (micrograd's design).",
    cases=lambda: [Case("a = 2, b = 3", (2.0, 3.0, "values")),
                   Case("a = -1.5, b = 4", (-1.5, 4.0, "values")),
                   Case("x · x with x = 3 (one Value used twice)", (3.0, None, "same")),
                   Case("a = 2.5 times the number 4", (2.5, 4.0, "number"), tags=frozenset({"number"}))],
    call=call_mul,
    mistakes=(
        Mistake("the slopes swapped", "d(a·b)/da is b, not a: give (b.data, a.data), in the inputs' order.",
                lambda c, e, g: c.args[2] == "values" and close(g["d/da"], c.args[0]) and close(g["d/db"], c.args[1])),
        Mistake("addition's slopes", "a·b changes by b for each unit of a: the slopes are (b.data, a.data), not 1.",
                lambda c, e, g: all(close(g[k], 1.0) for k in g if k.startswith("d/"))),
        Mistake("the inputs not recorded", "pass (a, b) as the Value's inputs, or backward cannot reach them.",
                lambda c, e, g: g["inputs"] == 0),
        Mistake("a number not made a Value", "b may be a plain number: b = b if isinstance(b, Value) else Value(b).",
                lambda c, e, g: "number" in c.tags and isinstance(g, (AttributeError, TypeError))),
    ),
    checks=(Check("XOR trained with your product", lambda fn: xor_check(mul=fn)),),
    draw=lambda fn, path: draw_value_op(lambda x, w: fn(x, w).tanh(), path),
)


def call_tanh(fn, case):
    x = Value(case.args[0])
    return value_summary(fn(x), x=x)


def _tanh_slope_like(slope):
    return lambda c, e, g: not close(e["d/dx"], g["d/dx"]) and close(g["d/dx"], slope(c.args[0]))


TANH = Exercise(
    number=2, name="tanh", title="tanh and its slope, 1 − tanh²",
    reads="tinygrad_lite/scalar.py (Value.tanh)", function="tanh", imports="import math\n\n" + SCALAR_IMPORTS,
    stub='''def tanh(x):
    """tanh(x) as a Value: t = tanh(x.data), one input x, op name "tanh", and the slope dt/dx = 1 − t².

    The slope is written with the output t, which is already computed; it must hold for any x,
    including x = ±400, where tanh is ±1 and its slope 0.
    """''',
    hints=("d tanh(x)/dx = 1 − tanh(x)²: square the output, not the input.",
           "math.tanh never overflows; a formula with exp(2x) does, at x = 400.",
           "Return Value(t, (x,), \"tanh\", (1 - t * t,))."),
    solution=lambda x: x.tanh(), shown=Value.tanh,
    why="The slope reuses t, the output already computed: no second call to tanh or exp, and it is exact "
        "where tanh saturates (1 − t² = 0 at ±400).",
    cases=lambda: [Case("x = 0.5", (0.5,)), Case("x = -1.2", (-1.2,)), Case("x = 0", (0.0,)), Case("x = 3", (3.0,)),
                   Case("x = 400 (tanh saturates)", (400.0,), tags=frozenset({"large"})),
                   Case("x = -400", (-400.0,), tags=frozenset({"large"}))],
    call=call_tanh,
    mistakes=(
        Mistake("the slope from the input, 1 − x²", "the slope is 1 − t² with t = tanh(x), the output.",
                _tanh_slope_like(lambda x: 1 - x * x)),
        Mistake("the slope without its square, 1 − t", "d tanh/dx = 1 − t², t squared.",
                _tanh_slope_like(lambda x: 1 - math.tanh(x))),
        Mistake("the slope's sign flipped", "tanh rises everywhere: its slope is 1 − t² ≥ 0, not t² − 1.",
                _tanh_slope_like(lambda x: math.tanh(x) ** 2 - 1)),
        Mistake("tanh overflows at large x", "exp(2·400) overflows a float: use math.tanh(x.data), or a formula "
                "in exp(−2|x|).",
                lambda c, e, g: "large" in c.tags and (isinstance(g, (OverflowError, ZeroDivisionError))
                                                       or g["data"] != g["data"] or g["d/dx"] != g["d/dx"])),
        Mistake("the input not recorded", "pass (x,) as the Value's inputs, or backward cannot reach x.",
                lambda c, e, g: g["inputs"] == 0),
    ),
    checks=(Check("XOR trained with your tanh", lambda fn: xor_check(tanh=fn)),),
    draw=lambda fn, path: draw_value_op(lambda x, w: fn(x * w + 1.0), path),
)


GRAPHS = (("one leaf", "leaf"), ("tanh(a·b + c)", "chain"), ("s·s + s·c with s = a·b (s reached twice)", "diamond"),
          ("a neuron, tanh(w·x + b)", "neuron"), ("a chain 3,000 additions deep", "deep"))


def _order_mistake(key):
    return lambda c, e, g: g[key] > 0


ORDER = Exercise(
    number=3, name="topological_order", title="the order the backward pass walks",
    reads="tinygrad_lite/scalar.py (Value.backward, Value.topological_order)", function="topological_order",
    imports=SCALAR_IMPORTS,
    stub='''def topological_order(root):
    """Every Value reachable from `root` through `.inputs`, each exactly once, each after all its inputs
    (so root comes last): a list. backward() walks it reversed, so a node's gradient is complete before
    it is passed on to the Values it was made from.

    A graph may reach one Value by several paths (s·s uses s twice), and may be thousands deep.
    """''',
    hints=("Depth-first search: add a node to the list only after all its inputs are in (post-order).",
           "Keep a set of the Values already seen, so a Value reached twice is listed once.",
           "Python stops a recursion about 1,000 calls deep: use a list as your own stack of "
           "(node, iterator over its inputs)."),
    solution=reference_order, shown=Value.topological_order,
    why="Iterative, with an explicit stack, because a recursive search dies past ~1,000 nodes and a "
        "Value graph of a small MLP's training step has tens of thousands.",
    cases=lambda: [Case(label, (kind,), tags=frozenset({kind})) for label, kind in GRAPHS],
    call=lambda fn, case: order_summary(fn, case.args[0]),
    mistakes=(
        Mistake("nodes before their inputs (pre-order)", "append a node after its inputs, not before: root last.",
                _order_mistake("placed before an input")),
        Mistake("no set of visited nodes", "a Value reached by two paths is listed twice, and its gradient "
                "sent twice: keep a set of the Values seen.", _order_mistake("listed twice")),
        Mistake("only part of the graph", "follow .inputs all the way down to the leaves, not one level.",
                _order_mistake("missing")),
        Mistake("recursion too deep", "a recursive search dies about 1,000 deep: keep your own stack.",
                lambda c, e, g: isinstance(g, RecursionError)),
    ),
    checks=(Check("XOR trained with your order", lambda fn: xor_check(order=fn)),),
    draw=draw_order, picture="numbering the Value graph's nodes (#1 first)",
)

EXERCISES = (MUL, TANH, ORDER)
