"""python -m viz watch RUN_DIR: the live page of a training run (python -m transformer train
--explore writes RUN_DIR/events.jsonl), during the run or after it."""
from __future__ import annotations

import os

from .server import EVENTS_FILE, WatchServer, holds_run


def add_parser(commands) -> None:
    watch = commands.add_parser("watch", help="the live page of a training run (train --explore)",
                                description=" ".join(__doc__.split()))
    watch.add_argument("run_dir", metavar="RUN_DIR", help="a run directory, e.g. runs/translator")
    add_server_arguments(watch)


def add_server_arguments(parser) -> None:
    parser.add_argument("--host", default="127.0.0.1",
                        help="address to serve on (default 127.0.0.1: this machine only)")
    parser.add_argument("--port", type=int, default=0, help="port (default 0: any free one)")


def serve(run_dir, host: str = "127.0.0.1", port: int = 0) -> WatchServer:
    """A WatchServer of `run_dir`, serving in a thread; its address is .url."""
    server = WatchServer(run_dir, host, port)
    server.start()
    return server


def run(args) -> list:
    """Serve RUN_DIR's live page until Ctrl-C; a directory without a run is an error (one line, exit 2
    from python -m viz). Writes nothing: returns []."""
    if not holds_run(args.run_dir):
        why = "does not exist" if not os.path.isdir(args.run_dir) else \
            f"holds no run with events (no {EVENTS_FILE}: train with python3 -m transformer train --explore)"
        raise FileNotFoundError(f"{args.run_dir} {why}")
    if not 0 <= args.port <= 65535:
        raise ValueError(f"watch: --port must be 0..65535, got {args.port}")
    server = WatchServer(args.run_dir, args.host, args.port)
    print(f"watching {args.run_dir}: open {server.url} (Ctrl-C stops)", flush=True)
    try:
        server.serve_forever(poll_interval=0.2)
    finally:
        server.server_close()
    return []
