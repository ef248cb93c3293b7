"""Loading a checkpoint from a stranger: it never runs code, never allocates more than the
file's size justifies, and every kind of broken file is one clean CheckpointError (or, for a
translator, TranslatorError) naming the file. Extends tests/test_checkpoint.py, which covers
truncation, a bad header length, a non-JSON header and a pickle renamed to .safetensors."""
import json
import pickle
import struct
import subprocess
import sys
import textwrap
import time
import tracemalloc
from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import tinygrad_lite as tl
from tinygrad_lite import nn
from tinygrad_lite.checkpoint import CheckpointError, load, load_module, load_training, save
from transformer import Transformer
from transformer.data import Vocab
from transformer.translator import Translator, TranslatorError

ROOT = Path(__file__).resolve().parents[2]


def safetensors_bytes(header: dict | bytes, data: bytes = b"") -> bytes:
    raw = header if isinstance(header, bytes) else json.dumps(header).encode()
    return struct.pack("<Q", len(raw)) + raw + data


class RunsCode:
    """Unpickling this creates the marker file: proof that code ran."""

    def __init__(self, marker):
        self.marker = str(marker)

    def __reduce__(self):
        return (open, (self.marker, "w"))


@pytest.fixture(scope="module")
def translator_checkpoint(tmp_path_factory) -> Path:
    tl.manual_seed(0)
    src, tgt = Vocab.build([list("这是一个苹果。")]), Vocab.build([["this", "is", "an", "apple", "."]])
    model = Transformer(len(src), len(tgt), d_model=8, h=2, N=1, d_ff=16, dropout=0.0)
    path = tmp_path_factory.mktemp("ckpt") / "checkpoint.safetensors"
    Translator(model, src, tgt, max_train_len=8).save(path, {"step": 3})
    return path


def assert_rejected(path: Path, marker: Path | None = None):
    """Both loaders refuse the file with an error that names it; no code ran."""
    with pytest.raises(CheckpointError) as info:
        load(path)
    assert str(path) in str(info.value) and "\n" not in str(info.value)
    with pytest.raises((CheckpointError, TranslatorError)) as info:
        Translator.load(path)
    assert str(path) in str(info.value)
    with pytest.raises(ValueError):
        load_module(nn.Linear(2, 2), path)
    if marker is not None:
        assert not marker.exists(), "loading ran code from the file"


# ---------------------------------------------------------------- code never runs
def pickle_payloads(marker):
    bomb = [RunsCode(marker)] * 3
    yield "pickle protocol 0", pickle.dumps(bomb, protocol=0)
    yield "pickle protocol 5", pickle.dumps({"weights": bomb, "pad": b"x" * 100}, protocol=5)
    body = pickle.dumps(bomb, protocol=4)
    yield "pickle after a plausible length field", struct.pack("<Q", len(body)) + body
    import io
    import zipfile
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as archive:  # the layout of torch.save's files
        archive.writestr("archive/data.pkl", pickle.dumps(bomb, protocol=2))
        archive.writestr("archive/version", "3\n")
    yield "torch.save-style zip with a pickle inside", buffer.getvalue()
    npy = io.BytesIO()
    np.save(npy, np.array(bomb, dtype=object), allow_pickle=True)
    yield "numpy .npy with an object array", npy.getvalue()


def test_pickle_payloads_renamed_to_safetensors_never_run(tmp_path):
    marker = tmp_path / "code-ran"
    for name, payload in pickle_payloads(marker):
        path = tmp_path / f"{name.replace(' ', '_')}.safetensors"
        path.write_bytes(payload)
        assert_rejected(path, marker)


def test_a_pickle_inside_a_valid_file_stays_bytes(tmp_path):
    marker = tmp_path / "code-ran"
    payload = np.frombuffer(pickle.dumps(RunsCode(marker)), dtype=np.uint8)
    path = tmp_path / "carrier.safetensors"
    save({"blob": payload}, path, {"note": "the data section holds a pickle"})
    arrays, _ = load(path)
    np.testing.assert_array_equal(arrays["blob"], payload)
    with pytest.raises(TranslatorError, match="not a translator checkpoint"):
        Translator.load(path)
    assert not marker.exists()


def test_the_cli_refuses_a_pickle_in_one_line(tmp_path, cli):
    marker = tmp_path / "code-ran"
    path = tmp_path / "model.safetensors"
    path.write_bytes(pickle.dumps([RunsCode(marker)]))
    for module, args in (("transformer", ["translate", "--checkpoint", path, "我"]),
                         ("transformer", ["eval", "--checkpoint", path]),
                         ("viz", ["attention", "--checkpoint", path, "--out", tmp_path / "a.png", "我"])):
        run = cli(module, *args, cwd=tmp_path)
        assert run.returncode == 2, run.stderr
        assert "not a valid safetensors checkpoint" in run.stderr and "Traceback" not in run.stderr
        assert len(run.stderr.strip().splitlines()) == 1
    assert not marker.exists()


# ---------------------------------------------------------------- malformed headers
MALFORMED = {
    "offsets past the end of the file":
        safetensors_bytes({"w": {"dtype": "F32", "shape": [4], "data_offsets": [0, 1600]}}, bytes(16)),
    "offsets reversed":
        safetensors_bytes({"w": {"dtype": "F32", "shape": [0], "data_offsets": [16, 0]}}, bytes(16)),
    "offsets disagree with the shape":
        safetensors_bytes({"w": {"dtype": "F32", "shape": [3], "data_offsets": [0, 16]}}, bytes(16)),
    "two tensors share bytes": safetensors_bytes(
        {"a": {"dtype": "F32", "shape": [4], "data_offsets": [0, 16]},
         "b": {"dtype": "F32", "shape": [4], "data_offsets": [0, 16]}}, bytes(16)),
    "a gap before the first tensor":
        safetensors_bytes({"a": {"dtype": "F32", "shape": [2], "data_offsets": [8, 16]}}, bytes(16)),
    "negative offsets":
        safetensors_bytes({"a": {"dtype": "F32", "shape": [2], "data_offsets": [-8, 0]}}, bytes(8)),
    "float offsets":
        safetensors_bytes({"a": {"dtype": "F32", "shape": [2], "data_offsets": [0.0, 8.0]}}, bytes(8)),
    "negative shape":
        safetensors_bytes({"w": {"dtype": "F32", "shape": [-4], "data_offsets": [0, 16]}}, bytes(16)),
    "unknown dtype": safetensors_bytes({"w": {"dtype": "X9", "shape": [4], "data_offsets": [0, 16]}}, bytes(16)),
    "an entry that is a number": safetensors_bytes({"w": 5}),
    "an entry without dtype": safetensors_bytes({"w": {"shape": [2], "data_offsets": [0, 8]}}, bytes(8)),
    "header length 2**64 - 1": struct.pack("<Q", 2 ** 64 - 1) + b"{}",
    "a UTF-8 byte order mark before the JSON": safetensors_bytes(b"\xef\xbb\xbf{}"),
    "a header nested 100,000 deep": safetensors_bytes(b"[" * 100_000 + b"]" * 100_000),
    "metadata that is not valid JSON": safetensors_bytes({"__metadata__": {"tinygrad_lite": "{'step': 1,"}}),
    "metadata JSON that is a list": safetensors_bytes({"__metadata__": {"tinygrad_lite": "[1, 2]"}}),
    "metadata JSON nested 100,000 deep":
        safetensors_bytes({"__metadata__": {"tinygrad_lite": "[" * 100_000 + "]" * 100_000}}),
    "metadata values that are not strings": safetensors_bytes({"__metadata__": {"tinygrad_lite": 5}}),
    "metadata that is a list": safetensors_bytes({"__metadata__": [1]}),
}


@pytest.mark.parametrize("name", sorted(MALFORMED))
def test_malformed_files_are_one_clean_error(tmp_path, name):
    path = tmp_path / "bad.safetensors"
    path.write_bytes(MALFORMED[name])
    assert_rejected(path)


def test_load_training_refuses_metadata_that_is_not_an_object(tmp_path):
    path = tmp_path / "train.safetensors"
    path.write_bytes(MALFORMED["metadata JSON that is a list"])
    with pytest.raises(CheckpointError, match="JSON list, expected an object"):
        load_training(path, nn.Linear(2, 2))
    with pytest.raises(TypeError, match="metadata must be a dict"):
        save({"x": np.zeros(1)}, tmp_path / "x.safetensors", [1, 2])


@pytest.mark.parametrize("fraction", [0.0, 0.01, 0.2, 0.5, 0.8, 0.99])
def test_every_truncation_of_a_translator_checkpoint_is_a_clean_error(tmp_path, translator_checkpoint, fraction):
    blob = translator_checkpoint.read_bytes()
    path = tmp_path / "cut.safetensors"
    path.write_bytes(blob[:int(len(blob) * fraction)])
    assert_rejected(path)


# ---------------------------------------------------------------- allocations
HUGE_CLAIMS = {
    "a 2**40-element tensor past the end": {"w": {"dtype": "F64", "shape": [2 ** 40], "data_offsets": [0, 2 ** 43]}},
    "a 2**40-element tensor in 16 bytes": {"w": {"dtype": "F64", "shape": [2 ** 40], "data_offsets": [0, 16]}},
    "a shape whose product overflows": {"w": {"dtype": "F32", "shape": [2 ** 62, 2 ** 62], "data_offsets": [0, 16]}},
}


@pytest.mark.parametrize("name", sorted(HUGE_CLAIMS))
def test_a_header_claiming_a_huge_tensor_fails_fast_without_allocating(tmp_path, name):
    path = tmp_path / "huge.safetensors"
    path.write_bytes(safetensors_bytes(HUGE_CLAIMS[name], bytes(16)))
    tracemalloc.start()
    started = time.perf_counter()
    try:
        with pytest.raises(CheckpointError, match="huge.safetensors"):
            load(path)
        with pytest.raises((CheckpointError, TranslatorError)):
            Translator.load(path)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 1_000_000, f"peak {peak:,} bytes for a {path.stat().st_size}-byte file"
    assert time.perf_counter() - started < 10  # a generous bound: "quickly", not a benchmark


def test_a_translator_config_asking_for_a_huge_model_is_refused_before_building_it(tmp_path,
                                                                                 translator_checkpoint):
    arrays, meta = load(translator_checkpoint)
    meta["config"].update(src_vocab=10 ** 9, tgt_vocab=10 ** 9, d_model=4096, d_ff=16384)
    path = tmp_path / "greedy.safetensors"
    save(arrays, path, meta)
    tracemalloc.start()
    try:
        with pytest.raises(TranslatorError, match="asks for a model of at least .* weights"):
            Translator.load(path)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 2 * path.stat().st_size + 1_000_000


PEAK_RSS = textwrap.dedent("""
    import resource, sys
    from tinygrad_lite.checkpoint import CheckpointError, load
    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    try:
        load(sys.argv[1])
    except CheckpointError:
        pass
    print(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before)
""")


def test_peak_memory_of_the_whole_process_stays_small(tmp_path, cli):
    """tracemalloc does not see the safetensors library's own (Rust) allocations; the
    process's peak resident size does."""
    path = tmp_path / "huge.safetensors"
    path.write_bytes(safetensors_bytes(HUGE_CLAIMS["a 2**40-element tensor in 16 bytes"], bytes(16)))
    run = subprocess.run([sys.executable, "-c", PEAK_RSS, str(path)], check=False, capture_output=True, text=True,
                         timeout=120, env={"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin"})
    assert run.returncode == 0, run.stderr
    assert int(run.stdout) < 50_000  # KiB on Linux


# ---------------------------------------------------------------- random corruption
@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.too_slow,
                                                                 HealthCheck.function_scoped_fixture])
@given(st.data())
def test_random_byte_corruption_loads_or_is_a_clean_error(count_example, translator_checkpoint, tmp_path, data):
    blob = bytearray(translator_checkpoint.read_bytes())
    header_end = 8 + struct.unpack("<Q", bytes(blob[:8]))[0]
    region = data.draw(st.sampled_from(["length", "header", "data", "anywhere"]))
    lo, hi = {"length": (0, 8), "header": (8, header_end), "data": (header_end, len(blob)),
              "anywhere": (0, len(blob))}[region]
    for _ in range(data.draw(st.integers(1, 4))):
        blob[data.draw(st.integers(lo, hi - 1))] = data.draw(st.integers(0, 255))
    path = tmp_path / "flipped.safetensors"
    path.write_bytes(bytes(blob))
    try:
        Translator.load(path)
    except (CheckpointError, TranslatorError) as error:
        assert str(path) in str(error)
    count_example("Translator.load on a randomly corrupted checkpoint")
