"""The live training page: a local server (viz.watch.server) and its page (static/), fed by the
events a training run appends to RUN_DIR/events.jsonl. `python -m viz watch RUN_DIR` serves a run;
`python -m transformer train --explore` serves its own while it trains."""
from .cli import serve
from .server import EVENTS_FILE, WatchServer, holds_run

__all__ = ["serve", "WatchServer", "holds_run", "EVENTS_FILE"]
