# -*- test-case-name: tests.test_minion_parts -*-
"""
Drops publications seen before or stamped outside the accepted time window.
"""

from __future__ import annotations

from collections import OrderedDict
from typing import Any


class ReplayGuard:
    """
    Remembers the jids of the last C{window} seconds.

    A publication is refused when its jid was seen, or its master timestamp
    is more than C{window} seconds from the minion's clock (so a recorded
    publication is useless once its jid has been forgotten).
    """

    def __init__(self, clock: Any, window: float = 600.0) -> None:
        self._clock = clock
        self._window = window
        self._seen: OrderedDict[str, float] = OrderedDict()
        #: The value of the first jid remembered (infinite when none is): the
        #: jids are forgotten from the front, once that is out of the window.
        self._front = float("inf")
        #: Publications stamped (by the master) earlier than this are refused.
        self.notBefore: float = float("-inf")

    def check(self, jid: str, timestamp: object) -> str | None:
        """
        Record C{jid}.

        @return: L{None} if the publication is fresh, else why it is refused.
        """
        now = self._clock.seconds()
        seen = self._seen
        if self._front < now - self._window:
            self._forget(now - self._window)
        if type(timestamp) is not float and (
            isinstance(timestamp, bool) or not isinstance(timestamp, (int, float))
        ):
            return "publication has no timestamp"
        if not abs(now - timestamp) <= self._window:  # NaN is not fresh either
            return f"publication is stamped {now - timestamp:.0f}s away from this minion's clock"
        if timestamp < self.notBefore:
            return "publication was made before this minion subscribed (a replay?)"
        if jid in seen:
            return f"publication {jid} was already received"
        # Remember the jid until its timestamp leaves the window, not just for
        # C{window} seconds after it arrived: a publication stamped ahead of
        # this minion's clock stays fresh for longer than that, and must not
        # be forgotten while it could still be replayed.
        until = timestamp if timestamp > now else now
        if not seen:
            self._front = until
        seen[jid] = until
        return None

    def _forget(self, horizon: float) -> None:
        """
        Forget the jids at the front whose time is before C{horizon}.
        """
        seen = self._seen
        while seen:
            jid, until = next(iter(seen.items()))
            if until >= horizon:
                self._front = until
                return
            del seen[jid]
        self._front = float("inf")
