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
    try:
        address = ipaddress.ip_address(host.strip("[]"))
    except ValueError:
        return peerName
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
        Take a token for one request from C{peerName}.

        @return: C{True} if it may go on; C{False} if its address is over
            the limit (logged at most once per address per minute, with the
            number refused since).
        """
        if not self.enabled:
            return True
        now = float(self.clock.seconds())
        key = peerKey(peerName)
        bucket = self._buckets.get(key)
        if bucket is None:
            bucket = self._buckets[key] = _Bucket(self.burst, now)
        else:
            self._buckets.move_to_end(key)
            self._refill(bucket, now)
        self._expire(now)
        if bucket.tokens >= 1:
            bucket.tokens -= 1
            return True
        bucket.refused += 1
        if bucket.logged is None or now - bucket.logged >= LOG_INTERVAL:
            self.log.warn(
                "authentications from {addr} refused: over {rate}/s (burst {burst}); "
                "{n} refused since the last such line",
                addr=key,
                rate=self.rate,
                burst=int(self.burst),
                n=bucket.refused,
            )
            bucket.logged = now
            bucket.refused = 0
        return False

    def refund(self, peerName: str) -> None:
        """
        Give back the token of a request that proved an accepted key: a
        fleet of accepted minions behind one address is never throttled.
        """
        if not self.enabled:
            return
        bucket = self._buckets.get(peerKey(peerName))
        if bucket is not None:
            self._refill(bucket, float(self.clock.seconds()))
            bucket.tokens = min(self.burst, bucket.tokens + 1)

    def __len__(self) -> int:
        return len(self._buckets)
