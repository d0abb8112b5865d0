"""Whether a host is this machine: a seam for adapters.

The command line refuses to serve HTTP without authentication beyond this machine,
and warns when a credential would cross the network in clear text (a Redis password,
an upstream's headers over ``http://``); all of them ask ``is_loopback(host)``.
"""

from __future__ import annotations

import ipaddress

__all__ = ["is_loopback"]


def is_loopback(host: str) -> bool:
    """Whether ``host`` (a name, or an address without brackets) is this machine's
    loopback: ``localhost`` in any case, or an address in ``127.0.0.0/8`` or ``::1``.
    Any other name is not, whatever it resolves to: the answer must not depend on DNS.
    """
    if host.lower() == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False
