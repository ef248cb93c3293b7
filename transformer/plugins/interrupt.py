"""Ctrl-C stops training between two steps, not inside one, on every rank after the same step; the
trainer then saves a checkpoint that --resume continues from."""
from __future__ import annotations

import contextlib

from ..loop import Plugin

_CTRL_C_PRESSED: list = []


class Interrupted(KeyboardInterrupt):
    """Ctrl-C, acted on after the same step by every rank (one process: by the only one)."""


@contextlib.contextmanager
def ctrl_c_between_steps():
    """Python raises KeyboardInterrupt wherever the interpreter happens to be; inside a finalizer
    (the graph's cleanup after backward) it is printed and dropped, and the run goes on. So inside
    this context the first Ctrl-C only makes the yielded list non-empty, a flag that the loop
    checks between steps; a second one interrupts at once. Leaving restores the previous handler.
    Outside the main thread (where handlers can't be set) nothing changes."""
    import signal
    import threading
    if threading.current_thread() is not threading.main_thread():
        yield _CTRL_C_PRESSED
        return
    _CTRL_C_PRESSED.clear()

    def on_ctrl_c(signum, frame):
        if _CTRL_C_PRESSED:
            raise KeyboardInterrupt
        _CTRL_C_PRESSED.append(signum)

    previous = signal.signal(signal.SIGINT, on_ctrl_c)
    try:
        yield _CTRL_C_PRESSED
    finally:
        signal.signal(signal.SIGINT, previous)
        _CTRL_C_PRESSED.clear()


class CtrlC(Plugin):
    """Raises Interrupted before the next step once Ctrl-C was pressed on any rank (`agree`: whether
    a flag is set on any rank; one process: the flag itself)."""

    def __init__(self, agree=bool):
        self.agree, self.handler, self.pressed = agree, None, []

    def start(self, run) -> None:
        self.handler = ctrl_c_between_steps()
        self.pressed = self.handler.__enter__()

    def before_step(self, run) -> None:
        if self.agree(bool(self.pressed)):
            raise Interrupted

    def end(self, run) -> None:
        if self.handler is not None:
            self.handler.__exit__(None, None, None)
            self.handler = None
