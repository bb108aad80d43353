# -*- test-case-name: tests.test_cluster,tests.test_cluster_nats -*-
"""
The behaviour every L{IClusterBus} must have (L{ClusterBusContract}), run
against the in-memory bus (L{tests.test_cluster}) and the NATS JetStream
bus on a real broker (L{tests.test_cluster_nats}); and what a bus does while
its broker is away (L{BrokerAwayContract}), run against the in-memory
broker taken down and a private C{nats-server} stopped and restarted.

A subclass provides:

  - C{makeBus(memberId, subscribe=(), handlers={}, **options)}: a
    started bus of a new member (or of a member seen before, with the same
    id), connected, stopped after the test, whose C{got[kind]} lists what
    it received of each kind in C{subscribe}, and C{handlers} handle the
    others; C{options} go to the bus's constructor;
  - C{settle(condition, what)}: wait until C{condition()} is true (at once
    for the in-memory bus; by polling the reactor for the real one, failing
    after a deadline);

and for L{BrokerAwayContract}: C{brokerDown()}, C{brokerUp()} and
C{waitUnreachable(bus)} (until the bus's unreachable limit has passed).
"""

from __future__ import annotations

from typing import Any

from twisted.internet.defer import Deferred
from zope.interface.verify import verifyObject

from salttwist.cluster.interfaces import EVENT, JOB, RETURN, ClusterUnavailable, IClusterBus


def subscribeAll(
    bus: Any, subscribe: tuple[str, ...], handlers: dict[str, Any] | None
) -> dict[str, list[bytes]]:
    """
    Subscribe C{bus} to C{subscribe} (collecting what comes, returned by
    kind) and C{handlers}.
    """
    got: dict[str, list[bytes]] = {}
    for kind in subscribe:
        got[kind] = []
        bus.subscribe(kind, got[kind].append)
    for kind, handler in (handlers or {}).items():
        bus.subscribe(kind, handler)
    return got


class ClusterBusContract:
    """
    L{IClusterBus} behaviour; mixed into a trial C{TestCase}.
    """

    async def makeBus(self, memberId: str, **options: Any) -> Any:
        raise NotImplementedError

    async def settle(self, condition: Any, what: str) -> None:
        raise NotImplementedError

    async def test_interface(self) -> None:
        """
        The bus provides L{IClusterBus}.
        """
        bus = await self.makeBus("a")
        self.assertTrue(verifyObject(IClusterBus, bus))  # type: ignore[attr-defined]

    async def test_durableReachesEveryMember(self) -> None:
        """
        A durable message is acknowledged and delivered once to every
        subscribed member, the sender too.
        """
        a = await self.makeBus("a", subscribe=(JOB,))
        b = await self.makeBus("b", subscribe=(JOB,))
        await a.publish(JOB, b"job-1")
        await self.settle(lambda: a.got[JOB] == [b"job-1"] and b.got[JOB] == [b"job-1"], "job-1")

    async def test_kindsApart(self) -> None:
        """
        Each kind reaches only its own handler.
        """
        a = await self.makeBus("a", subscribe=(JOB, RETURN))
        b = await self.makeBus("b", subscribe=(JOB, RETURN))
        await a.publish(RETURN, b"ret-1")
        await a.publish(JOB, b"job-2")
        # The sender gets its own copy too, in its own time: a real broker
        # may deliver it after the other member's.
        await self.settle(
            lambda: (
                b.got[RETURN] == [b"ret-1"]
                and b.got[JOB] == [b"job-2"]
                and a.got[RETURN] == [b"ret-1"]
            ),
            "both",
        )
        self.assertEqual(a.got[RETURN], [b"ret-1"])  # type: ignore[attr-defined]
        self.assertEqual(b.got[RETURN], [b"ret-1"])  # type: ignore[attr-defined]

    async def test_volatileReachesConnectedMembers(self) -> None:
        """
        A best-effort message reaches the other connected members.
        """
        a = await self.makeBus("a", subscribe=(EVENT,))
        b = await self.makeBus("b", subscribe=(EVENT,))
        await a.publish(EVENT, b"event-1")
        await self.settle(lambda: b"event-1" in b.got[EVENT], "event-1")

    async def test_durableKeptForMemberAway(self) -> None:
        """
        A durable message sent while a member was stopped is delivered to
        it when it starts again under the same id.
        """
        a = await self.makeBus("a", subscribe=(JOB,))
        b = await self.makeBus("b", subscribe=(JOB,))
        await b.stop()
        await a.publish(JOB, b"while-away")
        again = await self.makeBus("b", subscribe=(JOB,))
        await self.settle(lambda: again.got[JOB] == [b"while-away"], "the message kept for b")

    async def test_failedHandlerDeliveredAgain(self) -> None:
        """
        A durable message whose handler fails is delivered again.
        """
        calls: list[bytes] = []

        def flaky(payload: bytes) -> Deferred[None] | None:
            calls.append(payload)
            if len(calls) == 1:
                raise RuntimeError("not now")
            return None

        a = await self.makeBus("a")
        await self.makeBus("b", handlers={JOB: flaky})
        await a.publish(JOB, b"retry-me")
        await a.publish(JOB, b"next")
        await self.settle(lambda: calls.count(b"retry-me") == 2 and b"next" in calls, "redelivery")
        self.assertEqual(len(self.flushLoggedErrors(RuntimeError)), 1)  # type: ignore[attr-defined]

    async def test_tooLarge(self) -> None:
        """
        A message larger than the broker allows is refused at once, saying
        so, and nothing is held.
        """
        a = await self.makeBus("a")
        for kind in (JOB, EVENT):
            error = self.assertRaises(  # type: ignore[attr-defined]
                ClusterUnavailable, a.publish, kind, b"x" * (a.maxPayload + 1)
            )
            self.assertIn("more than the broker allows", str(error))  # type: ignore[attr-defined]
        self.assertEqual(len(a.outbox), 0)  # type: ignore[attr-defined]
        await a.publish(JOB, b"x" * a.maxPayload)

    async def test_unknownKind(self) -> None:
        """
        A kind the bus does not know is refused.
        """
        a = await self.makeBus("a")
        self.assertRaises(ValueError, a.publish, "jobz", b"x")  # type: ignore[attr-defined]
        self.assertRaises(ValueError, a.subscribe, "jobz", print)  # type: ignore[attr-defined]


class BrokerAwayContract:
    """
    What a bus does while its broker is away; mixed into a trial C{TestCase}.
    """

    async def test_bufferedWhileAwayThenDelivered(self) -> None:
        """
        A durable message sent while the broker is away is held, is not
        acknowledged, and jobs are still accepted (within the unreachable
        limit); once the broker is back it is stored and delivered.
        """
        a = await self.makeBus("a", subscribe=(JOB,))  # type: ignore[attr-defined]
        b = await self.makeBus("b", subscribe=(JOB,))  # type: ignore[attr-defined]
        await self.brokerDown()  # type: ignore[attr-defined]
        acked = a.publish(JOB, b"during-outage")
        self.assertNoResult(acked)  # type: ignore[attr-defined]
        self.assertEqual(len(a.outbox), 1)  # type: ignore[attr-defined]
        await self.brokerUp()  # type: ignore[attr-defined]
        await acked
        await self.settle(  # type: ignore[attr-defined]
            lambda: b.got[JOB] == [b"during-outage"], "the message sent during the outage"
        )
        self.assertEqual(len(a.outbox), 0)  # type: ignore[attr-defined]

    async def test_fullBufferRefuses(self) -> None:
        """
        When the buffer holds its most messages, a new durable message is
        refused with L{ClusterUnavailable} saying so, and so are new jobs;
        nothing held is lost.
        """
        a = await self.makeBus("a", maxMessages=2)  # type: ignore[attr-defined]
        b = await self.makeBus("b", subscribe=(JOB,))  # type: ignore[attr-defined]
        await self.brokerDown()  # type: ignore[attr-defined]
        first, second = a.publish(JOB, b"1"), a.publish(JOB, b"2")
        error = self.assertRaises(ClusterUnavailable, a.publish, JOB, b"3")  # type: ignore[attr-defined]
        self.assertIn("buffer is full", str(error))  # type: ignore[attr-defined]
        self.assertIn("buffer is full", a.whyUnavailable())  # type: ignore[attr-defined]
        await self.brokerUp()  # type: ignore[attr-defined]
        await first
        await second
        await self.settle(lambda: b.got[JOB] == [b"1", b"2"], "both held messages")  # type: ignore[attr-defined]
        self.assertIsNone(a.whyUnavailable())  # type: ignore[attr-defined]

    async def test_unreachableTooLongRefusesJobs(self) -> None:
        """
        Once the broker has been away longer than the unreachable limit,
        L{IClusterBus.whyUnavailable} says so; when it is back, jobs are
        accepted again.
        """
        a = await self.makeBus("a")  # type: ignore[attr-defined]
        await self.brokerDown()  # type: ignore[attr-defined]
        await self.waitUnreachable(a)  # type: ignore[attr-defined]
        self.assertIn("unreachable", a.whyUnavailable())  # type: ignore[attr-defined]
        self.assertUnreachableReason(a.whyUnavailable())  # type: ignore[attr-defined]
        await self.brokerUp()  # type: ignore[attr-defined]
        await self.settle(lambda: a.whyUnavailable() is None, "recovery")  # type: ignore[attr-defined]
