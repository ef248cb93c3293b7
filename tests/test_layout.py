"""The house's rules, read from the source: the floors never look up, no library file is over 500
lines nor function over 50, no module imports or reads another package's private names, and the textbook
path (docs/reading.md) holds no machinery: no Numba, ctypes or LLVM, no caches; fast paths sit
behind `if TRICKS.<name>:` and live in tinygrad_lite/fast.py, tinygrad_lite/kernels/ and
transformer/fast/."""
from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
LIBRARY = ("tinygrad_lite", "transformer", "viz", "tinylearn")
READING = ROOT / "docs" / "reading.md"


def sources(*folders) -> list[Path]:
    return sorted(p for folder in folders for p in (ROOT / folder).rglob("*.py"))


def imported_modules(path: Path) -> list[tuple[str, list[str]]]:
    """(absolute module, imported names) for each import statement of a file."""
    found = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            found += [(alias.name, []) for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            found.append((absolute_module(node, path), [alias.name for alias in node.names]))
    return found


def test_the_library_files_are_found():
    assert len(sources(*LIBRARY)) > 60


@pytest.mark.parametrize("floor, above", [("tinygrad_lite", ("viz", "transformer", "tinylearn")),
                                          ("viz", ("transformer", "tinylearn")), ("transformer", ("viz", "tinylearn"))])
def test_a_floor_never_imports_the_floors_above_or_beside_it(floor, above):
    """The CLIs (`__main__.py`) sit on top and may use anything; so does tinylearn, whose exercises span the
    engine and the model: nothing below imports it."""
    offenders = [f"{p.relative_to(ROOT)}: {module}" for p in sources(floor) if p.name != "__main__.py"
                 for module, _ in imported_modules(p) if module.split(".")[0] in above]
    assert not offenders


def test_no_cli_imports_another_cli():
    """A `__main__.py` may use anything but another `__main__.py`: what two CLIs share lives in the
    toolkit (tinygrad_lite/cli.py) or in the library module it belongs to."""
    offenders = [f"{p.relative_to(ROOT)}: {module} {names}" for p in sources(*LIBRARY) if p.name == "__main__.py"
                 for module, names in imported_modules(p)
                 if module.split(".")[-1] == "__main__" or "__main__" in names]
    assert not offenders


def module_file(module: str) -> Path | None:
    base = ROOT / module.replace(".", "/")
    return next((f for f in (base.with_suffix(".py"), base / "__init__.py") if f.exists()), None)


def import_graph(folders) -> dict[Path, set[Path]]:
    """Each library file -> the library files it imports, at the top or inside a function
    (`from pkg import sub` points at pkg/sub.py; `from pkg import name` at pkg/__init__.py)."""
    graph = {}
    for p in sources(*folders):
        targets = set()
        for module, names in imported_modules(p):
            submodules = [f for f in (module_file(f"{module}.{n}") for n in names) if f]
            targets |= set(submodules)
            if len(submodules) < len(names) or not names:
                targets |= {f for f in [module_file(module)] if f}
        graph[p] = targets - {p}
    return graph


def import_circles(graph: dict) -> list[list[str]]:
    """The strongly connected groups of more than one file (Tarjan's algorithm, iterative)."""
    index, low, stack, on_stack, circles = {}, {}, [], set(), []
    for start in graph:
        if start in index:
            continue
        work = [(start, iter(graph[start]))]
        index[start] = low[start] = len(index)
        stack.append(start)
        on_stack.add(start)
        while work:
            node, targets = work[-1]
            target = next(targets, None)
            if target is not None:
                if target not in index:
                    index[target] = low[target] = len(index)
                    stack.append(target)
                    on_stack.add(target)
                    work.append((target, iter(graph.get(target, ()))))
                elif target in on_stack:
                    low[node] = min(low[node], index[target])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                group = []
                while not group or group[-1] != node:
                    group.append(stack.pop())
                    on_stack.discard(group[-1])
                if len(group) > 1:
                    circles.append(sorted(str(f.relative_to(ROOT)) for f in group))
    return circles


# The one inherent circle: Tensor inherits its op mixins, and the mixins that build a Tensor or read one's values
# reach the class as tensor.Tensor (ops/__init__.py).
MIXIN_CIRCLE = ["tinygrad_lite/ops/binary.py", "tinygrad_lite/ops/movement.py", "tinygrad_lite/ops/nn.py",
                "tinygrad_lite/tensor.py"]

@pytest.mark.parametrize("package", ["tinygrad_lite", "viz", "transformer", "tinylearn"])
def test_no_import_circle_in_a_package(package):
    """What two modules both need lives in the module it belongs to, so imports run one way, down the floors
    (viz/graph.py uses viz/render.py, never the reverse; the kernels never import the ops, nor fast.py what
    reads its switches). The one exception: Tensor and its op mixins (MIXIN_CIRCLE)."""
    circles = [c for c in import_circles(import_graph(LIBRARY)) if any(f.startswith(package + "/") for f in c)]
    assert [c for c in circles if c != MIXIN_CIRCLE] == []


MAX_FILE_LINES, MAX_FUNCTION_LINES = 500, 50


def function_sizes(tree: ast.AST, prefix: str = ""):
    """(qualified name, lines from its `def` to its end) of each function; a nested function counts
    both on its own and within its parent's lines."""
    for node in ast.iter_child_nodes(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            if not isinstance(node, ast.ClassDef):
                yield prefix + node.name, node.end_lineno - node.lineno + 1
            yield from function_sizes(node, f"{prefix}{node.name}.")
        else:
            yield from function_sizes(node, prefix)


def over_the_limits() -> dict[str, int]:
    """'file' -> lines and 'file function' -> lines (function as Class.method or outer.inner) of each
    library file and function over its limit."""
    found = {}
    for p in sources(*LIBRARY):
        text, name = p.read_text(encoding="utf-8"), str(p.relative_to(ROOT))
        if text.count("\n") > MAX_FILE_LINES:
            found[name] = text.count("\n")
        found |= {f"{name} {function}": n for function, n in function_sizes(ast.parse(text)) if n > MAX_FUNCTION_LINES}
    return found


def test_no_library_file_is_over_500_lines_nor_function_over_50():
    """Split along concepts, one to a file: the limits keep each piece readable in one sitting."""
    found = over_the_limits()
    assert not found, f"over {MAX_FILE_LINES} lines a file or {MAX_FUNCTION_LINES} a function: {found}"


def test_no_module_imports_another_packages_private_names():
    offenders = []
    for p in sources(*LIBRARY):
        own = ".".join(p.relative_to(ROOT).parts[:-1])
        for module, names in imported_modules(p):
            theirs = module.rsplit(".", 1)[0] if (ROOT / (module.replace(".", "/") + ".py")).exists() else module
            private = [n for n in names if n.startswith("_") and not n.startswith("__")]
            if private and theirs != own:
                offenders.append(f"{p.relative_to(ROOT)}: from {module} import {private}")
    assert not offenders


def test_no_module_reaches_into_another_packages_private_names():
    """`module._name` for a module imported from another package (from x.y import module)."""
    offenders = []
    for p in sources(*LIBRARY):
        own = ".".join(p.relative_to(ROOT).parts[:-1])
        tree = ast.parse(p.read_text(encoding="utf-8"))
        foreign = set()
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom):
                module = absolute_module(node, p)
                for alias in node.names:
                    target = f"{module}.{alias.name}"
                    is_module = (ROOT / target.replace(".", "/")).with_suffix(".py").exists() or \
                        (ROOT / target.replace(".", "/") / "__init__.py").exists()
                    if is_module and target.rsplit(".", 1)[0] != own:
                        foreign.add(alias.asname or alias.name)
        offenders += [f"{p.relative_to(ROOT)}:{node.lineno}: {node.value.id}.{node.attr}" for node in ast.walk(tree)
                      if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name)
                      and node.value.id in foreign and node.attr.startswith("_") and not node.attr.startswith("__")]
    assert not offenders


# Reads of another package's private attributes still allowed, each with its reason: (file, name).
FOREIGN_PRIVATE_READS_ALLOWED = {
    # the name a parent registered a Module under, to label a module found through a tensor's scope
    # rather than through named_modules(); Module has no public name (nor has torch's)
    ("viz/module_tree.py", "_name"),
}


def private_attributes_defined(tree: ast.AST) -> set[str]:
    """The `_names` a file gives objects: assigned as attributes, defined or slotted in a class, or
    defined at the top of the module (a module's `_helper`, read as `module._helper`)."""
    names = {node.attr for node in ast.walk(tree)
             if isinstance(node, ast.Attribute) and isinstance(node.ctx, ast.Store)}
    names |= {node.name for node in getattr(tree, "body", [])
              if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef))}
    for cls in (node for node in ast.walk(tree) if isinstance(node, ast.ClassDef)):
        for statement in cls.body:
            if isinstance(statement, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                names.add(statement.name)
            targets = statement.targets if isinstance(statement, ast.Assign) else \
                [statement.target] if isinstance(statement, ast.AnnAssign) else []
            for target in (t for t in targets if isinstance(t, ast.Name)):
                names.add(target.id)
                slots = statement.value if target.id == "__slots__" else None
                keys = slots.keys if isinstance(slots, ast.Dict) else getattr(slots, "elts", [])
                names |= {k.value for k in keys if isinstance(k, ast.Constant) and isinstance(k.value, str)}
    return {n for n in names if n.startswith("_") and not n.startswith("__")}


def attribute_reads(tree: ast.AST):
    """(line, name) of each attribute read: `x.name`, getattr/hasattr(x, "name") and x.__dict__["name"]."""
    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute) and isinstance(node.ctx, ast.Load):
            yield node.lineno, node.attr
        elif (isinstance(node, ast.Subscript) and isinstance(node.value, ast.Attribute)
              and node.value.attr == "__dict__" and isinstance(node.slice, ast.Constant)
              and isinstance(node.slice.value, str)):
            yield node.lineno, node.slice.value
        elif (isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id in ("getattr", "hasattr")
              and len(node.args) >= 2 and isinstance(node.args[1], ast.Constant)
              and isinstance(node.args[1].value, str)):
            yield node.lineno, node.args[1].value


def test_no_package_reads_another_packages_private_attributes():
    """`x._prev` in viz reads the engine's insides: a package (tinygrad_lite, transformer, viz) reads
    only its own `_names`, and another's public API (Tensor.inputs, .op, .vjp). A `_name` that the
    reading package also defines counts as its own."""
    trees = {p: ast.parse(p.read_text(encoding="utf-8")) for p in sources(*LIBRARY)}
    defined = {package: set() for package in LIBRARY}
    for p, tree in trees.items():
        defined[p.relative_to(ROOT).parts[0]] |= private_attributes_defined(tree)
    offenders = []
    for p, tree in trees.items():
        package = p.relative_to(ROOT).parts[0]
        theirs = set().union(*(defined[other] for other in LIBRARY if other != package)) - defined[package]
        offenders += [f"{p.relative_to(ROOT)}:{line}: .{name}" for line, name in attribute_reads(tree)
                      if name in theirs and (str(p.relative_to(ROOT)), name) not in FOREIGN_PRIVATE_READS_ALLOWED]
    assert not offenders


def absolute_module(node: ast.ImportFrom, path: Path) -> str:
    package = ".".join(path.relative_to(ROOT).with_suffix("").parts[:-1])
    base = package.split(".")[:len(package.split(".")) - node.level + 1] if node.level else []
    return ".".join(base + ([node.module] if node.module else []))


def reading_path() -> list[tuple[str, int]]:
    """(file, line count) of each row of docs/reading.md's textbook table."""
    rows = re.findall(r"^\| *\d+ *\| *`([^`]+\.py)` *\| *(\d[\d,]*) *\|", READING.read_text(encoding="utf-8"), re.M)
    return [(path, int(count.replace(",", ""))) for path, count in rows]


def test_the_reading_path_names_real_files_with_their_sizes():
    """The reading path's line counts are exact: a reader plans a sitting by them, and a file that grows
    shows in the diff that grew it."""
    rows = reading_path()
    assert len(rows) >= 25
    stale = [(path, count, (ROOT / path).read_text(encoding="utf-8").count("\n") if (ROOT / path).exists() else None)
             for path, count in rows
             if not (ROOT / path).exists() or (ROOT / path).read_text(encoding="utf-8").count("\n") != count]
    assert not stale, f"update docs/reading.md: (file, says, has) {stale}"


MACHINERY = re.compile(r"\bnumba\b|\bnjit\b|\bctypes\b|\bllvm|lru_cache|\bmallopt\b|threadpoolctl")


def test_the_textbook_path_holds_no_machinery():
    """Kernels, caches, ctypes and LLVM live in the machinery's home; a textbook file may only call
    it (kernels.*, `if TRICKS.<name>:`)."""
    offenders = []
    for path, _ in reading_path():
        for number, line in enumerate((ROOT / path).read_text(encoding="utf-8").splitlines(), 1):
            code = line.split("#")[0]
            if MACHINERY.search(code) and not code.lstrip().startswith(('"', "'")):
                offenders.append(f"{path}:{number}: {line.strip()}")
    assert not offenders



def reading_path_identifiers(path: str) -> set:
    """The names a reading-path file uses: variables, arguments, keyword arguments and imports."""
    names = set()
    for node in ast.walk(ast.parse((ROOT / path).read_text(encoding="utf-8"))):
        if isinstance(node, ast.Name):
            names.add(node.id)
        elif isinstance(node, (ast.arg, ast.keyword)) and node.arg:
            names.add(node.arg)
        elif isinstance(node, ast.alias):
            names.add(node.asname or node.name.split(".")[-1])
    return names


def test_the_textbook_carries_no_real_rows_and_no_trick_branch():
    """The padding skip's rows (`real`) live in the compiler's rule skip_padding, not in the paper's boxes;
    no reading-path file branches on a speed trick: the compiler's rules fuse the plain boxes (issue 45)."""
    used = {path: reading_path_identifiers(path) for path, _ in reading_path()}
    assert [path for path, names in used.items() if "real" in names] == []
    assert [path for path, names in used.items() if "TRICKS" in names] == []


def test_no_file_on_the_reading_path_imports_kernels_or_fast_paths():
    """A faster twin of one op is reached through dispatch (`@has_twin`), never imported (issue 45)."""
    importing = {path for path, _ in reading_path() for module, names in imported_modules(ROOT / path)
                 if module.startswith(MACHINERY_MODULES) or {"kernels", "fast", "TRICKS"} & set(names)}
    assert importing == set(), "machinery imported on the reading path"


def test_no_file_on_the_reading_path_imports_the_step_compiler():
    """The step compiler reads the plain program; the program never calls it (issue 45): a learner's
    loop receives a step function, and compile() wraps it where a run is built."""
    offenders = [f"{path}: {module} {names}" for path, _ in reading_path()
                 for module, names in imported_modules(ROOT / path)
                 if "compiler" in module.split(".") or "compiler" in names]
    assert not offenders


OP_FILES = sorted((ROOT / "tinygrad_lite" / "ops").glob("*.py")) + [
    ROOT / "tinygrad_lite" / "optim" / name for name in ("sgd.py", "adam.py", "muon.py")]


@pytest.mark.parametrize("path", OP_FILES, ids=lambda p: str(p.relative_to(ROOT)))
def test_an_op_file_imports_nothing_from_kernels(path):
    """Each op file holds its formula; a faster twin is registered in kernels.TWINS and reached
    through the op's `@has_twin` line (tinygrad_lite.dispatch), never imported by the op."""
    offenders = [f"{module} {names}" for module, names in imported_modules(path)
                 if module.startswith("tinygrad_lite.kernels") or (module == "tinygrad_lite" and "kernels" in names)]
    assert not offenders


MACHINERY_MODULES = ("tinygrad_lite.kernels", "tinygrad_lite.fast", "transformer.fast")


def test_decoding_imports_nothing_from_the_kernels_nor_the_fast_paths():
    """transformer/decoding.py is greedy, beam search and sampling with a key/value cache; the
    translator picks the fused decoder (transformer/fast/decoder_steps.py) and passes it as `steps`."""
    offenders = [f"{module} {names}" for module, names in imported_modules(ROOT / "transformer" / "decoding.py")
                 if module.startswith(MACHINERY_MODULES) or {"kernels", "fast", "TRICKS"} & set(names)]
    assert not offenders


def test_softmax_forward_subtracts_the_row_max_and_exponentiates_in_ops_nn():
    """The formula a learner opens ops/nn.py to find: exp(x − max), in that file, not in a kernel."""
    tree = ast.parse((ROOT / "tinygrad_lite" / "ops" / "nn.py").read_text(encoding="utf-8"))
    forwards = [f for f in tree.body if isinstance(f, ast.FunctionDef) and "softmax" in f.name
                and "log" not in f.name and "backward" not in f.name]

    def exp_of_minus_max(node) -> bool:
        return (isinstance(node, ast.Call) and ast.unparse(node.func) in ("np.exp", "numpy.exp") and len(node.args) == 1
                and isinstance(node.args[0], ast.BinOp) and isinstance(node.args[0].op, ast.Sub)
                and "max" in ast.unparse(node.args[0].right))
    assert [f.name for f in forwards if any(exp_of_minus_max(node) for node in ast.walk(f))]
