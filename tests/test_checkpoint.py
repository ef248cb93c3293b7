"""Checkpoints: exact round trips, clear errors on every kind of bad file (never unpickling),
atomic replacement under kill -9, and resuming training bit-for-bit."""
import json
import os
import pickle
import signal
import struct
import subprocess
import sys
import textwrap
import time

import numpy as np
import pytest
import safetensors.numpy

import tinygrad_lite as tl
from tinygrad_lite import Tensor, nn, optim
from tinygrad_lite.checkpoint import (
    CheckpointError,
    load,
    load_module,
    load_training,
    save,
    save_module,
    save_training,
)
from tinygrad_lite.nn import functional as F

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def sample_arrays():
    g = np.random.default_rng(0)
    return {
        "f32": g.standard_normal((3, 4)).astype(np.float32),
        "f64": g.standard_normal(5),
        "f16": g.standard_normal(2).astype(np.float16),
        "i64": np.arange(-3, 3, dtype=np.int64),
        "i32": np.array([[1, 2]], dtype=np.int32),
        "u8": np.arange(7, dtype=np.uint8),
        "bool": np.array([True, False, True]),
        "scalar": np.array(2.5),
        "empty": np.zeros((0, 3), np.float32),
        "strided": np.arange(12.0).reshape(3, 4)[:, ::2],
        "tensor": Tensor(np.ones((2, 2), np.float32)),
    }


def test_round_trip_is_exact_including_dtypes_and_metadata(tmp_path):
    arrays = sample_arrays()
    meta = {"step": 12, "loss": [1.5, 0.25], "config": {"d_model": 512, "name": "翻译"}}
    path = tmp_path / "ckpt.safetensors"
    save(arrays, path, meta)
    loaded, loaded_meta = load(path)
    assert loaded_meta == meta
    assert set(loaded) == set(arrays)
    for name, original in arrays.items():
        original = original.data if isinstance(original, Tensor) else original
        assert loaded[name].dtype == original.dtype, name
        assert loaded[name].shape == original.shape, name
        np.testing.assert_array_equal(loaded[name], original)
    assert os.listdir(tmp_path) == ["ckpt.safetensors"]  # no temporary file left behind
    loaded["f32"][0, 0] = 7  # arrays are writable, not views of a read-only buffer


def test_overwrite_replaces_the_file_and_plain_safetensors_load_with_empty_metadata(tmp_path):
    path = tmp_path / "a.safetensors"
    save({"x": np.zeros(3)}, path, {"v": 1})
    save({"x": np.ones(3)}, path, {"v": 2})
    arrays, meta = load(path)
    assert meta == {"v": 2} and arrays["x"].tolist() == [1, 1, 1]
    safetensors.numpy.save_file({"y": np.arange(3)}, str(tmp_path / "plain.safetensors"))
    arrays, meta = load(tmp_path / "plain.safetensors")
    assert meta == {} and arrays["y"].tolist() == [0, 1, 2]


def test_save_rejects_what_it_cannot_store(tmp_path):
    with pytest.raises(TypeError, match="dict"):
        save([np.zeros(2)], tmp_path / "x")
    with pytest.raises(TypeError, match="'s'.*dtype"):
        save({"s": np.array(["a"])}, tmp_path / "x")
    with pytest.raises(TypeError, match="JSON"):
        save({"x": np.zeros(1)}, tmp_path / "x", metadata={"f": object()})
    with pytest.raises(FileNotFoundError, match="does not exist"):
        save({"x": np.zeros(1)}, tmp_path / "no" / "x.safetensors")
    assert os.listdir(tmp_path) == []


# ---------------------------------------------------------------- bad files
def good_file(tmp_path):
    path = tmp_path / "good.safetensors"
    save({"w": np.arange(1000, dtype=np.float32)}, path, {"step": 1})
    return path.read_bytes()


def header_len(blob):
    return struct.unpack("<Q", blob[:8])[0]


@pytest.mark.parametrize("make, needle", [
    (lambda blob: blob[:-10], "truncated"),
    (lambda blob: blob[:8 + header_len(blob) // 2], "header length"),
    (lambda blob: blob[:5], "too short"),
    (lambda blob: b"", "too short"),
    (lambda blob: np.random.default_rng(0).integers(0, 256, 4096, dtype=np.uint8).tobytes(), "header length"),
    (lambda blob: struct.pack("<Q", 2 ** 60) + b"{}" * 100, "header length field says 1152921504606846976"),
    (lambda blob: struct.pack("<Q", 10) + b"\xff" * 10 + b"0" * 100, "not valid JSON"),
    (lambda blob: struct.pack("<Q", 5) + b"[1,2]" + b"0" * 10, "JSON list"),
    (lambda blob: blob + b"trailing", "not a valid safetensors"),
])
def test_corrupt_files_raise_checkpoint_error_naming_the_path(tmp_path, make, needle):
    path = tmp_path / "bad.safetensors"
    path.write_bytes(make(good_file(tmp_path)))
    with pytest.raises(CheckpointError) as info:
        load(path)
    assert needle in str(info.value)
    assert str(path) in str(info.value)
    assert isinstance(info.value, ValueError)


class _Booby:
    """Unpickling this would create a marker file."""

    def __init__(self, marker):
        self.marker = marker

    def __reduce__(self):
        return (open, (self.marker, "w"))


@pytest.mark.parametrize("protocol", [2, pickle.HIGHEST_PROTOCOL])
def test_a_pickle_renamed_to_safetensors_is_rejected_and_never_unpickled(tmp_path, protocol):
    marker = tmp_path / "pwned"
    path = tmp_path / "model.safetensors"
    path.write_bytes(pickle.dumps({"weights": [_Booby(str(marker))] * 3, "pad": b"x" * 500}, protocol=protocol))
    with pytest.raises(CheckpointError, match="not a valid safetensors checkpoint"):
        load(path)
    with pytest.raises(CheckpointError):
        load_module(nn.Linear(2, 2), path)
    assert not marker.exists()


def test_missing_file_is_a_file_not_found_error(tmp_path):
    with pytest.raises(FileNotFoundError):
        load(tmp_path / "nope.safetensors")


# ---------------------------------------------------------------- atomicity under kill -9
WRITER = textwrap.dedent("""
    import sys, time
    import numpy as np
    import safetensors.numpy
    from tinygrad_lite.checkpoint import save

    def slow_save_file(arrays, filename, metadata=None):
        # a slow disk: the bytes dribble out, so a kill almost always lands mid-write
        blob = safetensors.numpy.save(arrays, metadata=metadata)
        with open(filename, "wb") as f:
            for start in range(0, len(blob), 1 << 17):
                f.write(blob[start:start + (1 << 17)])
                f.flush()
                time.sleep(0.001)

    safetensors.numpy.save_file = slow_save_file
    path, i = sys.argv[1], int(sys.argv[2])
    big = np.empty(2_000_000, np.float32)
    print("ready", flush=True)
    while True:
        i += 1
        big.fill(i)
        save({"big": big, "small": np.full(3, i, np.int64)}, path, {"i": i})
""")


def check_consistent(path):
    arrays, meta = load(path)
    i = meta["i"]
    assert arrays["big"].shape == (2_000_000,)
    assert arrays["big"][0] == i and arrays["big"][-1] == i and (arrays["big"] == i).all()
    assert arrays["small"].tolist() == [i, i, i]
    return i


def test_kill_9_during_save_never_leaves_a_half_written_checkpoint(tmp_path):
    path = tmp_path / "live.safetensors"
    save({"big": np.zeros(2_000_000, np.float32), "small": np.zeros(3, np.int64)}, path, {"i": 0})
    rng = np.random.default_rng(0)
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([REPO, os.environ.get("PYTHONPATH", "")]))
    last = 0
    for _ in range(5):
        child = subprocess.Popen([sys.executable, "-c", WRITER, str(path), str(last)], stdout=subprocess.PIPE,
                                 stderr=subprocess.PIPE, env=env)
        try:
            ready = child.stdout.readline()
            assert ready.strip() == b"ready", child.stderr.read().decode()
            time.sleep(rng.uniform(0.3, 0.7))
        finally:
            child.send_signal(signal.SIGKILL)
            child.wait()
        assert child.returncode == -signal.SIGKILL
        i = check_consistent(path)
        assert i >= last
        last = i
    assert last > 0  # the child did replace the file between kills


def test_save_makes_no_temporary_file_but_its_own(tmp_path, monkeypatch):
    """A kill mid-save may leave only `.NAME.*.tmp` (atomic_write's, which a resume removes): safetensors'
    save_file writes a `.tmpXXXXXX` of its own first, so save hands it bytes instead. Every name that
    appears in the folder while the bytes are written is recorded (os.replace is the last step)."""
    import tinygrad_lite.files as files
    seen, replace = set(), os.replace

    def watching_replace(src, dst):
        seen.update(os.listdir(tmp_path))
        replace(src, dst)
    monkeypatch.setattr(files.os, "replace", watching_replace)
    created = []
    monkeypatch.setattr(safetensors.numpy, "save_file", lambda *a, **k: created.append(a))  # must not be used
    save({"w": np.ones((64, 64), np.float32)}, tmp_path / "ck.safetensors", {"step": 1})
    assert not created
    assert all(name.startswith(".ck.safetensors.") and name.endswith(".tmp") for name in seen), seen
    assert os.listdir(tmp_path) == ["ck.safetensors"]
    np.testing.assert_array_equal(load(tmp_path / "ck.safetensors")[0]["w"], np.ones((64, 64), np.float32))


# ---------------------------------------------------------------- modules and training state
def test_save_module_and_load_module_round_trip(tmp_path):
    tl.manual_seed(0)
    a = nn.MLP([4, 8, 3])
    tl.manual_seed(1)
    b = nn.MLP([4, 8, 3])
    path = tmp_path / "mlp.safetensors"
    save_module(a, path, {"sizes": [4, 8, 3]})
    assert load_module(b, path) == {"sizes": [4, 8, 3]}
    for (na, pa), (nb, pb) in zip(a.named_parameters(), b.named_parameters()):
        assert na == nb
        np.testing.assert_array_equal(pa.data, pb.data)
    with pytest.raises(ValueError, match="shape mismatches"):
        load_module(nn.MLP([4, 9, 3]), path)


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc1 = nn.Linear(5, 16)
        self.drop = nn.Dropout(0.3)
        self.fc2 = nn.Linear(16, 3)

    def forward(self, x):
        return self.fc2(self.drop(self.fc1(x).relu()))


def train_steps(model, opt, sched, x, y, n):
    losses = []
    for _ in range(n):
        loss = F.cross_entropy(model(x), y)
        opt.zero_grad()
        loss.backward()
        opt.step()
        sched.step()
        losses.append(loss.item())
    return losses


def make_run(seed=0):
    tl.manual_seed(seed)
    model = Net()
    opt = optim.Adam(model.parameters(), lr=1.0, betas=(0.9, 0.98), eps=1e-9)
    return model, opt, optim.NoamLR(opt, d_model=16, warmup=5)


def test_save_training_resumes_bit_for_bit(tmp_path):
    g = np.random.default_rng(0)
    x = Tensor(g.standard_normal((32, 5)).astype(np.float32))
    y = g.integers(0, 3, 32)
    model, opt, sched = make_run()
    train_steps(model, opt, sched, x, y, 7)
    path = tmp_path / "train.safetensors"
    save_training(path, model, opt, sched, metadata={"step": 7})
    straight = train_steps(model, opt, sched, x, y, 6)

    model2, opt2, sched2 = make_run(seed=123)
    tl.manual_seed(999)
    assert load_training(path, model2, opt2, sched2) == {"step": 7}
    resumed = train_steps(model2, opt2, sched2, x, y, 6)
    assert resumed == straight
    for p, q in zip(model.parameters(), model2.parameters()):
        np.testing.assert_array_equal(p.data, q.data)
    _, meta = load(path)
    json.dumps(meta)


def test_save_training_keeps_arrays_inside_the_metadata_as_tensors(tmp_path):
    """Weight snapshots in a run's metadata (checkpoint averaging) are stored as tensors, not JSON,
    and come back from load_training bit for bit, in place."""
    model, opt, _ = make_run()
    snapshots = [{"w": np.arange(6, dtype=np.float32).reshape(2, 3) / 7}, {"w": np.full((2, 3), -0.1, np.float32)}]
    path = tmp_path / "run.safetensors"
    save_training(path, model, opt, metadata={"step": 3, "snapshots": snapshots})
    arrays, meta = load(path)
    assert meta["metadata"]["snapshots"][1] == {"w": {"__array__": "metadata/snapshots/1/w"}}
    np.testing.assert_array_equal(arrays["metadata/snapshots/0/w"], snapshots[0]["w"])
    back = load_training(path, make_run(seed=5)[0], make_run(seed=5)[1])
    assert back["step"] == 3 and [s["w"].dtype for s in back["snapshots"]] == [np.float32] * 2
    for saved, loaded in zip(snapshots, back["snapshots"]):
        np.testing.assert_array_equal(loaded["w"], saved["w"])
