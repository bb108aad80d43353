# -*- test-case-name: tests.test_cluster_nats -*-
"""
Tests for L{salttwist.cluster.nats} and L{salttwist.cluster.natsprotocol}:
the NATS JetStream bus against the bus contract on the machine's NATS
server (each test its own cluster id, so its own stream and subjects),
against a private C{nats-server} stopped and restarted while members send
(L{BrokerAwayContract}), and behind a proxy that drops traffic (a
partition); the protocol's parsing on a L{StringTransport}.
"""

from __future__ import annotations

from typing import Any

from twisted.internet.task import Clock
from twisted.internet.testing import StringTransport
from twisted.trial.unittest import SynchronousTestCase, TestCase

from salttwist.cluster.interfaces import JOB
from salttwist.cluster.nats import NatsClusterBus, parseBrokerUrl
from salttwist.cluster.natsprotocol import NatsProtocol, parseHeaders
from tests._clustercontract import BrokerAwayContract, ClusterBusContract, subscribeAll
from tests._nats import (
    DropProxy,
    PrivateNatsServer,
    deleteStreamAfter,
    newClusterId,
    reactor,
    requireServer,
    serverUrl,
    waitUntil,
)


class _NatsBuses:
    """
    Members of one cluster (an id of the test's own) on a NATS server.
    """

    url = ""

    async def startServer(self) -> None:
        self.url = self.serverUrl = serverUrl()
        await requireServer(self, self.url)  # type: ignore[arg-type]

    async def makeBus(
        self,
        memberId: str,
        subscribe: tuple[str, ...] = (),
        handlers: dict[str, Any] | None = None,
        **options: Any,
    ) -> NatsClusterBus:
        if not self.url:
            await self.startServer()
        if not hasattr(self, "clusterId"):
            self.clusterId = newClusterId()
            deleteStreamAfter(
                self,  # type: ignore[arg-type]
                self.serverUrl,
                self.clusterId,
                getattr(self, "caFile", None),
            )
        bus = NatsClusterBus(reactor(), self.url, self.clusterId, memberId, **options)
        bus.got = subscribeAll(bus, subscribe, handlers)  # type: ignore[attr-defined]
        bus.start()
        self.addCleanup(bus.stop)  # type: ignore[attr-defined]
        await waitUntil(lambda: bus.connected, f"member {memberId} connected to {self.url}")
        return bus

    async def settle(self, condition: Any, what: str) -> None:
        await waitUntil(condition, what)


class NatsClusterBusTests(_NatsBuses, ClusterBusContract, TestCase):
    """
    L{NatsClusterBus} keeps the L{IClusterBus} contract on the machine's
    NATS server.
    """


class NatsBrokerAwayTests(_NatsBuses, BrokerAwayContract, TestCase):
    """
    L{NatsClusterBus} while a private C{nats-server} is stopped, then
    started again on the same port and store: nothing acknowledged is lost.
    """

    async def startServer(self) -> None:
        self.server = PrivateNatsServer(self)  # type: ignore[arg-type]
        await self.server.start()
        self.url = self.serverUrl = self.server.url

    async def makeBus(self, memberId: str, **options: Any) -> NatsClusterBus:
        options.setdefault("unreachableLimit", 1.0)
        options.setdefault("pingInterval", 0.5)
        return await super().makeBus(memberId, **options)

    async def brokerDown(self) -> None:
        await self.server.stop()

    async def brokerUp(self) -> None:
        await self.server.start()

    async def waitUnreachable(self, bus: NatsClusterBus) -> None:
        await waitUntil(lambda: bus.whyUnavailable(), "the unreachable limit to pass")
        # Past the first attempt to connect again: the reason is the last one.
        await waitUntil(lambda: "cannot connect" in bus.whyUnavailable(), "a failed attempt")

    def assertUnreachableReason(self, why: str) -> None:
        self.assertIn("cannot connect: Connection was refused", why)


class NatsPartitionTests(_NatsBuses, TestCase):
    """
    A master cut off from the broker by a partition (a proxy that drops
    every byte, closing nothing) notices from its unanswered PINGs, refuses
    jobs saying why, and recovers when the partition heals; what it sent
    meanwhile reaches the others.
    """

    async def test_partition(self) -> None:
        """
        See the class.
        """
        await self.startServer()
        proxy = DropProxy(self, int(self.url.rsplit(":", 1)[1]))
        direct = self.url
        self.url = await proxy.listen()
        cutOff = await self.makeBus("a", unreachableLimit=1.0, pingInterval=0.3)
        self.url = direct
        other = await self.makeBus("b", subscribe=(JOB,))
        proxy.dropping = True
        sent = cutOff.publish(JOB, b"sent-during-partition")
        why = await waitUntil(cutOff.whyUnavailable, "jobs refused during the partition")
        self.assertIn("unreachable", why)
        self.assertTrue("PING" in why or "did not answer within" in why, why)
        self.assertEqual(other.got[JOB], [])
        proxy.dropping = False
        await waitUntil(lambda: cutOff.whyUnavailable() is None, "recovery after the partition")
        await sent
        await waitUntil(lambda: other.got[JOB] == [b"sent-during-partition"], "the held message")


class NoJetStreamTests(_NatsBuses, TestCase):
    """
    A broker without JetStream: the master says so when it refuses jobs.
    """

    async def test_saysWhy(self) -> None:
        """
        Jobs are refused past the unreachable limit, the reason naming
        JetStream.
        """
        server = PrivateNatsServer(self, jetStream=False)
        await server.start()
        bus = NatsClusterBus(reactor(), server.url, newClusterId(), "a", unreachableLimit=0.5)
        bus.start()
        self.addCleanup(bus.stop)
        why = await waitUntil(
            lambda: "JetStream" in (bus.whyUnavailable() or "") and bus.whyUnavailable(),
            "jobs refused naming JetStream",
        )
        self.assertIn("JetStream is not enabled", why)
        self.assertFalse(bus.connected)


class ParseTests(SynchronousTestCase):
    """
    Parsing NATS's protocol and the broker's URL.
    """

    def connected(self) -> tuple[NatsProtocol, StringTransport, list[Any]]:
        proto = NatsProtocol(Clock(), "test")
        transport = StringTransport()
        proto.makeConnection(transport)
        proto.dataReceived(b'INFO {"server_id":"x","max_payload":1048576}\r\n')
        self.assertIn(b"CONNECT {", transport.value())
        got: list[Any] = []
        proto.subscribe("s.>", lambda *message: got.append(message))
        proto.dataReceived(b"PONG\r\n")
        self.successResultOf(proto.ready)
        return proto, transport, got

    def test_messagesInPieces(self) -> None:
        """
        A C{MSG} and an C{HMSG} cut anywhere are delivered whole, with their
        reply subject and headers.
        """
        proto, _, got = self.connected()
        data = b"MSG s.a 2 reply.1 5\r\nhello\r\nHMSG s.b 2 18 20\r\nNATS/1.0\r\nK: v\r\n\r\nhi\r\n"
        for i in range(len(data)):
            proto.dataReceived(data[i : i + 1])
        self.assertEqual(
            got, [("s.a", "reply.1", None, {}, b"hello"), ("s.b", None, None, {"K": "v"}, b"hi")]
        )

    def test_pingAnswered(self) -> None:
        """
        The server's C{PING} is answered with C{PONG}.
        """
        proto, transport, _ = self.connected()
        transport.clear()
        proto.dataReceived(b"PING\r\n")
        self.assertEqual(transport.value(), b"PONG\r\n")

    def test_oversizedDropped(self) -> None:
        """
        A message larger than allowed, or a control line without an end,
        drops the connection before anything is buffered.
        """
        proto, transport, _ = self.connected()
        proto.dataReceived(b"MSG s.a 2 999999999999\r\n")
        self.assertTrue(transport.disconnecting)
        proto, transport, _ = self.connected()
        proto.dataReceived(b"X" * 5000)
        self.assertTrue(transport.disconnecting)

    def test_noResponders(self) -> None:
        """
        A request answered with status 503 (no responders) gives the status.
        """
        proto, transport, _ = self.connected()
        d = proto.request("$JS.API.INFO", b"{}", 5)
        inbox = transport.value().split(b"PUB $JS.API.INFO ")[1].split(b" ")[0].decode()
        header = b"NATS/1.0 503\r\n\r\n"
        proto.dataReceived(
            f"HMSG {inbox} 1 {len(header)} {len(header)}\r\n".encode() + header + b"\r\n"
        )
        self.assertEqual(self.successResultOf(d), ("503", b""))

    def test_headers(self) -> None:
        """
        L{parseHeaders} reads the status and the headers.
        """
        self.assertEqual(
            parseHeaders(b"NATS/1.0 408 Request Timeout\r\nA: 1\r\n\r\n"),
            ("408", {"A": "1"}),
        )

    def test_url(self) -> None:
        """
        L{parseBrokerUrl} takes C{nats://host[:port]} and nothing else.
        """
        self.assertEqual(parseBrokerUrl("nats://127.0.0.1"), ("127.0.0.1", 4222))
        self.assertEqual(parseBrokerUrl("nats://h:4333"), ("h", 4333))
        for bad in ("redis://h", "nats://", "h:4222", "nats://h:x", "nats://h/x"):
            self.assertRaises(ValueError, parseBrokerUrl, bad)

    def test_badIds(self) -> None:
        """
        A cluster id or member id that cannot be part of a subject is
        refused, naming it.
        """
        error = self.assertRaises(ValueError, NatsClusterBus, Clock(), "nats://h", "a.b", "m")
        self.assertIn("'a.b'", str(error))
