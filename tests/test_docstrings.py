"""help() shows a documented API: every public method, property and slot of Tensor, Module, the
containers, the optimizers and the LR schedulers carries its own docstring; no private name, private
parameter or source-section comment leaks into what pydoc renders."""
import doctest
import inspect
import pydoc
import re

import numpy as np
import pytest

from tinygrad_lite import optim
from tinygrad_lite.nn import container
from tinygrad_lite.nn.module import Module
from tinygrad_lite.tensor import Tensor

CONTAINERS = [c for name, c in vars(container).items() if isinstance(c, type) and issubclass(c, Module)
              and c.__module__ == container.__name__ and not name.startswith("_")]
OPTIM = [c for c in map(optim.__dict__.get, optim.__all__)
         if isinstance(c, type) and issubclass(c, (optim.Optimizer, optim.LRScheduler))]
CLASSES = [Tensor, Module, *CONTAINERS, *OPTIM]

# The one private name help() may print: ModuleList's and Sequential's shared base, in the
# "Method resolution order" and "Methods inherited from" headings (it holds append/insert/...).
ALLOWED_PRIVATE = {"_IndexedModules"}


def _documentable(attr) -> bool:
    return isinstance(attr, (staticmethod, classmethod, property, type(Tensor.data))) or inspect.isfunction(attr)


def _members():
    """(defining class, name, raw attribute) for every public member and every dunder method
    except __init__ (the class docstring covers it) of the classes above and of their project
    base classes, each once."""
    seen = set()
    for cls in CLASSES:
        for klass in cls.__mro__:
            if not klass.__module__.startswith("tinygrad_lite"):
                continue
            for name, attr in vars(klass).items():
                dunder = name.startswith("__") and name.endswith("__")
                if (klass, name) in seen or not _documentable(attr) or name == "__init__":
                    continue
                if dunder or not name.startswith("_"):
                    seen.add((klass, name))
                    yield klass, name, attr


MEMBERS = list(_members())


def _own_doc(attr):
    """The docstring the attribute itself carries; not one it shows only because its type has one
    (a property over operator.attrgetter would otherwise show attrgetter's documentation)."""
    if isinstance(attr, (staticmethod, classmethod)):
        attr = attr.__func__
    if inspect.ismemberdescriptor(attr):  # a slot: its docstring is the value in a __slots__ dict
        return inspect.getdoc(attr)
    doc = attr.__doc__
    fget = getattr(attr, "fget", None)
    if doc == type(attr).__doc__ or (fget is not None and doc == type(fget).__doc__):
        return None
    return doc


def _function(attr):
    if isinstance(attr, (staticmethod, classmethod)):
        return attr.__func__
    if isinstance(attr, property):
        return attr.fget if inspect.isfunction(attr.fget) else None
    return attr if inspect.isfunction(attr) else None


def test_the_classes_and_members_are_found():
    names = {c.__name__ for c in CLASSES}
    assert {"ModuleList", "Sequential", "MLP"} <= names
    assert {"Optimizer", "SGD", "Adam", "AdamW", "LRScheduler", "StepLR", "CosineAnnealingLR",
            "LambdaLR", "NoamLR"} <= names
    found = {(k.__name__, n) for k, n, _ in MEMBERS}
    for member in [("UnaryOps", "exp"), ("ReduceOps", "sum"), ("MovementOps", "reshape"), ("Tensor", "shape"),
                   ("Tensor", "grad"), ("BinaryOps", "__radd__"), ("NNOps", "softmax"), ("Module", "parameters"),
                   ("_IndexedModules", "append"), ("Adam", "step"), ("NoamLR", "get_lr")]:
        assert member in found


@pytest.mark.parametrize("cls", CLASSES, ids=lambda c: c.__name__)
def test_class_has_a_docstring(cls):
    assert (cls.__doc__ or "").strip(), f"{cls.__name__} has no class docstring"


@pytest.mark.parametrize("klass,name,attr", MEMBERS, ids=[f"{k.__name__}.{n}" for k, n, _ in MEMBERS])
def test_member_has_its_own_docstring(klass, name, attr):
    doc = _own_doc(attr)
    assert doc and doc.strip(), f"{klass.__name__}.{name} has no docstring of its own"
    fn = _function(attr)
    if fn is not None:
        assert fn.__name__ != "<lambda>", f"{klass.__name__}.{name} is a lambda; help() shows it unnamed"
        assert not [p for p in inspect.signature(fn).parameters if p.startswith("_")], \
            f"{klass.__name__}.{name}{inspect.signature(fn)} shows a private parameter"
        assert inspect.getcomments(fn) is None, \
            f"{klass.__name__}.{name}: help() shows the comment above it: {inspect.getcomments(fn)!r}"


@pytest.mark.parametrize("cls", CLASSES, ids=lambda c: c.__name__)
def test_no_private_name_in_help(cls):
    text = pydoc.render_doc(cls, renderer=pydoc.plaintext)
    private = {t for t in re.findall(r"(?<![\w.])_\w+", text) if not re.fullmatch(r"__\w+__", t)}
    assert not private - ALLOWED_PRIVATE, f"help({cls.__name__}) shows private names {sorted(private)}"
    assert inspect.getcomments(cls) is None


def test_tensor_class_docstring_example_runs():
    test, = doctest.DocTestFinder(recurse=False).find(Tensor, "Tensor", globs={"Tensor": Tensor, "np": np})
    result = doctest.DocTestRunner(optionflags=doctest.NORMALIZE_WHITESPACE).run(test)
    assert result.attempted >= 3 and result.failed == 0
    assert "float32" in Tensor.__doc__ and "float64" in Tensor.__doc__
