"""`python -m viz lab --checkpoint CKPT`: serve the attention lab until Ctrl-C.

viz/__main__.py loads the translator (viz never imports transformer) and hands `run` the
translate callable; this module owns the flags and the serving."""
from __future__ import annotations

import argparse
import sys
import webbrowser

from .server import LabServer

HELP = "serve the attention lab of a trained translator on 127.0.0.1 (Ctrl-C stops it)"


def add_parser(commands) -> argparse.ArgumentParser:
    lab = commands.add_parser("lab", help=HELP, description=HELP)
    lab.add_argument("--checkpoint", required=True, help="translator checkpoint (python -m transformer train)")
    lab.add_argument("--host", default="127.0.0.1", help="address to listen on (default 127.0.0.1: this machine)")
    lab.add_argument("--port", type=int, default=8000, help="port (default 8000; 0 picks a free one)")
    lab.add_argument("--beam", type=int, default=4, help="beam size (default 4, the paper's)")
    lab.add_argument("--open", action="store_true", help="open the page in the default browser")
    lab.add_argument("--debug", action="store_true", default=argparse.SUPPRESS, help="show tracebacks")
    return lab


def check_args(args) -> None:
    if not 0 <= args.port <= 65535:
        raise ValueError(f"lab: --port must be 0..65535, got {args.port}")
    if args.beam < 1:
        raise ValueError(f"lab: --beam must be >= 1, got {args.beam}")


def run(args, translate) -> list:
    """Serve `translate(text, mask) -> dict` until Ctrl-C; prints the URL first."""
    server = LabServer(translate, args.host, args.port)
    print(f"attention lab: {server.url}  (Ctrl-C stops it)", flush=True)
    if args.open:
        webbrowser.open(server.url)
    try:
        server.serve_forever(poll_interval=0.2)
    except KeyboardInterrupt:
        print("attention lab: stopped", file=sys.stderr)
    finally:
        server.server_close()
    return []
