# -*- test-case-name: tests.test_cluster -*-
"""
Tests for L{salttwist.cluster}: the in-memory bus against the bus contract
(L{tests._clustercontract}), the outbox, and the fan-out between masters
(L{salttwist.cluster.fanout}) over in-memory buses, with a clock.
"""

from __future__ import annotations

import os
import stat
from typing import Any

from twisted.internet.defer import Deferred, succeed
from twisted.internet.task import Clock
from twisted.logger import globalLogPublisher
from twisted.trial.unittest import TestCase

from salttwist import serial
from salttwist.cluster.fanout import (
    CLUSTER_ORIGIN,
    JOB_MAX_AGE,
    ClusterFanout,
    fromCluster,
    isClusterMasterEvent,
)
from salttwist.cluster.interfaces import EVENT, JOB, RETURN, ClusterUnavailable
from salttwist.cluster.memory import MemoryBroker, MemoryClusterBus
from salttwist.cluster.outbox import Outbox
from salttwist.cluster.sealed import (
    FUTURE_SKEW,
    MAX_AGES,
    ClusterKeyError,
    ReplayWindow,
    SealedClusterBus,
    loadOrCreateClusterKey,
)
from salttwist.events.bus import TagFilter
from salttwist.master.jobs import JobRegistry
from tests._clustercontract import BrokerAwayContract, ClusterBusContract, subscribeAll


class _MemoryBuses:
    """
    Members of one L{MemoryBroker}, with a L{Clock}.
    """

    def setUp(self) -> None:
        self.clock = Clock()
        self.broker = MemoryBroker()

    async def makeBus(
        self,
        memberId: str,
        subscribe: tuple[str, ...] = (),
        handlers: dict[str, Any] | None = None,
        **options: Any,
    ) -> MemoryClusterBus:
        bus = MemoryClusterBus(self.broker, memberId, self.clock, **options)
        bus.got = subscribeAll(bus, subscribe, handlers)  # type: ignore[attr-defined]
        bus.start()
        self.addCleanup(bus.stop)  # type: ignore[attr-defined]
        return bus

    async def settle(self, condition: Any, what: str) -> None:
        self.assertTrue(condition(), what)  # type: ignore[attr-defined]

    async def brokerDown(self) -> None:
        self.broker.down()

    async def brokerUp(self) -> None:
        self.broker.up()

    def assertUnreachableReason(self, why: str) -> None:
        self.assertIn("has been unreachable for 10 s", why)  # type: ignore[attr-defined]

    async def waitUnreachable(self, bus: MemoryClusterBus) -> None:
        self.assertIsNone(bus.whyUnavailable())  # type: ignore[attr-defined]
        self.clock.advance(bus.unreachableLimit)


class MemoryClusterBusTests(_MemoryBuses, ClusterBusContract, TestCase):
    """
    L{MemoryClusterBus} keeps the L{IClusterBus} contract.
    """


class MemoryBrokerAwayTests(_MemoryBuses, BrokerAwayContract, TestCase):
    """
    L{MemoryClusterBus} while its broker is away.
    """


KEY = bytes(range(32))


class _SealedBuses(_MemoryBuses):
    """
    Members of one L{MemoryBroker} whose messages are sealed with one key.
    """

    async def makeBus(
        self,
        memberId: str,
        subscribe: tuple[str, ...] = (),
        handlers: dict[str, Any] | None = None,
        key: bytes = KEY,
        **options: Any,
    ) -> SealedClusterBus:
        inner = MemoryClusterBus(self.broker, memberId, self.clock, **options)
        bus = SealedClusterBus(inner, key, "c1")
        bus.got = subscribeAll(bus, subscribe, handlers)  # type: ignore[attr-defined]
        bus.start()
        self.addCleanup(bus.stop)  # type: ignore[attr-defined]
        return bus


class SealedClusterBusTests(_SealedBuses, ClusterBusContract, TestCase):
    """
    L{SealedClusterBus} keeps the L{IClusterBus} contract.
    """

    async def test_sealed(self) -> None:
        """
        What crosses the broker is sealed: the broker holds no plaintext.
        """
        a = await self.makeBus("a", subscribe=(JOB,))
        await a.publish(JOB, b"secret job")
        [(_, stored)] = self.broker.stored[JOB]
        self.assertNotIn(b"secret", stored)
        self.assertEqual(a.got[JOB], [b"secret job"])

    async def test_otherKeyDropped(self) -> None:
        """
        A message sealed with another key (another cluster.key, or a
        forgery) is dropped, and logged; the member goes on.
        """
        a = await self.makeBus("a", key=bytes(32))
        b = await self.makeBus("b", subscribe=(JOB,))
        await a.publish(JOB, b"from the wrong key")
        await self.broker._members["a"].publish(JOB, b"plaintext forgery")
        self.assertEqual(b.got[JOB], [])
        c = await self.makeBus("c")
        await c.publish(JOB, b"good")
        self.assertEqual(b.got[JOB], [b"good"])


class SealedReplayTests(_SealedBuses, TestCase):
    """
    A sealed message cannot be replayed by whoever reaches the broker: each
    carries its time and id inside the seal.
    """

    async def sealedBus(self, memberId: str, now: Any, kind: str) -> SealedClusterBus:
        inner = MemoryClusterBus(self.broker, memberId, self.clock)
        bus = SealedClusterBus(inner, KEY, "c1", now=now)
        bus.got = subscribeAll(bus, (kind,), None)  # type: ignore[attr-defined]
        bus.start()
        self.addCleanup(bus.stop)
        return bus

    async def test_replayedEventDropped(self) -> None:
        """
        The sealed bytes of an event, published again, are not handled
        again (the reactor would have acted on each copy).
        """
        now = [1000.0]
        a = await self.sealedBus("a", lambda: now[0], EVENT)
        b = await self.sealedBus("b", lambda: now[0], EVENT)
        captured: list[bytes] = []
        deliver = self.broker._volatile

        def capture(kind: str, payload: bytes) -> None:
            captured.append(payload)
            deliver(kind, payload)

        self.patch(self.broker, "_volatile", capture)
        await a.publish(EVENT, b"salt/minion/web1/start")
        [sealed] = captured
        for _ in range(3):
            await self.broker._members["a"].publish(EVENT, sealed)
        self.assertEqual(b.got[EVENT], [b"salt/minion/web1/start"])  # type: ignore[attr-defined]
        self.assertEqual(len(b.windows[EVENT]), 1)

    async def test_oldAndFutureDropped(self) -> None:
        """
        A message older than its kind's window, or dated too far in the
        future, is dropped; a return may be as old as the broker keeps it.
        """
        sent = [1000.0]
        received = [1000.0]
        a = await self.sealedBus("a", lambda: sent[0], RETURN)
        b = await self.sealedBus("b", lambda: received[0], RETURN)
        received[0] = 1000.0 + MAX_AGES[RETURN] + 1
        await a.publish(RETURN, b"stale")
        received[0] = 1000.0 - FUTURE_SKEW - 1
        await a.publish(RETURN, b"future")
        received[0] = 1000.0 + 3000
        await a.publish(RETURN, b"after a master was away")
        self.assertEqual(b.got[RETURN], [b"after a master was away"])  # type: ignore[attr-defined]

    async def test_failedHandlerNotRemembered(self) -> None:
        """
        A message whose handler failed is not remembered, so the broker's
        redelivery is handled.
        """
        a = await self.sealedBus("a", lambda: 1000.0, JOB)
        inner = MemoryClusterBus(self.broker, "b", self.clock)
        b = SealedClusterBus(inner, KEY, "c1", now=lambda: 1000.0)
        calls: list[bytes] = []

        def handler(payload: bytes) -> None:
            calls.append(payload)
            if len(calls) == 1:
                raise RuntimeError("the job cache is away")

        b.subscribe(JOB, handler)
        b.start()
        self.addCleanup(b.stop)
        await a.publish(JOB, b"job")
        [(_, sealed)] = self.broker.stored[JOB]
        await self.broker._members["a"].publish(JOB, sealed)
        await self.broker._members["a"].publish(JOB, sealed)
        self.assertEqual(calls, [b"job", b"job"])
        self.assertEqual(len(self.flushLoggedErrors(RuntimeError)), 1)


class ReplayWindowTests(TestCase):
    """
    L{ReplayWindow} remembers ids while their messages could be accepted,
    and no more than its cap.
    """

    def test_forgetsOnlyWhatAgeDrops(self) -> None:
        window = ReplayWindow(60.0)
        window.handled(b"x", 100.0)
        self.assertIn("handled already", window.why(b"x", 100.0, 150.0) or "")
        self.assertIn("ago", window.why(b"x", 100.0, 161.0) or "")
        self.assertEqual(len(window), 0)

    def test_cap(self) -> None:
        window = ReplayWindow(60.0, cap=2)
        for msgId in (b"a", b"b", b"c"):
            window.handled(msgId, 100.0)
        self.assertEqual(len(window), 2)
        self.assertTrue(window.overflowed)
        self.assertIsNone(window.why(b"a", 100.0, 101.0))


class SealedBrokerAwayTests(_SealedBuses, BrokerAwayContract, TestCase):
    """
    L{SealedClusterBus} while its broker is away.
    """


class ClusterKeyTests(TestCase):
    """
    L{loadOrCreateClusterKey}.
    """

    def test_madeOnceThenRead(self) -> None:
        """
        The first call makes a key file (mode 0600, in a directory of mode
        0700); later calls read the same key.
        """
        directory = os.path.join(self.mktemp(), "cluster")
        key, path, made = loadOrCreateClusterKey(directory)
        self.assertTrue(made)
        self.assertEqual(len(key), 32)
        self.assertEqual(stat.S_IMODE(os.stat(path).st_mode), 0o600)
        self.assertEqual(stat.S_IMODE(os.stat(directory).st_mode), 0o700)
        self.assertEqual(loadOrCreateClusterKey(directory), (key, path, False))

    def test_refused(self) -> None:
        """
        A key file others may read, or one that is not 64 hex digits, is
        refused, saying why.
        """
        directory = self.mktemp()
        _, path, _ = loadOrCreateClusterKey(directory)
        os.chmod(path, 0o644)
        error = self.assertRaises(ClusterKeyError, loadOrCreateClusterKey, directory)
        self.assertIn("chmod go-rwx", str(error))
        os.chmod(path, 0o600)
        with open(path, "w") as f:
            f.write("not a key\n")
        error = self.assertRaises(ClusterKeyError, loadOrCreateClusterKey, directory)
        self.assertIn("64 hex digits", str(error))


class OutboxTests(TestCase):
    """
    L{Outbox} holds durable messages until acknowledged, within its bounds.
    """

    def test_bytesBound(self) -> None:
        """
        A message that would pass the byte bound is refused, saying so.
        """
        outbox = Outbox("m", 10, 10)
        outbox.add(JOB, b"12345678")
        error = self.assertRaises(ClusterUnavailable, outbox.add, JOB, b"123")
        self.assertIn("8 bytes", str(error))

    def test_acknowledgedFrees(self) -> None:
        """
        An acknowledged message leaves the buffer and its sender is told.
        """
        outbox = Outbox("m", 1, 100)
        pending = outbox.add(JOB, b"x")
        self.assertEqual(outbox.toSend(), [pending])
        self.assertEqual(outbox.toSend(), [])
        outbox.acknowledged(pending.msgId)
        self.successResultOf(pending.acked)
        self.assertEqual((len(outbox), outbox.bytes), (0, 0))
        outbox.add(JOB, b"y")

    def test_resentAfterDisconnection(self) -> None:
        """
        Messages in flight when the connection is lost are sent again, in
        order, under the same ids.
        """
        outbox = Outbox("m", 10, 100)
        first, second = outbox.add(JOB, b"1"), outbox.add(JOB, b"2")
        outbox.toSend()
        outbox.disconnected()
        self.assertEqual([p.msgId for p in outbox.toSend()], [first.msgId, second.msgId])

    def test_idsDifferAcrossRuns(self) -> None:
        """
        Two outboxes of the same member (a master restarted) give their
        first messages different ids: the broker's duplicate window must
        not drop the new one.
        """
        self.assertNotEqual(
            Outbox("m", 1, 10).add(JOB, b"").msgId, Outbox("m", 1, 10).add(JOB, b"").msgId
        )


class _Bus:
    """
    A master's event bus: what it fires, delivered to its subscribers as
    L{LocalEventBus} does (without C{_stamp}, so events compare equal).
    """

    def __init__(self) -> None:
        self.fired: list[tuple[str, dict[str, Any]]] = []
        self._subscriptions: list[tuple[TagFilter, Any]] = []

    def fire(self, tag: str, data: dict[str, Any]) -> None:
        self.fired.append((tag, data))
        for wanted, callback in list(self._subscriptions):
            if wanted(tag):
                callback(tag, data)

    def subscribe(self, prefixes: Any, callback: Any, globs: Any = ()) -> None:
        self._subscriptions.append((TagFilter(prefixes, globs), callback))


class _JobCache:
    """
    A job cache that records what is stored.
    """

    def __init__(self) -> None:
        self.jobs: list[str] = []
        self.returns: list[tuple[str, str]] = []

    def storeJob(self, jid: str, load: dict[str, Any], minions: list[str]) -> Deferred[None]:
        self.jobs.append(jid)
        return succeed(None)

    def storeReturn(self, jid: str, minionId: str, ret: dict[str, Any]) -> Deferred[None]:
        self.returns.append((jid, minionId))
        return succeed(None)


class _Publisher:
    """
    The job publishing room's part the fan-out uses: the registry, and the
    loads it publishes to its own minions.
    """

    def __init__(self) -> None:
        self.jobs = JobRegistry()
        self.published: list[dict[str, Any]] = []

    def publish(self, load: dict[str, Any]) -> Deferred[None]:
        self.published.append(load)
        return succeed(None)


class _Master:
    def __init__(self, fanout: ClusterFanout) -> None:
        self.fanout = fanout
        self.publisher = _Publisher()
        self.bus = _Bus()
        self.jobCache = _JobCache()
        fanout.attach(self.publisher, self.bus, self.jobCache)


def _load(jid: str, ts: float = 0.0) -> dict[str, Any]:
    return {"jid": jid, "fun": "test.ping", "arg": [], "tgt": "*", "tgt_type": "glob", "ts": ts}


class FanoutTests(TestCase):
    """
    L{ClusterFanout} between two masters on in-memory buses.
    """

    def setUp(self) -> None:
        self.clock = Clock()
        self.broker = MemoryBroker()

    def master(self, memberId: str, sharedJobCache: bool = False) -> _Master:
        bus = MemoryClusterBus(self.broker, memberId, self.clock, maxMessages=3, maxBytes=65536)
        master = _Master(ClusterFanout(bus, self.clock, sharedJobCache))
        bus.start()
        return master

    def test_jobPublishedByEveryOtherMaster(self) -> None:
        """
        A job published on one master is recorded, fired as
        C{salt/job/<jid>/new} and published to its own minions by every
        other master (not again by the one it came from), and stored in
        their own job caches.
        """
        a, b, c = self.master("a"), self.master("b"), self.master("c")
        a.fanout.jobPublished(_load("20261127000000000001"), ["m1", "m2"])
        for other in (b, c):
            self.assertEqual(
                [p["jid"] for p in other.publisher.published], ["20261127000000000001"]
            )
            job = other.publisher.jobs.get("20261127000000000001")
            self.assertEqual(job.minions, frozenset({"m1", "m2"}))
            self.assertEqual(other.bus.fired[0][0], "salt/job/20261127000000000001/new")
            self.assertEqual(other.jobCache.jobs, ["20261127000000000001"])
        self.assertEqual(a.publisher.published, [])

    def test_jobTwiceOnce(self) -> None:
        """
        A job that comes twice (a durable message delivered again) is
        published once.
        """
        a, b = self.master("a"), self.master("b")
        payload = serial.dumps(
            {"origin": "a", "load": _load("20261127000000000002"), "minions": []}
        )
        a.fanout.bus.publish(JOB, payload)
        a.fanout.bus.publish(JOB, payload)
        self.assertEqual(len(b.publisher.published), 1)

    def test_jidCollisionLogged(self) -> None:
        """
        A job from another master whose jid this master already gave
        another job is not published, and that is logged as an error.
        """
        a, b = self.master("a"), self.master("b")
        b.publisher.jobs.add("20261127000000000009", dict(_load("x"), fun="cmd.run"), [])
        logged: list[dict[str, Any]] = []
        globalLogPublisher.addObserver(logged.append)
        self.addCleanup(globalLogPublisher.removeObserver, logged.append)
        a.fanout.jobPublished(_load("20261127000000000009"), ["m1"])
        self.assertEqual(b.publisher.published, [])
        self.assertTrue(
            any("has the jid of another job" in e.get("log_format", "") for e in logged)
        )

    def test_staleJobNotPublished(self) -> None:
        """
        A job that reaches a master more than L{JOB_MAX_AGE} seconds after
        its publication (the master was away) is not published to its
        minions.
        """
        a, b = self.master("a"), self.master("b")
        self.clock.advance(JOB_MAX_AGE + 1)
        a.fanout.jobPublished(_load("20261127000000000003", ts=0.0), ["m1"])
        self.assertEqual(b.publisher.published, [])

    def test_returnFiredOnOtherMasters(self) -> None:
        """
        A return accepted on one master is fired on every other's bus as
        C{salt/job/<jid>/ret/<id>}, once however often it comes, and
        stored in each one's own job cache.
        """
        a, b = self.master("a"), self.master("b")
        event = {"cmd": "_return", "id": "m1", "jid": "20261127000000000004", "return": True}
        a.fanout.returnAccepted(event)
        a.fanout.returnAccepted(event)
        self.assertEqual(
            b.bus.fired,
            [("salt/job/20261127000000000004/ret/m1", {**event, CLUSTER_ORIGIN: "a"})],
        )
        self.assertEqual(b.jobCache.returns, [("20261127000000000004", "m1")])
        self.assertEqual(a.bus.fired, [])

    def test_sharedJobCacheStoredOnce(self) -> None:
        """
        With a shared job cache (PostgreSQL), the other masters store
        neither the job nor the return: the master that had them did.
        """
        a, b = self.master("a", True), self.master("b", True)
        a.fanout.jobPublished(_load("20261127000000000005"), ["m1"])
        a.fanout.returnAccepted({"id": "m1", "jid": "20261127000000000005"})
        self.assertEqual((b.jobCache.jobs, b.jobCache.returns), ([], []))
        self.assertEqual(len(b.bus.fired), 2)

    def test_eventFiredOnOtherMasters(self) -> None:
        """
        A minion's event is fired on the other masters' buses, with the
        master it came from under L{CLUSTER_ORIGIN}.
        """
        a, b = self.master("a"), self.master("b")
        a.fanout.eventFired("myco/deploy", {"id": "m1", "data": {"ok": 1}})
        self.assertEqual(
            b.bus.fired, [("myco/deploy", {"id": "m1", "data": {"ok": 1}, CLUSTER_ORIGIN: "a"})]
        )

    def test_jobNewMarked(self) -> None:
        """
        The C{salt/job/<jid>/new} another master's job fires carries the
        master it came from.
        """
        a, b = self.master("a"), self.master("b")
        a.fanout.jobPublished(_load("20261127000000000011"), ["m1"])
        [(tag, data)] = b.bus.fired
        self.assertEqual((tag, data[CLUSTER_ORIGIN]), ("salt/job/20261127000000000011/new", "a"))

    def test_masterEventsAcrossMasters(self) -> None:
        """
        The master events a Salt user watches, fired on one master's bus
        (by C{salttwist-key}, an authentication, a subscription, the
        presence timer), are fired once on every other master's bus, with
        the same tag and data and the master they came from under
        L{CLUSTER_ORIGIN}; they are not fired again on the first.
        """
        a, b, c = self.master("a"), self.master("b"), self.master("c")
        events = [
            ("salt/key", {"act": "delete", "id": "m1"}),
            ("salt/auth", {"act": "accept", "id": "m1", "result": True, "pub": "PEM"}),
            ("salt/minion/m1/start", {"id": "m1", "cmd": "_minion_event", "data": "started"}),
            ("minion_start", {"id": "m1", "data": "started"}),
            ("salt/presence/present", {"present": ["m1"]}),
            ("salt/presence/change", {"new": ["m1"], "lost": []}),
        ]
        for tag, data in events:
            a.bus.fire(tag, data)
        for other in (b, c):
            self.assertEqual(
                other.bus.fired, [(tag, {**data, CLUSTER_ORIGIN: "a"}) for tag, data in events]
            )
        self.assertEqual(a.bus.fired, events)

    def test_otherMasterEventsStay(self) -> None:
        """
        Master events that are not for the cluster (runner jobs, the
        reactor's errors, custom tags, a minion's other events fired by the
        master) stay on the master that fired them.
        """
        a, b = self.master("a"), self.master("b")
        for tag in (
            "salt/run/20261127000000000012/new",
            "salt/reactor/error",
            "salt/keys",
            "salt/minion/m1/start/extra",
            "salt/minion/m1/stop",
            "myco/custom",
        ):
            self.assertFalse(isClusterMasterEvent(tag), tag)
            a.bus.fire(tag, {"x": 1})
        self.assertEqual(b.bus.fired, [])

    def test_forwardedNotSentBack(self) -> None:
        """
        An event fired for another master (it carries L{CLUSTER_ORIGIN}) is
        not sent on again: with three masters each sees A's C{salt/key}
        once, and A never gets it back.
        """
        a, b, c = self.master("a"), self.master("b"), self.master("c")
        a.bus.fire("salt/key", {"act": "accept", "id": "m2"})
        self.assertEqual(len(b.bus.fired), 1)
        self.assertEqual(len(c.bus.fired), 1)
        self.assertEqual(len(a.bus.fired), 1)
        self.assertTrue(fromCluster(b.bus.fired[0][1]))
        self.assertFalse(fromCluster(a.bus.fired[0][1]))

    def test_minionStartEventSentOnce(self) -> None:
        """
        A minion's own C{salt/minion/<id>/start} (a minion event, which the
        returns room fires on the bus and then hands to
        L{ClusterFanout.eventFired}) is sent to the other masters once.
        """
        a, b = self.master("a"), self.master("b")
        event = {"id": "m1", "tag": "salt/minion/m1/start", "data": {}, "cmd": "_minion_event"}
        a.bus.fire("salt/minion/m1/start", event)
        a.fanout.eventFired("salt/minion/m1/start", event)
        self.assertEqual(b.bus.fired, [("salt/minion/m1/start", {**event, CLUSTER_ORIGIN: "a"})])

    def test_masterEventTooLarge(self) -> None:
        """
        A master event too large for the broker is logged and not sent;
        the local bus goes on.
        """
        a, b = self.master("a"), self.master("b")
        logged: list[dict[str, Any]] = []
        globalLogPublisher.addObserver(logged.append)
        self.addCleanup(globalLogPublisher.removeObserver, logged.append)
        a.fanout.bus.maxPayload = 1000
        a.bus.fire("salt/presence/present", {"present": [f"minion{n}" for n in range(500)]})
        self.assertEqual(b.bus.fired, [])
        self.assertTrue(
            any("is not sent to the other masters" in e.get("log_format", "") for e in logged)
        )
        a.bus.fire("salt/key", {"act": "accept", "id": "m1"})
        self.assertEqual([tag for tag, _ in b.bus.fired], ["salt/key"])

    def test_jobsRefusedWhenBrokerAway(self) -> None:
        """
        L{ClusterFanout.checkJobs} refuses jobs, saying why, once the
        buffer is full or the broker has been away too long; returns are
        never refused (a minion drops a refused return): one past the bound
        stays on its master. Once the broker is back, what was held is
        delivered and jobs are taken again.
        """
        a, b = self.master("a"), self.master("b")
        job = ("test.ping", [], "*", ["m1"])
        self.broker.down()
        a.fanout.checkJobs(*job)
        for n in range(4):
            a.fanout.returnAccepted({"id": "m1", "jid": f"2026112700000000010{n}"})
        error = self.assertRaises(ClusterUnavailable, a.fanout.checkJobs, *job)
        self.assertIn("job refused: the cluster's outgoing buffer is full", str(error))
        self.broker.up()
        a.fanout.checkJobs(*job)
        self.assertEqual(len(b.bus.fired), 3)
        self.broker.down()
        self.clock.advance(a.fanout.bus.unreachableLimit)
        error = self.assertRaises(ClusterUnavailable, a.fanout.checkJobs, *job)
        self.assertIn("unreachable", str(error))
        self.broker.up()
        a.fanout.checkJobs(*job)

    def test_jobTooBigForBuffer(self) -> None:
        """
        A job whose message would not fit in the buffer's bytes is refused
        before it is made.
        """
        a = self.master("a")
        error = self.assertRaises(
            ClusterUnavailable, a.fanout.checkJobs, "test.echo", ["x" * (70 * 1024)], "*", []
        )
        self.assertIn("bytes", str(error))

    def test_malformedDropped(self) -> None:
        """
        A message that is not msgpack, or a job without a load, is dropped.
        """
        a, b = self.master("a"), self.master("b")
        a.fanout.bus.publish(JOB, b"\xc1")
        a.fanout.bus.publish(JOB, serial.dumps({"origin": "a", "load": "x", "minions": []}))
        self.assertEqual(b.publisher.published, [])
