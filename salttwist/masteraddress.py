# -*- test-case-name: tests.test_minion_failover -*-
"""
Where a master listens for its minions: one entry of a minion's C{master}
option read as Salt's C{prep_ip_port} reads it. Shared by the minion daemon
(L{salttwist.minion.masters}) and C{salttwist-call}
(L{salttwist.client.transient}), so it lives below both; and the order in
which both try the masters of a list (L{masterOrder}).
"""

from __future__ import annotations

import random
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

__all__ = ["MasterAddress", "configuredMasters", "masterOrder", "parseMasterAddress"]


@dataclass(frozen=True)
class MasterAddress:
    """
    Where one master listens for its minions' req connections.
    """

    host: str
    port: int

    def __str__(self) -> str:
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"{host}:{self.port}"


def parseMasterAddress(text: str, defaultPort: int) -> MasterAddress:
    """
    Read one entry of C{master} as Salt's C{prep_ip_port} does: C{host} (the
    port is C{master_port}), C{host:port}, C{[v6]:port}, C{[v6]} or a bare
    IPv6 address (two colons or more: no port in it).

    @raise ValueError: an empty host, or a port that is not a number from 1
        to 65535.
    """
    original = text
    text = text.strip()
    port: str | None = None
    if text.startswith("["):
        host, closing, rest = text[1:].partition("]")
        if not closing or (rest and not rest.startswith(":")):
            raise ValueError(f"master {original!r}: expected [address] or [address]:port")
        port = rest[1:] if rest else None
    elif text.count(":") == 1:
        host, port = text.split(":")
    else:
        host = text
    if not host:
        raise ValueError(f"master {original!r}: no host")
    if port is None:
        return MasterAddress(host, defaultPort)
    if not port.isdigit() or not 1 <= int(port) <= 65535:
        raise ValueError(f"master {original!r}: the port {port!r} is not a number from 1 to 65535")
    return MasterAddress(host, int(port))


def configuredMasters(config: dict[str, Any]) -> list[MasterAddress]:
    """
    @return: the masters of a minion's C{master} option (one string or a
        list), in order, each without a port taking C{master_port}.
    @raise ValueError: an entry cannot be read (L{parseMasterAddress}).
    """
    entries = config["master"]
    names = [entries] if isinstance(entries, str) else list(entries)
    port = int(config["master_port"])
    return [parseMasterAddress(name, port) for name in names]


def masterOrder(
    config: dict[str, Any],
    shuffle: Callable[[list[MasterAddress]], None] = random.shuffle,
) -> list[MasterAddress]:
    """
    The masters of a minion's C{master} option in the order they are
    tried: as listed, or shuffled with C{random_master}; with
    C{master_type: failover} and C{master_failback} too, the first stays
    first (the one to fail back to) and the others are shuffled, as Salt
    does.

    @param shuffle: shuffles a list in place.
    @raise ValueError: an entry cannot be read (L{parseMasterAddress}).
    """
    order = configuredMasters(config)
    if config.get("random_master") and len(order) > 1:
        if config.get("master_type") == "failover" and config.get("master_failback"):
            rest = order[1:]
            shuffle(rest)
            order[1:] = rest
        else:
            shuffle(order)
    return order
