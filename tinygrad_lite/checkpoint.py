"""Checkpoints as safetensors files: named arrays plus JSON metadata, never pickle.

A safetensors file is an 8-byte little-endian header length, a JSON header (dtype, shape and
byte range of every array, plus a `__metadata__` dict of strings) and the raw array bytes.
Loading only reads numbers, so a checkpoint from a stranger cannot run code (unlike pickle).

Saving is atomic and durable (`files.atomic_write`): the bytes go to a temporary file in the same
directory, are flushed to disk (fsync), and only then renamed over the target (os.replace), so a
crash or `kill -9` mid-save leaves the previous checkpoint intact. A killed save may leave a
hidden `.NAME.*.tmp` file behind.

For tests that kill a process in the middle of a save (tests/test_kill_resume.py): with
TINYGRAD_LITE_TEST_SAVE_PAUSE=SECONDS set, every save waits that long between writing its
temporary file and renaming it, so a kill can be aimed inside the write.
"""
from __future__ import annotations

import json
import os
import struct
import time

import numpy as np
import safetensors
import safetensors.numpy

from . import random as _random
from .files import atomic_write
from .tensor import Tensor

METADATA_KEY = "tinygrad_lite"
SAVE_PAUSE_ENV = "TINYGRAD_LITE_TEST_SAVE_PAUSE"
MAX_HEADER_BYTES = 100_000_000  # the safetensors format's own limit


class CheckpointError(ValueError):
    """A file is not a readable checkpoint (truncated, corrupt, or not safetensors at all)."""


# ---------------------------------------------------------------- save
def _arrays(op: str, tensors) -> dict:
    if not isinstance(tensors, dict):
        raise TypeError(f"{op}: tensors must be a dict name -> ndarray/Tensor, got {type(tensors).__name__}")
    out = {}
    for name, value in tensors.items():
        if not isinstance(name, str):
            raise TypeError(f"{op}: tensor names must be strings, got {name!r}")
        arr = value.data if isinstance(value, Tensor) else value
        if not isinstance(arr, (np.ndarray, np.generic)):
            raise TypeError(f"{op}: '{name}' must be an ndarray or a Tensor, got {type(value).__name__}")
        arr = np.asarray(arr)
        if arr.dtype.kind not in "biuf":
            raise TypeError(f"{op}: '{name}' has dtype {arr.dtype}; checkpoints hold bool, int and float arrays")
        out[name] = arr if arr.flags.c_contiguous else arr.copy(order="C")
    return out


def save(tensors: dict, path, metadata: dict | None = None) -> None:
    """Write `tensors` (name -> ndarray or Tensor) and JSON-able `metadata` to `path`, atomically."""
    op = "checkpoint.save"
    arrays = _arrays(op, tensors)
    if metadata is not None and not isinstance(metadata, dict):
        raise TypeError(f"{op}: metadata must be a dict (a JSON object) or None, got {type(metadata).__name__}")
    try:
        header = {METADATA_KEY: json.dumps({} if metadata is None else metadata)}
    except (TypeError, ValueError) as e:
        raise TypeError(f"{op}: metadata must be JSON-serialisable ({e})") from None
    blob = safetensors.numpy.save(arrays, metadata=header)  # bytes: save_file would write a `.tmpXXXXXX` of its own
    with atomic_write(path, durable=True, op=op) as temp:       # beside ours, which a kill mid-write would leave
        temp.write_bytes(blob)
        if os.environ.get(SAVE_PAUSE_ENV):  # a test's window for a kill inside the write
            time.sleep(float(os.environ[SAVE_PAUSE_ENV]))


# ---------------------------------------------------------------- load
def _read_header(path: str, f, size: int) -> dict:
    def fail(what):
        raise CheckpointError(f"checkpoint.load: {path!r} is not a valid safetensors checkpoint: {what}")

    if size < 8:
        fail(f"the file is {size} bytes, too short to hold the 8-byte header length")
    (n,) = struct.unpack("<Q", f.read(8))
    if n == 0 or n > size - 8 or n > MAX_HEADER_BYTES:
        fail(f"the header length field says {n} bytes but the file has {size - 8} bytes after it "
             f"(limit {MAX_HEADER_BYTES}); truncated, corrupt, or another format (e.g. pickle)")
    raw = f.read(n)
    try:
        header = json.loads(raw.decode("utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as e:
        fail(f"the header is not valid JSON ({e})")
    except RecursionError:
        fail("the header's JSON is nested too deeply")
    if not isinstance(header, dict):
        fail(f"the header is a JSON {type(header).__name__}, expected an object")
    data_size = size - 8 - n
    for name, entry in header.items():
        if name == "__metadata__":
            continue
        offsets = entry.get("data_offsets") if isinstance(entry, dict) else None
        if (not isinstance(offsets, list) or len(offsets) != 2
                or not all(isinstance(o, int) and o >= 0 for o in offsets)):
            fail(f"tensor '{name}' has no valid data_offsets in the header")
        if offsets[1] > data_size:
            fail(f"tensor '{name}' needs bytes up to {offsets[1]} of the data section but it has only "
                 f"{data_size} (the file is truncated)")
    return header


def load(path) -> tuple[dict, dict]:
    """(name -> ndarray, metadata dict) from a checkpoint written by `save` (or any safetensors file,
    whose metadata is then {}). Anything unreadable raises CheckpointError naming path and problem."""
    path = os.fspath(path)
    with open(path, "rb") as f:
        size = os.fstat(f.fileno()).st_size
        header = _read_header(path, f, size)
        f.seek(0)
        blob = f.read()
    if len(blob) != size:
        raise CheckpointError(f"checkpoint.load: {path!r} changed size while being read ({size} -> {len(blob)} bytes)")
    try:
        arrays = safetensors.numpy.load(blob)
    except (safetensors.SafetensorError, ValueError, TypeError, KeyError) as e:
        raise CheckpointError(f"checkpoint.load: {path!r} is not a valid safetensors checkpoint: {e}") from None
    meta_strings = header.get("__metadata__") or {}
    metadata = {}
    if isinstance(meta_strings, dict) and METADATA_KEY in meta_strings:
        try:
            metadata = json.loads(meta_strings[METADATA_KEY])
        except (TypeError, json.JSONDecodeError, RecursionError) as e:
            raise CheckpointError(f"checkpoint.load: {path!r} has unreadable '{METADATA_KEY}' metadata "
                                  f"({e or type(e).__name__})") from None
        if not isinstance(metadata, dict):
            raise CheckpointError(f"checkpoint.load: {path!r} has '{METADATA_KEY}' metadata that is a JSON "
                                  f"{type(metadata).__name__}, expected an object")
    return dict(arrays), metadata


# ---------------------------------------------------------------- modules
def save_module(model, path, metadata: dict | None = None) -> None:
    """Save model.state_dict() (parameters and persistent buffers) with optional metadata."""
    save(model.state_dict(), path, metadata)


def load_module(model, path, strict: bool = True) -> dict:
    """Load a checkpoint saved by save_module into `model` (see Module.load_state_dict); returns
    the metadata."""
    arrays, metadata = load(path)
    model.load_state_dict(arrays, strict=strict)
    return metadata


# ---------------------------------------------------------------- training state
def pack_arrays(obj, prefix: str, arrays: dict):
    """Nested dicts/lists with ndarrays -> the same structure with {'__array__': name} references."""
    if isinstance(obj, np.ndarray):
        arrays[prefix] = obj
        return {"__array__": prefix}
    if isinstance(obj, dict):
        return {str(k): pack_arrays(v, f"{prefix}/{k}", arrays) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [pack_arrays(v, f"{prefix}/{i}", arrays) for i, v in enumerate(obj)]
    if isinstance(obj, np.generic):
        return obj.item()
    return obj


def unpack_arrays(obj, arrays: dict, path: str = "checkpoint"):
    """The inverse of pack_arrays: put the referenced arrays back in place."""
    if isinstance(obj, dict):
        if set(obj) == {"__array__"}:
            try:
                return arrays[obj["__array__"]]
            except KeyError:
                raise CheckpointError(f"checkpoint: {path!r} refers to a missing array '{obj['__array__']}'") from None
        return {k: unpack_arrays(v, arrays, path) for k, v in obj.items()}
    if isinstance(obj, list):
        return [unpack_arrays(v, arrays, path) for v in obj]
    return obj


def save_training(path, model, optimizer=None, scheduler=None, metadata: dict | None = None,
                  rng_state: bool = True) -> None:
    """One file with everything needed to resume training: the model's state_dict (under
    'model/'), the optimizer's arrays (under 'optimizer/'), the scheduler's and the engine rng's
    state and `metadata` (e.g. step, epoch, losses) in the JSON header; arrays inside the metadata
    (e.g. weight snapshots) are stored as tensors under 'metadata/' (pack_arrays)."""
    arrays = {f"model/{k}": v for k, v in model.state_dict().items()}
    info = {"metadata": pack_arrays(metadata or {}, "metadata", arrays)}
    if optimizer is not None:
        info["optimizer"] = pack_arrays(optimizer.state_dict(), "optimizer", arrays)
    if scheduler is not None:
        info["scheduler"] = scheduler.state_dict()
    if rng_state:
        info["rng"] = _random.get_rng_state()
    save(arrays, path, info)


def load_training(path, model, optimizer=None, scheduler=None, strict: bool = True,
                  rng_state: bool = True) -> dict:
    """Restore what save_training wrote into the given objects; returns the user metadata."""
    arrays, info = load(path)
    prefix = "model/"
    model.load_state_dict({k[len(prefix):]: v for k, v in arrays.items() if k.startswith(prefix)}, strict=strict)
    path = os.fspath(path)
    for name, obj in (("optimizer", optimizer), ("scheduler", scheduler)):
        if obj is not None:
            if name not in info:
                raise CheckpointError(f"checkpoint.load_training: {path!r} holds no {name} state")
            obj.load_state_dict(unpack_arrays(info[name], arrays, path))
    if rng_state and "rng" in info:
        _random.set_rng_state(info["rng"])
    return unpack_arrays(info.get("metadata", {}), arrays, path)
