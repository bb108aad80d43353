# -*- test-case-name: tests.test_master_fileserving -*-
"""
Per-minion limits of the file server: requests per second (a token bucket)
and chunk bytes being read or sent at once, with a fair wait.

Every minion (by id: its session and its transient sessions share one
account) has its own bucket, its own bytes in flight and its own FIFO of
waiting requests, so a greedy minion only ever waits behind itself: one
minion's queue never delays another's.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass, field
from typing import Any

from twisted.internet.defer import Deferred

#: The most requests one minion may have waiting for its limits; past it a
#: request is refused (a well-behaved client keeps a handful in flight).
DEFAULT_MAX_QUEUED = 1024
#: Rounding slack on a bucket's tokens (a refill computed from float times).
_EPSILON = 1e-9


class LimitExceeded(ValueError):
    """
    A request refused because its minion already has too much waiting: the
    message says which bound and its value (a L{ValueError}, answered to
    the minion as the request's error).
    """


class SessionClosed(ValueError):
    """
    A waiting request dropped because its session closed (a L{ValueError}:
    the req channel answers it quietly, to nobody).
    """


@dataclass
class _Waiting:
    """
    One request waiting for its minion's limits.
    """

    nbytes: int
    held: int
    owner: object
    deferred: Deferred[None]


@dataclass
class _Account:
    """
    One minion's share: its tokens, its bytes in flight and its queue.
    """

    tokens: float
    last: float
    inflight: int = 0
    held: int = 0
    queue: deque[_Waiting] = field(default_factory=deque)
    wakeup: Any = None


class FairLimits:
    """
    A token bucket and a bound on bytes in flight per minion, each with a
    FIFO of requests waiting their turn.

    @ivar rate: tokens added per second (C{fileserver_request_rate}).
    @ivar burst: the most tokens a bucket holds
        (C{fileserver_request_burst}).
    @ivar inflightBytes: the most chunk bytes one minion may have being
        read or sent at once (C{fileserver_inflight_bytes}); a request
        larger than that alone is admitted when the minion has nothing in
        flight, so every chunk size makes progress.
    @ivar maxQueued: the most requests one minion may have waiting.
    """

    def __init__(
        self,
        clock: Any,
        rate: float,
        burst: int,
        inflightBytes: int,
        maxQueued: int = DEFAULT_MAX_QUEUED,
    ) -> None:
        self.clock = clock
        self.rate = float(rate)
        self.burst = max(1, int(burst))
        self.inflightBytes = inflightBytes
        self.maxQueued = maxQueued
        self._accounts: dict[str, _Account] = {}

    @classmethod
    def fromConfig(cls, config: dict[str, Any], clock: Any) -> FairLimits:
        """
        @return: limits from the master's C{fileserver_request_rate},
            C{fileserver_request_burst} and C{fileserver_inflight_bytes}.
        """
        return cls(
            clock,
            config.get("fileserver_request_rate", 1000),
            config.get("fileserver_request_burst", 2000),
            config.get("fileserver_inflight_bytes", 16 * 1024 * 1024),
        )

    def _account(self, key: str) -> _Account:
        account = self._accounts.get(key)
        if account is None:
            account = self._accounts[key] = _Account(float(self.burst), self.clock.seconds())
        return account

    def _refill(self, account: _Account) -> None:
        now = self.clock.seconds()
        if now > account.last:
            account.tokens = min(
                float(self.burst), account.tokens + (now - account.last) * self.rate
            )
        account.last = now

    def _fits(self, account: _Account, nbytes: int) -> bool:
        return account.tokens >= 1.0 - _EPSILON and (
            account.inflight == 0 or account.inflight + nbytes <= self.inflightBytes
        )

    def acquire(
        self, key: str, nbytes: int = 0, held: int = 0, owner: object = None
    ) -> Deferred[None]:
        """
        Take one token and reserve C{nbytes} in flight for minion C{key};
        release them with L{release} once the request is answered.

        @param nbytes: the chunk bytes the request will read or write.
        @param held: the bytes the request holds in memory while it waits
            (the data of a C{_file_recv}): bounded per minion by
            C{inflightBytes} as well.
        @param owner: the session the request came on (see L{dropOwner}).
        @return: a L{Deferred} that fires once the request may run: at once
            if its minion is within its limits and nothing of it waits,
            else when its turn comes.
        @raise LimitExceeded: if the minion already has C{maxQueued}
            requests waiting, or too many bytes held by waiting requests.
        """
        account = self._account(key)
        self._refill(account)
        if not account.queue and self._fits(account, nbytes):
            account.tokens -= 1.0
            account.inflight += nbytes
            d: Deferred[None] = Deferred()
            d.callback(None)
            return d
        if len(account.queue) >= self.maxQueued:
            raise LimitExceeded(
                f"minion {key} has {len(account.queue)} file-server requests waiting "
                f"(the most allowed): send fewer at once"
            )
        if held and account.held + held > self.inflightBytes:
            raise LimitExceeded(
                f"minion {key} has {account.held} bytes of file-server requests waiting, "
                f"more than fileserver_inflight_bytes {self.inflightBytes} with this one"
            )
        d = Deferred()
        account.queue.append(_Waiting(nbytes, held, owner, d))
        account.held += held
        self._schedule(key, account)
        return d

    def release(self, key: str, nbytes: int) -> None:
        """
        A request of minion C{key} that reserved C{nbytes} is done: let its
        waiting requests run if they now fit.
        """
        account = self._accounts.get(key)
        if account is None:
            return
        account.inflight = max(0, account.inflight - nbytes)
        self._drain(key)

    def dropOwner(self, key: str, owner: object) -> None:
        """
        Forget the waiting requests of minion C{key} that came on session
        C{owner} (it closed): they fail with L{SessionClosed}.
        """
        account = self._accounts.get(key)
        if account is None:
            return
        dropped = [w for w in account.queue if w.owner is owner]
        if not dropped:
            return
        account.queue = deque(w for w in account.queue if w.owner is not owner)
        for waiting in dropped:
            account.held -= waiting.held
            waiting.deferred.errback(SessionClosed("the session closed"))
        self._drain(key)

    def waiting(self, key: str) -> int:
        """
        @return: how many requests of minion C{key} wait.
        """
        account = self._accounts.get(key)
        return len(account.queue) if account is not None else 0

    def _drain(self, key: str) -> None:
        account = self._accounts.get(key)
        if account is None:
            return
        self._refill(account)
        ready: list[Deferred[None]] = []
        while account.queue and self._fits(account, account.queue[0].nbytes):
            waiting = account.queue.popleft()
            account.tokens -= 1.0
            account.inflight += waiting.nbytes
            account.held -= waiting.held
            ready.append(waiting.deferred)
        if not account.queue and account.inflight == 0 and account.tokens >= self.burst:
            self._cancelWakeup(account)
            del self._accounts[key]
        else:
            self._schedule(key, account)
        for d in ready:
            d.callback(None)

    def _schedule(self, key: str, account: _Account) -> None:
        """
        Wake minion C{key}'s queue when its bucket will hold a token again,
        if a token is what its first waiting request lacks.
        """
        if not account.queue or account.tokens >= 1.0 - _EPSILON:
            self._cancelWakeup(account)
            return
        if account.wakeup is not None and account.wakeup.active():
            return
        delay = (1.0 - account.tokens) / self.rate

        def wake() -> None:
            account.wakeup = None
            self._drain(key)

        account.wakeup = self.clock.callLater(delay, wake)

    def _cancelWakeup(self, account: _Account) -> None:
        if account.wakeup is not None and account.wakeup.active():
            account.wakeup.cancel()
        account.wakeup = None
