"""python -m viz watch RUN_DIR: the live page of a training run (python -m transformer train
--explore writes RUN_DIR/events.jsonl), during the run or after it."""
from __future__ import annotations

import os
import sys

from .server import EVENTS_FILE, WatchServer, holds_run

EXIT_BAD_INPUT = 2


def add_parser(commands) -> None:
    watch = commands.add_parser("watch", help="the live page of a training run (train --explore)",
                                description=__doc__.splitlines()[0])
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


def run(args) -> int:
    if not holds_run(args.run_dir):
        why = "does not exist" if not os.path.isdir(args.run_dir) else \
            f"holds no run with events (no {EVENTS_FILE}: train with python3 -m transformer train --explore)"
        print(f"viz watch: error: {args.run_dir} {why}", file=sys.stderr)
        return EXIT_BAD_INPUT
    try:
        server = WatchServer(args.run_dir, args.host, args.port)
    except OSError as e:
        print(f"viz watch: error: cannot serve on {args.host}:{args.port}: {e.strerror or e}", file=sys.stderr)
        return EXIT_BAD_INPUT
    print(f"watching {args.run_dir}: open {server.url} (Ctrl-C stops)", flush=True)
    try:
        server.serve_forever(poll_interval=0.2)
    except KeyboardInterrupt:
        pass
    finally:
        server.server_close()
    return 0
