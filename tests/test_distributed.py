"""Data-parallel training (tinygrad_lite.distributed): one process is untouched, and two ranks under
`mpiexec -n 2` train to the same parameters as one process given the same global batches.

The mpiexec tests skip when mpi4py or mpiexec is missing (pip install -e ".[distributed]")."""
import importlib.util
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import tinygrad_lite as tl
from tinygrad_lite import distributed as dist
from tinygrad_lite.checkpoint import load

ROOT = Path(__file__).resolve().parents[1]
WORKER = ROOT / "tests" / "distributed_worker.py"
ENV = {**os.environ, "PYTHONPATH": str(ROOT), "OMP_NUM_THREADS": "1", "NUMBA_NUM_THREADS": "1"}
TOY = ["--d-model", "16", "--heads", "2", "--layers", "1", "--d-ff", "32", "--max-tokens", "120",
       "--dropout", "0", "--no-progress"]


# ---------------------------------------------------------------- one process: every call a no-op

def test_one_process_is_rank_0_of_1_and_every_call_leaves_the_gradients_alone():
    assert (dist.rank(), dist.world_size(), dist.is_main(), dist.active()) == (0, 1, True, False)
    p = tl.tensor([1.0, 2.0], requires_grad=True)
    grad = np.array([0.5, -1.0], np.float32)
    p.grad = grad
    assert dist.all_reduce_gradients([p], weight=7, extra=[3.5]) == (7.0, 3.5)
    assert p.grad is grad and p.grad.tolist() == [0.5, -1.0]
    dist.broadcast_parameters([p])
    assert p.data.tolist() == [1.0, 2.0]
    assert dist.any_rank([], True) == (False, True)
    assert dist.rank_seed(123) == 123 and dist.rank_seed(123, 9) == 123
    assert dist.gather_json({"state": 2 ** 127}) == [{"state": 2 ** 127}]
    dist.barrier()
    dist.abort(1, "never")  # nothing to stop: returns


@pytest.mark.parametrize("call, message", [
    (lambda: dist.all_reduce_gradients([], weight=-1), "weight must be finite and >= 0, got -1.0"),
    (lambda: dist.all_reduce_gradients([], extra=[float("nan")]), "extra must be a finite number, got nan"),
    (lambda: dist.broadcast_parameters([], root=1), "broadcast_parameters: root must be a rank below 1, got 1"),
    (lambda: dist.rank_seed(-1), "rank_seed: seed must be an int >= 0, got -1"),
])
def test_bad_arguments_are_named_even_in_one_process(call, message):
    with pytest.raises(ValueError) as info:
        call()
    assert message in str(info.value)


def test_shared_file_in_one_process_is_the_file_itself(tmp_path):
    path = tmp_path / "x.bin"
    with dist.shared_file(str(path)) as local:
        assert local is None
    path.write_bytes(b"x")
    with dist.shared_file(str(path)) as local:
        assert local == str(path)


def run_python(code: str, **env):
    return subprocess.run([sys.executable, "-c", code], cwd=ROOT, env={**ENV, **env}, capture_output=True,
                          text=True, timeout=120)


def test_importing_and_training_code_never_import_mpi4py_without_mpiexec():
    code = ("import sys, tinygrad_lite, transformer.train\n"
            "from tinygrad_lite import distributed as d\n"
            "assert d.world_size() == 1\n"
            "print('mpi4py' in sys.modules)")
    run = run_python(code)
    assert run.returncode == 0, run.stderr
    assert run.stdout.strip() == "False"


def test_mpiexec_without_mpi4py_is_a_clear_error_not_k_lone_runs():
    code = ("import sys; sys.modules['mpi4py'] = None\n"  # as if not installed
            "from tinygrad_lite import distributed as d\n"
            "d.world_size()")
    run = run_python(code, PMI_SIZE="2", PMI_RANK="0")
    assert run.returncode != 0
    assert "mpiexec started 2 processes but mpi4py is not installed" in run.stderr


def test_a_bad_timeout_is_named():
    code = "from tinygrad_lite import distributed as d; d.init()"
    run = run_python(code, TINYGRAD_LITE_DIST_TIMEOUT="soon")
    assert "TINYGRAD_LITE_DIST_TIMEOUT must be a number of seconds, got 'soon'" in run.stderr


# ---------------------------------------------------------------- two ranks under mpiexec

@pytest.fixture(scope="module")
def mpiexec():
    if importlib.util.find_spec("mpi4py") is None:
        pytest.skip("mpi4py is not installed (pip install -e '.[distributed]')")
    search = os.pathsep.join([str(Path(sys.executable).parent), os.environ.get("PATH", "")])
    exe = shutil.which("mpiexec", path=search)
    if exe is None:
        pytest.skip("no mpiexec found (pip install mpich)")
    return exe


@pytest.fixture(scope="module")
def corpus(tmp_path_factory):
    """A small zh<TAB>en training file and dev file cut from the built-in corpus."""
    from transformer.data import builtin_corpus
    splits = builtin_corpus()
    folder = tmp_path_factory.mktemp("corpus")
    for name, pairs in (("train", splits["train"][:300]), ("dev", splits["dev"][:16])):
        (folder / f"{name}.tsv").write_text("".join(f"{zh}\t{en}\n" for zh, en in pairs), encoding="utf-8")
    return ["--data", str(folder / "train.tsv"), "--dev", str(folder / "dev.tsv")]


def mpirun(mpiexec, *args, timeout=300, env=None):
    return subprocess.run([mpiexec, "-n", "2", sys.executable, *map(str, args)], cwd=ROOT, env=env or ENV,
                          capture_output=True, text=True, timeout=timeout)


def test_collectives_match_the_formula_flat_and_plain(mpiexec, tmp_path):
    run = mpirun(mpiexec, WORKER, "collectives", tmp_path, timeout=120)
    assert run.returncode == 0, run.stdout + run.stderr
    assert "collectives ok on 2 ranks" in run.stdout


def merged_pairs(batches):
    """Batches 0+1, 2+3, ...: each step's two rank batches as one padded batch."""
    from transformer.data.batching import Batch

    def stack(a, b):
        width = max(a.shape[1], b.shape[1])
        return np.concatenate([np.pad(m, ((0, 0), (0, width - m.shape[1]))) for m in (a, b)])
    return [Batch(stack(a.src, b.src), stack(a.tgt, b.tgt)) for a, b in zip(batches[0::2], batches[1::2])]


def one_process_run(saved_config: dict, out, monkeypatch, batches=None) -> dict:
    """Train in this process with the config the two-rank run saved; `batches` maps an epoch's
    batch list to the one this run trains on."""
    from transformer import train
    if batches is not None:
        original = train.epoch_batches
        monkeypatch.setattr(train, "epoch_batches", lambda data, cfg, epoch: batches(original(data, cfg, epoch)))
    train.Trainer(train.TrainConfig(**{**saved_config, "out": str(out)})).run()
    monkeypatch.undo()
    return model_arrays(out)


def model_arrays(out) -> dict:
    arrays, _ = load(os.path.join(out, "checkpoint.safetensors"))
    return {k: v for k, v in arrays.items() if k.startswith("model.")}


def test_two_ranks_give_one_process_parameters_on_the_same_global_batches(mpiexec, corpus, tmp_path, monkeypatch):
    steps = 6
    run = mpirun(mpiexec, "-m", "transformer", "train", *corpus, "--out", tmp_path / "k2", *TOY,
                 "--max-steps", steps)
    assert run.returncode == 0, run.stderr
    assert "data parallel: 2 ranks" in run.stdout and run.stdout.count("training on") == 1  # rank 0 prints
    assert "Noam multiplier 1.41 (--lr 1, --lr-scaling sqrt)" in run.stdout
    state = load(tmp_path / "k2" / "checkpoint.safetensors")[1]["train"]
    assert (state["step"], state["batch_in_epoch"]) == (steps, 2 * steps)
    two_ranks = model_arrays(tmp_path / "k2")

    # one process, each step the two ranks' batches as one, at the lr the 2 ranks used (--lr x sqrt(2))
    config = {**state["train_config"], "lr": state["train_config"]["lr"] * 2 ** 0.5, "lr_scaling": "none"}
    one = one_process_run(config, tmp_path / "k1", monkeypatch, batches=merged_pairs)
    assert one.keys() == two_ranks.keys() and len(one) > 10
    for key in one:  # float32 sums in another order: equal to rounding
        if key.endswith("w_k.bias"):  # its exact gradient is 0 (softmax ignores a constant added to a row's
            continue                  # scores): both runs step on round-off, which Adam scales to full steps
        np.testing.assert_allclose(two_ranks[key], one[key], rtol=1e-5, atol=5e-7, err_msg=key)
    # the comparison can fail: one process on rank 0's batches alone ends elsewhere
    alone = one_process_run(config, tmp_path / "alone", monkeypatch, batches=lambda b: b[0::2])
    assert max(np.abs(two_ranks[k] - alone[k]).max() for k in one) > 1e-3


def test_the_benchmark_runs_one_and_two_ranks(mpiexec, tmp_path):
    run = subprocess.run([sys.executable, str(ROOT / "bench" / "distributed.py"), "--quick", "--json",
                          str(tmp_path / "d.jsonl")], cwd=ROOT, env=ENV, capture_output=True, text=True, timeout=300)
    assert run.returncode == 0, run.stdout + run.stderr
    (row,) = [json.loads(line) for line in (tmp_path / "d.jsonl").read_text().splitlines()]
    assert row["ranks"] == 2 and row["tok_s_1"] > 0 and row["tok_s_2"] > 0 and row["allreduce_ms_per_step"] > 0
    assert row["tensors"] > 10 and "Paper estimate" in run.stdout and "sent per rank a step" in run.stdout
