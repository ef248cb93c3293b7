# ---
# jupyter:
#   jupytext:
#     cell_metadata_filter: -all
#     formats: ipynb,py:percent
#     text_representation:
#       extension: .py
#       format_name: percent
#       format_version: '1.3'
#       jupytext_version: 1.19.6
#   kernelspec:
#     display_name: Python 3 (ipykernel)
#     language: python
#     name: python3
# ---

# %% [markdown]
# # 1 · Scalar autograd: `Value`, one neuron, and XOR
#
# The bottom floor of tinygrad-lite is `tinygrad_lite.scalar.Value`: one number that remembers
# how it was computed. Its API is micrograd's (`.data`, `.grad`, `backward()`,
# `MLP(nin, nouts)`), so code written for micrograd runs with only the import changed.
#
# `viz.draw_graph(...)` returns a Graphviz graph that a notebook shows inline as SVG. No system
# Graphviz is needed: the pip package `graphviz-pure` (installed with tinygrad-lite) lays it out.
# Nothing in this notebook writes a file outside a temporary directory.

# %%
import math
import random

from IPython.display import display

from tinygrad_lite.scalar import MLP, Neuron, Value
from viz import draw_graph, plots

# %% [markdown]
# ## A small expression and its graph
#
# Each operation on Values makes a new Value that keeps its inputs (`_prev`), the op's name
# (`_op`) and the local derivatives d(out)/d(input). `backward()` visits the graph from the
# output back to the leaves and multiplies local derivatives along every path: the chain rule.
# In the picture, each record reads *label | data | grad*, and each small node is an op.

# %%
a = Value(2.0, label="a")
b = Value(-3.0, label="b")
c = Value(10.0, label="c")
f = Value(-2.0, label="f")
e = a * b
e.label = "e"
d = e + c
d.label = "d"
L = d * f
L.label = "L"
L.backward()
draw_graph(L)

# %% [markdown]
# The gradients are what a finite difference gives: nudge one input by `h`, see how far `L`
# moves, divide by `h`.

# %%
def L_of(a, b, c, f):
    return (a * b + c) * f


point = {"a": 2.0, "b": -3.0, "c": 10.0, "f": -2.0}
h = 1e-6
for name, leaf in zip(point, (a, b, c, f)):
    nudged = {**point, name: point[name] + h}
    numeric = (L_of(**nudged) - L_of(**point)) / h
    print(f"dL/d{name}: backward {leaf.grad:+.4f}   finite difference {numeric:+.4f}")
    assert math.isclose(leaf.grad, numeric, abs_tol=1e-4)

# %% [markdown]
# ## One neuron
#
# A neuron multiplies each input by a weight, adds a bias and squashes the sum with an
# activation: `o = tanh(x1·w1 + x2·w2 + b)`. The local derivative of tanh is `1 - o²`, so the
# gradient reaching the sum `n` is `1 - o²` times the gradient of `o` (here 1).

# %%
x1, x2 = Value(2.0, label="x1"), Value(0.0, label="x2")
w1, w2 = Value(-3.0, label="w1"), Value(1.0, label="w2")
bias = Value(6.7, label="b")
n = x1 * w1 + x2 * w2 + bias
n.label = "n"
o = n.tanh()
o.label = "o"
o.backward()
print(f"o = {o.data:.4f}, dn = {n.grad:.4f}, 1 - o² = {1 - o.data ** 2:.4f}")
assert math.isclose(n.grad, 1 - o.data ** 2)
assert math.isclose(w1.grad, x1.data * n.grad) and math.isclose(x1.grad, w1.data * n.grad)
draw_graph(o)

# %% [markdown]
# The library's `Neuron` is the same thing with random weights in [-1, 1) and a choice of
# activation; `Layer` is several neurons reading the same inputs, and `MLP` stacks layers.

# %%
neuron = Neuron(2, act="tanh", rng=random.Random(0))
out = neuron([Value(2.0, label="x1"), Value(0.0, label="x2")])
out.backward()
print(neuron, [round(p.data, 4) for p in neuron.parameters()], "->", round(out.data, 4))
draw_graph(out)

# %% [markdown]
# ## XOR: why a hidden layer matters
#
# XOR is 1 when exactly one input is 1. No straight line puts (0,1) and (1,0) on one side and
# (0,0) and (1,1) on the other, so a single neuron (one line) gets at most 3 of the 4 right.
# A hidden layer with a non-linear activation bends the boundary.
#
# Each model outputs a logit `s`; it predicts 1 when `s > 0`. Training is plain gradient
# descent on the mean binary cross-entropy `log(1 + eˢ) - t·s`.

# %%
XOR_POINTS = [(0.0, 0.0), (0.0, 1.0), (1.0, 0.0), (1.0, 1.0)]
XOR_TARGETS = [0, 1, 1, 0]


def xor_loss(model):
    logits = [model([Value(x0), Value(x1)]) for x0, x1 in XOR_POINTS]
    losses = [(1 + s.exp()).log() - t * s for s, t in zip(logits, XOR_TARGETS)]
    return sum(losses) * (1.0 / len(losses))


def train(model, steps=400, lr=0.5):
    history = []
    for _ in range(steps):
        loss = xor_loss(model)
        model.zero_grad()
        loss.backward()
        for p in model.parameters():
            p.data -= lr * p.grad
        history.append(loss.data)
    return history


def correct(model):
    return sum((model([Value(x0), Value(x1)]).data > 0) == bool(t)
               for (x0, x1), t in zip(XOR_POINTS, XOR_TARGETS))


single = MLP(2, [1], seed=0)
hidden = MLP(2, [4, 1], act="tanh", seed=0)
histories = {"one neuron, no hidden layer": train(single), "MLP 2-4-1 (tanh)": train(hidden)}
for name, model in (("one neuron", single), ("MLP 2-4-1", hidden)):
    print(f"{name}: {correct(model)}/4 correct, final loss {xor_loss(model).data:.4f}")
assert correct(single) <= 3  # one line cannot separate XOR
assert abs(histories["one neuron, no hidden layer"][-1] - math.log(2)) < 0.01
assert histories["MLP 2-4-1 (tanh)"][-1] < histories["MLP 2-4-1 (tanh)"][0]

# %%
display(plots.plot_loss_curves(histories, logy=True, title="XOR: loss per step"));

# %% [markdown]
# The single neuron ends where its loss is lowest: weights and bias near zero, every logit near 0,
# every probability ½, loss `log 2 ≈ 0.693`. That is its best: for one neuron (no activation
# before the loss) the loss is convex in the weights, and on XOR's symmetric points its gradient
# at all-zero weights is exactly zero.
#
# The regions each model assigns to class 1 (the logit `s > 0`): one straight line for the
# single neuron (look at the scale: its logits are tiny), a bent boundary for the MLP.

# %%
def logits_on(model):
    return lambda grid: [model([Value(x0), Value(x1)]).data for x0, x1 in grid]


for name, model in (("one neuron", single), ("MLP 2-4-1 (tanh)", hidden)):
    display(plots.plot_decision_boundary(logits_on(model), XOR_POINTS, XOR_TARGETS,
                                         resolution=60, title=f"XOR, {name}"))

# %% [markdown]
# ## The backprop graph of one training step
#
# The whole graph of the XOR loss for the trained MLP, after `backward()`: every parameter is
# used four times (once per point), and its gradient is the sum of what flows back along the
# four paths. Labels name the parameters by layer and neuron.

# %%
for depth, layer in enumerate(hidden.layers):
    for j, unit in enumerate(layer.neurons):
        for i, w in enumerate(unit.w):
            w.label = f"L{depth}.n{j}.w{i}"
        unit.b.label = f"L{depth}.n{j}.b"
loss = xor_loss(hidden)
loss.label = "loss"
hidden.zero_grad()
loss.backward()
graph = draw_graph(loss)
print(graph.stats)
display(graph)
