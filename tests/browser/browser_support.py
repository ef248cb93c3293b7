"""What the browser tests share outside their fixtures."""
from __future__ import annotations

from urllib.parse import urlparse


def outside_this_machine(url: str) -> bool:
    """True for a request that would leave this machine: any host but loopback."""
    parsed = urlparse(url)
    if parsed.scheme in ("file", "data", "blob", "about", "chrome", "devtools", ""):
        return False
    return parsed.hostname not in ("127.0.0.1", "localhost", "::1")
