"""The thread count a Trainer uses: 1 by default, unless the argument, the process or the environment
says otherwise (tinygrad_lite.threads.use_num_threads); and bench/threads.py's busy mode runs and
stops the processes it starts. Speed itself is measured in bench/threads.py, never here."""
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tinygrad_lite import threads
from transformer.train import TrainConfig, Trainer

ROOT = Path(__file__).resolve().parent.parent


@pytest.fixture
def fresh(monkeypatch):
    """A process that chose no count yet; set_num_threads records the count (as the process's choice)
    instead of setting the libraries' pools."""
    calls = []
    monkeypatch.setattr(threads, "_requested", None)

    def record(n):
        calls.append(n)
        threads._requested = n  # monkeypatch restores None afterwards

    monkeypatch.setattr(threads, "set_num_threads", record)
    monkeypatch.delenv(threads.ENV_VAR, raising=False)
    return calls


def test_the_default_is_one_thread(fresh):
    assert threads.use_num_threads() == 1
    assert fresh == [1]


def test_the_environment_overrides_the_default(fresh, monkeypatch):
    monkeypatch.setenv(threads.ENV_VAR, "2")
    assert threads.use_num_threads() == 2
    assert fresh == [2]


def test_an_explicit_count_beats_the_environment_and_the_process(fresh, monkeypatch):
    monkeypatch.setenv(threads.ENV_VAR, "2")
    monkeypatch.setattr(threads, "_requested", 2)
    assert threads.use_num_threads(3) == 3
    assert fresh == [3]


def test_a_count_the_process_chose_is_kept(fresh, monkeypatch):
    monkeypatch.setattr(threads, "_requested", 2)  # e.g. the CLI's --threads 2, or tl.set_num_threads(2)
    assert threads.use_num_threads() == 2
    assert fresh == []


@pytest.mark.parametrize("bad", [0, -1, 1.5, "2", True])
def test_a_bad_explicit_count_is_named(fresh, bad):
    with pytest.raises(ValueError, match=f"train: threads must be a positive int, got {bad!r}"):
        threads.use_num_threads(bad)
    assert fresh == []


def test_a_bad_environment_count_is_named(fresh, monkeypatch):
    monkeypatch.setenv(threads.ENV_VAR, "all")
    with pytest.raises(ValueError, match=f"environment: {threads.ENV_VAR} must be a positive int, got 'all'"):
        threads.use_num_threads()


def tiny(tmp_path, **kw):
    return TrainConfig(out=str(tmp_path), progress=False, d_model=16, heads=2, layers=1, d_ff=32, **kw)


def test_the_trainer_sets_the_count_where_it_is_built(fresh, tmp_path, monkeypatch):
    assert Trainer(tiny(tmp_path)).threads == 1
    monkeypatch.setenv(threads.ENV_VAR, "2")
    assert Trainer(tiny(tmp_path, threads=3)).threads == 3
    assert fresh == [1, 3]


def test_the_trainer_names_a_bad_count(fresh, tmp_path):
    with pytest.raises(ValueError, match="train: threads must be a positive int, got 0"):
        Trainer(tiny(tmp_path, threads=0))


def test_importing_sets_no_threads():
    code = ("import os, sys, tinygrad_lite, transformer.train as t; from tinygrad_lite import threads; "
            "assert threads.get_num_threads() is None; assert 'numba' not in sys.modules; "
            "assert 'NUMBA_NUM_THREADS' not in os.environ; print('ok')")
    env = {k: v for k, v in os.environ.items() if k != "NUMBA_NUM_THREADS"}
    env["PYTHONPATH"] = str(ROOT)
    done = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, check=False)
    assert done.stdout.strip() == "ok", done.stderr


def gone(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    return False


def bench(*args):
    return subprocess.Popen([sys.executable, str(ROOT / "bench" / "threads.py"), "--quick", *args], cwd=ROOT,
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)


def busy_pids(text: str) -> list:
    return [int(p) for line in text.splitlines() if line.strip().startswith("busy pids")
            for p in line.split()[2:]]


def test_the_busy_mode_prints_the_ratio_and_stops_its_neighbour():
    proc = bench("--busy", "1")
    out, _ = proc.communicate(timeout=600)
    assert proc.returncode == 0, out[-3000:]
    assert "default / 1 thread, 1 busy process(es): " in out and "default / 1 thread, 0 busy" in out
    pids = busy_pids(out)
    assert len(pids) == 1 and gone(pids[0])


def test_ctrl_c_stops_the_neighbours():
    proc = bench("--busy", "2", "--cases", "1", "--repeats", "1")
    lines = []
    for line in proc.stdout:
        lines.append(line)
        if line.strip().startswith("busy pids"):
            break
    pids = busy_pids("".join(lines))
    assert len(pids) == 2 and not any(gone(p) for p in pids)
    proc.send_signal(signal.SIGINT)
    proc.communicate(timeout=120)
    deadline = time.monotonic() + 10
    while not all(gone(p) for p in pids) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert all(gone(p) for p in pids)


def test_a_translator_built_from_python_takes_the_library_default_too():
    """Decoding from a notebook (Translator.load(...).translate) must not spin a thread per core."""
    code = (
        "import tinygrad_lite.threads as t\n"
        "from transformer.model import Transformer\n"
        "from transformer.data import Vocab\n"
        "from transformer.translator import Translator\n"
        "assert t.get_num_threads() is None\n"
        "v = Vocab.build([['a', 'b']])\n"
        "Translator(Transformer(src_vocab=len(v), tgt_vocab=len(v), d_model=8, h=2, N=1, d_ff=16), v, v)\n"
        "print(t.get_num_threads())\n"
    )
    env = {k: v for k, v in os.environ.items() if k != "TINYGRAD_LITE_NUM_THREADS"}
    out = subprocess.run([sys.executable, "-c", code], env=env, cwd=ROOT, capture_output=True, text=True, check=False)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "1"


def test_a_blas_loaded_after_the_count_was_set_follows_it_too():
    """SciPy's OpenBLAS (Numba's np.dot in the decoder kernels) loads at the first decode, after the CLI
    or the Trainer set the count: it must not start a thread per core."""
    pytest.importorskip("scipy")
    code = (
        "import os, sys\n"
        "for v in ('OPENBLAS_NUM_THREADS', 'OMP_NUM_THREADS', 'MKL_NUM_THREADS'): os.environ.pop(v, None)\n"
        "import numpy\n"
        "import tinygrad_lite as tl\n"
        "tl.set_num_threads(1)\n"
        "assert 'scipy' not in sys.modules\n"
        "import scipy.linalg.cython_blas\n"
        "from threadpoolctl import threadpool_info\n"
        "print(sorted({i['num_threads'] for i in threadpool_info() if i['internal_api'] == 'openblas'}))\n"
    )
    env = {k: v for k, v in os.environ.items() if not k.endswith("_NUM_THREADS")}
    out = subprocess.run([sys.executable, "-c", code], env=env, cwd=ROOT, capture_output=True, text=True, check=False)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "[1]"
