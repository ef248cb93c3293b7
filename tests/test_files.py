"""tinygrad_lite.files.atomic_write, the one writer of checkpoints, figures and graphs: the target
is replaced whole or not at all, nothing is left behind, and `durable` decides the fsyncs."""
import os
import stat

import pytest

from tinygrad_lite import files
from tinygrad_lite.files import atomic_write


def count_fsyncs(monkeypatch) -> list:
    calls = []
    real = os.fsync

    def counting(handle):
        calls.append(handle)
        return real(handle)

    monkeypatch.setattr(files.os, "fsync", counting)
    return calls


@pytest.mark.parametrize("durable, fsyncs", [(True, 2), (False, 0)])
def test_the_target_is_replaced_and_durable_means_file_and_directory_fsync(tmp_path, monkeypatch, durable, fsyncs):
    target = tmp_path / "out.bin"
    target.write_bytes(b"old")
    calls = count_fsyncs(monkeypatch)
    with atomic_write(target, durable=durable) as temp:
        assert temp.parent == tmp_path and temp.name.startswith(".out.bin.") and temp.name.endswith(".tmp")
        temp.write_bytes(b"new")
        assert target.read_bytes() == b"old"  # nothing visible until the block ends
    assert target.read_bytes() == b"new"
    assert len(calls) == fsyncs
    assert os.listdir(tmp_path) == ["out.bin"]


def test_an_error_in_the_block_keeps_the_old_file_and_removes_the_temp(tmp_path):
    target = tmp_path / "out.bin"
    target.write_bytes(b"old")
    with pytest.raises(RuntimeError, match="disk on fire"), atomic_write(target) as temp:
        temp.write_bytes(b"half")
        raise RuntimeError("disk on fire")
    assert target.read_bytes() == b"old"
    assert os.listdir(tmp_path) == ["out.bin"]


def test_the_file_gets_the_umask_permissions_not_mkstemps_0600(tmp_path):
    previous = os.umask(0o027)
    try:
        with atomic_write(tmp_path / "a.txt", durable=False) as temp:
            temp.write_text("x")
    finally:
        os.umask(previous)
    assert stat.S_IMODE((tmp_path / "a.txt").stat().st_mode) == 0o640


def test_make_parents_and_a_suffix(tmp_path):
    target = tmp_path / "deep" / "er" / "fig.png"
    with atomic_write(target, durable=False, suffix=".tmp.png", make_parents=True) as temp:
        assert temp.name.endswith(".tmp.png")
        temp.write_bytes(b"png")
    assert target.read_bytes() == b"png"


def test_a_directory_that_cannot_take_the_file_is_named(tmp_path):
    with pytest.raises(FileNotFoundError, match=r"save: cannot write .*: directory .*missing' does not exist"):
        with atomic_write(tmp_path / "missing" / "a.bin", op="save"):
            pass
    blocker = tmp_path / "a_file"
    blocker.write_text("")
    for make_parents in (False, True):
        with pytest.raises(OSError, match="a_file' is a file, not a directory"):
            with atomic_write(blocker / "sub" / "a.bin", make_parents=make_parents):
                pass
    assert sorted(os.listdir(tmp_path)) == ["a_file"]
