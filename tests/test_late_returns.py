# -*- test-case-name: tests.test_late_returns -*-
"""
Returns for jobs the running master process did not publish (it restarted
while a minion held the return) are checked against the job cache.
"""

from __future__ import annotations

import os
from typing import Any

from twisted.internet.defer import Deferred, succeed
from twisted.internet.task import Clock
from twisted.trial.unittest import SynchronousTestCase

from salttwist import crypt
from salttwist.blocking import runSynchronously
from salttwist.config import loadMasterConfig
from salttwist.events.bus import LocalEventBus
from salttwist.master.core import Master
from salttwist.master.keys import MasterKeys
from salttwist.pki.keystore import InMemoryKeyStore

MASTER_KEY = crypt.generatePrivateKey()
JID = "20261122010203040506"


class _Cache:
    """
    A job cache holding one job for C{web1} and C{web2}.
    """

    def __init__(self, returned: dict[str, Any]) -> None:
        self.returned = returned
        self.stored: list[tuple[str, str]] = []

    def getJob(self, jid: str) -> Deferred[dict[str, Any] | None]:
        if jid != JID:
            return succeed(None)
        return succeed({"jid": JID, "fun": "test.ping", "minions": ["web1", "web2"]})

    def getReturns(self, jid: str) -> Deferred[dict[str, Any]]:
        return succeed(dict(self.returned))

    def storeReturn(self, jid: str, minionId: str, ret: dict[str, Any]) -> Deferred[None]:
        self.stored.append((jid, minionId))
        return succeed(None)


class _Session:
    def __init__(self, minionId: str) -> None:
        self.minionId = minionId


class LateReturnTests(SynchronousTestCase):
    """
    L{Master.minionReturn} for a jid missing from the in-memory registry.
    """

    def makeMaster(self, returned: dict[str, Any]) -> Master:
        """
        A freshly started master whose job cache knows L{JID}.
        """
        root = os.path.abspath(self.mktemp())
        config = loadMasterConfig(root, overrides={"root_dir": root})
        self.events: list[str] = []
        bus = LocalEventBus()
        bus.subscribe(["salt/job/"], lambda tag, data: self.events.append(tag))
        self.cache = _Cache(returned)
        return Master(
            config,
            MasterKeys(MASTER_KEY, crypt.publicKeyToPem(MASTER_KEY.public_key()), b"k" * 32),
            InMemoryKeyStore(),
            bus,
            runSynchronously,
            Clock(),
            jobCache=self.cache,  # type: ignore[arg-type]
        )

    def ret(self, master: Master, minionId: str, jid: str = JID) -> Any:
        """
        Send a return from C{minionId}'s session.
        """
        load = {"id": minionId, "jid": jid, "return": True}
        return master.minionReturn(_Session(minionId), load)  # type: ignore[arg-type]

    def test_cachedJobAccepted(self) -> None:
        """
        A return for a cached job that targeted the minion is accepted, fired
        and stored, once; a second copy is refused.
        """
        master = self.makeMaster({})
        self.assertEqual(self.successResultOf(self.ret(master, "web1")), {"ret": True})
        self.assertEqual(self.events, [f"salt/job/{JID}/ret/web1"])
        self.assertEqual(self.cache.stored, [(JID, "web1")])
        self.assertRaises(ValueError, self.ret, master, "web1")

    def test_alreadyStoredRefused(self) -> None:
        """
        A return the cache already holds (sent before the master went down)
        is refused as a duplicate and not fired again.
        """
        master = self.makeMaster({"web1": {"return": True}})
        self.failureResultOf(self.ret(master, "web1"), ValueError)
        self.assertEqual(self.events, [])

    def test_untargetedOrUnknownRefused(self) -> None:
        """
        A minion the cached job did not target, or a jid the cache does not
        know, is refused.
        """
        master = self.makeMaster({})
        self.failureResultOf(self.ret(master, "db1"), ValueError)
        self.failureResultOf(self.ret(master, "web1", "2" * 20), ValueError)
        self.assertEqual(self.events, [])
