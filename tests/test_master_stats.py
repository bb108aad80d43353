# -*- test-case-name: tests.test_master_stats -*-
"""
Tests for the master's statistics (C{master_stats: True}): the req channel's
per-command figures (L{RequestStats}, kept by L{ReqServerProtocol}), the
C{salt/master/stats} event (L{MasterStats}) and its loop in
L{MasterService}, and the C{manage.workers} runner, on a L{Clock}.
"""

from __future__ import annotations

import os
from typing import Any

from twisted.internet.defer import Deferred
from twisted.internet.task import deferLater
from twisted.internet.testing import StringTransport
from twisted.trial.unittest import SynchronousTestCase

from salttwist.config import ConfigError, loadMasterConfig
from salttwist.events.bus import EventPublisherFactory
from salttwist.master.maintenance import (
    STATS_TAG,
    MasterStats,
    RequestStats,
    jobsInFlight,
    workerStats,
)
from salttwist.master.reqserver import ReqServerProtocol
from salttwist.runners import RunnerContext
from tests.test_events import encode
from tests.test_presence import connect, makeService, record
from tests.test_runners_jobs import makeMaster

WORKER_KEYS = {"running", "size", "busy", "idle", "queued", "restarts", "completed", "failed"}


class FakePool:
    """
    A worker pool as far as the statistics look at it.
    """

    def stats(self) -> dict[str, int]:
        """
        @return: fixed figures.
        """
        return {
            "size": 4,
            "busy": 3,
            "idle": 1,
            "queued": 7,
            "restarts": 2,
            "completed": 90,
            "failed": 1,
        }


class RequestStatsTests(SynchronousTestCase):
    """
    L{RequestStats} keeps Salt's C{{"mean", "runs"}} per command.
    """

    def test_meanAndRuns(self) -> None:
        """
        Each command has its number of runs and their mean duration.
        """
        stats = RequestStats()
        for seconds in (1.0, 2.0, 6.0):
            stats.record("_return", seconds)
        stats.record("_auth", 0.5)
        self.assertEqual(
            stats.peek(),
            {"_return": {"mean": 3.0, "runs": 3}, "_auth": {"mean": 0.5, "runs": 1}},
        )

    def test_take(self) -> None:
        """
        L{RequestStats.take} hands over the figures and starts again;
        L{RequestStats.peek} gives a copy and keeps them.
        """
        stats = RequestStats()
        stats.record("publish", 1.0)
        stats.peek()["publish"]["runs"] = 99
        self.assertEqual(stats.take(), {"publish": {"mean": 1.0, "runs": 1}})
        self.assertEqual(stats.take(), {})


class ReqServerRecordsTests(SynchronousTestCase):
    """
    The req server records each allow-listed request it answers.
    """

    def setUp(self) -> None:
        """
        A master on a L{Clock} and one req connection to it.
        """
        self.master = makeMaster(self, master_stats=True)
        self.proto = ReqServerProtocol(self.master)
        self.transport = StringTransport()
        self.proto.makeConnection(self.transport)

    def test_recordsDuration(self) -> None:
        """
        A request is recorded under its command with the time it took to
        answer, on the master's clock.
        """

        def slowAuth(proto: Any, load: Any) -> Deferred[Any]:
            reply = ({"ret": "error", "error": "no"}, None, None, None)
            return deferLater(self.master.clock, 2.5, lambda: reply)

        self.patch(self.master, "clearClientAuth", slowAuth)
        self.proto.dataReceived(encode({"cmd": "_client_auth"}))
        self.assertEqual(self.master.requestStats.peek(), {})
        self.master.clock.advance(2.5)
        self.assertEqual(
            self.master.requestStats.peek(), {"_client_auth": {"mean": 2.5, "runs": 1}}
        )

    def test_failedRequestRecorded(self) -> None:
        """
        A refused client authentication is still a request handled.
        """
        self.proto.dataReceived(encode({"cmd": "_client_auth", "nonce": b"x", "mac": b"y"}))
        self.assertEqual(self.master.requestStats.peek()["_client_auth"]["runs"], 1)

    def test_notRecordedWithoutMasterStats(self) -> None:
        """
        Without C{master_stats} nothing reports the figures, so requests
        are not timed at all.
        """
        self.master.config["master_stats"] = False
        self.proto.dataReceived(encode({"cmd": "_client_auth", "nonce": b"x", "mac": b"y"}))
        self.assertEqual(self.master.requestStats.peek(), {})

    def test_unknownCommandNotRecorded(self) -> None:
        """
        A command outside the allow-lists is not recorded: the table cannot
        grow with names a peer makes up.
        """
        self.proto.dataReceived(encode({"cmd": "made-up"}))
        self.assertEqual(self.master.requestStats.peek(), {})


class FiguresTests(SynchronousTestCase):
    """
    L{workerStats} and L{jobsInFlight}.
    """

    def setUp(self) -> None:
        """
        A master on a L{Clock}.
        """
        self.master = makeMaster(self, timeout=5)

    def test_noWorkers(self) -> None:
        """
        Without a worker pool (authentication in threads) the figures are 0
        and C{running} is false.
        """
        figures = workerStats(self.master)
        self.assertEqual(set(figures), WORKER_KEYS)
        self.assertFalse(figures["running"])
        self.assertEqual({v for k, v in figures.items() if k != "running"}, {0})

    def test_workers(self) -> None:
        """
        With a pool, its own figures and C{running}.
        """
        self.master.workers = FakePool()
        self.assertEqual(workerStats(self.master), {"running": True, **FakePool().stats()})

    def test_jobsInFlight(self) -> None:
        """
        A job is in flight while it is younger than C{timeout} and a
        connected minion it targeted has not returned (the rule of
        C{jobs.active}).
        """
        now = self.master.clock.seconds()
        connect(self.master, "minion1", "minion2")
        self.master.jobs.add("1", {"ts": now}, ["minion1", "minion2"])
        self.master.jobs.add("2", {"ts": now}, ["minion3"])
        self.master.jobs.add("3", {"ts": now - 5}, ["minion1"])
        self.master.jobs.add("4", {}, ["minion1"])
        self.assertEqual(jobsInFlight(self.master), 1)
        self.master.jobs.checkReturn("1", "minion1")
        self.assertEqual(jobsInFlight(self.master), 1)
        self.master.jobs.checkReturn("1", "minion2")
        self.assertEqual(jobsInFlight(self.master), 0)


class MasterStatsTests(SynchronousTestCase):
    """
    L{MasterStats} fires C{salt/master/stats} with what the master does.
    """

    def test_collect(self) -> None:
        """
        The event holds the seconds since the last one and the req figures
        (as Salt's), the workers, the connected minions, the sessions, the
        jobs in flight and the event bus's figures; the req figures start
        again after each event.
        """
        master = makeMaster(self)
        master.workers = FakePool()
        publisher = EventPublisherFactory(master.bus)  # type: ignore[arg-type]
        stats = MasterStats(master, master.clock, publisher)
        connect(master, "minion1", "minion2")
        master.sessions["minion1"] = object()  # type: ignore[assignment]
        master.requestStats.record("_return", 0.25)
        events = record(master.bus, ("salt/master/",))
        master.clock.advance(60)
        master.jobs.add("1", {"ts": master.clock.seconds()}, ["minion1"])
        stats()
        [(tag, data)] = events
        self.assertEqual(tag, STATS_TAG)
        self.assertEqual(
            data,
            {
                "time": 60,
                "stats": {"_return": {"mean": 0.25, "runs": 1}},
                "workers": {"running": True, **FakePool().stats()},
                "minions": 2,
                "sessions": 1,
                "jobs": 1,
                "events": {
                    "subscriptions": 2,
                    "subscribers": 0,
                    "queued": 0,
                    "queued_bytes": 0,
                    "dropped": 0,
                },
                "publications": {"dropped": 0},
            },
        )
        master.clock.advance(30)
        self.assertEqual(stats.collect()["time"], 30)
        self.assertEqual(stats.collect()["stats"], {})

    def test_publicationsDropped(self) -> None:
        """
        The event reports the publications dropped for minions that did not
        read them (C{pub_write_buffer}), as the sessions room counts them.
        """
        master = makeMaster(self)
        stats = MasterStats(master, master.clock)
        master.sessionsRoom.publicationsDropped = 3
        self.assertEqual(master.publicationsDropped, 3)
        self.assertEqual(stats.collect()["publications"], {"dropped": 3})

    def test_manageWorkers(self) -> None:
        """
        The C{manage.workers} runner returns the same worker figures.
        """
        master = makeMaster(self)
        runner = master.runners["manage.workers"]
        self.assertEqual(
            self.successResultOf(Deferred.fromCoroutine(runner(RunnerContext(master)))),
            workerStats(master),
        )
        master.workers = FakePool()
        self.assertEqual(
            self.successResultOf(Deferred.fromCoroutine(runner(RunnerContext(master)))),
            {"running": True, **FakePool().stats()},
        )


class MasterStatsLoopTests(SynchronousTestCase):
    """
    L{MasterService} fires C{salt/master/stats} every
    C{master_stats_event_iter} seconds when C{master_stats} is true.
    """

    def test_everyIter(self) -> None:
        """
        One event every C{master_stats_event_iter} seconds, counting the
        connected subscribers of the bus's socket; none after stopping.
        """
        service = makeService(self, master_stats=True, master_stats_event_iter=30)
        events = record(service.bus, ("salt/master/",))
        service.startService()
        subscriber = service.eventPublisher.buildProtocol(None)
        subscriber.makeConnection(StringTransport())
        subscriber.dataReceived(encode({"subscribe": ["salt/master/"]}))
        service.reactor.advance(29)
        self.assertEqual(events, [])
        service.reactor.advance(1)
        service.reactor.advance(30)
        self.assertEqual([tag for tag, _ in events], [STATS_TAG, STATS_TAG])
        data = events[0][1]
        self.assertEqual(data["time"], 30)
        self.assertEqual(data["events"]["subscribers"], 1)
        self.assertEqual(set(data["workers"]), WORKER_KEYS)
        self.successResultOf(service.stopService())
        service.reactor.advance(300)
        self.assertEqual(len(events), 2)

    def test_offByDefault(self) -> None:
        """
        Without C{master_stats} no statistics event is fired.
        """
        service = makeService(self)
        events = record(service.bus, ("salt/master/",))
        service.startService()
        service.reactor.advance(600)
        self.assertEqual(events, [])
        self.successResultOf(service.stopService())

    def test_iterMustBePositive(self) -> None:
        """
        C{master_stats_event_iter} (default 60, as Salt's) must be a number
        above 0.
        """
        root = os.path.abspath(self.mktemp())
        self.assertEqual(loadMasterConfig(root)["master_stats_event_iter"], 60)
        for bad in (0, -5):
            self.assertRaises(ConfigError, loadMasterConfig, root, {"master_stats_event_iter": bad})
