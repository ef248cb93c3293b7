"""Containers: Sequential (run children in order), ModuleList (a list that registers its
children, e.g. the paper's stack of N = 6 encoder layers) and MLP.

Children are named "0", "1", ... (their keys in named_parameters and state_dict).
"""
from __future__ import annotations

import itertools
from collections import OrderedDict

import numpy as np

from ..checks import activation, probability
from .activation import ACTIVATION_MODULES
from .dropout import Dropout
from .linear import Linear
from .module import Module


def _check_module(op: str, m):
    if not isinstance(m, Module):
        raise TypeError(f"{op}: expected a Module, got {type(m).__name__}")
    return m


class _IndexedModules(Module):
    """Children named "0", "1", ...; indexing, len and iteration like a list."""

    def _items(self) -> list:
        return list(self._modules.values())

    def _index(self, op: str, i: int) -> int:
        n = len(self._modules)
        if isinstance(i, bool) or not isinstance(i, (int, np.integer)):
            raise TypeError(f"{op}: index must be an int or a slice, got {type(i).__name__}")
        if not -n <= i < n:
            raise IndexError(f"{op}: index {i} is out of range for {n} modules")
        return int(i) % n

    def _renumber(self, modules):
        for key in list(self._modules):
            self._forget(key)
        for i, m in enumerate(modules):
            self.add_module(str(i), m)

    def __getitem__(self, i):
        """The i-th module, or a new container of the modules in a slice."""
        if isinstance(i, slice):
            return type(self)._from_modules(self._items()[i])
        return self._items()[self._index(type(self).__name__, i)]

    def __setitem__(self, i, module):
        """Replaces the i-th module."""
        key = list(self._modules)[self._index(type(self).__name__, i)]
        self._put("_modules", key, _check_module(type(self).__name__, module))
        module._set_name(self._child_name(key))

    def __delitem__(self, i):
        """Removes the i-th module (or a slice); the rest are renumbered 0, 1, ..."""
        items = self._items()
        if isinstance(i, slice):
            del items[i]
        else:
            del items[self._index(type(self).__name__, i)]
        self._renumber(items)

    def __len__(self):
        """The number of modules."""
        return len(self._modules)

    def __iter__(self):
        """Iterates over the modules in order."""
        return iter(self._items())

    def append(self, module: Module):
        """Adds `module` at the end; returns self, like torch.nn.ModuleList.append."""
        self.add_module(str(len(self._modules)), _check_module(type(self).__name__, module))
        return self

    def extend(self, modules):
        """Appends each module of `modules`; returns self."""
        for m in modules:
            self.append(m)
        return self

    def insert(self, index: int, module: Module):
        """Inserts `module` before position `index`, renumbering the modules after it."""
        items = self._items()
        items.insert(index, _check_module(type(self).__name__, module))
        self._renumber(items)


class ModuleList(_IndexedModules):
    """A list of Modules whose parameters the parent sees (a plain list would hide them)."""

    def __init__(self, modules=None):
        super().__init__()
        if modules is not None:
            self.extend(modules)

    @classmethod
    def _from_modules(cls, modules):
        return ModuleList(modules)

    def _child_name(self, attr: str) -> str:
        """A ModuleList is never called, so it never shows up in the chain of running modules;
        its children carry its name instead ("layers.0"), which keeps paths like
        `encoder.layers.0.self_attn` complete."""
        return f"{self._name}.{attr}" if self._name else attr

    def _set_name(self, name: str) -> None:
        super()._set_name(name)
        for attr, child in self._modules.items():
            if child is not None:
                child._set_name(self._child_name(attr))

    def forward(self, *args, **kwargs):
        """Raises: a ModuleList is not called; iterate over it in the parent's forward."""
        raise NotImplementedError("ModuleList has no forward(); iterate over it in the parent's forward")


class Sequential(_IndexedModules):
    """Sequential(m1, m2, ...) or Sequential(OrderedDict(name=module)): forward feeds each
    module's output to the next."""

    def __init__(self, *modules):
        super().__init__()
        if len(modules) == 1 and isinstance(modules[0], OrderedDict):
            for name, m in modules[0].items():
                self.add_module(name, _check_module("Sequential", m))
        else:
            for m in modules:
                self.append(m)

    @classmethod
    def _from_modules(cls, modules):
        return Sequential(*modules)

    def forward(self, x):
        """Feeds `x` through each module in order and returns the last output."""
        for m in self._modules.values():
            x = m(x)
        return x


class MLP(Sequential):
    """Linear → activation (→ Dropout) → ... → Linear, e.g. MLP([64, 128, 10]).
    `sizes` lists the width of every layer, input first; the output layer has no activation.
    `act` is one of `checks.ACTIVATIONS` ("linear": none between the layers either)."""

    def __init__(self, sizes, act: str = "relu", dropout: float = 0.0, bias: bool = True, dtype=np.float32):
        sizes = list(sizes)
        if len(sizes) < 2:
            raise ValueError(f"MLP: sizes needs at least an input and an output width, got {sizes}")
        activation("MLP", act)
        dropout = probability("MLP", "dropout", dropout)
        layers = []
        for i, (n_in, n_out) in enumerate(itertools.pairwise(sizes)):
            layers.append(Linear(n_in, n_out, bias=bias, dtype=dtype))
            if i < len(sizes) - 2:
                if act != "linear":
                    layers.append(ACTIVATION_MODULES[act]())
                if dropout > 0:
                    layers.append(Dropout(dropout))
        super().__init__(*layers)
        self.sizes = sizes

    @classmethod
    def _from_modules(cls, modules):
        return Sequential(*modules)
