# -*- test-case-name: tests.test_minion_failover -*-
"""
Tests for a minion's failover between masters (C{master_type: failover}):
L{salttwist.minion.masters} alone, then a whole minion against two masters
in memory (L{MasterPair}), with time driven by a L{MemoryReactorClock}.
"""

from __future__ import annotations

import os
from typing import Any

from twisted.internet import defer
from twisted.internet.address import IPv4Address
from twisted.internet.defer import Deferred
from twisted.internet.error import ConnectionRefusedError
from twisted.internet.protocol import Factory, Protocol
from twisted.internet.testing import EventLoggingObserver, MemoryReactorClock
from twisted.logger import LogLevel, formatEvent, globalLogPublisher
from twisted.trial.unittest import SynchronousTestCase

from salttwist import crypt
from salttwist.client.transient import CallerError, MasterCaller
from salttwist.config import ConfigError, loadMasterConfig, loadMinionConfig
from salttwist.daemon import StartupError
from salttwist.events.bus import LocalEventBus
from salttwist.master.core import Master, runSynchronously
from salttwist.master.keys import MasterKeys
from salttwist.master.publisher import PubServerFactory
from salttwist.master.reqserver import ReqServerFactory
from salttwist.minion.core import (
    MASTER_CONNECTED,
    MASTER_DISCONNECTED,
    MASTER_FAILBACK,
    MASTER_PUB_FILE,
    Minion,
)
from salttwist.minion.masters import (
    MasterAddress,
    MasterList,
    ownPinFile,
    parseMasterAddress,
)
from salttwist.minion.service import buildMinion
from salttwist.pki.keystore import ACCEPTED, InMemoryKeyStore
from tests._loopback import Loopback
from tests.test_runners_jobs import FakeJobCache

# Key generation is slow: these serve every test of the module.
MASTER_KEY = crypt.generatePrivateKey()
MASTER_PEM = crypt.publicKeyToPem(MASTER_KEY.public_key())
OTHER_MASTER_KEY = crypt.generatePrivateKey()
OTHER_MASTER_PEM = crypt.publicKeyToPem(OTHER_MASTER_KEY.public_key())
MINION_KEY = crypt.generatePrivateKey()
MINION_PEM = crypt.publicKeyToPem(MINION_KEY.public_key())
ROOT_KEY = os.urandom(32)

HOST = "127.0.0.1"
A_REQ, A_PUB = 4506, 4505
B_REQ, B_PUB = 5506, 5505
#: A TCP load balancer's port in front of both masters' req ports.
LB_PORT = 7000
A = MasterAddress(HOST, A_REQ)
B = MasterAddress(HOST, B_REQ)


def _config(**options: Any) -> dict[str, Any]:
    config = {
        "master": [f"{HOST}:{A_REQ}", f"{HOST}:{B_REQ}"],
        "master_port": 4506,
        "master_type": "failover",
    }
    config.update(options)
    return config


class MasterAddressTests(SynchronousTestCase):
    """
    L{parseMasterAddress} reads an entry of C{master} as Salt's
    C{prep_ip_port}.
    """

    def test_forms(self) -> None:
        """
        A host takes C{master_port}; C{host:port}, C{[v6]:port} and
        C{[v6]} are read; a bare IPv6 address has no port in it.
        """
        for text, expected in (
            ("salt", MasterAddress("salt", 4506)),
            ("10.0.0.1:5000", MasterAddress("10.0.0.1", 5000)),
            ("[::1]:5000", MasterAddress("::1", 5000)),
            ("[::1]", MasterAddress("::1", 4506)),
            ("fe80::a00:27ff:fedc:ba98", MasterAddress("fe80::a00:27ff:fedc:ba98", 4506)),
        ):
            self.assertEqual(parseMasterAddress(text, 4506), expected, text)

    def test_bad(self) -> None:
        """
        A port that is not a number from 1 to 65535, an empty host or an
        unclosed bracket is refused, naming the entry.
        """
        for text in ("salt:", "salt:http", "salt:0", "salt:70000", ":4506", "[::1:4506", "[::1]x"):
            with self.assertRaises(ValueError) as e:
                parseMasterAddress(text, 4506)
            self.assertIn(repr(text), str(e.exception))

    def test_str(self) -> None:
        """
        An address shows as C{host:port}, an IPv6 host in brackets.
        """
        self.assertEqual(str(MasterAddress("salt", 4506)), "salt:4506")
        self.assertEqual(str(MasterAddress("::1", 4506)), "[::1]:4506")

    def test_ownPinFile(self) -> None:
        """
        The file pinning one master's key is named after its host and port,
        with nothing but letters, digits, dots and dashes from the host.
        """
        self.assertEqual(ownPinFile(A), "minion_master_127.0.0.1_4506.pub")
        self.assertEqual(ownPinFile(MasterAddress("::1", 1)), "minion_master___1_1.pub")
        self.assertEqual(ownPinFile(MasterAddress("../x", 1)), "minion_master_.._x_1.pub")


class MasterListTests(SynchronousTestCase):
    """
    L{MasterList}: the order a minion tries its masters in.
    """

    def test_strUsesFirst(self) -> None:
        """
        Without C{master_type: failover} only the first master is used.
        """
        masters = MasterList(_config(master_type="str"))
        self.assertFalse(masters.failover)
        self.assertEqual(masters.order, [A])
        self.assertTrue(masters.attemptFailed())
        self.assertEqual(masters.current, A)

    def test_oneMasterAsString(self) -> None:
        """
        One master as a string is a list of one, also for failover.
        """
        self.assertEqual(MasterList(_config(master="salt")).order, [MasterAddress("salt", 4506)])

    def test_rounds(self) -> None:
        """
        Each failed attempt moves on to the next master; once every master
        failed in a row the round is over and the next starts from the
        first.
        """
        masters = MasterList(_config(master=["a", "b", "c"]))
        seen = [masters.current.host]
        ends = []
        for _ in range(6):
            ends.append(masters.attemptFailed())
            seen.append(masters.current.host)
        self.assertEqual(seen, ["a", "b", "c", "a", "b", "c", "a"])
        self.assertEqual(ends, [False, False, True, False, False, True])

    def test_connectedStartsRound(self) -> None:
        """
        A session resets the count of failures in a row.
        """
        masters = MasterList(_config(master=["a", "b"]))
        self.assertFalse(masters.attemptFailed())
        masters.connected()
        self.assertEqual(masters.current.host, "b")
        self.assertFalse(masters.attemptFailed())
        self.assertEqual(masters.current.host, "a")

    def test_sessionLost(self) -> None:
        """
        A lost session puts its master at the end, and the minion tries
        the others first, from the first (Salt's C{eval_master(failed=True)}).
        """
        masters = MasterList(_config(master=["a", "b", "c"]))
        masters.attemptFailed()
        self.assertEqual(masters.current.host, "b")
        masters.connected()
        masters.sessionLost()
        self.assertEqual([m.host for m in masters.order], ["a", "c", "b"])
        self.assertEqual(masters.current.host, "a")
        self.assertEqual(masters.primary.host, "a")
        self.assertFalse(masters.onPrimary is False)

    def test_failBack(self) -> None:
        """
        Failing back restores the first order, the first master first.
        """
        masters = MasterList(_config(master=["a", "b", "c"]))
        masters.sessionLost()
        self.assertFalse(masters.onPrimary)
        masters.failBack()
        self.assertEqual([m.host for m in masters.order], ["a", "b", "c"])
        self.assertTrue(masters.onPrimary)

    def test_randomMaster(self) -> None:
        """
        C{random_master} shuffles the list; with C{master_failback} the
        first master stays first (Salt).
        """
        shuffled: list[list[str]] = []

        def reverse(items: list[MasterAddress]) -> None:
            shuffled.append([m.host for m in items])
            items.reverse()

        names = ["a", "b", "c"]
        masters = MasterList(_config(master=names, random_master=True), shuffle=reverse)
        self.assertEqual([m.host for m in masters.order], ["c", "b", "a"])
        self.assertEqual(masters.primary.host, "c")
        masters = MasterList(
            _config(master=names, random_master=True, master_failback=True), shuffle=reverse
        )
        self.assertEqual([m.host for m in masters.order], ["a", "c", "b"])
        self.assertEqual(shuffled, [["a", "b", "c"], ["b", "c"]])
        masters = MasterList(
            _config(master=names, random_master=True, master_type="str"), shuffle=reverse
        )
        self.assertEqual([m.host for m in masters.order], ["a"])


class _Site:
    """
    One master of a L{MasterPair}.

    @ivar up: whether it accepts connections.
    @ivar hung: whether it reads nothing on its connections.
    @ivar protocols: its side of every connection made to it.
    """

    def __init__(self, master: Master, reqPort: int, keyStore: InMemoryKeyStore) -> None:
        self.master = master
        self.keyStore = keyStore
        self.reqPort = reqPort
        self.servers: dict[int, Factory] = {
            reqPort: ReqServerFactory(master),
            master.publishPort: PubServerFactory(master),
        }
        self.up = True
        self.hung = False
        self.protocols: list[Protocol] = []
        self.events: list[tuple[str, dict[str, Any]]] = []

    def hang(self, protocol: Protocol) -> None:
        protocol.dataReceived = lambda data: None  # type: ignore[method-assign]


class MasterPair(Loopback):
    """
    Two L{Master}s, A and B, each with its own key store and bus, sharing
    one job cache, and the minions' C{connectTCP} to them in memory, with
    one clock.

    @ivar attempts: the C{(host, port)} of every connection attempt.
    """

    def __init__(self, root: str, keys: dict[str, bytes | None] | None = None) -> None:
        reactor = MemoryReactorClock()
        super().__init__(reactor)
        self.reactor = reactor
        self.sites: dict[str, _Site] = {}
        #: The job cache both masters share, as a cluster's.
        self.jobCache = FakeJobCache(reactor)
        self.attempts: list[tuple[str, int]] = []
        for name, req, pub in (("A", A_REQ, A_PUB), ("B", B_REQ, B_PUB)):
            path = os.path.join(root, name)
            config = loadMasterConfig(
                path, overrides={"root_dir": path, "publish_port": pub, "ret_port": req}
            )
            key = OTHER_MASTER_KEY if (keys or {}).get(name) else MASTER_KEY
            pem = crypt.publicKeyToPem(key.public_key())
            keyStore = InMemoryKeyStore()
            bus = LocalEventBus()
            master = Master(
                config,
                MasterKeys(key, pem, ROOT_KEY),
                keyStore,
                bus,
                runSynchronously,
                reactor,
                jobCache=self.jobCache,
            )
            site = _Site(master, req, keyStore)
            bus.subscribe([], lambda tag, data, site=site: site.events.append((tag, data)))
            self.sites[name] = site

    def connectTCP(self, host: str, port: int, factory: Factory) -> defer.Deferred:
        """
        Connect to the master listening on C{port}, if it is up.
        """
        self.attempts.append((host, port))
        for site in self.sites.values():
            # The balancer's port goes to the req port of the first master up.
            server = site.servers.get(site.reqPort if port == LB_PORT else port)
            if server is not None and site.up:
                addr = IPv4Address("TCP", host, port)
                client = factory.buildProtocol(addr)
                protocol = server.buildProtocol(addr)
                site.protocols.append(protocol)
                if site.hung:
                    site.hang(protocol)
                self.connect(protocol, client)
                return defer.succeed(client)
        return defer.fail(ConnectionRefusedError(string=f"{host}:{port}"))

    def kill(self, name: str) -> None:
        """
        Master C{name} dies: its connections close and it refuses new ones.
        """
        site = self.sites[name]
        site.up = False
        for protocol in site.protocols:
            if protocol.transport is not None:
                protocol.transport.loseConnection()
        site.protocols = []
        self.flush()

    def hang(self, name: str) -> None:
        """
        Master C{name} hangs: it keeps its connections open and reads
        nothing more on them.
        """
        site = self.sites[name]
        site.hung = True
        for protocol in site.protocols:
            site.hang(protocol)

    def reqAttempts(self) -> list[int]:
        """
        @return: the req ports connected to, in order.
        """
        return [port for _, port in self.attempts if port in (A_REQ, B_REQ)]

    def advance(self, seconds: float) -> None:
        """
        Let C{seconds} pass, then deliver whatever that caused, with the
        calls that schedules without delay (a failover minion moves on to
        its next master at once).
        """
        self.reactor.advance(seconds)
        self.flush()
        for _ in range(100):
            now = self.reactor.seconds()
            if not any(call.getTime() <= now for call in self.reactor.getDelayedCalls()):
                return
            self.reactor.advance(0)
            self.flush()
        raise AssertionError("calls without delay never stop coming")


class FailoverTestCase(SynchronousTestCase):
    """
    A L{MasterPair}, and helpers to build a failover minion for it.
    """

    masterKeys: dict[str, bytes | None] = {}

    def setUp(self) -> None:
        self.net = MasterPair(os.path.abspath(self.mktemp()), self.masterKeys)
        self.logs = EventLoggingObserver.createWithCleanup(self, globalLogPublisher)

    def makeMinion(self, accept: tuple[str, ...] = ("A", "B"), **overrides: Any) -> Minion:
        """
        Build a failover minion for masters A then B (not started), its key
        accepted on the masters named in C{accept}, its back-off
        deterministic: 1 s doubling up to 10 s, no reauth spread.
        """
        for name in accept:
            self.net.sites[name].keyStore.putKey(ACCEPTED, "m1", MINION_PEM)
        root = os.path.abspath(self.mktemp())
        options = {
            "root_dir": root,
            "id": "m1",
            "master": [f"{HOST}:{A_REQ}", f"{HOST}:{B_REQ}"],
            "master_type": "failover",
            "acceptance_wait_time": 10,
            "recon_default": 1000,
            "recon_max": 10000,
            "recon_randomize": False,
            "random_reauth_delay": 0,
        }
        options.update(overrides)
        config = loadMinionConfig(root, overrides=options)
        os.makedirs(config["pki_dir"], mode=0o700)
        crypt.writePrivateFile(
            os.path.join(config["pki_dir"], "minion.pem"), crypt.privateKeyToPem(MINION_KEY)
        )
        minion = buildMinion(
            config, self.net.reactor, connectTCP=self.net.connectTCP, runBlocking=runSynchronously
        )
        self.addCleanup(minion.stop)
        self.busEvents: list[tuple[str, dict[str, Any]]] = []
        minion.bus.subscribe([], lambda tag, data: self.busEvents.append((tag, data)))
        return minion

    def start(self, minion: Minion) -> None:
        """
        Start C{minion} and deliver what that causes, with the calls it
        schedules without delay.
        """
        minion.start()
        self.net.advance(0)

    def masterEvents(self) -> list[str]:
        """
        @return: the C{__master_*} tags the minion fired on its bus, in order.
        """
        return [tag for tag, _ in self.busEvents if tag.startswith("__master_")]

    def sessionOn(self, name: str) -> bool:
        """
        @return: whether master C{name} holds a session of C{m1}.
        """
        return "m1" in self.net.sites[name].master.sessions

    def publish(self, name: str, fun: str, arg: list[Any] | None = None) -> str:
        """
        Publish a job on master C{name} and deliver it.
        """
        load = {"tgt": "*", "fun": fun, "arg": arg or []}
        reply = self.successResultOf(self.net.sites[name].master.clientPublish(None, load))
        self.net.flush()
        return str(reply["jid"])

    def returnsOn(self, name: str) -> list[dict[str, Any]]:
        """
        @return: the data of every return event of C{m1} on master C{name}'s bus.
        """
        return [
            data
            for tag, data in self.net.sites[name].events
            if tag.startswith("salt/job/") and tag.endswith("/ret/m1")
        ]

    def logged(self, text: str) -> list[str]:
        messages = [formatEvent(event) for event in self.logs]
        return [message for message in messages if text in message]


class FailoverTests(FailoverTestCase):
    """
    A failover minion keeps one session, to the first master that takes
    it, and moves on when it is lost.
    """

    def test_firstMaster(self) -> None:
        """
        With both masters up, the minion holds one session, on the first,
        and says so on its bus with the master's host (Salt's data).
        """
        minion = self.makeMinion()
        self.start(minion)
        self.assertEqual(minion.state, "ready")
        self.assertEqual(minion.masters.current, A)
        self.assertTrue(self.sessionOn("A"))
        self.assertFalse(self.sessionOn("B"))
        self.assertEqual(self.net.reqAttempts(), [A_REQ])
        self.assertEqual(self.masterEvents(), [MASTER_CONNECTED])
        self.assertEqual(self.busEvents[0][1]["master"], HOST)
        jid = self.publish("A", "test.ping")
        self.assertEqual([r["jid"] for r in self.returnsOn("A")], [jid])

    def test_firstDownAtStart(self) -> None:
        """
        A first master that cannot be reached makes the minion try the next
        one at once, not after a back-off.
        """
        self.net.sites["A"].up = False
        minion = self.makeMinion()
        self.start(minion)
        self.assertEqual(minion.state, "ready")
        self.assertEqual(self.net.reqAttempts(), [A_REQ, B_REQ])
        self.assertEqual(self.net.reactor.seconds(), 0)
        self.assertTrue(self.sessionOn("B"))
        self.assertTrue(self.logged("trying the next master, 127.0.0.1:5506"))

    def test_moveOnLoss(self) -> None:
        """
        When the master dies, the minion says it is disconnected, waits its
        back-off, and opens its session on the other master, which then
        runs its jobs; the dead master goes to the end of the order.
        """
        minion = self.makeMinion()
        self.start(minion)
        self.net.kill("A")
        self.assertEqual(minion.state, "waiting")
        self.assertEqual(self.masterEvents(), [MASTER_CONNECTED, MASTER_DISCONNECTED])
        self.assertEqual(self.busEvents[1][1]["master"], HOST)
        self.net.advance(0.99)
        self.assertEqual(self.net.reqAttempts(), [A_REQ])
        self.net.advance(0.01)
        self.assertEqual(self.net.reqAttempts(), [A_REQ, B_REQ])
        self.assertEqual(minion.state, "ready")
        self.assertEqual(minion.masters.order, [B, A])
        self.assertTrue(self.sessionOn("B"))
        self.assertEqual(
            self.masterEvents(), [MASTER_CONNECTED, MASTER_DISCONNECTED, MASTER_CONNECTED]
        )
        jid = self.publish("B", "test.ping")
        self.assertEqual([r["jid"] for r in self.returnsOn("B")], [jid])
        self.assertTrue(self.logged("(127.0.0.1:4506); trying 127.0.0.1:5506 next"))

    def test_backAndForth(self) -> None:
        """
        When the second master dies too, the minion goes back to the first
        once it is up again.
        """
        minion = self.makeMinion()
        self.start(minion)
        self.net.kill("A")
        self.net.advance(1.0)
        self.assertTrue(self.sessionOn("B"))
        self.net.sites["A"].up = True
        self.net.kill("B")
        self.net.advance(1.0)
        self.assertEqual(minion.state, "ready")
        self.assertEqual(minion.masters.current, A)
        self.assertTrue(self.sessionOn("A"))

    def test_roundsBackOff(self) -> None:
        """
        With no master up, the minion tries each in turn at once, then
        backs off (1 s, 2 s, 4 s) before each new round.
        """
        self.net.sites["A"].up = self.net.sites["B"].up = False
        minion = self.makeMinion()
        self.start(minion)
        self.assertEqual(self.net.reqAttempts(), [A_REQ, B_REQ])
        for delay, count in ((1.0, 4), (2.0, 6), (4.0, 8)):
            self.net.advance(delay - 0.01)
            self.assertEqual(len(self.net.reqAttempts()), count - 2)
            self.net.advance(0.01)
            self.assertEqual(self.net.reqAttempts()[-2:], [A_REQ, B_REQ])
        self.assertEqual(minion.state, "waiting")
        self.assertTrue(self.logged("no master of 2 answered this round"))
        self.net.sites["B"].up = True
        self.net.advance(8.0)
        self.assertEqual(minion.state, "ready")
        self.assertTrue(self.sessionOn("B"))

    def test_pendingMovesOn(self) -> None:
        """
        A master that has not accepted the minion's key makes it try the
        next master at once, rather than wait there.
        """
        minion = self.makeMinion(accept=("B",))
        self.start(minion)
        self.assertEqual(minion.state, "ready")
        self.assertTrue(self.sessionOn("B"))
        self.assertEqual(self.net.reactor.seconds(), 0)

    def test_pendingEverywhere(self) -> None:
        """
        When no master has accepted the key, a round ends with the wait of
        C{acceptance_wait_time}.
        """
        minion = self.makeMinion(accept=())
        self.start(minion)
        self.assertEqual(self.net.reqAttempts(), [A_REQ, B_REQ])
        self.net.advance(9.9)
        self.assertEqual(len(self.net.reqAttempts()), 2)
        self.net.sites["B"].keyStore.putKey(ACCEPTED, "m1", MINION_PEM)
        self.net.advance(0.1)
        self.assertEqual(self.net.reqAttempts(), [A_REQ, B_REQ, A_REQ, B_REQ])
        self.assertEqual(minion.state, "ready")

    def test_randomMaster(self) -> None:
        """
        C{random_master} shuffles the order the minion tries its masters
        in (here a shuffle that swaps them).
        """
        minion = self.makeMinion(random_master=True)
        minion.masters = MasterList(minion.config, shuffle=lambda items: items.reverse())
        self.start(minion)
        self.assertEqual(self.net.reqAttempts(), [B_REQ])
        self.assertTrue(self.sessionOn("B"))

    def test_returnReplayedToNewMaster(self) -> None:
        """
        A job's return that finished while no master was up is kept on disk
        and sent to the master the minion moves to; that master stores it.
        """
        minion = self.makeMinion()
        self.start(minion)
        jid = self.publish("A", "test.sleep", [5])
        self.net.sites["B"].up = False
        self.net.kill("A")
        self.net.advance(5.0)  # the job finishes; no master is up
        self.assertEqual(minion.state, "waiting")
        directory = os.path.join(minion.config["cachedir"], "returns")
        self.assertEqual(len(os.listdir(directory)), 1)
        self.assertEqual(self.returnsOn("A"), [])
        self.net.sites["B"].up = True
        self.net.advance(10.0)
        self.assertEqual(minion.state, "ready")
        self.assertTrue(self.sessionOn("B"))
        [ret] = self.returnsOn("B")
        self.assertEqual(ret["jid"], jid)
        self.assertIs(ret["return"], True)
        self.net.advance(1.0)  # B's acknowledgement, held back as any
        self.assertEqual(os.listdir(directory), [])
        self.assertEqual(list(self.net.jobCache.returns[jid]), ["m1"])

    def test_replayStoredOnce(self) -> None:
        """
        A return the first master stored but did not acknowledge before it
        died is sent again to the next master, which refuses it as a
        duplicate (the job cache they share has it): it is stored once, and
        the minion forgets it.
        """
        minion = self.makeMinion()
        self.start(minion)
        jid = self.publish("A", "test.sleep", [5])
        self.net.reactor.advance(5.0)
        self.net.flush()  # the return is sent and stored; A holds its acknowledgement
        self.assertEqual([r["jid"] for r in self.returnsOn("A")], [jid])
        self.assertEqual(len(minion.returns.unacknowledged), 1)
        self.net.kill("A")
        self.net.advance(1.0)
        self.assertTrue(self.sessionOn("B"))
        self.assertEqual(self.returnsOn("B"), [])
        self.assertEqual(list(self.net.jobCache.returns[jid]), ["m1"])
        self.assertEqual(len(minion.returns.unacknowledged), 0)
        self.assertEqual(os.listdir(os.path.join(minion.config["cachedir"], "returns")), [])
        self.assertTrue(self.logged("return from m1 refused"))

    def test_strModeStaysOnFirst(self) -> None:
        """
        With C{master_type: str}, a list's first master only is used: the
        minion never tries the second.
        """
        minion = self.makeMinion(master_type="str")
        self.start(minion)
        self.net.kill("A")
        self.net.advance(1.0)
        self.net.advance(2.0)
        self.assertEqual(self.net.reqAttempts(), [A_REQ, A_REQ, A_REQ])
        self.assertEqual(minion.state, "waiting")

    def test_badMasterEntry(self) -> None:
        """
        An entry of C{master} that cannot be read stops the minion at start,
        naming it.
        """
        with self.assertRaises(StartupError) as e:
            self.makeMinion(master=["127.0.0.1:http"])
        self.assertIn("'127.0.0.1:http'", str(e.exception))


class LoadBalancerTests(FailoverTestCase):
    """
    One address behind a TCP load balancer (C{master_type: str}): the
    minion reconnects through it after a loss, and the master that answers
    presents the masters' shared key.
    """

    def test_reconnectThroughBalancer(self) -> None:
        """
        With C{single_connection} (one connection, so the balancer cannot
        send the req and pub channels to different masters), a minion whose
        master dies reconnects through the balancer to the other one.
        """
        minion = self.makeMinion(
            master=f"lb.test:{LB_PORT}", master_type="str", single_connection=True
        )
        self.start(minion)
        self.assertTrue(self.sessionOn("A"))
        self.net.kill("A")
        self.net.advance(1.0)
        self.assertEqual(minion.state, "ready")
        self.assertTrue(self.sessionOn("B"))
        self.assertEqual(self.net.attempts, [("lb.test", LB_PORT), ("lb.test", LB_PORT)])
        jid = self.publish("B", "test.ping")
        self.assertEqual([r["jid"] for r in self.returnsOn("B")], [jid])


class AliveTests(FailoverTestCase):
    """
    C{master_alive_interval}: a master that keeps its connection but does
    not answer is left.
    """

    def test_answeringMasterKept(self) -> None:
        """
        A master that answers keeps the session however long it runs: one
        check per interval, no reconnection.
        """
        minion = self.makeMinion(master_alive_interval=5)
        self.start(minion)
        for _ in range(10):
            self.net.advance(5.0)
        self.assertEqual(self.net.reqAttempts(), [A_REQ])
        self.assertEqual(minion.state, "ready")
        self.assertEqual(self.masterEvents(), [MASTER_CONNECTED])

    def test_hungMasterLeft(self) -> None:
        """
        A master that reads nothing is left once a check goes unanswered
        for an interval; the minion then moves to the next master after its
        back-off.
        """
        minion = self.makeMinion(master_alive_interval=5)
        self.start(minion)
        self.net.advance(5.0)  # a check, answered
        self.net.hang("A")
        self.net.advance(5.0)  # a check, not answered
        self.assertEqual(minion.state, "ready")
        self.net.advance(4.99)
        self.assertEqual(minion.state, "ready")
        self.net.advance(0.01)  # unanswered for an interval
        self.assertEqual(minion.state, "waiting")
        self.assertEqual(self.masterEvents(), [MASTER_CONNECTED, MASTER_DISCONNECTED])
        self.assertTrue(self.logged("did not answer for 5s (master_alive_interval)"))
        self.net.advance(1.0)
        self.assertEqual(minion.state, "ready")
        self.assertTrue(self.sessionOn("B"))
        self.assertEqual(self.net.reqAttempts(), [A_REQ, B_REQ])

    def test_noChecksWhenZero(self) -> None:
        """
        With C{master_alive_interval} 0 (the default) the minion schedules
        nothing once ready.
        """
        minion = self.makeMinion()
        self.start(minion)
        self.assertEqual(minion._watchTimers, {})


class FailbackTests(FailoverTestCase):
    """
    C{master_failback}: a minion away from its first master goes back to
    it once it answers.
    """

    def test_failback(self) -> None:
        """
        Every C{master_failback_interval} seconds the minion looks whether
        its first master is back; once it is, it fires C{__master_failback}
        and moves its session there.
        """
        self.net.sites["A"].up = False
        minion = self.makeMinion(master_failback=True, master_failback_interval=10)
        self.start(minion)
        self.assertTrue(self.sessionOn("B"))
        self.net.advance(10.0)
        self.assertEqual(minion.masters.current, B)
        self.net.sites["A"].up = True
        self.net.advance(10.0)
        self.assertEqual(minion.state, "ready")
        self.assertEqual(minion.masters.current, A)
        self.assertTrue(self.sessionOn("A"))
        self.assertEqual(
            self.masterEvents(),
            [MASTER_CONNECTED, MASTER_FAILBACK, MASTER_DISCONNECTED, MASTER_CONNECTED],
        )
        self.assertEqual(self.busEvents[1][1]["master"], HOST)
        jid = self.publish("A", "test.ping")
        self.assertEqual([r["jid"] for r in self.returnsOn("A")], [jid])
        # On the first master, it looks for nothing more.
        self.assertEqual(minion._watchTimers, {})

    def test_intervalFromAlive(self) -> None:
        """
        A C{master_failback_interval} of 0 means C{master_alive_interval}
        (Salt).
        """
        self.net.sites["A"].up = False
        minion = self.makeMinion(master_failback=True, master_alive_interval=7)
        self.start(minion)
        self.net.sites["A"].up = True
        self.net.advance(6.9)
        self.assertEqual(minion.masters.current, B)
        self.net.advance(0.1)
        self.assertEqual(minion.masters.current, A)

    def test_noFailbackWithoutOption(self) -> None:
        """
        Without C{master_failback} the minion stays where it is.
        """
        self.net.sites["A"].up = False
        minion = self.makeMinion(master_alive_interval=5)
        self.start(minion)
        self.net.sites["A"].up = True
        for _ in range(5):
            self.net.advance(5.0)
        self.assertEqual(minion.masters.current, B)
        self.assertEqual(self.net.reqAttempts(), [A_REQ, B_REQ])

    def test_failbackToUntrustedMaster(self) -> None:
        """
        A first master that is back but whose authentication fails (here,
        it has not accepted the key) sends the minion on to the next one.
        """
        self.net.sites["A"].up = False
        minion = self.makeMinion(accept=("B",), master_failback=True, master_failback_interval=10)
        self.start(minion)
        self.net.sites["A"].up = True
        self.net.advance(10.0)
        self.assertEqual(minion.state, "ready")
        self.assertTrue(self.sessionOn("B"))


class SharedKeyTests(FailoverTestCase):
    """
    Masters sharing one key pair: the minion pins it once.
    """

    def test_pinnedOnce(self) -> None:
        """
        The key pinned at first contact, in C{minion_master.pub}, is the one
        every master presents: no file of a master's own is written.
        """
        minion = self.makeMinion()
        self.start(minion)
        self.net.kill("A")
        self.net.advance(1.0)
        self.assertTrue(self.sessionOn("B"))
        pki = minion.config["pki_dir"]
        with open(os.path.join(pki, MASTER_PUB_FILE), "rb") as f:
            self.assertEqual(crypt.canonicalPublicPem(f.read()), MASTER_PEM)
        self.assertEqual(
            sorted(name for name in os.listdir(pki) if name.startswith("minion_master")),
            [MASTER_PUB_FILE],
        )


class OwnKeysTests(FailoverTestCase):
    """
    Masters with key pairs of their own: B's key is not A's.
    """

    masterKeys = {"B": b"other"}

    def test_unpinnedKeyRefused(self) -> None:
        """
        A master presenting a key that matches no pin is refused, with a
        message naming the file to place its key in; the minion does not
        trust it and keeps trying its masters. Once B's key is placed in
        its own file, the minion opens its session there.
        """
        minion = self.makeMinion()
        self.start(minion)
        self.net.kill("A")
        self.net.advance(1.0)
        self.assertFalse(self.sessionOn("B"))
        self.assertNotEqual(minion.state, "ready")
        ownPath = os.path.join(minion.config["pki_dir"], ownPinFile(B))
        refused = self.logged("if this master has a key pair of its own")
        self.assertTrue(refused)
        self.assertIn(ownPath, refused[0])
        self.assertFalse(os.path.exists(ownPath))
        with open(ownPath, "wb") as f:
            f.write(OTHER_MASTER_PEM)
        self.net.advance(2.0)
        self.assertEqual(minion.state, "ready")
        self.assertTrue(self.sessionOn("B"))

    def test_ownPinMustMatch(self) -> None:
        """
        A master with a pin of its own must present that key, even if it
        presents the shared one.
        """
        minion = self.makeMinion()
        ownPath = os.path.join(minion.config["pki_dir"], ownPinFile(A))
        with open(ownPath, "wb") as f:
            f.write(OTHER_MASTER_PEM)
        self.net.sites["B"].up = False
        self.start(minion)
        self.assertFalse(self.sessionOn("A"))
        self.assertTrue(self.logged(f"not the pinned {crypt.fingerprint(OTHER_MASTER_PEM)}"))
        self.assertFalse(os.path.exists(os.path.join(minion.config["pki_dir"], MASTER_PUB_FILE)))

    def test_firstContactWithSecond(self) -> None:
        """
        With nothing pinned, the first master met is trusted and pinned in
        C{minion_master.pub} (first contact, as before), even the second of
        the list when the first is down; the first, with another key, is
        then refused.
        """
        self.net.sites["A"].up = False
        minion = self.makeMinion(master_failback=True, master_failback_interval=10)
        self.start(minion)
        self.assertTrue(self.sessionOn("B"))
        with open(os.path.join(minion.config["pki_dir"], MASTER_PUB_FILE), "rb") as f:
            self.assertEqual(crypt.canonicalPublicPem(f.read()), OTHER_MASTER_PEM)
        self.net.sites["A"].up = True
        self.net.advance(10.0)
        self.assertFalse(self.sessionOn("A"))
        self.assertTrue(self.logged(f"place its public key in {minion.config['pki_dir']}"))
        self.assertEqual(minion.state, "ready")
        self.assertTrue(self.sessionOn("B"))


class TransientCallerTests(FailoverTestCase):
    """
    C{salttwist-call}'s transient session (L{MasterCaller}) reads C{master}
    as the daemon does, and tries its first master first (the others:
    L{tests.test_call_masters}).
    """

    def makeCaller(self, master: list[str]) -> MasterCaller:
        root = os.path.abspath(self.mktemp())
        config = loadMinionConfig(
            root,
            overrides={"root_dir": root, "id": "m1", "master": master, "master_type": "failover"},
        )
        os.makedirs(config["pki_dir"], mode=0o700)
        crypt.writePrivateFile(
            os.path.join(config["pki_dir"], "minion.pem"), crypt.privateKeyToPem(MINION_KEY)
        )
        caller = MasterCaller(
            config, "m1", self.net.reactor, runSynchronously, connectTCP=self.net.connectTCP
        )
        self.addCleanup(caller.close)
        return caller

    def test_hostAndPort(self) -> None:
        """
        The first entry's C{host:port} is where the caller connects.
        """
        self.net.sites["B"].keyStore.putKey(ACCEPTED, "m1", MINION_PEM)
        caller = self.makeCaller([f"{HOST}:{B_REQ}", f"{HOST}:{A_REQ}"])
        session = Deferred.fromCoroutine(caller.session())
        self.net.flush()
        self.successResultOf(session)
        self.assertEqual(self.net.attempts, [(HOST, B_REQ)])
        self.assertIn("m1", self.net.sites["B"].master.transients)

    def test_badEntry(self) -> None:
        """
        An entry that cannot be read is the caller's error, naming it.
        """
        caller = self.makeCaller(["salt:http"])
        failure = self.failureResultOf(Deferred.fromCoroutine(caller.session()), CallerError)
        self.assertIn("'salt:http'", str(failure.value))
        self.assertEqual(self.net.attempts, [])


class ConfigTests(SynchronousTestCase):
    """
    The failover options in the minion's configuration.
    """

    def warnings(self, **options: Any) -> list[str]:
        observer = EventLoggingObserver.createWithCleanup(self, globalLogPublisher)
        root = os.path.abspath(self.mktemp())
        loadMinionConfig(root, overrides=options)
        return [formatEvent(e) for e in observer if e["log_level"] == LogLevel.warn]

    def test_defaults(self) -> None:
        """
        The defaults are Salt's.
        """
        config = loadMinionConfig(os.path.abspath(self.mktemp()))
        self.assertEqual(
            {
                name: config[name]
                for name in (
                    "master_type",
                    "master_alive_interval",
                    "master_failback",
                    "master_failback_interval",
                    "random_master",
                )
            },
            {
                "master_type": "str",
                "master_alive_interval": 0,
                "master_failback": False,
                "master_failback_interval": 0,
                "random_master": False,
            },
        )

    def test_failoverListDoesNotWarn(self) -> None:
        """
        A list of masters with C{master_type: failover} logs no warning.
        """
        self.assertEqual(self.warnings(master=["a", "b"], master_type="failover"), [])

    def test_strListWarns(self) -> None:
        """
        A list of masters with C{master_type: str} warns that only the
        first is used and names the setting that uses them all.
        """
        [warning] = self.warnings(master=["a", "b"])
        self.assertIn("only the first, 'a', is used", warning)
        self.assertIn("master_type: failover", warning)

    def test_unsupportedMasterType(self) -> None:
        """
        Salt's other C{master_type} values are refused, naming those
        supported.
        """
        for value in ("func", "disable", "distributed"):
            with self.assertRaises(ConfigError) as e:
                loadMinionConfig(os.path.abspath(self.mktemp()), overrides={"master_type": value})
            self.assertIn("master_type", str(e.exception))
            self.assertIn("'failover'", str(e.exception))
