"""The live page's server: the standard library's ThreadingHTTPServer on 127.0.0.1, serving its
own static files and one file of the run directory, the events (JSON lines) from a line on:

    GET /                    the page (static/index.html)
    GET /static/NAME         a file of viz/watch/static (no subfolders, no links out)
    GET /events?since=N      {"lines": [event, ...], "next": M, "total": T}: at most LIMIT events
    GET /font.otf            the CJK font bundled in viz/fontdata (a browser may have none for 苹果)

Anything else is 404, so nothing outside the static directory and the run's events file can be read."""
from __future__ import annotations

import json
import os
import threading
import time
from http.server import BaseHTTPRequestHandler
from pathlib import Path
from urllib.parse import parse_qs, unquote, urlsplit

from ..local_server import BUNDLED_FONT, LocalServer, file_in
from .events_file import EVENTS_FILE, EventsFile

STATIC = Path(__file__).resolve().parent / "static"
TYPES = {".html": "text/html; charset=utf-8", ".js": "text/javascript; charset=utf-8",
         ".css": "text/css; charset=utf-8", ".png": "image/png", ".svg": "image/svg+xml", ".otf": "font/otf"}
LIMIT = 2000  # events per response: a long run's history arrives in pages


def static_file(name: str) -> Path | None:
    """The file `name` of the static directory, or None for anything that would lead out of it
    (.., a path, an absolute path, a link, a hidden file: viz.local_server.file_in)."""
    return file_in(STATIC, unquote(name))


class WatchHandler(BaseHTTPRequestHandler):
    server: WatchServer

    def do_GET(self):  # noqa: N802  (http.server's name)
        url = urlsplit(self.path)
        if url.path == "/events":
            return self.send_events(parse_qs(url.query))
        name = "index.html" if url.path == "/" else url.path[len("/static/"):] \
            if url.path.startswith("/static/") else ""
        path = BUNDLED_FONT if url.path == "/font.otf" else static_file(name)
        if path is None:
            return self.send_error(404)
        self.send(path.read_bytes(), TYPES.get(path.suffix, "application/octet-stream"))

    def send_events(self, query: dict):
        try:
            since = int(query.get("since", ["0"])[0])
        except ValueError:
            return self.send_error(400, "since must be a whole number")
        lines, total = self.server.events.lines(since, LIMIT)
        events = [json.loads(line, parse_constant=str) for line in lines if line.strip()]  # NaN -> 'NaN'
        nxt = min(max(since, 0), total) + len(lines)
        self.server.note_read(nxt)
        body = json.dumps({"lines": events, "next": nxt, "total": total}, allow_nan=False)
        self.send(body.encode("utf-8"), "application/json")

    def send(self, body: bytes, content_type: str):
        self.send_response(200)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(body)))
        self.send_header("Cache-Control", "no-store")
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, format, *args):  # noqa: A002  (quiet: the terminal belongs to training)
        pass


class WatchServer(LocalServer):
    """Serves the live page of `run_dir` on host:port (port 0: any free one; see .url)."""

    def __init__(self, run_dir, host: str = "127.0.0.1", port: int = 0):
        self.run_dir = Path(run_dir)
        self.events = EventsFile(self.run_dir / EVENTS_FILE)
        self.read_up_to = -1  # the furthest line a page has read, -1 before any page asked
        super().__init__((host, port), WatchHandler)

    def note_read(self, line: int) -> None:
        self.read_up_to = max(self.read_up_to, line)

    def start(self) -> threading.Thread:
        """Serve in a daemon thread (training goes on in the main one)."""
        thread = threading.Thread(target=self.serve_forever, kwargs={"poll_interval": 0.2},
                                  name="viz-watch", daemon=True)
        thread.start()
        return thread

    def wait_for_readers(self, timeout: float = 10.0) -> None:
        """If a page is open, give it up to `timeout` seconds to read the last event (the run's
        end) before the server goes, so it stops polling instead of finding no server. A page that is
        up to date ends the wait at once; a loaded machine's page may take seconds for its next poll."""
        deadline = time.monotonic() + timeout
        while self.read_up_to >= 0 and time.monotonic() < deadline:
            if self.read_up_to >= self.events.lines(0, 0)[1]:
                return
            time.sleep(0.05)

    def stop(self) -> None:
        self.shutdown()
        self.server_close()


def holds_run(run_dir) -> bool:
    return os.path.isfile(os.path.join(run_dir, EVENTS_FILE))
