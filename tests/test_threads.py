"""The thread count: 1 by default wherever the engine is used, chosen where heavy work first starts
(the first product or Numba kernel) and never on import, unless the process or the environment says
otherwise (tinygrad_lite.threads); a Trainer's argument beats both; and bench/threads.py's busy mode
runs and stops the processes it starts. Speed itself is measured in bench/threads.py, never here."""
import json
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


def clean_env(**extra) -> dict:
    """This environment without any thread setting (as a learner's shell), plus `extra`."""
    env = {k: v for k, v in os.environ.items()
           if not k.endswith("_NUM_THREADS") and k not in ("OMP_WAIT_POLICY", "TINYGRAD_LITE_BACKEND")}
    return {**env, "PYTHONPATH": str(ROOT), **extra}


# A fresh process: what it chose (tinygrad_lite, BLAS, Numba) after `before` and after each op.
PROBE = """
import json, os, sys
import numpy as np
import tinygrad_lite as tl
from threadpoolctl import threadpool_info
def state():
    numba = sys.modules.get("numba")
    return {{"chosen": tl.get_num_threads(), "numba": numba and numba.get_num_threads(),
            "blas": sorted({{i["num_threads"] for i in threadpool_info() if i["user_api"] == "blas"}})}}
{before}
states = []
for op in {ops!r}:
    exec(op)
    states.append(state())
print(json.dumps(states))
"""
FIRST_OPS = {
    "a product": "x = tl.Tensor(np.ones((64, 64), np.float32), requires_grad=True); (x @ x).sum().backward()",
    "a Linear": "tl.nn.Linear(8, 4)(tl.Tensor(np.ones((2, 8), np.float32)))",
    "a Numba kernel": "tl.nn.functional.softmax(tl.Tensor(np.ones((4, 8), np.float32)))",
}


def probe(*ops: str, before: str = "", **env) -> list:
    done = subprocess.run([sys.executable, "-c", PROBE.format(before=before, ops=list(ops))], env=clean_env(**env),
                          cwd=ROOT, capture_output=True, text=True, check=False, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout.strip().splitlines()[-1])


@pytest.mark.parametrize("op", list(FIRST_OPS))
def test_the_first_op_chooses_one_thread(op):
    """A notebook's first product or kernel, with no Trainer and no setting: BLAS at 1, and Numba at 1
    once an op with a twin loads it (a Linear's product has one, kernels.panels; a bare product leaves it
    unloaded)."""
    first, then = probe(FIRST_OPS[op], FIRST_OPS["a Numba kernel"], TINYGRAD_LITE_BACKEND="numba")
    assert first == {"chosen": 1, "numba": None if op == "a product" else 1, "blas": [1]}, first
    assert then == {"chosen": 1, "numba": 1, "blas": [1]}, then


def test_the_formula_path_chooses_one_thread_and_leaves_numba_unloaded():
    got = probe(FIRST_OPS["a Linear"], FIRST_OPS["a Numba kernel"], TINYGRAD_LITE_BACKEND="numpy")
    assert got == [{"chosen": 1, "numba": None, "blas": [1]}] * 2, got


@pytest.mark.skipif((os.cpu_count() or 1) < 2, reason="BLAS runs at most a thread per core")
@pytest.mark.parametrize("how", ["set_num_threads", "environment"])
def test_a_count_chosen_before_the_first_op_is_kept(how):
    before, env = ("tl.set_num_threads(2)", {}) if how == "set_num_threads" else ("", {threads.ENV_VAR: "2"})
    got = probe(FIRST_OPS["a Numba kernel"], FIRST_OPS["a product"], before=before, TINYGRAD_LITE_BACKEND="numba",
                **env)
    assert got[-1] == {"chosen": 2, "numba": 2, "blas": [2]}, got


def test_importing_sets_no_threads():
    """Importing (the engine, the translator, numpy) changes no count, no variable, loads no Numba."""
    before = ("untouched = [i['num_threads'] for i in threadpool_info()]\n"
              "import transformer.train, transformer.translator\n"
              "assert tl.get_num_threads() is None and 'numba' not in sys.modules, 'chose on import'\n"
              "assert not [v for v in os.environ if v.endswith('_NUM_THREADS')], 'set a variable'\n"
              "assert [i['num_threads'] for i in threadpool_info()] == untouched, 'changed BLAS'")
    assert probe(before=before) == []


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
