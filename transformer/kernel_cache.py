"""Whether Numba must compile kernels before a command can start (a cold cache), so the CLI can
say so instead of leaving a silent wait.

Numba (``cache=True``) keeps each compiled kernel as ``<module>.<function>-<line>.py<XY>.nbi``
(the index) plus ``.nbc`` files: under ``$NUMBA_CACHE_DIR`` when that is set, else in the
``__pycache__`` next to the source, else in the user's cache directory. A kernel module with no
index for this Python newer than its source compiles on first use. Only file names and times are
read: numba itself is not imported.
"""
from __future__ import annotations

import contextlib
import hashlib
import importlib.util
import os
import sys

# the kernel modules a command compiles, and the seconds that takes on a 2-core machine (measured
# with an empty $NUMBA_CACHE_DIR; the first evaluation of `train` compiles the decoder's kernels)
COMPILES = {
    "train": (("tinygrad_lite.kernels.softmax", "tinygrad_lite.kernels.exp_and_max", "tinygrad_lite.kernels.layernorm",
                "tinygrad_lite.kernels.fused", "tinygrad_lite.kernels.cross_entropy", "tinygrad_lite.kernels.embedding",
                "tinygrad_lite.kernels.adam", "tinygrad_lite.kernels.dropout", "transformer.fast.decoder_kernel"), 70),
    "translate": (("tinygrad_lite.kernels.softmax", "tinygrad_lite.kernels.exp_and_max",
                   "transformer.fast.decoder_kernel"), 35),
    "sample": (("transformer.fast.decoder_kernel",), 20),
    "gpt train": (("tinygrad_lite.kernels.softmax", "tinygrad_lite.kernels.exp_and_max",
                   "tinygrad_lite.kernels.layernorm", "tinygrad_lite.kernels.attention_tiles",
                   "tinygrad_lite.kernels.cross_entropy", "tinygrad_lite.kernels.embedding",
                   "tinygrad_lite.kernels.adam", "tinygrad_lite.kernels.gelu"), 35),
    "gpt sample": (("tinygrad_lite.kernels.softmax", "tinygrad_lite.kernels.exp_and_max",
                    "transformer.fast.gpt_kernel"), 20),
}


def cache_dirs(source: str) -> list[str]:
    """Where Numba may keep the compiled kernels of the file `source`, in its own order."""
    folder = os.path.dirname(os.path.abspath(source))
    subpath = f"{os.path.basename(folder)}_{hashlib.sha1(folder.encode()).hexdigest()}"
    if os.environ.get("NUMBA_CACHE_DIR"):
        return [os.path.join(os.environ["NUMBA_CACHE_DIR"], subpath)]
    user = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return [os.path.join(folder, "__pycache__"), os.path.join(user, "numba", subpath)]


def is_cached(module: str) -> bool:
    """True when some kernel of `module` has an index for this Python, newer than the source."""
    spec = importlib.util.find_spec(module)
    if spec is None or not spec.origin:
        return True
    stem, since = module.rsplit(".", 1)[-1] + ".", os.path.getmtime(spec.origin)
    suffix = f".py{sys.version_info.major}{sys.version_info.minor}.nbi"
    for folder in cache_dirs(spec.origin):
        try:
            names = os.listdir(folder)
        except OSError:
            continue
        if any(n.startswith(stem) and n.endswith(suffix) and os.path.getmtime(os.path.join(folder, n)) >= since
               for n in names):
            return True
    return False


def uses_numba() -> bool:
    """The kernels will run on Numba: asked for (the default) and installed."""
    from tinygrad_lite.kernels.backend import requested_backend
    return requested_backend() == "numba" and importlib.util.find_spec("numba") is not None


def ready_stamp(command: str) -> str:
    """The empty file `command` leaves once it has run to its end with these kernels' sources: a
    module's index alone does not tell, as another command may have compiled some of its kernels
    for other types (`train` compiles softmax's exp for its shapes, `translate` for its own)."""
    folder = os.environ.get("NUMBA_CACHE_DIR") or os.path.join(
        os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache"), "numba")
    python = f"py{sys.version_info.major}{sys.version_info.minor}"
    return os.path.join(folder, "tinygrad_lite_ready", f"{command.replace(' ', '_')}.{python}")


def is_ready(command: str) -> bool:
    """`command` ran to its end since its kernels' sources last changed."""
    try:
        since = os.path.getmtime(ready_stamp(command))
    except OSError:
        return False
    sources = [importlib.util.find_spec(m) for m in COMPILES[command][0]]
    return all(spec is None or not spec.origin or os.path.getmtime(spec.origin) <= since for spec in sources)


def mark_ready(command: str) -> None:
    """`command` has run to its end: its kernels are compiled and cached (best effort: a read-only
    cache folder only means the notice shows again)."""
    path = ready_stamp(command)
    try:
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with open(path, "w", encoding="utf-8"):
            pass
    except OSError:
        pass


def compile_notice(command: str) -> str | None:
    """'compiling kernels (first run only, about N s)' when `command` (a key of COMPILES) will
    compile, else None."""
    modules, seconds = COMPILES[command]
    if not uses_numba() or (all(is_cached(m) for m in modules) and is_ready(command)):
        return None
    return f"compiling kernels (first run only, about {seconds} s)"


@contextlib.contextmanager
def compiling_notice(command: str):
    """The compile notice on stderr when Numba's cache is cold for `command`; a block that ends
    without an error marks the command's kernels compiled."""
    notice = compile_notice(command)
    if notice:
        print(notice, file=sys.stderr, flush=True)
    yield
    if notice and uses_numba():
        mark_ready(command)
