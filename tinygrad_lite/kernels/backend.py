"""Which implementation runs the kernels: Numba JIT (default) or the plain NumPy twins.

Choose with the environment variable ``TINYGRAD_LITE_BACKEND`` (``numba`` or ``numpy``), or at
run time with :func:`set_backend` / the :func:`use_backend` context manager.

Numba is imported lazily, on the first kernel call that needs it, because importing it costs
a few tenths of a second; ``import tinygrad_lite`` therefore stays fast and compiles nothing.
If Numba cannot be imported, the kernels fall back to NumPy after one ``RuntimeWarning``.

Also shared by the kernel modules: the fast-math flags, the rule that keeps small kernel calls
on one thread (:class:`threads_for`) and `rows_of`.
"""
import contextlib
import functools
import importlib
import os
import warnings

import numpy as np

from ..checks import one_of
from ..threads import ensure_num_threads

BACKENDS = ("numba", "numpy")
ENV_VAR = "TINYGRAD_LITE_BACKEND"

# Fast-math flags that are safe for these kernels: they let LLVM reorder sums into SIMD lanes
# and fuse multiply-adds. 'nnan'/'ninf' are left out on purpose: masks use -inf and NaN inputs
# must come out as NaN, never be optimised away. 'afn' is left out to keep libm's accuracy.
FASTMATH = {"nsz", "arcp", "contract", "reassoc"}


class _State:
    """Mutable module state, kept in one object so tests can swap it out."""

    def __init__(self):
        self.requested = None  # set_backend's choice; None: the environment decides
        self.from_env = None   # ENV_VAR, parsed once on first use (it sits on every kernel call)
        self.numba = None
        self.numba_import_error = None
        self.numba_active = None  # use_numba()'s answer, cached until the choice changes


_state = _State()


def _validate(name, source):
    return one_of(source, "kernel backend", name, BACKENDS)


def requested_backend():
    """The backend asked for (set_backend > env var > 'numba'), before any fallback."""
    if _state.requested is not None:
        return _state.requested
    if _state.from_env is None:
        name = os.environ.get(ENV_VAR, "numba").strip().lower() or "numba"
        _state.from_env = _validate(name, f"environment variable {ENV_VAR}")
    return _state.from_env


def get_backend():
    """The backend the kernels will actually use: 'numba' or 'numpy'.

    Asking for 'numba' when Numba cannot be imported gives 'numpy' (with one warning).
    """
    name = requested_backend()
    if name == "numba" and load_numba() is None:
        return "numpy"
    return name


def set_backend(name):
    """Select the kernel backend for the whole process: 'numba' or 'numpy'."""
    _state.requested = _validate(name, "set_backend")
    _state.numba_active = None


@contextlib.contextmanager
def use_backend(name):
    """Run a block with another backend, restoring the previous choice afterwards."""
    previous = _state.requested
    set_backend(name)
    try:
        yield
    finally:
        _state.requested = previous
        _state.numba_active = None


def load_numba():
    """Import numba on first use; return the module, or None (warning once) if it is missing."""
    if _state.numba is None and _state.numba_import_error is None:
        ensure_num_threads()  # before the import, which sizes Numba's pool (tinygrad_lite.threads)
        try:
            _state.numba = importlib.import_module("numba")
        except ImportError as err:
            _state.numba_import_error = err
            warnings.warn(
                f"tinygrad_lite.kernels: numba could not be imported ({err}); falling back to the "
                f"NumPy kernels. Install numba, or set {ENV_VAR}=numpy to silence this warning.",
                RuntimeWarning,
                stacklevel=3,
            )
    return _state.numba


def require_numba(kernel):
    """The numba module, or an ImportError naming the kernel that needed it."""
    numba = load_numba()
    if numba is None:
        raise ImportError(
            f"{kernel}: the Numba implementation needs numba, which could not be imported "
            f"({_state.numba_import_error}); use the NumPy twin or set {ENV_VAR}=numpy"
        )
    return numba


def lazy_kernels(build):
    """Decorator: ``build(numba)`` returns a module's compiled kernels, built on first use.

    The decorated name becomes a zero-argument function that imports numba, runs ``build``
    once and caches the result. ``@numba.njit`` without signatures compiles on the first call
    for each argument type, and ``cache=True`` keeps the machine code on disk between runs.
    """
    built = []

    @functools.wraps(build)
    def get():
        if not built:
            built.append(build(require_numba(build.__name__)))
        return built[0]

    return get


def use_numba():
    """True when dispatching functions should run their Numba implementation. Every kernel call
    asks, so the answer is kept until set_backend/use_backend change the choice."""
    active = _state.numba_active
    if active is None:
        active = _state.numba_active = get_backend() == "numba"
    return active


# ---------------------------------------------------------------------------------------------
# Threads
# ---------------------------------------------------------------------------------------------

# Kernels on fewer elements than this run on the calling thread only. On an idle 2-core
# machine threads pay from ~64K elements (float32 softmax on 65,536: 69 us on 1 thread, 37 us
# on 2), but when other processes keep the cores busy every parallel call can stall for a
# scheduler time slice (~6 ms measured, even on 32 elements). 256K elements (~0.3 ms of work)
# keeps that risk to the calls where threads pay most. Read on every call, so it can be tuned.
PARALLEL_MIN_ELEMENTS = 1 << 18


class threads_for:
    """Context manager: Numba kernel calls inside run on the calling thread alone when `work`
    (elements touched) is below PARALLEL_MIN_ELEMENTS; otherwise Numba's thread count stays.

    The kernels always use prange: with one thread Numba runs the loop inline, and still
    compiles it with the no-aliasing promise that lets LLVM vectorise better than a plain loop.
    A small class rather than @contextmanager, because this wraps every kernel call.
    """

    __slots__ = ("numba", "restore_to")

    def __init__(self, work):
        self.numba, self.restore_to = _state.numba, 0
        if (work < PARALLEL_MIN_ELEMENTS and self.numba is not None
                and self.numba.config.NUMBA_NUM_THREADS > 1):
            threads = self.numba.get_num_threads()
            if threads > 1:
                self.numba.set_num_threads(1)
                self.restore_to = threads

    def __enter__(self):
        return self

    def __exit__(self, *exc_info):
        if self.restore_to:
            self.numba.set_num_threads(self.restore_to)


# ---------------------------------------------------------------------------------------------
# Array helpers shared by the kernel modules (which take trusted arrays: the Tensor methods and
# nn.functional check what users pass)
# ---------------------------------------------------------------------------------------------

def rows_of(arr):
    """A C-contiguous (rows, last_dim) view of arr; copies only if arr is not C-contiguous."""
    return np.ascontiguousarray(arr).reshape(-1, arr.shape[-1])

