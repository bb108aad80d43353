# -*- test-case-name: tests.test_minion_pillar -*-
"""
Tests for L{salttwist.minion.pillar}: the minion's pillar fetched over its
session, kept in memory and refreshed one fetch at a time; and the whole
path in memory, a real L{Master} compiling real C{pillar_roots} for real
minions (L{tests._loopback.MasterMinionNetwork}).
"""

from __future__ import annotations

import os
from typing import Any

from twisted.internet.defer import Deferred
from twisted.internet.task import Clock
from twisted.internet.testing import EventLoggingObserver
from twisted.logger import formatEvent, globalLogPublisher
from twisted.trial.unittest import SynchronousTestCase

from salttwist.minion.pillar import (
    PILLAR_REFRESH_COMPLETE,
    MinionPillar,
    PillarUnavailable,
    pillarRequest,
)
from salttwist.modules import LoaderContext
from salttwist.pki.keystore import ACCEPTED
from salttwist.transport.reqclient import RequestError
from tests.test_master_pillarserving import FILES, SECRET, writeTree
from tests.test_minion import MINION_PEM, MinionTestCase


class MemorySession:
    """
    A minion's session in memory: records each request; the test answers
    it through its L{Deferred}.
    """

    def __init__(self) -> None:
        self.requests: list[tuple[dict[str, Any], Deferred[dict[str, Any]]]] = []

    def request(self, payload: dict[str, Any]) -> Deferred[dict[str, Any]]:
        d: Deferred[dict[str, Any]] = Deferred()
        self.requests.append((payload, d))
        return d


class MinionPillarTests(SynchronousTestCase):
    """
    L{MinionPillar} over an in-memory session.
    """

    def setUp(self) -> None:
        self.clock = Clock()
        self.session: MemorySession | None = MemorySession()
        self.fired: list[tuple[str, dict[str, Any]]] = []
        self.context = LoaderContext(
            opts={"id": "m1", "saltenv": None, "pillarenv": "dev"},
            grains={"id": "m1", "os": "Linux"},
            reactor=self.clock,
        )
        self.context.fireLocal = lambda tag, data: self.fired.append((tag, data))
        self.pillar = MinionPillar("m1", self.context, lambda: self.session, self.clock)
        self.logs = EventLoggingObserver.createWithCleanup(self, globalLogPublisher)

    def answer(self, index: int, pillar: dict[str, Any]) -> None:
        assert self.session is not None
        self.session.requests[index][1].callback({"ret": pillar})

    def test_request(self) -> None:
        """
        The request is Salt's C{_pillar} load: id, grains, the config's
        saltenv and pillarenv, the override.
        """
        self.pillar.refresh(cleanCache=False)
        assert self.session is not None
        payload = self.session.requests[0][0]
        self.assertEqual(
            payload,
            {
                "cmd": "_pillar",
                "id": "m1",
                "grains": {"id": "m1", "os": "Linux"},
                "saltenv": None,
                "pillarenv": "dev",
                "pillar_override": {},
                "clean_cache": False,
            },
        )
        self.assertEqual(
            pillarRequest("m1", {}, {}, "qa", None, {"a": 1}, True)["pillar_override"], {"a": 1}
        )

    def test_refreshReplacesWhole(self) -> None:
        """
        A refresh replaces C{context.pillar} with a new dict (never changes
        the old one), fires the refresh-complete event without the pillar
        and answers it.
        """
        old = self.context.pillar = {"a": 1}
        d = self.pillar.refresh()
        self.answer(0, {"b": 2})
        self.assertEqual(self.successResultOf(d), {"b": 2})
        self.assertEqual(self.context.pillar, {"b": 2})
        self.assertEqual(old, {"a": 1})
        self.assertEqual(self.fired, [(PILLAR_REFRESH_COMPLETE, {"complete": True})])

    def test_oneAtATime(self) -> None:
        """
        A refresh asked for while one runs waits for a new fetch, started
        when the running one is over; those who ask meanwhile share it.
        """
        assert self.session is not None
        first = self.pillar.refresh()
        second = self.pillar.refresh()
        third = self.pillar.refresh()
        self.assertEqual(len(self.session.requests), 1)
        self.answer(0, {"v": 1})
        self.assertEqual(self.successResultOf(first), {"v": 1})
        self.assertNoResult(second)
        self.assertEqual(len(self.session.requests), 2)
        self.answer(1, {"v": 2})
        self.assertEqual(self.successResultOf(second), {"v": 2})
        self.assertEqual(self.successResultOf(third), {"v": 2})
        self.assertEqual(self.context.pillar, {"v": 2})
        self.assertEqual(self.pillar.fetches, 2)

    def test_failureKeepsPillar(self) -> None:
        """
        A refused fetch keeps the previous pillar, logs why and fails the
        refresh with L{PillarUnavailable}.
        """
        assert self.session is not None
        self.context.pillar = {"kept": SECRET}
        d = self.pillar.refresh()
        self.session.requests[0][1].errback(RequestError("no pillar for you"))
        failure = self.failureResultOf(d, PillarUnavailable)
        self.assertIn("no pillar for you", str(failure.value))
        self.assertEqual(self.context.pillar, {"kept": SECRET})
        messages = [formatEvent(e) for e in self.logs]
        self.assertTrue(any("could not be refreshed" in m for m in messages), messages)
        self.assertFalse(any(SECRET in m for m in messages))

    def test_badReply(self) -> None:
        """
        A reply without a pillar is a failure.
        """
        assert self.session is not None
        d = self.pillar.refresh()
        self.session.requests[0][1].callback({"ret": "nope"})
        self.failureResultOf(d, PillarUnavailable)

    def test_notConnected(self) -> None:
        """
        Without a session the refresh fails at once, the pillar kept.
        """
        self.session = None
        self.failureResultOf(self.pillar.refresh(), PillarUnavailable)

    def test_timeout(self) -> None:
        """
        A master that does not answer fails the fetch after the timeout.
        """
        d = self.pillar.refresh()
        self.clock.advance(59)
        self.assertNoResult(d)
        self.clock.advance(1)
        self.failureResultOf(d, PillarUnavailable)

    def test_cancelOneWaiter(self) -> None:
        """
        Cancelling one caller's refresh stops no fetch and no other caller.
        """
        first = self.pillar.refresh()
        second = self.pillar.refresh()
        second.cancel()
        self.failureResultOf(second)
        self.answer(0, {"v": 1})
        self.assertEqual(self.successResultOf(first), {"v": 1})

    def test_fetchKeepsNothing(self) -> None:
        """
        C{fetch} (other inputs) answers a pillar without keeping it.
        """
        assert self.session is not None
        self.context.pillar = {"own": 1}
        d = self.pillar.fetch(pillarenv="qa", override={"x": 1})
        payload = self.session.requests[0][0]
        self.assertEqual((payload["pillarenv"], payload["pillar_override"]), ("qa", {"x": 1}))
        self.answer(0, {"other": 1})
        self.assertEqual(self.successResultOf(d), {"other": 1})
        self.assertEqual(self.context.pillar, {"own": 1})


class MinionPillarPathTests(MinionTestCase):
    """
    A real master compiling real C{pillar_roots}, and real minions, in
    memory.
    """

    def setUp(self) -> None:
        super().setUp()
        self.pillarRoot = writeTree(os.path.abspath(self.mktemp()), FILES)
        self.master.config["pillar_roots"] = {"base": [self.pillarRoot]}

    def test_fetchedAfterSubscribing(self) -> None:
        """
        Each minion holds its own pillar once it subscribed.
        """
        web = self.readyMinion("web1")
        db = self.readyMinion("db1")
        self.net.flush()
        self.assertEqual(web.executor.context.pillar["port2"], 8002)
        self.assertNotIn("db_password", web.executor.context.pillar)
        self.assertEqual(db.executor.context.pillar["db_password"], SECRET)
        self.assertEqual(self.master.pillarCache.get("db1")["db_password"], SECRET)  # type: ignore[index]

    def test_jobsAndRefresh(self) -> None:
        """
        C{pillar.items} in a job shows the minion's pillar; after a top
        change, C{saltutil.refresh_pillar} brings the new one. No event of
        the master carries the secret.
        """
        minion = self.readyMinion("db1")
        self.net.flush()
        self.publish("pillar.get", ["motd"])
        motd = f"hello {minion.executor.context.grains.get('os', 'unknown')}"
        self.assertEqual(self.returns("db1")[-1]["return"], motd)
        writeTree(self.pillarRoot, {"top.sls": "base:\n  '*':\n    - common\n"})
        self.publish("saltutil.refresh_pillar")
        self.net.flush()
        self.assertIs(self.returns("db1")[-1]["return"], True)
        self.assertEqual(minion.executor.context.pillar, {"motd": motd})
        self.assertFalse([event for event in self.net.events if SECRET in repr(event)])

    def test_masterless(self) -> None:
        """
        With C{file_client: local} the minion compiles its pillar from its
        own C{pillar_roots} when it starts, without a master, and again at
        each refresh; the master compiles nothing for it.
        """
        localRoot = writeTree(
            os.path.abspath(self.mktemp()),
            {"top.sls": "base:\n  '*':\n    - local\n", "local.sls": "where: {{ grains['id'] }}\n"},
        )
        self.net.refuse = 1
        minion = self.makeMinion("local1", file_client="local", pillar_roots={"base": [localRoot]})
        minion.start()
        self.net.flush()
        self.assertEqual(minion.executor.context.pillar, {"where": "local1"})
        writeTree(localRoot, {"local.sls": "where: changed\n"})
        ret = self.successResultOf(minion.executor.run("saltutil.refresh_pillar", []))
        self.assertIs(ret["return"], True)
        self.assertEqual(minion.executor.context.pillar, {"where": "changed"})
        writeTree(localRoot, {"local.sls": "where: [broken\n"})
        ret = self.successResultOf(minion.executor.run("pillar.items", []))
        self.assertEqual(ret["return"], {"where": "changed"})
        self.successResultOf(minion.executor.run("saltutil.refresh_pillar", []))
        self.assertIn("_errors", minion.executor.context.pillar)
        self.assertTrue(self.logged("local pillar: "))
        self.assertEqual(self.master.pillarRequests.compiles, 0)

    def test_rogueSessionRefused(self) -> None:
        """
        A minion's own session asking for another minion's pillar is
        refused.
        """
        self.net.keyStore.putKey(ACCEPTED, "db1", MINION_PEM)
        web = self.readyMinion("web1")
        req = web.returns.req
        assert req is not None
        d = req.request({"cmd": "_pillar", "id": "db1", "grains": {}})
        self.net.flush()
        failure = self.failureResultOf(d, RequestError)
        self.assertEqual(
            str(failure.value), "minion 'web1' may only ask for its own pillar, not for 'db1''s"
        )
        self.assertEqual(self.logged(SECRET), [])
