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
# # 5 · Build it yourself: the first three exercises
#
# Reading the engine teaches less than writing it. `tinylearn` holds 19 exercises along the reading
# path (`python -m tinylearn list`), from `Value`'s product to a step of beam search. Each is graded
# offline: your function runs where the project's own code runs, on fixed inputs from the smallest up,
# and a failure shows the first input it fails on, what was expected, what you gave, and, when it
# recognises it, the name of your mistake and a hint.
#
# Here are the first three, in Python: `learn.check(name, your_function)`. From a terminal, the same
# exercises are files you write (`python -m tinylearn start 1`, then `check 1`; docs/learn.md).
# Nothing here writes a file.

# %%
import math

from IPython.display import display

import tinylearn as learn
from tinygrad_lite.scalar import Value
from viz import draw_graph

# %% [markdown]
# ## 1 · A product that remembers its slopes
#
# `a * b` makes a new `Value` holding the product, its two inputs, the op's name and the local
# slopes d(out)/d(input). `backward()` then needs no code per op: it multiplies each upstream
# gradient by these slopes. Here is a first try, written as many people write it at first:

# %%
print(learn.find("mul").stub)


def mul(a, b):
    b = b if isinstance(b, Value) else Value(b)
    return Value(a.data * b.data, (a, b), "*", (a.data, b.data))


print(learn.check("mul", mul))

# %% [markdown]
# The check names the mistake: the slope with respect to `a` is `b`, not `a`. Swapped back:

# %%
def mul(a, b):
    b = b if isinstance(b, Value) else Value(b)
    return Value(a.data * b.data, (a, b), "*", (b.data, a.data))


print(learn.check("mul", mul))

# %% [markdown]
# The pass includes an end-to-end run: a 2-4-1 network trained on XOR with your product in every
# neuron. Your op in a graph, its gradients filled in by `backward()`:

# %%
x, w = Value(3.0, label="x"), Value(-2.0, label="w")
y = mul(x, w)
y.label = "y"
y.backward()
display(draw_graph(y))

# %% [markdown]
# ## 2 · tanh and its slope
#
# d tanh(x)/dx = 1 − tanh(x)²: it is written with the output t, already computed. A common slip
# squares the input instead:

# %%
def tanh(x):
    t = math.tanh(x.data)
    return Value(t, (x,), "tanh", (1 - x.data * x.data,))


print(learn.check("tanh", tanh))

# %%
def tanh(x):
    t = math.tanh(x.data)
    return Value(t, (x,), "tanh", (1 - t * t,))


print(learn.check("tanh", tanh))

# %% [markdown]
# ## 3 · The order the backward pass walks
#
# `backward()` visits every Value reachable from the loss, each after all the Values it was made
# from have been listed (a topological order), then walks that list backwards. The textbook answer
# is a recursive depth-first search:

# %%
def topological_order(root):
    order, seen = [], set()

    def visit(node):
        if id(node) not in seen:
            seen.add(id(node))
            for child in node.inputs:
                visit(child)
            order.append(node)
    visit(root)
    return order


print(learn.check("topological_order", topological_order))

# %% [markdown]
# It is right on small graphs and dies on a chain 3,000 deep: Python stops a recursion about 1,000
# calls down, and the graph of a small MLP's training step is far deeper. The same search with a
# stack of its own:

# %%
def topological_order(root):
    order, seen, stack = [], {id(root)}, [(root, iter(root.inputs))]
    while stack:
        node, inputs = stack[-1]
        child = next((c for c in inputs if id(c) not in seen), None)
        if child is None:
            stack.pop()
            order.append(node)
        else:
            seen.add(id(child))
            stack.append((child, iter(child.inputs)))
    return order


print(learn.check("topological_order", topological_order))

# %% [markdown]
# The project's own version, and why it is written that way:

# %%
print(learn.solution("topological_order"))

# %% [markdown]
# Next: `python -m tinylearn start 4` (a broadcast gradient summed back to its input's shape), or
# `learn.check("unbroadcast", your_function)` right here. `learn.hint(4)` gives one more hint each
# time, `learn.listing()` shows your progress.
