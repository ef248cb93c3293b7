"""What the attention lab's and the live page's servers share: the standard library's
ThreadingHTTPServer bound to this machine, and the one rule for which files a URL may name.

A page's files sit directly in its own folder; a name with a path in it (`/`, `\\`), `..`, a hidden
file, a NUL or a symlink names nothing, so no request can read outside that folder."""
from __future__ import annotations

import errno
from http.server import ThreadingHTTPServer
from pathlib import Path

# the Chinese font shipped in viz/fontdata (viz.fonts.BUNDLED_FONT_PATH, which loads matplotlib)
BUNDLED_FONT = Path(__file__).resolve().parent / "fontdata" / "TinygradLiteCJK-Regular.otf"


def file_in(folder: Path, name: str) -> Path | None:
    """The file `name` (already URL-decoded) directly inside `folder`, resolved, or None."""
    if not name or "/" in name or "\\" in name or "\0" in name or name.startswith("."):
        return None
    path = folder / name
    if path.is_symlink() or not path.is_file() or path.resolve().parent != folder.resolve():
        return None
    return path.resolve()


class LocalServer(ThreadingHTTPServer):
    """A ThreadingHTTPServer whose request threads never hold the process open (a page may keep
    its connection alive); `url` says where it listens (port 0 picks a free one)."""

    daemon_threads = True

    def server_bind(self) -> None:
        try:
            super().server_bind()
        except OSError as e:
            if e.errno != errno.EADDRINUSE:
                raise
            host, port = self.server_address[:2]
            busy = OSError(f"port {port} on {host} is already in use (another server holds it): "
                           "pick another with --port N, or --port 0 for any free one")
            busy.errno = e.errno
            raise busy from None

    @property
    def url(self) -> str:
        host, port = self.server_address[:2]
        return f"http://{host}:{port}/"
