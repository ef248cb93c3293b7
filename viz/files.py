"""Writing output files so that a reader never sees half a file: write a temporary file in
the same directory, then rename it into place."""
from __future__ import annotations

import contextlib
import os
import tempfile
from pathlib import Path


def unwritable(op: str, path: Path, directory: Path, exc: OSError) -> OSError:
    """An OSError that names the file, and why its directory cannot take it."""
    blocker = next((p for p in (directory, *directory.parents) if p.exists()), None)
    if blocker is not None and not blocker.is_dir():
        message = f"{op}: cannot write {str(path)!r}: {str(blocker)!r} is a file, not a directory"
    else:
        message = f"{op}: cannot write {str(path)!r}: directory {str(directory)!r} is not writable"
    if exc.errno is None:
        return OSError(f"{message} ({exc})")
    return OSError(exc.errno, f"{message} ({exc.strerror})", str(directory))


@contextlib.contextmanager
def atomic_output(path: Path, op: str, suffix: str = ".tmp"):
    """Yield a binary stream; on success the bytes replace `path` in one rename (with the
    usual umask permissions), on any error the temporary file is removed."""
    path = Path(path)
    directory = path.parent
    try:
        directory.mkdir(parents=True, exist_ok=True)
        handle, temp_name = tempfile.mkstemp(dir=directory, prefix=f".{path.name}.", suffix=suffix)
    except OSError as exc:
        raise unwritable(op, path, directory, exc) from exc
    try:
        with os.fdopen(handle, "wb") as stream:
            yield stream
        mask = os.umask(0o022)
        os.umask(mask)
        os.chmod(temp_name, 0o666 & ~mask)
        os.replace(temp_name, path)
    except BaseException:
        if os.path.exists(temp_name):
            os.unlink(temp_name)
        raise
