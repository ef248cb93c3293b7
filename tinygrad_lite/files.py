"""Writing a file so that nobody ever sees half of it: the bytes go to a hidden temporary file in
the same directory, which is then renamed over the target in one step (os.replace). A reader, or
a process killed mid-write, finds the old file or the new one, never a mix.

The durability policy is a parameter. `durable=True` (checkpoints) also flushes the temporary
file and the directory to disk (fsync), so the new file survives a power cut, not just a crash;
`durable=False` (figures, graphs) skips the two fsyncs, which cost milliseconds each.
"""
from __future__ import annotations

import contextlib
import errno
import os
import tempfile
from pathlib import Path


@contextlib.contextmanager
def atomic_write(path, durable: bool = True, *, op: str = "atomic_write", suffix: str = ".tmp",
                 make_parents: bool = False):
    """Yield the Path of a new empty temporary file `.NAME.*SUFFIX` beside `path`; write it in the
    block. If the block succeeds, the file gets the usual permissions (umask) and replaces `path`;
    if it raises, the temporary file is removed. With `make_parents`, missing directories are
    created. A directory that cannot take the file raises OSError naming `op`, path and reason."""
    path = Path(path)
    temp = _temp_file(op, path, suffix, make_parents)
    try:
        yield temp
        if durable:
            _fsync(temp)
        os.chmod(temp, _default_file_mode())
        os.replace(temp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(temp)
        raise
    if durable:
        with contextlib.suppress(OSError):  # some platforms cannot open a directory; the rename holds
            _fsync(path.parent)


def _temp_file(op: str, path: Path, suffix: str, make_parents: bool) -> Path:
    directory = path.parent
    try:
        if make_parents:
            directory.mkdir(parents=True, exist_ok=True)
        handle, name = tempfile.mkstemp(dir=directory, prefix=f".{path.name}.", suffix=suffix)
    except OSError as exc:
        raise unwritable(op, path, exc) from exc
    os.close(handle)
    return Path(name)


def _fsync(path: Path) -> None:
    handle = os.open(path, os.O_RDONLY)
    try:
        os.fsync(handle)
    finally:
        os.close(handle)


def _default_file_mode() -> int:
    """0o666 minus the umask: what open() would have given the file (mkstemp gives 0o600)."""
    umask = os.umask(0o022)
    os.umask(umask)
    return 0o666 & ~umask


def unwritable(op: str, path: Path, exc: OSError) -> OSError:
    """An OSError of exc's kind (FileNotFoundError, PermissionError, ...) that names the file and
    why its directory cannot take it."""
    directory = path.parent
    blocker = next((p for p in (directory, *directory.parents) if p.exists()), None)
    if blocker is not None and not blocker.is_dir():
        reason = f"{str(blocker)!r} is a file, not a directory"
    elif exc.errno == errno.ENOENT and not directory.is_dir():
        reason = f"directory {str(directory)!r} does not exist"
    else:
        reason = f"directory {str(directory)!r} is not writable"
    message = f"{op}: cannot write {str(path)!r}: {reason}"
    if exc.errno is None:
        return OSError(f"{message} ({exc})")
    return OSError(exc.errno, f"{message} ({exc.strerror})", str(directory))
