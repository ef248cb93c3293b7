"""Which modules ran in a recorded graph, and which of them `draw_graph(collapse=d)` draws as boxes.

A tensor's `scope` holds the Modules whose forward created it; their dotted paths (from the
model's `named_modules`) name the clusters, their depths decide what `collapse` folds, and the
model's `named_parameters` name the parameters.
"""
from __future__ import annotations

from collections import defaultdict


class ModuleTree:
    """Dotted paths of the modules that ran, their parents, depths, and which are boxes."""

    def __init__(self, model, tensors, collapse, expand):
        self.path_of: dict[int, str] = {}
        self.module: dict[str, object] = {}
        self.parent: dict[str, str | None] = {}
        self.children: dict[str, list] = defaultdict(list)
        self.param_name: dict[int, str] = {}
        if model is not None and not (hasattr(model, "named_modules") and hasattr(model, "named_parameters")):
            raise TypeError(f"draw_graph: model must be a tinygrad_lite.nn.Module, got {type(model).__name__}")
        roots = [model] if model is not None else self._outermost(tensors)
        for i, root in enumerate(roots):
            prefix = "" if len(roots) == 1 else (getattr(root, "_name", None) or f"{type(root).__name__}{i}")
            self._add_tree(root, prefix)
        self.collapse = collapse
        unknown = [p for p in expand if p not in self.module]
        if unknown:
            known = ", ".join(p or "<model>" for p in list(self.module)[:12])
            hint = f"module paths start: {known}" if known else "no Module built this graph"
            raise ValueError(f"draw_graph: expand names {unknown[0]!r}, which is not a module path of the "
                             f"model; {hint}")
        self.forced_open = set()
        for path in expand:
            while path is not None:
                self.forced_open.add(path)
                path = self.parent[path]
        self._box_cache: dict = {}

    @staticmethod
    def _outermost(tensors) -> list:
        found = {}
        for t in tensors:
            scope = getattr(t, "scope", ()) or ()
            if scope and hasattr(scope[0], "named_modules"):
                found.setdefault(id(scope[0]), scope[0])
        return list(found.values())

    def _add_tree(self, root, prefix: str):
        for path, module in root.named_modules(prefix=prefix):
            if id(module) in self.path_of:
                continue
            self._register(path, module, path.rpartition(".")[0] if path != prefix else None)
        for name, p in root.named_parameters(prefix=prefix):
            self.param_name.setdefault(id(p), name)

    def _register(self, path: str, module, parent: str | None):
        self.path_of[id(module)] = path
        self.module[path] = module
        self.parent[path] = parent
        if parent is not None:
            self.children[parent].append(path)

    def home(self, tensor) -> str | None:
        """The module path whose cluster holds this tensor, or None (outside every module)."""
        name = self.param_name.get(id(tensor))
        if name is not None:
            owner = name.rpartition(".")[0]
            return owner if owner in self.module else self._top_path()
        current = None
        for module in getattr(tensor, "scope", ()) or ():
            path = self.path_of.get(id(module))
            if path is None:  # a module the model does not register: nest it where it ran
                label = getattr(module, "_name", None) or type(module).__name__
                path = f"{current}.{label}" if current else label
                while path in self.module:
                    path += "'"
                self._register(path, module, current)
            current = path
        return current

    def _top_path(self):
        return "" if "" in self.module else None

    def is_container(self, path: str) -> bool:
        try:
            from tinygrad_lite.nn import ModuleList
        except ImportError:
            return False
        return isinstance(self.module[path], ModuleList)

    def depth(self, path: str) -> int:
        parent = self.parent[path]
        if parent is None:
            return 0
        return self.depth(parent) + (0 if self.is_container(path) else 1)

    def is_open(self, path: str) -> bool:
        if self.collapse is None or path in self.forced_open or self.is_container(path):
            return True
        if self.parent[path] is None:
            return self.collapse >= 1
        return self.depth(path) < self.collapse and any(self.children[c] for c in self.children[path])

    def box_of(self, path: str | None) -> str | None:
        """The outermost module on the way down to `path` that is drawn as one box, if any."""
        if path is None or self.collapse is None:
            return None
        if path not in self._box_cache:
            chain = []
            node = path
            while node is not None:
                chain.append(node)
                node = self.parent[node]
            self._box_cache[path] = next((p for p in reversed(chain) if not self.is_open(p)), None)
        return self._box_cache[path]

    def label(self, path: str) -> str:
        cls = type(self.module[path]).__name__
        return f"{path} ({cls})" if path else cls

    def parameters(self, path: str) -> list:
        module = self.module[path]
        return list(module.parameters()) if hasattr(module, "parameters") else []
