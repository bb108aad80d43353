# -*- test-case-name: tests.test_late_returns -*-
"""
Returns for jobs the running master process did not publish (it restarted
while a minion held the return) are checked against the job cache.
"""

from __future__ import annotations

import os
from typing import Any

from twisted.internet.defer import Deferred, fail, succeed
from twisted.internet.task import Clock
from twisted.internet.testing import EventLoggingObserver
from twisted.logger import globalLogPublisher
from twisted.trial.unittest import SynchronousTestCase

from salttwist import crypt, wire
from salttwist.blocking import runSynchronously
from salttwist.config import loadMasterConfig
from salttwist.events.bus import LocalEventBus
from salttwist.master.core import Master
from salttwist.master.jobcache_pgsql import JobCacheUnavailable
from salttwist.master.jobcachequeue import JobCacheQueueFull
from salttwist.master.keys import MasterKeys
from salttwist.master.returns import NOT_STORED_LOG_INTERVAL
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
        #: The operations that fail as with the database server away.
        self.down: set[str] = set()

    def _away(self) -> Deferred[Any]:
        if "full" in self.down:
            return fail(JobCacheQueueFull("the job cache does not keep up: 9 writes wait"))
        return fail(JobCacheUnavailable("cannot connect to the PostgreSQL job cache db:5432/salt"))

    def getJob(self, jid: str) -> Deferred[dict[str, Any] | None]:
        if "getJob" in self.down:
            return self._away()
        if jid != JID:
            return succeed(None)
        return succeed({"jid": JID, "fun": "test.ping", "minions": ["web1", "web2"]})

    def getReturns(self, jid: str) -> Deferred[dict[str, Any]]:
        if "getReturns" in self.down:
            return self._away()
        return succeed(dict(self.returned))

    def storeReturn(self, jid: str, minionId: str, ret: dict[str, Any]) -> Deferred[None]:
        if "storeReturn" in self.down:
            return self._away()
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
        self.clock = Clock()
        return Master(
            config,
            MasterKeys(MASTER_KEY, crypt.publicKeyToPem(MASTER_KEY.public_key()), b"k" * 32),
            InMemoryKeyStore(),
            bus,
            runSynchronously,
            self.clock,
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

    def assertNotStored(self, answer: Deferred[Any]) -> None:
        """
        C{answer} is the refusal that makes the minion keep the return and
        send it again (L{wire.RETURN_NOT_STORED}), naming no database.
        """
        message = str(self.failureResultOf(answer, ValueError).value)
        self.assertTrue(message.startswith(wire.RETURN_NOT_STORED), message)
        self.assertNotIn("db:5432", message)

    def test_lookupFailsNotStored(self) -> None:
        """
        A job cache that cannot look the job up (its server is away), or
        its returns, refuses the return with C{return not stored}, which
        the minion keeps and sends again, rather than with an error it
        would drop the return for; nothing is fired. Sent again once the
        cache answers, the return is taken and stored.
        """
        master = self.makeMaster({})
        for operation in ("getJob", "getReturns"):
            self.cache.down = {operation}
            self.assertNotStored(self.ret(master, "web1"))
        self.assertEqual(self.events, [])
        self.cache.down = set()
        self.assertEqual(self.successResultOf(self.ret(master, "web1")), {"ret": True})
        self.assertEqual(self.cache.stored, [(JID, "web1")])

    def test_lateWriteFailsNotStored(self) -> None:
        """
        A return for a job found in the cache whose write fails is refused
        with C{return not stored}, and not counted: sent again, it is taken
        (not refused as a duplicate) and stored.
        """
        master = self.makeMaster({})
        self.cache.down = {"storeReturn"}
        self.assertNotStored(self.ret(master, "web1"))
        self.cache.down = set()
        self.assertEqual(self.successResultOf(self.ret(master, "web1")), {"ret": True})
        self.assertEqual(self.cache.stored, [(JID, "web1")])

    def test_notStoredLoggedTogether(self) -> None:
        """
        Returns answered C{return not stored} are logged one line per
        L{NOT_STORED_LOG_INTERVAL} at most, counting those since the last
        line and naming the job cache's error, without a traceback for the
        job cache's own error.
        """
        logged = EventLoggingObserver.createWithCleanup(self, globalLogPublisher)
        master = self.makeMaster({})
        self.cache.down = {"getJob"}
        for _ in range(3):
            self.assertNotStored(self.ret(master, "web1"))
        self.clock.advance(NOT_STORED_LOG_INTERVAL)
        self.assertNotStored(self.ret(master, "web2"))
        lines = [e for e in logged if "return not stored" in e.get("log_format", "")]
        self.assertEqual([e["count"] for e in lines], [1, 3])
        self.assertIn("db:5432/salt", lines[0]["error"])
        self.assertEqual([e for e in lines if "log_failure" in e], [])

    def test_queueFullNotStored(self) -> None:
        """
        A write refused because the job cache's queue is full (its server
        hangs) is answered C{return not stored} too, logged in a line
        without a traceback.
        """
        logged = EventLoggingObserver.createWithCleanup(self, globalLogPublisher)
        master = self.makeMaster({})
        self.cache.down = {"storeReturn", "full"}
        self.assertNotStored(self.ret(master, "web1"))
        [line] = [e for e in logged if "return not stored" in e.get("log_format", "")]
        self.assertIn("does not keep up", line["error"])
        self.assertNotIn("log_failure", line)
