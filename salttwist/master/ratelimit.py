# -*- test-case-name: tests.adversarial.test_wire -*-
"""
A per-source-address token bucket for C{_auth} requests (issue 7).

Checked before any RSA or disk work. Addresses are grouped as an attacker
gets them: one IPv4 address, or one IPv6 /64 (a host usually holds a whole
/64). Memory is bounded: a bucket that has refilled is worth nothing and is
dropped, and at most C{maxPeers} buckets are kept (the least recently used
goes first).
"""

from __future__ import annotations

import functools
import ipaddress
from collections import OrderedDict
from typing import Any

from twisted.logger import Logger

#: Buckets kept at most; beyond that the least recently used is forgotten.
MAX_PEERS = 65536
#: Seconds between two log lines about the same refused address.
LOG_INTERVAL = 60.0


def peerKey(peerName: str) -> str:
    """
    The bucket an address belongs to.

    @param peerName: C{"host:port"} as L{FrameProtocol.peerName} has it
        (C{"local"} or any other text is used as is).
    @return: the IPv4 address, or the IPv6 /64 (an IPv4-mapped IPv6
        address counts as its IPv4 address).
    """
    host = peerName.rsplit(":", 1)[0] if ":" in peerName else peerName
    key = _addressKey(host.strip("[]"))
    return peerName if key is None else key


@functools.lru_cache(maxsize=1024)
def _addressKey(host: str) -> str | None:
    """
    L{peerKey} of a host, remembered for the most recent hosts: parsing
    the address was about half of L{Master.clearAuth}'s own CPU in an auth
    storm, and the port differs at each connection, the host rarely.

    @return: the bucket's key, or L{None} if C{host} is not an address.
    """
    try:
        address = ipaddress.ip_address(host)
    except ValueError:
        return None
    if isinstance(address, ipaddress.IPv6Address):
        if address.ipv4_mapped is not None:
            return str(address.ipv4_mapped)
        return str(ipaddress.IPv6Network((address, 64), strict=False))
    return str(address)


class _Bucket:
    __slots__ = ("tokens", "updated", "refused", "logged")

    def __init__(self, tokens: float, now: float) -> None:
        self.tokens = tokens
        self.updated = now
        self.refused = 0
        self.logged: float | None = None


class AuthRateLimiter:
    """
    Token buckets per source address.

    @param rate: tokens added per second (0 turns the limit off).
    @param burst: the most tokens a bucket holds (requests at once).
    @param clock: an L{IReactorTime} (C{seconds()}).
    @param maxPeers: the most buckets kept.
    """

    log = Logger()

    def __init__(self, rate: float, burst: int, clock: Any, maxPeers: int = MAX_PEERS) -> None:
        self.rate = float(rate)
        self.burst = float(burst)
        self.clock = clock
        self.maxPeers = maxPeers
        self._buckets: OrderedDict[str, _Bucket] = OrderedDict()

    @property
    def enabled(self) -> bool:
        """
        Whether requests are limited at all.
        """
        return self.rate > 0

    def _refill(self, bucket: _Bucket, now: float) -> None:
        if now > bucket.updated:
            bucket.tokens = min(self.burst, bucket.tokens + (now - bucket.updated) * self.rate)
        bucket.updated = now

    def _expire(self, now: float) -> None:
        """
        Drop the least recently used buckets that have refilled (they are
        the same as no bucket), and any beyond L{maxPeers}.
        """
        buckets = self._buckets
        full = self.burst / self.rate
        while buckets:
            key, oldest = next(iter(buckets.items()))
            if len(buckets) <= self.maxPeers and now - oldest.updated < full + LOG_INTERVAL:
                break
            del buckets[key]

    def allow(self, peerName: str) -> bool:
        """
        May a request from C{peerName} go on? Yes while its address has a
        token left; the token is only spent by L{charge}, once the request
        turned out not to come from an accepted minion.

        @return: C{True} if it may go on; C{False} if its address is over
            the limit (logged at most once per address per minute, with the
            number refused since).
        """
        if not self.enabled:
            return True
        bucket = self._bucket(peerName)
        if bucket.tokens > 0:
            return True
        bucket.refused += 1
        now = bucket.updated
        if bucket.logged is None or now - bucket.logged >= LOG_INTERVAL:
            self.log.warn(
                "authentications from {addr} refused: over {rate}/s (burst {burst}); "
                "{n} refused since the last such line",
                addr=peerKey(peerName),
                rate=self.rate,
                burst=int(self.burst),
                n=bucket.refused,
            )
            bucket.logged = now
            bucket.refused = 0
        return False

    def charge(self, peerName: str) -> None:
        """
        Spend a token of C{peerName}'s address: its request was not an
        accepted minion's (pending, rejected, denied or failed). Requests
        admitted together may drive the bucket below zero (down to minus
        the burst): the address then waits until it has refilled above zero.
        Accepted minions are never charged, so a fleet behind one (NAT)
        address is never throttled.
        """
        if not self.enabled:
            return
        bucket = self._bucket(peerName)
        bucket.tokens = max(-self.burst, bucket.tokens - 1)

    def _bucket(self, peerName: str) -> _Bucket:
        now = float(self.clock.seconds())
        key = peerKey(peerName)
        bucket = self._buckets.get(key)
        if bucket is None:
            bucket = self._buckets[key] = _Bucket(self.burst, now)
        else:
            self._buckets.move_to_end(key)
            self._refill(bucket, now)
        self._expire(now)
        return bucket

    def __len__(self) -> int:
        return len(self._buckets)
