# -*- test-case-name: tests.adversarial.test_wire -*-
"""
Token buckets that bound what one source may make the master do:

  - L{AuthRateLimiter}: C{_auth} requests per source address (issue 7),
    checked before any RSA or disk work. Addresses are grouped as an
    attacker gets them: one IPv4 address, or one IPv6 /64 (a host usually
    holds a whole /64).
  - L{EventRateLimiter}: events each minion fires on the master's bus
    (C{_minion_event}), so that one compromised minion cannot flood every
    subscriber's queue until the events of others (returns a C{salttwist}
    command waits for) are dropped.

Memory is bounded: a bucket that has refilled is worth nothing and is
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


class _TokenBuckets:
    """
    Token buckets by key, refilled with time.

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

    def _bucket(self, key: str) -> _Bucket:
        now = float(self.clock.seconds())
        bucket = self._buckets.get(key)
        if bucket is None:
            bucket = self._buckets[key] = _Bucket(self.burst, now)
        else:
            self._buckets.move_to_end(key)
            self._refill(bucket, now)
        self._expire(now)
        return bucket

    def _refused(self, bucket: _Bucket) -> int | None:
        """
        Count a refusal of C{bucket}'s source.

        @return: the refusals since the last time this returned a number,
            at most once per L{LOG_INTERVAL} seconds (time to log a line);
            otherwise L{None}.
        """
        bucket.refused += 1
        now = bucket.updated
        if bucket.logged is not None and now - bucket.logged < LOG_INTERVAL:
            return None
        refused, bucket.logged, bucket.refused = bucket.refused, now, 0
        return refused

    def __len__(self) -> int:
        return len(self._buckets)


class AuthRateLimiter(_TokenBuckets):
    """
    Token buckets per source address, for C{_auth} requests.
    """

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
        bucket = self._bucket(peerKey(peerName))
        if bucket.tokens > 0:
            return True
        refused = self._refused(bucket)
        if refused is not None:
            self.log.warn(
                "authentications from {addr} refused: over {rate}/s (burst {burst}); "
                "{n} refused since the last such line",
                addr=peerKey(peerName),
                rate=self.rate,
                burst=int(self.burst),
                n=refused,
            )
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
        bucket = self._bucket(peerKey(peerName))
        bucket.tokens = max(-self.burst, bucket.tokens - 1)


class EventRateLimiter(_TokenBuckets):
    """
    Token buckets per minion id, for the events minions fire on the
    master's bus (C{minion_event_rate_limit}, C{minion_event_rate_burst}).
    """

    def take(self, minionId: str) -> str | None:
        """
        Spend one of C{minionId}'s tokens for an event.

        @return: L{None} if the event may go on the bus; otherwise why not
            (the minion is over its rate; logged at most once per minion
            per minute, with the number refused since).
        """
        if not self.enabled:
            return None
        bucket = self._bucket(minionId)
        if bucket.tokens >= 1:
            bucket.tokens -= 1
            return None
        problem = (
            f"minion {minionId} fires more than {self.rate:g} events/s "
            f"(burst {int(self.burst)}, minion_event_rate_limit)"
        )
        refused = self._refused(bucket)
        if refused is not None:
            self.log.warn(
                "events refused: {problem}; {n} refused since the last such line",
                problem=problem,
                n=refused,
            )
        return problem
