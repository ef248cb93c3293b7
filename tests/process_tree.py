"""What the kill-and-resume tests share: mpiexec found beside the interpreter (or a skip saying what
to install), and a SIGKILL that reaches every process a command started (mpiexec's proxy and ranks)."""
import contextlib
import importlib.util
import os
import shutil
import signal
import subprocess
import sys
from pathlib import Path

import pytest


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
