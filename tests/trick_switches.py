"""A test body run with speed tricks on, then off (tinygrad_lite/fast.py): the tests that compare a
trick with its plain twin share this."""
from tinygrad_lite import fast


def both(fn, *names):
    """fn() with the named tricks (all if none) on, then off: (on result, off result)."""
    with fast.tricks_on(*names):
        on = fn()
    with fast.tricks_off(*names):
        off = fn()
    return on, off
