"""A run's events file (JSON lines, appended by the training loop) read by line number: the page
asks for the lines from `since` on, and each request reads only what was appended since the last."""
from __future__ import annotations

import contextlib
import os
import threading

EVENTS_FILE = "events.jsonl"


class EventsFile:
    """Byte offsets of the complete lines of `path`, extended as the file grows. A file rewritten
    since the last read (a new run in the same directory, or a resumed run that cut it back to its
    checkpoint and wrote on) is read again from the start: it is shorter, or its last line read is no
    longer where it was."""

    def __init__(self, path):
        self.path = os.fspath(path)
        self.starts: list[int] = []   # where each complete line begins
        self.end = 0                  # just after the last complete line
        self.last_line = b""          # the bytes of that line, to see a rewrite by
        self.lock = threading.Lock()

    def refresh(self) -> None:
        try:
            size = os.path.getsize(self.path)
        except OSError:
            size = 0
        with open(self.path, "rb") if size else contextlib.nullcontext() as f:
            if size < self.end or (self.starts and self._line_at(f, self.starts[-1]) != self.last_line):
                self.starts, self.end, self.last_line = [], 0, b""
            if size == self.end:
                return
            f.seek(self.end)
            chunk = f.read(size - self.end)
        done = chunk.rfind(b"\n") + 1  # a line still being written waits for the next request
        position = self.end
        for line in chunk[:done].split(b"\n")[:-1]:
            self.starts.append(position)
            position += len(line) + 1
            self.last_line = line + b"\n"
        self.end += done

    def _line_at(self, f, start: int) -> bytes:
        f.seek(start)
        return f.read(self.end - start)

    def lines(self, since: int, limit: int) -> tuple[list[str], int]:
        """(up to `limit` lines from line `since` on, the number of complete lines now)."""
        with self.lock:
            self.refresh()
            total = len(self.starts)
            since = max(0, min(since, total))
            stop = min(total, since + limit)
            if stop == since:
                return [], total
            begin, end = self.starts[since], self.starts[stop] if stop < total else self.end
        with open(self.path, "rb") as f:
            f.seek(begin)
            data = f.read(end - begin)
        return data.decode("utf-8").splitlines(), total
