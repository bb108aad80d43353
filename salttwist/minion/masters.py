# -*- test-case-name: tests.test_minion_failover -*-
"""
Which master a minion uses, as Salt's C{master}, C{master_type},
C{random_master} and C{master_failback} say, and which master keys it
trusts for each.

  - L{parseMasterAddress} (from L{salttwist.masteraddress}): one entry of
    C{master} (C{host}, C{host:port}, C{[v6]:port} or a bare IPv6
    address), as Salt's C{prep_ip_port}.
  - L{MasterList}: the masters in the order the minion tries them, and the
    one it tries now. With C{master_type: str} (the default) only the first
    is used; with C{master_type: failover} a failed attempt moves on to the
    next, and a lost session puts its master at the end of the list (as
    Salt's C{eval_master(failed=True)}).
  - L{PinnedMasterCredentials} (from L{salttwist.pki.masterpins}, which
    C{salttwist-call} shares): a minion's credentials for one master of a
    failover list: the key pinned for that master alone
    (C{minion_master_<host>_<port>.pub}), else the key pinned for every
    master (C{minion_master.pub}, the cluster's shared key), else the key
    presented now, pinned in C{minion_master.pub} (first contact, as
    before). A key matching no pin is never trusted.
"""

from __future__ import annotations

import random
from collections.abc import Callable
from typing import Any

from salttwist.masteraddress import (
    MasterAddress,
    configuredMasters,
    masterOrder,
    parseMasterAddress,
)
from salttwist.pki.masterpins import PinnedMasterCredentials, ownPinFile

__all__ = [
    "MasterAddress",
    "MasterList",
    "PinnedMasterCredentials",
    "ownPinFile",
    "parseMasterAddress",
]


class MasterList:
    """
    The masters a minion may use, in the order it tries them, and the one
    it uses or tries now (L{current}).

    @ivar failover: whether C{master_type} is C{failover}; if not, the list
        holds the first master only.
    @ivar masters: the masters as configured.
    @ivar primary: the first master to try (Salt's C{master_list[0]}): the
        one C{master_failback} returns to.
    @ivar order: the order the minion tries them in now.
    """

    def __init__(
        self,
        config: dict[str, Any],
        shuffle: Callable[[list[MasterAddress]], None] = random.shuffle,
    ) -> None:
        """
        @param shuffle: shuffles a list in place (C{random_master}).
        @raise ValueError: an entry of C{master} cannot be read.
        """
        self.failover = config.get("master_type", "str") == "failover"
        masters = configuredMasters(config)
        self.masters = masters if self.failover else masters[:1]
        order = masterOrder(config, shuffle) if self.failover else list(self.masters)
        self.primary = order[0]
        self._initial = list(order)
        self.order = order
        self._index = 0
        #: Attempts failed in a row since the last session or round.
        self._failures = 0

    @property
    def current(self) -> MasterAddress:
        """
        The master the minion uses or tries now.
        """
        return self.order[self._index]

    @property
    def onPrimary(self) -> bool:
        """
        Whether the minion uses or tries its first master now.
        """
        return self.current == self.primary

    def attemptFailed(self) -> bool:
        """
        An attempt on L{current} failed (unreachable, refused, not
        trusted): move on to the next master.

        @return: whether every master failed once in a row (a round is
            over: the minion backs off before it starts again from the
            first of L{order}); always L{True} with one master.
        """
        self._failures += 1
        if self._failures >= len(self.order):
            self._failures = 0
            self._index = 0
            return True
        self._index = (self._index + 1) % len(self.order)
        return False

    def sessionLost(self) -> None:
        """
        The session with L{current} was lost: as Salt, that master goes to
        the end of the order, and the minion tries the others first,
        starting from the first.
        """
        lost = self.current
        self.order = [m for m in self.order if m != lost] + [lost]
        self._index = 0
        self._failures = 0

    def connected(self) -> None:
        """
        A session with L{current} is up: a new round starts at the next
        failure.
        """
        self._failures = 0

    def failBack(self) -> None:
        """
        Go back to the first order, with L{primary} first (C{master_failback}).
        """
        self.order = list(self._initial)
        self._index = 0
        self._failures = 0
