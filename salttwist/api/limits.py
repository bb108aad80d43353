# -*- test-case-name: tests.test_api_limits -*-
"""
The login rate limit: each source address may try C{login_burst} logins
at once and C{login_rate} a second on average after that (a token bucket
per address). Every attempt takes a token while it is checked; one that
succeeds gives it back, so only refused logins count, and a client that
logs in correctly (or many behind one proxy) is never held back.

Memory is bounded: at most L{MAX_SOURCES} addresses are remembered, the
least recently seen forgotten first (a forgotten address starts again
with a full bucket, which an attacker with that many addresses has
anyway).
"""

from __future__ import annotations

from collections import OrderedDict

from twisted.internet.interfaces import IReactorTime

__all__ = ["MAX_SOURCES", "LoginLimiter"]

#: The most source addresses remembered.
MAX_SOURCES = 10000


class LoginLimiter:
    """
    Token buckets of login attempts by source address.
    """

    def __init__(
        self, clock: IReactorTime, rate: float, burst: int, maxSources: int = MAX_SOURCES
    ) -> None:
        self.clock = clock
        self.rate = rate
        self.burst = burst
        self.maxSources = maxSources
        #: address -> (tokens left, when counted)
        self._buckets: OrderedDict[str, tuple[float, float]] = OrderedDict()

    def __len__(self) -> int:
        return len(self._buckets)

    def attempt(self, source: str) -> float:
        """
        Count one login attempt from C{source}.

        @return: 0 when it may go ahead, else how many seconds to wait
            before the next one may.
        """
        now = self.clock.seconds()
        tokens, then = self._buckets.pop(source, (float(self.burst), now))
        tokens = min(float(self.burst), tokens + (now - then) * self.rate)
        if tokens >= 1.0:
            wait = 0.0
            tokens -= 1.0
        else:
            wait = (1.0 - tokens) / self.rate
        self._buckets[source] = (tokens, now)
        while len(self._buckets) > self.maxSources:
            self._buckets.popitem(last=False)
        return wait

    def succeeded(self, source: str) -> None:
        """
        An attempt of C{source} that L{attempt} let through succeeded: give
        its token back.
        """
        bucket = self._buckets.get(source)
        if bucket is not None:
            self._buckets[source] = (min(float(self.burst), bucket[0] + 1.0), bucket[1])
