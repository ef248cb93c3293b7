"""Rule flat_optimizer: Adam's update of a whole parameter group as one pass over flat arrays.

Adam updates one parameter at a time (optim/adam.py): a kernel call, state lookups and scalars per
parameter, about a hundred a step. Matches: a step's recorded `step()` of an Adam or AdamW, alone or
inside a CombinedOptimizer, whose every parameter gets its gradient from the step's own backward, and
whose parameters are small (PAYS_BELOW): the flat arrays cost a copy of each gradient, which a plan's
loop does not pay (it adopts the gradients the backward makes: compiler/leaf_grads.py).
Emits: each group's parameters, gradients and Adam's m and v as views into four flat arrays (`Flat`,
made once for an optimizer and shared by all the plans that step it, as DDP keeps gradients as views
of its buckets); the backward writes each gradient into its view, and one `adam_update` a group runs
over the flat arrays. Each element sees the same float operations as in the loop, so the weights and
the state are the same to the last bit.

What it assumes, each step: every parameter, gradient, m and v is still its view and the step counts
agree. An array put in place of a view (loading a checkpoint, a gradient all-reduced into a buffer
of its own) is copied back into the view; a parameter without a gradient, or a group whose step
counts differ, runs the plain loop. A gradient the step hands back stays its view: the next step
writes over it (zero_grad() makes it None first, as in eager mode).
Gain: see bench/README.md, "Step compiler".
"""
from __future__ import annotations

import weakref

import numpy as np

from ...autograd import into_leaf
from ...optim.adam import Adam, adam_update
from ...optim.combined import CombinedOptimizer

ADAM_STEP = Adam.step.__wrapped__               # what a capture records for optimizer.step()
COMBINED_STEP = CombinedOptimizer.step.__wrapped__
FLOATS = (np.dtype(np.float32), np.dtype(np.float64))
PAYS_BELOW = 32_768  # mean elements a parameter below which one call beats the loop: its ~20 µs a call against
# the flat gradient's copy, ~0.66 ns an element (train_throughput.py's steps, Xeon AVX-512, 2026-12-07: TINY,
# 2 K elements a parameter, 4% faster flat; SMALL, 14 K, 2%; BASE-short, 215 K, 6% slower)
_FLAT = weakref.WeakKeyDictionary()             # optimizer -> its Flat, one for all plans


class FlatOptimizer:
    """The rule (see the module docstring): rewrite() edits a finished capture's lines."""

    name, switch = "flat_optimizer", "flat_optimizer"

    def rewrite(self, capture) -> list:
        """Point each matched optimizer's recorded step, and its parameters' gradients, at its Flat; returns
        the optimizers it flattened."""
        done = []
        for line, method, receiver in capture.calls:
            if method is ADAM_STEP and type(receiver).step is Adam.step:
                flats = {id(receiver): _flat(receiver, capture)}
            elif method is COMBINED_STEP:
                flats = {id(o): _flat(o, capture) for o in receiver.optimizers if type(o).step is Adam.step}
            else:
                continue
            flats = {k: f for k, f in flats.items() if f is not None}
            if not flats:
                continue
            var = capture.lines[line].split(" = ", 1)[0]
            target = flats[id(receiver)].step if method is ADAM_STEP else _Combined(receiver, flats).step
            capture.lines[line] = f"{var} = {capture.const(target)}()"
            capture.call_rules.append((self.name, method.__qualname__))
            for flat in flats.values():
                for i, p in enumerate(flat.params):
                    at, _, gvar = capture.into_leaves[id(p)]
                    capture.lines[at] = f"{capture.const(flat.into_leaf)}({i}, {gvar})"
                done.append(flat.optimizer)
        return done


def _flat(optimizer, capture):
    """The optimizer's Flat if every parameter of it gets a gradient in this capture and they are small, else None."""
    params = [p for group in optimizer.param_groups for p in group["params"]]
    small = sum(p.data.size for p in params) < PAYS_BELOW * len(params)
    if not small or not all(id(p) in capture.into_leaves for p in params):
        return None
    flat = _FLAT.get(optimizer)
    if flat is None or [id(p) for p in flat.params] != [id(p) for p in params]:
        flat = _FLAT[optimizer] = Flat(optimizer)
    return flat


class _Combined:
    """CombinedOptimizer.step with its Adams flat."""

    def __init__(self, combined, flats: dict):
        self.combined, self.flats = combined, flats

    def step(self):
        for o in self.combined.optimizers:
            flat = self.flats.get(id(o))
            if flat is None:
                o.step()
            else:
                flat.step()


class Flat:
    """An Adam's groups as flat arrays: `data`, `grad`, `exp_avg`, `exp_avg_sq` per group, and each
    parameter's views of them. Laid out at its first step, when every gradient exists."""

    def __init__(self, optimizer):
        self._optimizer = weakref.ref(optimizer)  # _FLAT's key: a strong reference would keep it alive forever
        self.groups = [list(group["params"]) for group in optimizer.param_groups]
        self.ids = [[id(p) for p in params] for params in self.groups]
        self.params = [p for group in self.groups for p in group]
        self.flat = None    # per group: (data, grad, exp_avg, exp_avg_sq) flat arrays
        self.views = None   # per parameter: (data, grad, exp_avg, exp_avg_sq, state) views and its state dict

    @property
    def optimizer(self):
        return self._optimizer()

    def into_leaf(self, i: int, g: np.ndarray):
        """autograd.into_leaf for parameter i: its gradient written into its view."""
        p = self.params[i]
        view = None if self.views is None else self.views[i][1]
        if view is None or g.dtype != view.dtype:
            into_leaf(p, g, False)
        elif p.grad is None:
            np.copyto(view, g)
            p.grad = view
        elif p.grad is view:
            np.add(view, g, out=view)
        else:
            into_leaf(p, g, False)

    def step(self):
        """Adam's step: one adam_update per group over its flat arrays, or the plain loop where the layout
        cannot hold."""
        o = self.optimizer
        if [[id(p) for p in g["params"]] for g in o.param_groups] != self.ids or not self._settled():
            return ADAM_STEP(o)
        for group, (data, grad, exp_avg, exp_avg_sq), params in zip(o.param_groups, self.flat, self.groups):
            states = [o.state[p] for p in params]
            step = states[0]["step"] + 1
            for state in states:
                state["step"] = step
            (beta1, beta2) = group["betas"]
            adam_update(data, grad, exp_avg, exp_avg_sq, group["lr"], beta1, beta2, group["eps"],
                        group["weight_decay"], o._decoupled, step)

    def _settled(self) -> bool:
        """Whether every parameter, gradient, m and v is in its view, putting back what was replaced; False
        where the loop must run: a gradient is None, a dtype or shape moved, or a group's step counts differ."""
        o = self.optimizer
        if self.views is None:
            return self._lay_out()
        for p, (data, grad, exp_avg, exp_avg_sq, state) in zip(self.params, self.views):
            if p.grad is not grad:
                if p.grad is None or p.grad.shape != grad.shape or p.grad.dtype != grad.dtype:
                    return False
                np.copyto(grad, p.grad)
                p.grad = grad
            if p.data is not data or o.state.get(p) is not state or state.get("exp_avg") is not exp_avg \
                    or state.get("exp_avg_sq") is not exp_avg_sq:
                return self._lay_out()
        return all(len({o.state[p]["step"] for p in params}) == 1 for params in self.groups)

    def _lay_out(self) -> bool:
        """Copy every group's arrays into new flat ones and make each parameter's arrays views of them."""
        o = self.optimizer
        for p in self.params:
            state = o.state.get(p)
            if p.grad is None or p.data.dtype not in FLOATS or p.grad.shape != p.data.shape or (
                    state is not None and not all(state.get(k) is not None and state[k].shape == p.data.shape
                                                  for k in ("exp_avg", "exp_avg_sq"))):
                return False
        for params in self.groups:
            if len({p.data.dtype for p in params}) != 1 or \
                    len({o.state[p]["step"] if p in o.state else 0 for p in params}) != 1:
                return False
        self.flat, self.views = [], []
        for params in self.groups:
            dtype, size = params[0].data.dtype, sum(p.data.size for p in params)
            arrays = tuple(np.empty(size, dtype) for _ in range(4))
            self.flat.append(arrays)
            start = 0
            for p in params:
                views = tuple(a[start:start + p.data.size].reshape(p.data.shape) for a in arrays)
                start += p.data.size
                state = o.state.get(p)
                if state is None:
                    state = o.state[p] = {"step": 0, "exp_avg": None, "exp_avg_sq": None}
                    views[2][...] = 0
                    views[3][...] = 0
                else:
                    views[2][...] = state["exp_avg"]
                    views[3][...] = state["exp_avg_sq"]
                views[0][...] = p.data
                views[1][...] = p.grad
                p.data, p.grad, state["exp_avg"], state["exp_avg_sq"] = views
                self.views.append((*views, state))
        return True
