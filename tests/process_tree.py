"""What the kill-and-resume tests share: how a run starts (one process or two ranks, on the Numba kernels or
their NumPy twins), mpiexec found beside the interpreter (or a skip saying what to install), and a SIGKILL that
reaches every process a command started (mpiexec's proxy and ranks)."""
import contextlib
import importlib.util
import os
import shutil
import signal
import subprocess
import sys
from pathlib import Path

import pytest

LAUNCHES = [(1, "numba"), (2, "numba"), (1, "numpy")]  # (ranks, kernel backend): as users run it, then the twins
LAUNCH_IDS = ["1-process", "2-ranks", "1-process-numpy"]


class Launcher:
    """How a run starts: the command's head (python, or mpiexec -n 2 python) and its environment, `env` with the
    kernel backend set. Two ranks need psutil, to kill mpiexec's whole tree (its proxy and ranks run in sessions
    of their own), and mpiexec: the test skips without them."""

    def __init__(self, ranks: int, backend: str, env: dict):
        if ranks > 1:
            pytest.importorskip("psutil")
        self.ranks = ranks
        self.head = [sys.executable] if ranks == 1 else [find_mpiexec(), "-n", str(ranks), sys.executable]
        self.env = {**env, "TINYGRAD_LITE_BACKEND": backend}


def find_mpiexec():
    if importlib.util.find_spec("mpi4py") is None:
        pytest.skip("mpi4py is not installed (pip install -e '.[distributed]')")
    exe = shutil.which("mpiexec", path=os.pathsep.join([str(Path(sys.executable).parent), os.environ["PATH"]]))
    if exe is None:
        pytest.skip("no mpiexec found (pip install mpich)")
    return exe


def kill_tree(proc: subprocess.Popen) -> bool:
    """SIGKILL the process and everything it started (mpiexec: its proxy and the ranks); False if it
    had already ended. The family is frozen first (SIGSTOP) until no new member appears, so no
    rank started a moment before the kill outlives it."""
    if proc.poll() is not None:
        return False
    if importlib.util.find_spec("psutil") is None:  # one process (two ranks need psutil)
        proc.kill()
        proc.wait(timeout=60)
        return True
    import psutil
    family, found = {}, {proc.pid: psutil.Process(proc.pid)}
    while found:
        family.update(found)
        for member in found.values():
            with contextlib.suppress(psutil.NoSuchProcess):
                member.suspend()
        children = {}
        for member in list(family.values()):
            with contextlib.suppress(psutil.NoSuchProcess):
                children.update((child.pid, child) for child in member.children(recursive=True))
        found = {pid: child for pid, child in children.items() if pid not in family}
    for member in family.values():
        with contextlib.suppress(psutil.NoSuchProcess):
            member.kill()
    assert proc.wait(timeout=60) == -signal.SIGKILL
    _, alive = psutil.wait_procs(list(family.values()), timeout=30)
    assert not alive, f"still running after SIGKILL: {alive}"
    return True
