"""The attention lab's web server: the standard library's ThreadingHTTPServer on 127.0.0.1.

It serves three things only: the files of viz/lab/static/ (the page, its script and style), the
bundled Chinese font (viz/fontdata, as viz/fonts.py uses it) at /font/cjk.otf, and
`/api/translate`, which answers with the JSON of a `translate(text, masked_positions) -> dict`
callable it is given (transformer.lab.translate_with_mask, wired by `python -m viz lab`; viz
never imports transformer). A bad request gets 400 and {"error": "..."}; a path outside the
static folder, 404.

    GET  /api/translate?text=我喜欢猫&mask=0,2
    POST /api/translate   {"text": "我喜欢猫", "mask": [0, 2]}
"""
from __future__ import annotations

import json
import mimetypes
import threading
from http import HTTPStatus
from http.server import BaseHTTPRequestHandler
from pathlib import Path
from urllib.parse import parse_qs, unquote, urlsplit

from ..local_server import BUNDLED_FONT, LocalServer, file_in

STATIC = Path(__file__).resolve().parent / "static"
MAX_TEXT = 300          # characters of Chinese a request may carry
MAX_BODY = 16_384       # bytes of a POST body


class BadRequest(ValueError):
    """A request the lab cannot answer; the message says why (sent as 400)."""


def parse_mask(value) -> list[int]:
    """"1,3" or [1, 3] -> [1, 3]: the masked source positions."""
    if value is None or value == "":
        return []
    items = value.split(",") if isinstance(value, str) else value
    if not isinstance(items, list):
        raise BadRequest(f"mask: expected comma-separated token positions such as 1,3, got {value!r}")
    try:
        positions = [int(item) for item in items if str(item).strip() != ""]
    except (TypeError, ValueError):
        raise BadRequest(f"mask: expected comma-separated token positions such as 1,3, got {value!r}") from None
    if any(isinstance(item, bool) or (isinstance(item, float) and not item.is_integer()) for item in items):
        raise BadRequest(f"mask: expected integer token positions, got {value!r}")
    return positions


def check_text(text) -> str:
    if not isinstance(text, str) or not text.strip():
        raise BadRequest("text: empty; type some Chinese to translate")
    if len(text) > MAX_TEXT:
        raise BadRequest(f"text: {len(text)} characters is too long; at most {MAX_TEXT}")
    return text


def static_file(url_path: str) -> Path | None:
    """The file of the static folder that `url_path` names, or None: "/" is index.html,
    /font/cjk.otf the bundled font, and a path that leaves the folder (.., an absolute path, a
    symlink out) or names no file is None (viz.local_server.file_in)."""
    name = unquote(url_path)
    if name == "/font/cjk.otf":
        return BUNDLED_FONT if BUNDLED_FONT.is_file() else None
    if name in ("/", "/index.html"):
        return file_in(STATIC, "index.html")
    if name.startswith("/static/"):
        return file_in(STATIC, name[len("/static/"):])
    return None


class LabHandler(BaseHTTPRequestHandler):
    """One request: a static file, or /api/translate through `self.server.translate`."""

    server_version = "tinygrad-lite-lab"

    def do_GET(self):
        url = urlsplit(self.path)
        if url.path == "/api/translate":
            query = parse_qs(url.query, keep_blank_values=True)
            self.answer(lambda: (query.get("text", [""])[0], parse_mask(query.get("mask", [""])[0])))
            return
        path = static_file(url.path)
        if path is None:
            self.send_json(HTTPStatus.NOT_FOUND, {"error": f"not found: {url.path}"})
            return
        self.send_bytes(HTTPStatus.OK, path.read_bytes(), mimetypes.guess_type(path.name)[0] or "text/plain")

    def do_POST(self):
        if urlsplit(self.path).path != "/api/translate":
            self.send_json(HTTPStatus.NOT_FOUND, {"error": f"not found: {self.path}"})
            return
        self.answer(self.read_json_request)

    def read_json_request(self) -> tuple:
        length = int(self.headers.get("Content-Length") or 0)
        if not 0 < length <= MAX_BODY:
            raise BadRequest(f"body: expected a JSON object of 1 to {MAX_BODY} bytes, got {length}")
        try:
            body = json.loads(self.rfile.read(length).decode("utf-8"))
        except (UnicodeDecodeError, json.JSONDecodeError) as exc:
            raise BadRequest(f"body: not JSON ({exc})") from None
        if not isinstance(body, dict):
            raise BadRequest(f"body: expected a JSON object {{\"text\": ..., \"mask\": [...]}}, got {body!r}")
        return body.get("text"), parse_mask(body.get("mask"))

    def answer(self, read_request) -> None:
        """400 for a bad request or input the translate function refuses (ValueError)."""
        try:
            text, mask = read_request()
            result = self.server.translate(check_text(text), mask)
        except ValueError as exc:
            self.send_json(HTTPStatus.BAD_REQUEST, {"error": str(exc)})
            return
        except Exception as exc:  # a bug, not the learner's input: say so, keep serving
            self.send_json(HTTPStatus.INTERNAL_SERVER_ERROR, {"error": f"{type(exc).__name__}: {exc}"})
            return
        self.send_json(HTTPStatus.OK, result)

    def send_json(self, status, payload) -> None:
        self.send_bytes(status, json.dumps(payload, ensure_ascii=False).encode("utf-8"), "application/json")

    def send_bytes(self, status, payload: bytes, content_type: str) -> None:
        self.send_response(status)
        if content_type.startswith(("text/", "application/javascript", "application/json")):
            content_type += "; charset=utf-8"
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(payload)))
        self.send_header("Cache-Control", "no-store")
        self.end_headers()
        self.wfile.write(payload)

    def log_message(self, format, *args):  # quiet: the terminal shows the URL, not every request
        pass


class LabServer(LocalServer):
    """LabServer(translate, host, port): port 0 picks a free one; `url` says where it listens.
    `start()` serves from a background thread (tests), `stop()` ends it."""

    def __init__(self, translate, host: str = "127.0.0.1", port: int = 0):
        if not callable(translate):
            raise TypeError(f"LabServer: translate must be a callable (text, mask) -> dict, got {translate!r}")
        super().__init__((host, port), LabHandler)
        self.translate = translate
        self.thread = None

    def start(self) -> LabServer:
        self.thread = threading.Thread(target=self.serve_forever, kwargs={"poll_interval": 0.1}, daemon=True)
        self.thread.start()
        return self

    def stop(self) -> None:
        if self.thread is not None:
            self.shutdown()
            self.thread.join(timeout=10)
        self.server_close()
