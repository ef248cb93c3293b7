"""Capture: run a training step once, dry, and write down what it does, as a program of ops on arrays.

While a step is captured, `Tensor._apply` hands each op here (autograd's per-thread `capture`): the op
runs, and the capture notes the function, where its input arrays come from and where its output goes.
`backward()` walks the graph as autograd does and notes each backward call and each gradient sum, in the
same order, so a replay adds the same numbers in the same order as the eager step and agrees with it to
the last bit. Calls marked `@recorded` (an optimizer's step, zero_grad, clipping, a loop's hooks) are
noted, not made: the capture changes nothing, and the step's first results come from the plan, as all
later ones do. Each replay makes them in their place, on what it made itself (the step's tensors, its
inputs, earlier recorded results) and on everything else as it is then (the lr, the step count).

Names in the program: `v<n>` arrays (inputs, leaves' arrays, op outputs, gradients), `b<n>` an op's
backward, `c<n>` the constants (functions, static arguments, leaf tensors, the gradient seed).
"""
from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from ..autograd import current_scope, retains_all_grads, toposort
from .leaf_grads import into_leaf_at_replay
from .rules import Defer, Fuse, Ran, Record
from .rules.skip_padding import kept_rows, row_version
from .traced import CompileError, Input, Rows, Traced, plain, step_site, traced


class ForwardDone(BaseException):
    """Raised at backward() by a capture that records the forward only (the rules read no more). A
    BaseException, so that a step's own `except Exception` around backward() lets it through."""


class Pending:
    """The result of a recorded call during capture: known only when the plan runs."""

    __slots__ = ("var", "what")

    def __init__(self, var: str, what: str):
        self.var, self.what = var, what

    def __repr__(self):
        return f"<result of {self.what}, known when the compiled step runs>"


def _refuse_pending(name):
    def method(self, *args):
        raise CompileError(f"compile: the step uses the result of {self.what} ({name}) at {step_site()} while it "
                           "is captured; return it from the step instead, where the compiled step fills it in")
    return method


for _name in ("__float__", "__int__", "__bool__", "__index__", "__add__", "__radd__", "__sub__", "__rsub__",
              "__mul__", "__rmul__", "__truediv__", "__rtruediv__", "__lt__", "__le__", "__gt__", "__ge__",
              "__format__", "__round__"):
    setattr(Pending, _name, _refuse_pending(_name))


@dataclass
class SpaceArrays:
    """A skip_padding space's stand-ins in a capture, its (B, T) kept grid and their flat rows (found from
    the first captures' values, the same inputs, and defined in the prologue by finish_rows), and the
    (expression, value) of each mask on its keys, of each target array with its ignore_index, and of the
    ids its embedding reads."""
    kept: Input
    rows: Input
    masks: list = field(default_factory=list)
    targets: list = field(default_factory=list)
    ids: tuple = None


class Capture:
    """The program of one step, written while the step runs once (see the module docstring)."""

    def __init__(self, rewrites: dict | None = None, rows=None, forward_only: bool = False):
        self.rewrites = rewrites or {}  # op index -> rules.Defer or rules.Fuse (from a first capture)
        self.rows = rows                # rules.skip_padding.Rows: the ops that run on a padded batch's kept rows
        self.forward_only = forward_only  # stop at backward(): the records up to it are all the rules read
        self.backward_reached = False   # whether the step called backward() (forward_only: stopped there)
        self.spaces: dict = {}          # its space -> SpaceArrays
        self.records: list = []         # rules.Record of each op, by index (None where deferred)
        self.made_by: dict = {}         # id(Tensor) -> index of the op that made it
        self.deferred: dict = {}        # op index -> rules.Ran of a deferred op (its placeholder, out)
        self.placeholders: set = set()  # id of each deferred op's placeholder Tensor
        self.fusions: dict = {}         # op index -> (rule name, the plain ops' names it replaced)
        self.prologue: list[str] = []   # NumPy on the inputs, and guards: runs first (traced.Input)
        self.lines: list[str] = []      # the program, one statement a line
        self.constants: dict = {}       # c<n> -> value
        self.vars: dict = {}            # id(Tensor) -> v<n> of its array
        self.arrays: dict = {}          # id(Traced array) -> v<n>
        self.backs: dict = {}           # id(Tensor) -> b<n> of its op's backward
        self.inputs: list = []          # (v<n>, argument index or (index, item), is a Tensor) of each array input
        self.input_tensors: dict = {}   # id(Tensor argument) -> its index among the step's arguments
        self.leaves: list = []          # (Tensor, v<n>): parameters, buffers and constant tensors, read at replay
        self.modules: dict = {}         # id -> Module seen running (its train/eval mode is assumed)
        self.grads_before: dict = {}    # id(leaf) -> (leaf, .grad before the capture), put back after it
        self.grad_seen: dict = {}       # id(leaf) -> its .grad when an op first read the leaf
        self.keep: list = []            # what the ids above refer to, kept alive
        self.late: list[str] = []       # prologue lines that need the spaces' rows (finish_rows)
        self.calls: list = []           # (line index, method, receiver) of each recorded call (flat_optimizer.py)
        self.into_leaves: dict = {}     # id(leaf) -> (line index, leaf, gradient's v<n>) of each leaf's gradient
        self.call_rules: list = []      # (rule name, qualname) of each recorded call a rule rewrote
        self.count = 0
        self._scope = None

    # ------------------------------------------------------------ names

    def new(self, prefix: str = "v") -> str:
        self.count += 1
        return f"{prefix}{self.count}"

    def const(self, value) -> str:
        name = self.new("c")
        self.constants[name] = value
        return name

    def input(self, index, value):
        """Step argument `index`, an array or a Tensor (or item `index[1]` of a tuple argument, an array): a
        Traced view of its array, bound to a new v<n> (a Tensor argument holds the view while the capture runs)."""
        var = self.new()
        self.inputs.append((var, index, hasattr(value, "_apply")))
        array = value.data if hasattr(value, "_apply") else value
        view = Input(array, self, var)
        self.arrays[id(view)] = var
        self.keep.append(view)
        if hasattr(value, "_apply"):
            self.vars[id(value)], self.input_tensors[id(value)] = var, index
            self.keep.append(value)
        return view

    def var_of(self, tensor) -> str:
        var = self.vars.get(id(tensor))
        if var is None and isinstance(tensor.data, Input):  # Tensor(input) made inside the step
            var = self.vars[id(tensor)] = tensor.data.var
            self.keep.append(tensor)
        if var is None:  # a leaf: a parameter, a buffer or a constant tensor, read from the tensor at replay
            if isinstance(tensor.data, Traced):
                raise CompileError(f"compile: a tensor made outside an op from a step's values reaches an op at "
                                   f"{step_site()}; its values would be frozen into the plan")
            var = self.vars[id(tensor)] = self.new()
            self.leaves.append((tensor, var))
            self.keep.append(tensor)
            self.grad_seen[id(tensor)] = tensor.grad
        return var

    def argument(self, value, op: str):
        """An op's non-tensor argument as (expression, the value the op gets now)."""
        if isinstance(value, Traced):
            var = self.arrays.get(id(value))
            if var is None:
                raise CompileError(f"compile: op '{op}' at {step_site()} got an array derived outside an op from a "
                                   "step's values; derive it with Tensor ops so the plan can replay it")
            return var, plain(value)
        if isinstance(value, (tuple, list)) and any(isinstance(v, (Traced, tuple, list)) for v in value):
            parts = [self.argument(v, op) for v in value]
            expression = ", ".join(e for e, _ in parts) + ("," if len(parts) == 1 else "")
            values = tuple(v for _, v in parts)
            return (f"({expression})", values) if isinstance(value, tuple) else (f"[{expression}]", list(values))
        if hasattr(value, "_apply") and hasattr(value, "data"):
            raise CompileError(f"compile: op '{op}' got a Tensor among its non-tensor arguments")
        return self.const(value), value

    # ------------------------------------------------------------ what the step does

    def apply(self, fn, op: str, parents: tuple, args: tuple):
        """Tensor._apply while capturing: run the op, note it, return its Tensor (holding a Traced view).
        An op a rule rewrites is deferred (a placeholder) or runs the rule's fused op instead."""
        from ..tensor import Tensor
        index = len(self.records)
        rewrite = self.rewrites.get(index)
        if isinstance(rewrite, Defer):
            return self._defer(index, rewrite.record, op, parents, args)
        if isinstance(rewrite, Fuse):
            self._same_op(rewrite.record, op)
            fn, op, parents, args = self._fuse(index, rewrite, Ran(op, parents, args))
        elif any(id(p) in self.placeholders for p in parents):
            raise CompileError(f"compile: op '{op}' at {step_site()} reads the output of an op a rule fused away; "
                               "the step ran other ops than at its first capture")
        at_rows = None if self.rows is None else self.rows.ops.get(index)
        if at_rows is not None:
            fn, args = self._at_rows(at_rows, fn, op, args)
        self.records.append(Record(fn, op, tuple(self.made_by.get(id(p)) for p in parents), args, None, None,
                                   leaves=tuple(None if id(p) in self.made_by else p for p in parents)))
        for p in parents:
            if id(p) in self.made_by:
                self.records[self.made_by[id(p)]].uses += 1
        inputs = [self.var_of(p) for p in parents]
        arguments = [self.argument(a, op) for a in args]
        data, backward = fn(*[plain(p.data) for p in parents], *[v for _, v in arguments])
        rows = at_rows is not None and at_rows[0] != "loss"
        out = Tensor._node(Rows(data, self.rows.shapes[index]) if rows else traced(data), op, parents, backward)
        self.records[index].shape, self.records[index].dtype = out.data.shape, out.data.dtype
        self.made_by[id(out)] = index
        var, back = self.new(), self.new("b")
        call = ", ".join(inputs + [e for e, _ in arguments])
        self.lines.append(f"{var}, {back} = {self.const(fn)}({call})")
        self.vars[id(out)], self.arrays[id(out.data)], self.backs[id(out)] = var, var, back
        self.keep.append(out)
        scope = current_scope()
        if scope is not self._scope:
            self._scope = scope
            for module in scope:
                self.modules[id(module)] = module
        return out

    def _defer(self, index: int, record: Record, op: str, parents: tuple, args: tuple):
        """A placeholder for op `index`, which its group's fused op stands in for (only that group reads it)."""
        from ..tensor import Tensor
        self._same_op(record, op)
        self.records.append(None)
        zeros = np.broadcast_to(np.zeros((), record.dtype), record.shape)
        placeholder = Tensor._node(traced(zeros), op, parents, None)
        self.deferred[index] = Ran(op, parents, args, placeholder)
        self.placeholders.add(id(placeholder))
        self.keep.append(placeholder)
        return placeholder

    @staticmethod
    def _same_op(record: Record, op: str):
        if op != record.op:
            raise CompileError(f"compile: the step ran op '{op}' at {step_site()} where its first capture ran "
                               f"'{record.op}'; a step must run the same ops on the same signature")

    def check_rewrites(self):
        """After a capture with rewrites: every deferred op reached its group's fused op."""
        if self.deferred:
            names = ", ".join(f"'{ran.op}'" for ran in self.deferred.values())
            raise CompileError(f"compile: ops a rule deferred ({names}) never reached their fused op; the step ran "
                               "other ops than at its first capture")

    def _fuse(self, index: int, fuse: Fuse, root: Ran) -> tuple:
        """(fn, op, parents, args) of the fused op that runs at op `index`, the root of `fuse`'s group."""
        rule, roles = fuse.rule, fuse.roles
        ran = {role: root if i == index else self.deferred.pop(i, None) for role, i in roles.items()}
        fused = None if None in ran.values() else rule.emit(ran)
        if fused is None or any(id(p) in self.placeholders for p in fused.parents):
            raise CompileError(f"compile: rule {rule.name} no longer matches op '{root.op}' at {step_site()}")
        self.fusions[index] = (rule.name, tuple(ran[role].op for role in sorted(roles, key=roles.get)))
        for leaf, value in fused.assumed:
            self.prologue.append(f"if not np.array_equal({self.var_of(leaf)}, {self.const(value)}): "
                                 "return FALLBACK")
        return fused.fn, fused.op, fused.parents, fused.args

    # ------------------------------------------------------------ skip_padding: ops on kept rows

    def _at_rows(self, kind: tuple, fn, op: str, args: tuple) -> tuple:
        """(fn, args) of a region op on its kept rows (rules/skip_padding.py); notes the masks and targets
        that decide a space's rows, from which the plan finds them at each replay."""
        if kind[0] == "attention":
            self._space(kind[1][1]).masks.append(self.argument(args[0], op))
        if kind[0] == "loss":
            self._space(kind[1]).targets.append((*self.argument(args[0], op), args[2]))
        if kind[0] == "entry":
            self._space(kind[1]).ids = self.argument(args[0], op)
        return row_version(kind, fn, args, lambda s: (self._space(s).kept, self._space(s).rows),
                           lambda s, a: self._gathered(s, a, op))

    def _space(self, s: int) -> SpaceArrays:
        """Space s's stand-ins and what decides its rows (SpaceArrays), made on its first op."""
        if s not in self.spaces:
            kept = self.rows.spaces[s].kept
            stand_ins = [Input(a, self, self.new()) for a in (kept, np.flatnonzero(kept))]
            for x in stand_ins:
                self.arrays[id(x)] = x.var
                self.keep.append(x)
            self.spaces[s] = SpaceArrays(*stand_ins)
        return self.spaces[s]

    def _gathered(self, s: int, value, op: str) -> Input:
        """An id or target array (B, T) or (B·T,) at space s's rows, (n,): computed in the prologue."""
        expression, array = self.argument(value, op)
        rows = self._space(s).rows
        out = Input(np.take(array, rows.array), self, self.new())
        self.arrays[id(out)] = out.var
        self.keep.append(out)
        self.late.append(f"{out.var} = np.take({expression}, {rows.var})")
        return out

    def finish_rows(self):
        """The prologue's lines that find each space's rows from the step's masks and targets, then take the
        ids and targets there; the first captures' rows must be what these find (the same inputs)."""
        lines = []
        for space in self.spaces.values():
            found = kept_rows(space.ids[1], tuple(m for _, m in space.masks),
                              tuple((t, ignore) for _, t, ignore in space.targets))
            if not np.array_equal(found, space.kept.array):
                raise CompileError("compile: rule skip_padding found other rows than at the step's first capture; "
                                   "the step ran other ops than there")
            mask_list = "".join(f"{e}, " for e, _ in space.masks)
            target_list = "".join(f"({e}, {self.const(ignore)}), " for e, _, ignore in space.targets)
            lines.append(f"{space.kept.var} = {self.const(kept_rows)}({space.ids[0]}, ({mask_list}), ({target_list}))")
            lines.append(f"{space.rows.var} = np.flatnonzero({space.kept.var})")
        self.prologue += lines + self.late

    def numpy(self, func, args, kwargs) -> Input:
        """NumPy's `func` on step inputs (traced.Input): computed now, and noted in the prologue."""
        exprs, values = self._numpy_args(args)
        kw_exprs, kw_values = self._numpy_args(tuple(kwargs.values()))
        result = func(*values, **dict(zip(kwargs, kw_values)))
        var = self.new()
        keywords = "".join(f", {k}={e}" for k, e in zip(kwargs, kw_exprs))
        self.prologue.append(f"{var} = {self.const(func)}({', '.join(exprs)}{keywords})")
        if not isinstance(result, (np.ndarray, np.generic)):
            raise CompileError(f"compile: NumPy's {getattr(func, '__name__', func)} on a step's input at {step_site()} "
                               f"gave a {type(result).__name__}, which a plan cannot follow")
        out = Input(result, self, var)
        self.arrays[id(out)] = var
        self.keep.append(out)
        return out

    def _numpy_args(self, args) -> tuple:
        exprs, values = [], []
        for a in args:
            if isinstance(a, Input):
                exprs.append(a.var), values.append(a.array)
            elif isinstance(a, Traced):
                raise CompileError(f"compile: NumPy code at {step_site()} mixes a step's input with a tensor's "
                                   "values, which only ops may read")
            elif isinstance(a, (tuple, list)) and any(isinstance(v, (Traced, tuple, list)) for v in a):
                inner, inner_values = self._numpy_args(a)
                exprs.append(f"({', '.join(inner)},)" if isinstance(a, tuple) else f"[{', '.join(inner)}]")
                values.append(type(a)(inner_values))
            else:
                exprs.append(self.const(a)), values.append(a)
        return exprs, values

    def guard(self, value: Input) -> bool:
        """bool() of a value NumPy made from the inputs: the branch taken now, checked at each replay
        (a replay whose inputs branch the other way runs the step eagerly)."""
        taken = bool(value.array)
        self.prologue.append(f"if bool({value.var}) is not {taken}: return FALLBACK")
        return taken

    @staticmethod
    def is_traced(value) -> bool:
        """Whether `value` is a stand-in of this capture (tensor.as_array passes it on as it is)."""
        return isinstance(value, Traced)

    def tensor_data(self, data):
        """Tensor(data) while capturing: an input's stand-in becomes the tensor's data (so its ops read
        the input at each replay); a tensor's values refuse; anything else is None (made as usual)."""
        if hasattr(data, "_apply"):
            data = data.data
        if isinstance(data, Input):
            return data
        if isinstance(data, Traced):
            raise CompileError(f"compile: a Tensor made from another tensor's values at {step_site()} would be "
                               "frozen into the plan; use the tensor itself (or .detach())")
        return None

    def refuse_op(self, op: str):
        raise CompileError(f"compile: op '{op}' at {step_site()} computes its output outside Tensor._apply, so a "
                           "plan cannot replay it; run this step eagerly")

    def call(self, method, args: tuple, kwargs: dict):
        """A @recorded call (an optimizer's step, zero_grad, clipping, a training loop's hooks): noted, made
        at each replay. An argument the replay makes anew (a tensor the step made, a step's input, an
        earlier recorded call's result, in tuples, lists and dicts too) is passed as that replay made it;
        anything else as it is now (a parameter, the optimizer), read by the call when it runs."""
        what = f"{method.__qualname__} at {step_site()} got a tensor's values; pass the tensors themselves"
        parts = [self.output(a, what) for a in args] + [f"{k}={self.output(v, what)}" for k, v in kwargs.items()]
        var = self.new()
        self.calls.append((len(self.lines), method, _receiver(args)))
        self.lines.append(f"{var} = {self.const(method)}({', '.join(parts)})")
        return Pending(var, method.__qualname__)

    def backward(self, root, grad):
        """autograd.run_backward while capturing: the same walk, the same sums in the same order, noted."""
        self.backward_reached = True
        if self.forward_only:
            for leaf, _ in self.leaves:
                if leaf.requires_grad:
                    self._grad_unset(leaf)
            raise ForwardDone
        if retains_all_grads():
            raise CompileError("compile: retain_grads() keeps intermediate gradients, which a plan does not hold")
        seed = self.new()
        self.lines.append(f"{seed} = {self.const(np.array(plain(grad)))}.copy()")
        grads, names = {id(root): plain(grad)}, {id(root): seed}
        summed = set()
        for node in reversed(toposort(root)):
            key = id(node)
            g = grads.pop(key, None)
            if g is None:
                continue
            gvar, own = names.pop(key), key in summed
            summed.discard(key)
            if not node._prev:
                index = self.input_tensors.get(key)
                leaf = self.const(node) if index is None else f"ARGS[{index}]"
                if index is None:
                    self.into_leaves[key] = (len(self.lines), node, gvar)
                self.lines.append(f"{self.const(into_leaf_at_replay)}({leaf}, {gvar}, {own})")
                self._show_grad(node, g)
                continue
            if node._retains_grad:
                raise CompileError(f"compile: retain_grad() on the output of op '{node._op}': a plan keeps no "
                                   "intermediate gradients")
            back = self.backs.get(key)
            if back is None:
                raise CompileError(f"compile: backward() reaches op '{node._op}', which ran before the capture")
            parent_grads = tuple(node._backward(g))
            outs, sums = ["_"] * len(parent_grads), []
            for i, (parent, pg) in enumerate(zip(node._prev, parent_grads)):
                if pg is not None and parent.requires_grad:
                    outs[i] = self.new()
                    self._sum_into(id(parent), pg, outs[i], grads, names, summed, sums)
            self.lines.append(f"{', '.join(outs)}, = {back}({gvar})")
            self.lines.extend(sums)

    def _sum_into(self, key, pg, pvar: str, grads: dict, names: dict, summed: set, sums: list):
        """Add gradient pg (named pvar) into node `key`'s, as autograd.run_backward does, and note how."""
        acc = grads.get(key)
        if acc is None:
            grads[key], names[key] = pg, pvar
        elif key in summed and pg.shape == acc.shape and pg.dtype == acc.dtype:
            np.add(acc, pg, out=acc)
            sums.append(f"{self.const(np.add)}({names[key]}, {pvar}, out={names[key]})")
        else:
            grads[key] = acc = acc + pg
            total = self.new()
            sums.append(f"{total} = {names[key]} + {pvar}")
            names[key] = total
            if isinstance(acc, np.ndarray):
                summed.add(key)

    def _show_grad(self, leaf, g):
        """During capture a leaf's .grad is a Traced view of its gradient: reading it raises; put back after."""
        if id(leaf) not in self.grads_before:
            self._grad_unset(leaf)
            self.grads_before[id(leaf)] = (leaf, leaf.grad)
        leaf.grad = traced(g)

    def _grad_unset(self, leaf):
        """Refuse a step that set a leaf's .grad itself between an op reading the leaf and backward()."""
        if leaf.grad is not self.grad_seen.get(id(leaf), leaf.grad):
            raise CompileError(f"compile: the step sets the .grad of a {leaf.shape} leaf itself before backward(); a "
                               "plan replays ops and recorded calls only: clear gradients with optimizer.zero_grad()")

    def restore(self):
        for leaf, grad in self.grads_before.values():
            leaf.grad = grad

    def output(self, value, refusal: str = "the step returns a tensor's array; return the Tensor itself") -> str:
        """An expression building, at replay, the step's return value (or a recorded call's argument)
        from the plan's arrays; a tensor's bare array is refused with `refusal`."""
        from ..tensor import Tensor
        if isinstance(value, Tensor):
            if id(value) in self.placeholders:
                raise CompileError("compile: the step returns the output of an op a rule fused away; the step ran "
                                   "other ops than at its first capture")
            if id(value) in self.made_by:
                self.records[self.made_by[id(value)]].uses += 1
            var = self.vars.get(id(value))
            if var is None or any(var == leaf_var for _, leaf_var in self.leaves):
                return self.const(value)
            return f"{self.const(_as_tensor)}({var})"
        if isinstance(value, Pending):
            return value.var
        if isinstance(value, (tuple, list)):
            items = ", ".join(self.output(v, refusal) for v in value) + ("," if len(value) == 1 else "")
            return f"({items})" if isinstance(value, tuple) else f"[{items}]"
        if isinstance(value, dict):
            return "{" + ", ".join(f"{self.const(k)}: {self.output(v, refusal)}" for k, v in value.items()) + "}"
        if isinstance(value, Input):
            return value.var
        if isinstance(value, Traced):
            raise CompileError(f"compile: {refusal}")
        return self.const(value)


def _receiver(args: tuple):
    """A recorded call's first argument, what a rule reads (an optimizer), unless it is a step's tensor, an array
    or a container: held by the capture, those would keep a dry run's arrays alive into the next one."""
    first = args[0] if args else None
    return None if hasattr(first, "_apply") or isinstance(first, (np.ndarray, list, tuple, dict, Pending)) else first


def _as_tensor(array):
    from ..tensor import Tensor
    return Tensor._node(array, "", (), None)
