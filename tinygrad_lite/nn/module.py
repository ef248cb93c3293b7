"""Parameter and Module: the bookkeeping that turns a pile of Tensors into a model.

As in PyTorch, a Module registers whatever is assigned to it: a Parameter goes into
`_parameters`, a Module into `_modules` (and is told its attribute name, which the graph
renderer and anomaly mode use to build paths like `encoder.layers.0.self_attn`), a buffer
(`register_buffer`) into `_buffers`. Everything else — `parameters()`, `state_dict()`,
`train()` — walks that tree.

Every write goes through `_put`/`_forget`; reads of registered members go through `__getattr__`,
as in PyTorch.
"""
from __future__ import annotations

from collections import OrderedDict, namedtuple

import numpy as np

from .. import autograd
from ..tensor import FLOAT_DTYPES, Tensor

IncompatibleKeys = namedtuple("IncompatibleKeys", ["missing_keys", "unexpected_keys"])


class Parameter(Tensor):
    """A Tensor that a Module owns and an optimizer updates; requires grad by default."""

    __slots__ = ()

    def __init__(self, data, requires_grad: bool = True, dtype=None):
        super().__init__(data, requires_grad=requires_grad, dtype=dtype)
        if self.data.dtype not in FLOAT_DTYPES:
            raise TypeError(f"Parameter: expected float32 or float64 data, got {self.data.dtype}")
        if not self.data.flags.writeable:
            self.data = self.data.copy()  # optimizers update parameters in place

    def __repr__(self):
        return "Parameter" + super().__repr__()[len("Tensor"):]


def _as_buffer(op: str, name: str, value):
    if value is None or isinstance(value, Tensor):
        return value
    if isinstance(value, (np.ndarray, np.generic)):
        return Tensor(np.array(value))
    raise TypeError(f"{op}: buffer '{name}' must be an ndarray, a Tensor or None, got {type(value).__name__}")


class Module:
    """Base class of every layer and model; subclasses set attributes in __init__ and define forward."""

    _name = None  # str | None: the name the parent registered this module under

    def __init__(self):
        d = self.__dict__
        d["_parameters"] = {}
        d["_buffers"] = {}
        d["_non_persistent"] = set()
        d["_modules"] = {}
        d["training"] = True

    # ------------------------------------------------------------ registration

    def _registry(self, what: str) -> dict:
        try:
            return self.__dict__[what]
        except KeyError:
            raise AttributeError(f"{type(self).__name__}: cannot register {what[1:]} before "
                                 "Module.__init__() runs; call super().__init__() first") from None

    def __setattr__(self, name: str, value):
        """Registers a Parameter, a Module or a buffer under `name` (as torch.nn.Module does); other
        values are set as plain attributes."""
        d = self.__dict__
        if isinstance(value, Parameter):
            self._registry("_parameters")
            self._forget(name)
            self._put("_parameters", name, value)
        elif isinstance(value, Module):
            self._registry("_modules")
            self._forget(name)
            self._put("_modules", name, value)
            value._set_name(self._child_name(name))
        elif name in d.get("_parameters", ()):
            if value is not None:
                raise TypeError(f"{type(self).__name__}: cannot assign {type(value).__name__} to parameter "
                                f"'{name}' (a Parameter or None expected)")
            self._put("_parameters", name, None)
        elif name in d.get("_modules", ()):
            if value is not None:
                raise TypeError(f"{type(self).__name__}: cannot assign {type(value).__name__} to submodule "
                                f"'{name}' (a Module or None expected)")
            self._put("_modules", name, None)
        elif name in d.get("_buffers", ()):
            self._put("_buffers", name, _as_buffer("Module", name, value))
        else:
            object.__setattr__(self, name, value)

    def _put(self, what: str, name: str, value):
        """Store a member in its registry, keeping its place there."""
        d = self.__dict__
        d[what][name] = value
        d.pop(name, None)  # reads find it through __getattr__, not a plain attribute of that name

    def _forget(self, name: str):
        d = self.__dict__
        d.pop(name, None)
        for what in ("_parameters", "_modules", "_buffers"):
            d[what].pop(name, None)
        d["_non_persistent"].discard(name)

    def __getattr__(self, name: str):
        """Looks `name` up among the registered parameters, buffers and submodules."""
        d = self.__dict__
        for what in ("_parameters", "_buffers", "_modules"):
            registry = d.get(what)
            if registry is not None and name in registry:
                return registry[name]
        raise AttributeError(f"'{type(self).__name__}' object has no attribute '{name}'")

    def __delattr__(self, name: str):
        """Deletes an attribute, unregistering it if it is a parameter, buffer or submodule."""
        d = self.__dict__
        for what in ("_parameters", "_buffers", "_modules"):
            if name in d.get(what, ()):
                self._forget(name)
                return
        object.__delattr__(self, name)

    def register_buffer(self, name: str, value, persistent: bool = True) -> None:
        """A tensor that belongs to the module's state but is not trained (e.g. the positional
        encoding table). Persistent buffers go into state_dict()."""
        if not isinstance(name, str) or not name or "." in name:
            raise ValueError(f"register_buffer: name must be a non-empty string without '.', got {name!r}")
        buffers = self._registry("_buffers")
        if (name in self.__dict__ and name not in buffers) or name in self._parameters or name in self._modules:
            raise KeyError(f"register_buffer: attribute '{name}' already exists on {type(self).__name__}")
        self._put("_buffers", name, _as_buffer("register_buffer", name, value))
        if persistent:
            self._non_persistent.discard(name)
        else:
            self._non_persistent.add(name)

    def register_parameter(self, name: str, param: Parameter | None) -> None:
        """Adds `param` (a Parameter or None) under `name`, like
        torch.nn.Module.register_parameter."""
        if param is not None and not isinstance(param, Parameter):
            raise TypeError(f"register_parameter: '{name}' must be a Parameter or None, got {type(param).__name__}")
        self._registry("_parameters")
        self._forget(name)
        self._put("_parameters", name, param)

    def add_module(self, name: str, module: Module | None) -> None:
        """Adds the submodule `module` (or None) under `name`, like torch.nn.Module.add_module."""
        if module is not None and not isinstance(module, Module):
            raise TypeError(f"add_module: '{name}' must be a Module or None, got {type(module).__name__}")
        self._registry("_modules")
        self._forget(name)
        self._put("_modules", name, module)
        if module is not None:
            module._set_name(self._child_name(name))

    def _child_name(self, attr: str) -> str:
        """The `_name` a child registered as `attr` gets: the step it adds to module paths."""
        return attr

    def _set_name(self, name: str) -> None:
        object.__setattr__(self, "_name", name)

    # ------------------------------------------------------------ running

    def forward(self, *args, **kwargs):
        """The computation of the module; subclasses define it, and calling the module runs it."""
        raise NotImplementedError(f"{type(self).__name__} has no forward(); subclasses define it")

    def __call__(self, *args, **kwargs):
        """Runs forward(*args, **kwargs) with this module as the scope of the ops it makes (graph
        drawings and anomaly messages name it)."""
        with autograd.module_scope(self):
            return self.forward(*args, **kwargs)

    # ------------------------------------------------------------ traversal

    def named_modules(self, prefix: str = "", memo: set | None = None, remove_duplicate: bool = True):
        """(dotted path, module) for this module and every descendant, depth first. Walked with an
        explicit stack (no nested generators), so model.eval() stays cheap and depth is unlimited."""
        if memo is None:
            memo = set()
        stack = [(prefix, self)]
        while stack:
            path, module = stack.pop()
            if remove_duplicate:
                if id(module) in memo:
                    continue
                memo.add(id(module))
            yield path, module
            stack.extend(reversed([(f"{path}.{name}" if path else name, child)
                                   for name, child in module._modules.items() if child is not None]))

    def modules(self):
        """Yields this module and every descendant once, depth first, like
        torch.nn.Module.modules."""
        for _, m in self.named_modules():
            yield m

    def named_children(self):
        """Yields (name, module) for each direct submodule once, like
        torch.nn.Module.named_children."""
        seen = set()
        for name, child in self._modules.items():
            if child is not None and id(child) not in seen:
                seen.add(id(child))
                yield name, child

    def children(self):
        """Yields each direct submodule once, like torch.nn.Module.children."""
        for _, child in self.named_children():
            yield child

    def _named_members(self, what: str, prefix: str, recurse: bool, remove_duplicate: bool = True):
        seen = set()
        modules = self.named_modules(prefix, remove_duplicate=remove_duplicate) if recurse else [(prefix, self)]
        for path, module in modules:
            for name, member in module.__dict__[what].items():
                if member is None or (remove_duplicate and id(member) in seen):
                    continue
                seen.add(id(member))
                yield (f"{path}.{name}" if path else name), member

    def named_parameters(self, prefix: str = "", recurse: bool = True):
        """(dotted name, Parameter), each shared Parameter once (under its first name)."""
        return self._named_members("_parameters", prefix, recurse)

    def parameters(self, recurse: bool = True):
        """Yields every Parameter once (of descendants too unless recurse=False), the input an
        optimizer takes, like torch.nn.Module.parameters."""
        for _, p in self.named_parameters(recurse=recurse):
            yield p

    def named_buffers(self, prefix: str = "", recurse: bool = True):
        """Yields (dotted name, buffer) for every buffer once, like
        torch.nn.Module.named_buffers."""
        return self._named_members("_buffers", prefix, recurse)

    def buffers(self, recurse: bool = True):
        """Yields every buffer once, like torch.nn.Module.buffers."""
        for _, b in self.named_buffers(recurse=recurse):
            yield b

    def num_parameters(self, trainable_only: bool = False) -> int:
        """Total number of scalars in the (unique) parameters."""
        return sum(p.numel() for p in self.parameters() if p.requires_grad or not trainable_only)

    # ------------------------------------------------------------ modes and grads

    def train(self, mode: bool = True) -> Module:
        """Training mode (dropout active) for this module and all descendants."""
        if not isinstance(mode, bool):
            raise TypeError(f"train: mode must be a bool, got {type(mode).__name__}")
        for m in self.modules():
            m.__dict__["training"] = mode
        return self

    def eval(self) -> Module:
        """Evaluation mode (dropout off) for this module and all descendants: train(False)."""
        return self.train(False)

    def zero_grad(self) -> None:
        """Sets the grad of every parameter to None, like torch.nn.Module.zero_grad."""
        for p in self.parameters():
            p.grad = None

    def requires_grad_(self, requires_grad: bool = True) -> Module:
        """Sets requires_grad of every parameter (False freezes them); returns self."""
        for p in self.parameters():
            p.requires_grad = requires_grad
        return self

    def apply(self, fn) -> Module:
        """Call fn on every descendant, then on self (e.g. a custom init), as in PyTorch."""
        for child in self.children():
            child.apply(fn)
        fn(self)
        return self

    def to(self, dtype) -> Module:
        """Cast every floating parameter and buffer to `dtype` in place (e.g. np.float64 for gradcheck)."""
        dtype = np.dtype(dtype)
        if dtype not in FLOAT_DTYPES:
            raise TypeError(f"Module.to: expected float32 or float64, got {dtype}")
        for p in self.parameters():
            p.data = p.data.astype(dtype)
            p.grad = None if p.grad is None else p.grad.astype(dtype)
        for b in self.buffers():
            if b.dtype in FLOAT_DTYPES:
                b.data = b.data.astype(dtype)
        return self

    def double(self) -> Module:
        """Casts every floating parameter and buffer to float64 in place; returns self."""
        return self.to(np.float64)

    def float(self) -> Module:
        """Casts every floating parameter and buffer to float32 in place; returns self."""
        return self.to(np.float32)

    # ------------------------------------------------------------ state

    def _state_items(self):
        """(name, tensor) for every parameter and persistent buffer, shared ones under every name."""
        for path, module in self.named_modules(remove_duplicate=False):
            stem = f"{path}." if path else ""
            for name, p in module._parameters.items():
                if p is not None:
                    yield stem + name, p
            for name, b in module._buffers.items():
                if b is not None and name not in module._non_persistent:
                    yield stem + name, b

    def state_dict(self) -> OrderedDict:
        """name -> np.ndarray copy of every parameter and persistent buffer. A parameter shared by
        two modules appears under both names, as in PyTorch."""
        return OrderedDict((name, t.data.copy()) for name, t in self._state_items())

    def load_state_dict(self, state_dict, strict: bool = True) -> IncompatibleKeys:
        """Copy arrays (or Tensors) into the parameters and buffers, keeping their dtypes.

        With strict=True a missing or unexpected key is an error. All problems are reported in one
        ValueError and nothing is loaded. A shape mismatch is always an error (as in PyTorch): it
        means a different architecture, never something to skip silently. With strict=False the
        matching keys are loaded and (missing_keys, unexpected_keys) is returned."""
        if not hasattr(state_dict, "keys"):
            raise TypeError(f"load_state_dict: expected a dict name -> array, got {type(state_dict).__name__}")
        own = OrderedDict(self._state_items())
        missing = [k for k in own if k not in state_dict]
        unexpected = [k for k in state_dict if k not in own]
        arrays, mismatched = {}, []
        for name, target in own.items():
            if name not in state_dict:
                continue
            value = state_dict[name]
            arr = value.data if isinstance(value, Tensor) else np.asarray(value)
            if arr.shape != target.shape:
                mismatched.append(f"{name}: expected shape {target.shape}, got {arr.shape}")
            else:
                arrays[name] = arr
        problems = []
        if mismatched:
            problems.append("shape mismatches:\n    " + "\n    ".join(mismatched))
        if strict and missing:
            problems.append(f"missing keys ({len(missing)}): {', '.join(missing)}")
        if strict and unexpected:
            problems.append(f"unexpected keys ({len(unexpected)}): {', '.join(unexpected)}")
        if problems:
            raise ValueError(f"load_state_dict: cannot load into {type(self).__name__}:\n  " + "\n  ".join(problems))
        for name, arr in arrays.items():
            target = own[name]
            target.data = np.array(arr, dtype=target.dtype, copy=True)
        return IncompatibleKeys(missing, unexpected)

    # ------------------------------------------------------------ printing

    def extra_repr(self) -> str:
        """The text inside the parentheses of repr() (e.g. layer sizes); subclasses override it."""
        return ""

    def __repr__(self):
        """The layer and its submodules, one per line, as torch prints an nn.Module."""
        lines = [f"({name}): " + _indent(repr(child)) for name, child in self._modules.items()]
        extra = self.extra_repr()
        if not lines:
            return f"{type(self).__name__}({extra})"
        body = ([_indent(extra)] if extra else []) + lines
        return f"{type(self).__name__}(\n  " + "\n  ".join(body) + "\n)"


def _indent(text: str) -> str:
    return text.replace("\n", "\n  ")
