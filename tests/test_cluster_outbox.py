# -*- test-case-name: tests.test_cluster_outbox -*-
"""
The bound of a master's outgoing buffer to the cluster's broker, and what
happens past it (issue 23: "buffer in bounded memory (then refuse new jobs
with a clear error rather than lose data)"; docs/cluster.md "The broker
restarted during a job"):

  - the refusal names the broker and the bound (L{OutboxBoundTests},
    L{NatsBusBoundTests}: a L{NatsClusterBus} whose broker never answers,
    on a L{MemoryReactorClock});
  - a return that finds the buffer full is refused to its minion with
    C{return not stored} before anything is done with it, so the minion
    keeps it and sends it again; a return acknowledged to a minion is never
    left out of the fan-out (L{ReturnPastBoundTests}: two real masters on
    the in-memory bus).
"""

from __future__ import annotations

from typing import Any

from twisted.internet.task import Clock
from twisted.internet.testing import MemoryReactorClock
from twisted.trial.unittest import SynchronousTestCase

from salttwist import crypt, wire
from salttwist.cluster.fanout import ClusterFanout
from salttwist.cluster.interfaces import RETURN, ClusterUnavailable
from salttwist.cluster.memory import MemoryBroker, MemoryClusterBus
from salttwist.cluster.nats import NatsClusterBus
from salttwist.cluster.outbox import Outbox
from salttwist.cluster.service import joinCluster
from salttwist.master.core import ACK_DELAY
from salttwist.pki.keystore import ACCEPTED
from tests.test_master_core import MINION_KEYS, MasterTestCase

URL = "nats://127.0.0.1:4222"
JOB = ("test.ping", [], "*", ["m1"])


def returnEvent(n: int) -> dict[str, Any]:
    """
    @return: the event of a return of minion C{m<n>}.
    """
    return {"cmd": "_return", "id": f"m{n}", "jid": "20261127000000000001", "return": True}


class OutboxBoundTests(SynchronousTestCase):
    """
    L{Outbox.whyFull} names the broker and the bound that is reached.
    """

    def test_messagesBound(self) -> None:
        """
        At C{maxMessages} messages, the refusal says how many are held, by
        which broker they are not acknowledged, and the bound.
        """
        outbox = Outbox("m", 2, 100, broker=URL)
        outbox.add(RETURN, b"1")
        self.assertIsNone(outbox.whyFull())
        outbox.add(RETURN, b"2")
        self.assertEqual(
            outbox.whyFull(),
            "the cluster's outgoing buffer is full (2 messages not yet acknowledged by "
            f"the broker {URL}, at most 2)",
        )
        self.assertRaises(ClusterUnavailable, outbox.add, RETURN, b"3")

    def test_bytesBound(self) -> None:
        """
        A message that would pass C{maxBytes} is refused, naming the broker.
        """
        outbox = Outbox("m", 10, 10, broker=URL)
        outbox.add(RETURN, b"12345678")
        error = self.assertRaises(ClusterUnavailable, outbox.add, RETURN, b"123")
        self.assertEqual(
            str(error),
            "the cluster's outgoing buffer is full (8 bytes not yet acknowledged by "
            f"the broker {URL}, at most 10)",
        )

    def test_noBrokerNamed(self) -> None:
        """
        Without a broker's name (the in-memory bus), "the broker".
        """
        outbox = Outbox("m", 1, 10)
        outbox.add(RETURN, b"1")
        self.assertIn("acknowledged by the broker, at most 1", outbox.whyFull() or "")


class NatsBusBoundTests(SynchronousTestCase):
    """
    A L{NatsClusterBus} whose broker is away (its connection attempts never
    complete on a L{MemoryReactorClock}), with a buffer of 3 messages.
    """

    def setUp(self) -> None:
        self.clock = MemoryReactorClock()
        self.bus = NatsClusterBus(self.clock, URL, "c1", "b", maxMessages=3, unreachableLimit=10.0)
        self.fanout = ClusterFanout(self.bus, self.clock, sharedJobCache=False)
        self.bus.start()
        self.addCleanup(self.bus.stop)

    def test_jobsRefusedPastBound(self) -> None:
        """
        Within the unreachable limit, jobs are taken and returns held; with
        the buffer full, a new job is refused, naming the broker and the
        bound, and a new return is refused for now; nothing held is
        dropped.
        """
        self.assertEqual(len(self.clock.tcpClients), 1)
        self.fanout.checkJobs(*JOB)
        for n in range(3):
            event = returnEvent(n)
            self.fanout.returnAccepted(event, self.fanout.returnMessage(event))
        self.assertEqual(len(self.bus.outbox), 3)
        error = self.assertRaises(ClusterUnavailable, self.fanout.checkJobs, *JOB)
        self.assertEqual(
            str(error),
            "job refused: the cluster's outgoing buffer is full (3 messages not yet "
            f"acknowledged by the broker {URL}, at most 3)",
        )
        error = self.assertRaises(ClusterUnavailable, self.fanout.returnMessage, returnEvent(3))
        self.assertIn(URL, str(error))
        self.assertEqual(len(self.bus.outbox), 3)

    def test_unreachableAfterLimit(self) -> None:
        """
        Past C{cluster_unreachable_limit} (on the clock), with room in the
        buffer, jobs are refused naming the broker and the time.
        """
        self.clock.advance(9.0)
        self.fanout.checkJobs(*JOB)
        self.clock.advance(1.0)
        error = self.assertRaises(ClusterUnavailable, self.fanout.checkJobs, *JOB)
        self.assertIn(f"job refused: the cluster's broker {URL} has been unreachable", str(error))
        self.assertIn("for 10 s", str(error))

    def test_tooLargeReturnNotRefused(self) -> None:
        """
        A return larger than the whole buffer would never fit: it is not
        refused (it would be sent again forever), and is kept on this
        master only.
        """
        self.bus.outbox.maxBytes = 100
        event = dict(returnEvent(0), **{"return": "x" * 200})
        payload = self.fanout.returnMessage(event)
        self.fanout.returnAccepted(event, payload)
        self.assertEqual(len(self.bus.outbox), 0)


class ReturnPastBoundTests(MasterTestCase):
    """
    Masters A and B on the in-memory bus; B, with a buffer of one message,
    holds the sessions of C{m1} and C{m2}.
    """

    def setUp(self) -> None:
        super().setUp()
        self.masterB = self.master
        self.masterA = self.makeMaster(self.masterB.runBlocking)
        self.eventsA: list[tuple[str, dict[str, Any]]] = []
        self.eventsB: list[tuple[str, dict[str, Any]]] = []
        self.masterA.bus.subscribe([], lambda tag, data: self.eventsA.append((tag, data)))
        self.masterB.bus.subscribe([], lambda tag, data: self.eventsB.append((tag, data)))
        for minionId, key in MINION_KEYS.items():
            self.masterA.keyStore.putKey(ACCEPTED, minionId, crypt.publicKeyToPem(key.public_key()))
        self.clock = Clock()
        self.broker = MemoryBroker()
        for name, master, bound in (("a", self.masterA, 100), ("b", self.masterB, 1)):
            bus = MemoryClusterBus(self.broker, name, self.clock, maxMessages=bound)
            service = joinCluster(master.config, self.clock, master, bus)
            service.startService()
            self.addCleanup(service.stopService)
        self.sessions = {}
        for minionId in ("m1", "m2"):
            client, _, sessionKey = self.authMinion(minionId)
            self.subscribe(minionId, sessionKey)
            self.sessions[minionId] = client
        self.master = self.masterA
        client, _ = self.authClient()
        reply = self.successResultOf(
            self.request(client, {"cmd": "publish", "fun": "test.ping", "tgt": "*"})
        )
        self.jid = reply["jid"]
        self.master = self.masterB

    def returnFrom(self, minionId: str) -> Any:
        """
        @return: the L{Deferred} answer to C{minionId}'s return to B.
        """
        return self.request(
            self.sessions[minionId],
            {"cmd": "_return", "id": minionId, "jid": self.jid, "fun": "test.ping", "return": True},
        )

    def returnsOn(self, events: list[tuple[str, dict[str, Any]]]) -> list[str]:
        """
        @return: the minions whose return for the job C{events} holds.
        """
        prefix = f"salt/job/{self.jid}/ret/"
        return [tag[len(prefix) :] for tag, _ in events if tag.startswith(prefix)]

    def test_refusedThenSentAgain(self) -> None:
        """
        With the broker away, B acknowledges C{m1}'s return (held in its
        buffer) and refuses C{m2}'s with C{return not stored}, doing nothing
        with it; once the broker is back, C{m1}'s reaches A, and C{m2}'s,
        sent again, is acknowledged and reaches A: each return once on each
        bus.
        """
        self.broker.down()
        self.assertTrue(self.successResultOf(self.returnFrom("m1"))["ret"])
        error = self.requestError(
            self.sessions["m2"],
            {"cmd": "_return", "id": "m2", "jid": self.jid, "fun": "test.ping", "return": True},
        )
        self.assertTrue(error.startswith(wire.RETURN_NOT_STORED), error)
        self.assertIn("the cluster's outgoing buffer is full", error)
        self.assertEqual(self.returnsOn(self.eventsB), ["m1"])
        self.assertEqual(self.returnsOn(self.eventsA), [])
        self.broker.up()
        self.clock.advance(ACK_DELAY)
        self.assertEqual(self.returnsOn(self.eventsA), ["m1"])
        self.assertTrue(self.successResultOf(self.returnFrom("m2"))["ret"])
        self.assertEqual(self.returnsOn(self.eventsB), ["m1", "m2"])
        self.assertEqual(self.returnsOn(self.eventsA), ["m1", "m2"])
