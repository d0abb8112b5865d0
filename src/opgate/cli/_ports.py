"""Where ``opgate serve --http`` listens: the address it parses, and the sockets bound
before the server says it is serving (a port in use is a usage error, not a traceback)."""

from __future__ import annotations

import errno
import os
import socket

from ._usage import UsageError

__all__ = ["LOOPBACK", "http_address", "listen"]

#: Where ``--http PORT`` listens when no host is given.
LOOPBACK = "127.0.0.1"


def http_address(value: str) -> tuple[str, int]:
    """The host and port of ``--http [HOST:]PORT`` (the host ``LOOPBACK`` if not given)."""
    host, separator, port_text = value.rpartition(":")
    if not separator:
        host, port_text = LOOPBACK, value
    host = host.strip("[]") or LOOPBACK
    try:
        port = int(port_text)
    except ValueError:
        raise UsageError(f"--http needs [HOST:]PORT, got {value!r}") from None
    if not 0 <= port <= 65535:
        raise UsageError(f"--http port {port} is out of range")
    return host, port


def listen(host: str, port: int) -> list[socket.socket]:
    """Listen on ``host:port`` (every address ``host`` names, as asyncio would), so a
    port in use is refused before the server says it is serving."""
    try:
        addresses = socket.getaddrinfo(
            host, port, type=socket.SOCK_STREAM, proto=socket.IPPROTO_TCP, flags=socket.AI_PASSIVE
        )
    except socket.gaierror as exc:
        raise UsageError(f"--http host {host!r} is not an address: {exc.strerror}") from None
    sockets: list[socket.socket] = []
    bound: set[tuple[int, object]] = set()
    try:
        for family, kind, proto, _, address in addresses:
            if (family, address[0]) in bound:  # a name listed twice in /etc/hosts
                continue
            bound.add((family, address[0]))
            if sockets and port == 0:  # every address on the port the first one got
                address = (address[0], sockets[0].getsockname()[1], *address[2:])
            listener = socket.socket(family, kind, proto)
            sockets.append(listener)
            if os.name == "posix":  # what asyncio and uvicorn set: restart at once after a stop
                listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            if family == socket.AF_INET6:
                listener.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 1)
            listener.bind(address)
            listener.listen()  # connections wait from the announcement on, not refused
    except OSError as exc:
        for listener in sockets:
            listener.close()
        raise UsageError(_bind_failure(host, port, exc)) from None
    return sockets


def _bind_failure(host: str, port: int, error: OSError) -> str:
    """What to do when ``host:port`` cannot be bound."""
    where = f"{host}:{port}"
    if error.errno == errno.EADDRINUSE:
        return (
            f"port {port} is in use on {host}: stop the process listening there, or pass "
            f"another port (--http {host}:PORT; port 0 picks a free one)"
        )
    if error.errno == errno.EACCES:
        return (
            f"not allowed to listen on {where} (ports below 1024 need privileges): "
            "pass a port above 1023"
        )
    if error.errno == errno.EADDRNOTAVAIL:
        return f"cannot listen on {where}: {host} is not an address of this machine"
    return f"cannot listen on {where}: {error.strerror}"
