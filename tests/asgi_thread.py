"""An ASGI app served by uvicorn on 127.0.0.1 in a background thread, for tests.

``serve_asgi(app, what)`` starts it on a free port, waits until it listens (``what``
names it in the error if it does not start) and yields the port; leaving the block
stops the server (``force=True``: without waiting for open responses, for an app whose
bodies never end).
"""

from __future__ import annotations

import socket
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import uvicorn

__all__ = ["free_port", "serve_asgi"]


def free_port() -> int:
    """A TCP port on 127.0.0.1 that was free a moment ago."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


@contextmanager
def serve_asgi(app: Any, what: str, *, force: bool = False) -> Iterator[int]:
    """Run ``app`` with uvicorn in a thread; yield its port."""
    port = free_port()
    config = uvicorn.Config(app, host="127.0.0.1", port=port, log_level="warning", lifespan="off")
    server = uvicorn.Server(config)
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    deadline = time.monotonic() + 30
    while not server.started:
        if time.monotonic() > deadline or not thread.is_alive():
            raise RuntimeError(f"{what} did not start")
        time.sleep(0.05)
    try:
        yield port
    finally:
        server.should_exit = True
        server.force_exit = force
        thread.join(timeout=10)
