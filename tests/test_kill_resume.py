"""`python -m transformer train` killed with SIGKILL at random moments and continued with --resume
after each kill ends bit for bit where the uninterrupted run of the same command ends (issue #39):
every array of the last checkpoint (weights, Adam's moments, the averaging window) and of the best
model, every rank's random state, the metrics log but for its clock readings, and the report.
Some kills are aimed inside a checkpoint write (TINYGRAD_LITE_TEST_SAVE_PAUSE holds each write
open before its rename, tinygrad_lite/checkpoint.py). After every kill each checkpoint on disk
loads; at the end no temporary file is left. Also: N steps + N resumed equal 2N, and a finished
run resumed trains no further step.

One process and two ranks under `mpiexec -n 2` when mpi4py and mpiexec are installed (the kill then
reaches mpiexec, its proxy and both ranks), on the Numba kernels, as users run it; one process again on
their NumPy twins. The kills' delays are seeded, but what they
hit depends on the machine's speed; the assertions hold whatever they hit, and kills aimed inside a
write go on until one has landed there (a loaded machine can make the first ones miss). The runs are bounded by
--max-steps: a --minutes run stops where the clock says, which no resume can reproduce."""
import json
import os
import shutil
import subprocess
import time
from pathlib import Path

import numpy as np
import pytest
from process_tree import LAUNCH_IDS, LAUNCHES, Launcher, kill_tree

from tinygrad_lite.checkpoint import load
from transformer.translator import Translator

pytestmark = pytest.mark.cli  # whole programs and processes: the same on either path (.ci/run)

ROOT = Path(__file__).resolve().parents[1]
ENV = {**os.environ, "PYTHONPATH": str(ROOT), "OMP_NUM_THREADS": "1", "NUMBA_NUM_THREADS": "1"}
ENV.pop("TINYGRAD_LITE_DETECT_ANOMALY", None)
# dropout on, an evaluation every 10 steps with checkpoint averaging, a checkpoint every 3 steps
TOY = ["--d-model", "16", "--heads", "2", "--layers", "1", "--d-ff", "32", "--max-tokens", "120", "--dropout", "0.1",
       "--eval-every", "10", "--average", "3", "--save-every", "3", "--cooldown", "0", "--seed", "5", "--no-progress"]
STEPS = {1: 60, 2: 30}  # two ranks take two batches a step
KILLS = 10
SAVE_PAUSE = 0.2
CLOCK_READINGS = {"seconds", "eval_seconds", "cpu_seconds", "tokens_per_s"}


@pytest.fixture(scope="module", params=LAUNCHES, ids=LAUNCH_IDS)
def launcher(request) -> Launcher:
    return Launcher(*request.param, ENV)


@pytest.fixture(scope="module")
def corpus(tmp_path_factory) -> list:
    """300 training pairs and 16 dev pairs of the built-in corpus: a second per epoch."""
    from transformer.data import builtin_corpus
    splits = builtin_corpus()
    folder = tmp_path_factory.mktemp("corpus")
    for name, pairs in (("train", splits["train"][:300]), ("dev", splits["dev"][:16])):
        (folder / f"{name}.tsv").write_text("".join(f"{zh}\t{en}\n" for zh, en in pairs), encoding="utf-8")
    return ["--data", str(folder / "train.tsv"), "--dev", str(folder / "dev.tsv")]


def command(launcher, corpus, out, *extra, steps=None) -> list:
    steps = steps or STEPS[launcher.ranks]
    return [*launcher.head, "-m", "transformer", "train", *corpus, "--out", str(out), *TOY, "--max-steps", str(steps),
            *extra]


def train(launcher, corpus, out, *extra, steps=None) -> subprocess.CompletedProcess:
    run = subprocess.run(command(launcher, corpus, out, *extra, steps=steps), cwd=ROOT, env=launcher.env,
                         capture_output=True, text=True, timeout=600)
    assert run.returncode == 0, run.stdout[-2000:] + run.stderr[-3000:]
    return run


@pytest.fixture(scope="module")
def uninterrupted(launcher, corpus, tmp_path_factory) -> Path:
    """The run no kill touched."""
    out = tmp_path_factory.mktemp("uninterrupted")
    train(launcher, corpus, out)
    return out


def checkpoint(out: Path, name="checkpoint.safetensors") -> tuple[dict, dict]:
    return load(out / name)


def assert_same_arrays(a: dict, b: dict, prefixes=None):
    a = {k: v for k, v in a.items() if prefixes is None or k.startswith(prefixes)}
    b = {k: v for k, v in b.items() if prefixes is None or k.startswith(prefixes)}
    assert a.keys() == b.keys() and len(a) > 10
    for key in a:
        np.testing.assert_array_equal(a[key], b[key], err_msg=key)


def assert_same_training_state(a: dict, b: dict):
    """Equal train states, but for what a run sets for itself (its flags), the metrics log's size
    (its clock readings are printed with another number of digits) and the clock's own readings."""
    a, b = ({k: v for k, v in state.items() if k not in ("train_config", "metrics_bytes", "time_budget")}
            for state in (a, b))
    assert a == b


def metrics(out: Path) -> list:
    records = [json.loads(line) for line in (out / "metrics.jsonl").read_text().splitlines()]
    return [{k: v for k, v in r.items() if k not in CLOCK_READINGS} for r in records]


def assert_same_run(out: Path, reference: Path):
    """Bit for bit: the last checkpoint and the best model, the metrics log and the report."""
    for name in ("checkpoint.safetensors", "best.safetensors"):
        (arrays, meta), (ref_arrays, ref_meta) = checkpoint(out, name), checkpoint(reference, name)
        assert_same_arrays(arrays, ref_arrays)
        assert_same_training_state(meta["train"], ref_meta["train"])
    assert metrics(out) == metrics(reference)
    report, ref_report = (json.loads((folder / "report.json").read_text()) for folder in (out, reference))
    for r, folder in ((report, out), (ref_report, reference)):
        assert r.pop("checkpoint") == str(folder / "best.safetensors")
        r.pop("seconds")
    assert report == ref_report


# ---------------------------------------------------------------- resume without kills

def test_n_steps_and_n_resumed_equal_2n_steps(launcher, corpus, uninterrupted, tmp_path):
    reference = uninterrupted
    half = STEPS[launcher.ranks] // 2
    train(launcher, corpus, tmp_path, steps=half)
    train(launcher, corpus, tmp_path, "--resume")
    arrays, meta = checkpoint(tmp_path)
    ref_arrays, ref_meta = checkpoint(reference)
    assert_same_arrays(arrays, ref_arrays, prefixes=("model.", "optim.", "sched."))
    assert len(meta["train"]["rank_rngs"]) == launcher.ranks  # every rank's dropout stream, saved and restored
    assert meta["train"]["rank_rngs"] == ref_meta["train"]["rank_rngs"]
    assert len({json.dumps(state) for state in meta["train"]["rank_rngs"]}) == launcher.ranks  # streams differ


def test_a_finished_run_resumed_trains_no_further_step(launcher, corpus, uninterrupted, tmp_path):
    reference = uninterrupted
    out = tmp_path / "run"
    shutil.copytree(reference, out)
    run = train(launcher, corpus, out, "--resume")
    steps = STEPS[launcher.ranks]
    assert f"resuming from step {steps} " in run.stdout and f"done: {steps} steps" in run.stdout
    assert checkpoint(out)[1]["train"]["step"] == steps
    assert_same_run(out, reference)  # it only averaged and reported again


def test_a_resumed_run_removes_only_the_temporary_files_of_its_own_writes(tmp_path):
    from transformer.training_state import cut_back, remove_partial_writes
    partial = [".best.safetensors.k2x.tmp", ".checkpoint.safetensors.a1b2.tmp", ".loss.png.q9.tmp.png",
               ".report.json.zz.tmp"]
    kept = ["checkpoint.safetensors", ".checkpoint.safetensors.notes", ".other.safetensors.a1.tmp", "x.tmp"]
    for name in partial + kept:
        (tmp_path / name).write_text("x")
    assert remove_partial_writes(tmp_path) == partial
    assert sorted(os.listdir(tmp_path)) == sorted(kept)
    log = tmp_path / "metrics.jsonl"
    log.write_text('{"step": 10}\n{"step": 20}\n{"st')
    cut_back(log, len('{"step": 10}\n'))  # a record written after the checkpoint, and half of one, go
    assert log.read_text() == '{"step": 10}\n'
    cut_back(log, 1000)
    assert log.read_text() == '{"step": 10}\n'


# ---------------------------------------------------------------- kills

def hidden_files(out: Path) -> list:
    return sorted(name for name in os.listdir(out) if name.startswith("."))


def wait_for_a_write(out: Path, proc: subprocess.Popen, skip: int, seconds: float = 300) -> bool:
    """Wait until the (skip+1)-th checkpoint or best-model write shows its temporary file; False if
    the run ended first."""
    seen, deadline = set(), time.perf_counter() + seconds
    while proc.poll() is None and time.perf_counter() < deadline:
        seen.update(name for name in hidden_files(out)
                    if name.startswith((".checkpoint.safetensors.", ".best.safetensors.")))
        if len(seen) > skip:
            return True
        time.sleep(0.002)
    return False


def checkpoint_version(out: Path):
    try:
        st = os.stat(out / "checkpoint.safetensors")
    except FileNotFoundError:
        return None
    return st.st_ino, st.st_mtime_ns, st.st_size


def saved_step(out: Path) -> int:
    return checkpoint(out)[1]["train"]["step"] if (out / "checkpoint.safetensors").exists() else 0


def sleep_while_running(proc: subprocess.Popen, seconds: float):
    deadline = time.perf_counter() + seconds
    while proc.poll() is None and time.perf_counter() < deadline:
        time.sleep(min(0.005, max(deadline - time.perf_counter(), 0)))


class Pace:
    """How long a launch takes to its first checkpoint and from one checkpoint to the next, as
    measured in this test, so that the kills' delays fit a fast machine and a slow one."""

    def __init__(self):
        self.startups, self.gaps = [1.5], [0.3]

    def wait_for_step(self, out: Path, proc: subprocess.Popen, step: int, launched: float) -> bool:
        """Wait until the checkpoint on disk has reached `step`; False if the run ended first."""
        version, last, reached = checkpoint_version(out), launched, saved_step(out)
        while reached < step:
            if proc.poll() is not None:
                return False
            time.sleep(0.002)
            if checkpoint_version(out) != version:
                version, now, reached = checkpoint_version(out), time.perf_counter(), saved_step(out)
                (self.gaps if last > launched else self.startups).append(now - last)
                last = now
        return True

    def startup(self) -> float:
        return float(np.median(self.startups))

    def gap(self) -> float:
        return float(np.median(self.gaps))


def kill_plans(rng, steps: int) -> list:
    """Where the kills land: 6 at random checkpoints (in order, so the run moves on), 3 inside a
    checkpoint or best-model write, 1 in the closing averaging and report, 1 early in a resumed run
    that had already finished."""
    plans = [("after step", int(step)) for step in sorted(rng.choice(np.arange(0, steps, 3), 6))]
    for i in (1, 4, 7):
        plans.insert(i, ("inside write", int(rng.integers(0, 3))))
    return [*plans, ("closing", steps), ("finished", 0)]


def launch_and_kill(plan, out: Path, cmd: list, env: dict, pace: Pace, rng) -> bool:
    """Launch `cmd` and SIGKILL it where `plan` says; False if the run ended first (it must
    have succeeded)."""
    kind, at = plan
    env = {**env, "TINYGRAD_LITE_TEST_SAVE_PAUSE": str(SAVE_PAUSE)} if kind == "inside write" else env
    launched = time.perf_counter()
    proc = subprocess.Popen(cmd, cwd=ROOT, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    if kind == "inside write":
        if wait_for_a_write(out, proc, skip=at):
            time.sleep(rng.uniform(0, SAVE_PAUSE / 2))
    elif kind == "finished" or saved_step(out) >= at:
        sleep_while_running(proc, rng.uniform(0, pace.startup()))
    elif pace.wait_for_step(out, proc, at, launched):  # the closing part is short: a shorter delay
        sleep_while_running(proc, rng.uniform(0, pace.gap() / (2 if kind == "closing" else 1)))
    killed = kill_tree(proc)
    if not killed:
        assert proc.returncode == 0, proc.stderr.read().decode()[-3000:]
    proc.stderr.close()
    return killed


def assert_everything_on_disk_loads(out: Path, steps: int, last_step: int) -> int:
    """Each checkpoint on disk loads in full; the latest's step never goes back nor past --max-steps."""
    step = last_step
    for name in ("checkpoint.safetensors", "best.safetensors"):
        if (out / name).exists():
            Translator.load(out / name)
    if (out / "checkpoint.safetensors").exists():
        step = checkpoint(out)[1]["train"]["step"]
        assert last_step <= step <= steps
    return step


def test_sigkill_at_random_moments_then_resume_equals_the_uninterrupted_run(launcher, corpus, uninterrupted,
                                                                            tmp_path):
    reference = uninterrupted
    rng, steps, pace = np.random.default_rng(39), STEPS[launcher.ranks], Pace()
    plans = kill_plans(rng, steps)
    kills, inside_writes, step, launches = 0, 0, 0, 0
    while plans or kills < KILLS or not inside_writes:
        if plans:
            plan = plans.pop(0)
        else:  # more kills early in a launch if some missed, and inside a write until one landed there
            plan = ("after step", 0) if kills < KILLS else ("inside write", 0)
        launches += 1
        assert launches <= 3 * KILLS, (plan, kills, inside_writes)
        first = "--resume" if (tmp_path / "checkpoint.safetensors").exists() else "--overwrite"
        before = set(hidden_files(tmp_path))
        if launch_and_kill(plan, tmp_path, command(launcher, corpus, tmp_path, first), launcher.env, pace,
                           rng):
            kills += 1
            inside_writes += bool(set(hidden_files(tmp_path)) - before)  # a write cut short left its temporary file
        step = assert_everything_on_disk_loads(tmp_path, steps, step)
    train(launcher, corpus, tmp_path, "--resume" if (tmp_path / "checkpoint.safetensors").exists() else "--overwrite")
    print(f"{kills} kills, {inside_writes} inside a write")
    assert inside_writes >= 1
    assert hidden_files(tmp_path) == []  # the temporary files of the writes the kills cut short are gone
    assert_same_run(tmp_path, reference)
