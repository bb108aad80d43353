# -*- test-case-name: tests.test_minion_bus -*-
"""
Tests for the minion's own event bus (issue 5): its socket names
(L{salttwist.events.minionEventSockets}), the local events of L{Minion}
(C{__master_connected}, C{__master_disconnected}), C{event.fire}
(L{salttwist.modules.event.fire}), L{MinionService}'s two sockets and
C{salttwist-event --node minion}. Everything runs in memory.
"""

from __future__ import annotations

import hashlib
import os
from typing import Any

from twisted.internet.defer import Deferred
from twisted.internet.testing import StringTransport

from salttwist.cli.event import buildParser, streamEvents
from salttwist.config import loadMinionConfig
from salttwist.events import EVENT_PUB_SOCKET, minionEventSockets
from salttwist.events.bus import EventPublisherFactory, EventPullFactory
from salttwist.minion.core import MASTER_CONNECTED, MASTER_DISCONNECTED, Minion
from salttwist.minion.service import MinionService
from salttwist.modules import CommandExecutionError, LoaderContext, SaltInvocationError
from salttwist.modules import event as eventModule
from salttwist.pki.keystore import ACCEPTED
from tests.test_cli_run import OutputTestCase, frame
from tests.test_cli_salt import failUnixConnections
from tests.test_minion import MINION_PEM, MinionTestCase


def record(minion: Minion) -> list[tuple[str, dict[str, Any]]]:
    """
    @return: a list that receives every event fired on C{minion}'s bus.
    """
    events: list[tuple[str, dict[str, Any]]] = []
    minion.bus.subscribe([], lambda tag, data: events.append((tag, data)))
    return events


class SocketNameTests(OutputTestCase):
    """
    L{minionEventSockets} names a minion's sockets as Salt does.
    """

    def test_saltNames(self) -> None:
        """
        The sockets are C{minion_event_<hash>_pub.ipc} and
        C{minion_event_<hash>_pull.ipc} in the given C{sock_dir}, C{<hash>}
        the first 10 hex digits of the SHA-256 of the minion id.
        """
        idHash = hashlib.sha256(b"web1").hexdigest()[:10]
        self.assertEqual(
            minionEventSockets("/run/st", "web1"),
            (
                f"/run/st/minion_event_{idHash}_pub.ipc",
                f"/run/st/minion_event_{idHash}_pull.ipc",
            ),
        )

    def test_perId(self) -> None:
        """
        Two ids sharing a C{sock_dir} get different sockets, and a long id
        does not make the name longer.
        """
        self.assertNotEqual(minionEventSockets("/s", "a"), minionEventSockets("/s", "b"))
        self.assertEqual(
            len(minionEventSockets("/s", "x" * 200)[1]), len(minionEventSockets("/s", "y")[1])
        )


class LocalEventTests(MinionTestCase):
    """
    L{Minion} fires Salt's C{__master_connected} and
    C{__master_disconnected} on its own bus.
    """

    def test_connected(self) -> None:
        """
        Once authenticated and subscribed, the minion fires
        C{__master_connected} with C{{"master": <its master>}} (and a
        C{_stamp}) on its own bus, not on the master's.
        """
        self.net.keyStore.putKey(ACCEPTED, "m1", MINION_PEM)
        minion = self.makeMinion()
        events = record(minion)
        minion.start()
        self.net.flush()
        self.assertEqual(minion.state, "ready")
        [(tag, data)] = events
        self.assertEqual((tag, data["master"]), (MASTER_CONNECTED, "salt.test"))
        self.assertIn("_stamp", data)
        self.assertEqual(self.net.eventsTagged(MASTER_CONNECTED), [])

    def test_disconnected(self) -> None:
        """
        Losing a ready connection fires C{__master_disconnected} with the
        master; reconnecting fires C{__master_connected} again.
        """
        minion = self.readyMinion()
        events = record(minion)
        [reqPump, _] = self.net.pumps
        reqPump.serverIO.loseConnection()
        self.net.flush()
        self.assertEqual(minion.state, "waiting")
        self.assertEqual(
            [(t, d["master"]) for t, d in events], [(MASTER_DISCONNECTED, "salt.test")]
        )
        self.net.advance(1.0)
        self.assertEqual(minion.state, "ready")
        self.assertEqual(events[-1][0], MASTER_CONNECTED)

    def test_notConnectedNoEvent(self) -> None:
        """
        A minion that never got connected fires nothing on its bus when an
        attempt fails.
        """
        minion = self.makeMinion()
        events = record(minion)
        self.net.refuse = 1
        minion.start()
        self.net.flush()
        self.assertEqual(minion.state, "waiting")
        self.assertEqual(events, [])


class FireTests(MinionTestCase):
    """
    C{event.fire} puts an event on the minion's own bus.
    """

    def test_daemonFires(self) -> None:
        """
        In the daemon, C{event.fire DATA TAG} fires C{TAG} with C{DATA}
        (plus C{_stamp}) on the minion's bus and returns C{True}; nothing
        reaches the master.
        """
        minion = self.readyMinion()
        events = record(minion)
        result = self.successResultOf(minion.executor.run("event.fire", [{"a": 1}, "myco/tag"]))
        self.assertEqual((result["return"], result["retcode"]), (True, 0))
        [(tag, data)] = events
        self.assertEqual((tag, data["a"]), ("myco/tag", 1))
        self.assertIn("_stamp", data)
        self.assertEqual(self.net.eventsTagged("myco/"), [])

    def test_badArguments(self) -> None:
        """
        Data that is not a map, and an empty, non-string or over-long tag,
        are refused and nothing is fired.
        """
        minion = self.makeMinion()
        events = record(minion)
        context = minion.executor.context
        for data, tag in (("text", "t"), ({}, ""), ({}, 3), ({}, "t" * 513)):
            self.assertRaises(SaltInvocationError, eventModule.fire, context, data, tag)
        self.assertEqual(events, [])

    def localContext(self, sockDir: str) -> LoaderContext:
        """
        A context as C{salttwist-call --local} makes: no C{fireLocal}.
        """
        root = os.path.abspath(self.mktemp())
        config = loadMinionConfig(
            root, overrides={"root_dir": root, "id": "web1", "sock_dir": sockDir}
        )
        return LoaderContext(config, {"id": "web1"}, None)

    def test_localUsesPullSocket(self) -> None:
        """
        Without the daemon's bus (C{salttwist-call}), the event is written
        to the daemon's C{minion_event_<hash>_pull.ipc} of the config's
        C{sock_dir} and id.
        """
        sent: list[tuple[str, str, dict[str, Any]]] = []

        def fake(path: str, tag: str, data: dict[str, Any], timeout: float = 1.0) -> bool:
            sent.append((path, tag, data))
            return True

        self.patch(eventModule, "fireEvent", fake)
        context = self.localContext("/run/st")
        self.assertTrue(eventModule.fire(context, {"a": 1}, "myco/tag"))
        pullPath = minionEventSockets(context.opts["sock_dir"], "web1")[1]
        self.assertEqual(sent, [(pullPath, "myco/tag", {"a": 1})])

    def test_localIdFromGrains(self) -> None:
        """
        Without an C{id} in the config, the socket is named from the id
        grain already computed: no name lookup on the reactor thread.
        """
        import socket

        sent: list[str] = []

        def fake(path: str, tag: str, data: dict[str, Any], timeout: float = 1.0) -> bool:
            sent.append(path)
            return True

        def noLookup() -> str:
            raise AssertionError("getfqdn called")

        self.patch(eventModule, "fireEvent", fake)
        self.patch(socket, "getfqdn", noLookup)
        root = os.path.abspath(self.mktemp())
        config = loadMinionConfig(root, overrides={"root_dir": root, "sock_dir": "/run/st"})
        context = LoaderContext(config, {"id": "g1"}, None)
        self.assertTrue(eventModule.fire(context, {"a": 1}, "myco/tag"))
        self.assertEqual(sent, [minionEventSockets(config["sock_dir"], "g1")[1]])

    def test_localNoDaemon(self) -> None:
        """
        When no minion daemon listens there, C{event.fire} fails with a
        message naming the socket.
        """
        self.patch(eventModule, "fireEvent", lambda *a, **k: False)
        e = self.assertRaises(
            CommandExecutionError,
            eventModule.fire,
            self.localContext("/run/st"),
            {"a": 1},
            "myco/tag",
        )
        self.assertIn("no salttwist minion listens on ", str(e))
        self.assertIn("/run/st/minion_event_", str(e))


class ServiceTests(MinionTestCase):
    """
    L{MinionService} serves the minion's bus on its two sockets.
    """

    def test_listens(self) -> None:
        """
        Starting the service listens on the minion's pub and pull sockets in
        its C{sock_dir}, mode 0660 with a PID lock, serving the minion's bus.
        """
        minion = self.makeMinion("web1")
        service = MinionService(minion)
        service.startService()
        self.addCleanup(service.stopService)
        pubPath, pullPath = minionEventSockets(minion.config["sock_dir"], "web1")
        [pub, pull] = self.net.reactor.unixServers
        self.assertEqual((pub[0], pub[3], pub[4]), (pubPath, 0o660, True))
        self.assertEqual((pull[0], pull[3], pull[4]), (pullPath, 0o660, True))
        self.assertIsInstance(pub[1], EventPublisherFactory)
        self.assertIsInstance(pull[1], EventPullFactory)
        self.assertIs(pub[1].bus, minion.bus)
        self.assertIs(pull[1].bus, minion.bus)

    def test_pullFiresOnBus(self) -> None:
        """
        A frame written to the pull socket is fired on the minion's bus.
        """
        minion = self.makeMinion()
        events = record(minion)
        service = MinionService(minion)
        service.startService()
        self.addCleanup(service.stopService)
        pullFactory = self.net.reactor.unixServers[1][1]
        proto = pullFactory.buildProtocol(None)
        proto.makeConnection(StringTransport())
        proto.dataReceived(frame({"tag": "myco/tag", "data": {"a": 1}}))
        self.assertEqual([(t, d["a"]) for t, d in events], [("myco/tag", 1)])

    def test_stopClosesSockets(self) -> None:
        """
        Stopping the service stops listening on both sockets (which removes
        their files) and stops the minion.
        """
        minion = self.makeMinion()
        service = MinionService(minion)
        service.startService()
        stopped: list[Any] = []
        for port in service._ports:
            port.stopListening = lambda port=port: stopped.append(port)
        self.assertEqual(len(service._ports), 2)
        self.successResultOf(service.stopService())
        self.assertEqual(len(stopped), 2)
        self.assertEqual(minion.state, "stopped")


class EventCommandTests(OutputTestCase):
    """
    C{salttwist-event --node minion} watches the minion's bus.
    """

    def test_nodeMinion(self) -> None:
        """
        C{--node minion} is accepted; the command subscribes on the minion's
        C{minion_event_<hash>_pub.ipc} in the minion config's C{sock_dir}
        and, when nothing listens there, says the minion is not running.
        """
        config = loadMinionConfig(self.root, overrides={"root_dir": self.root, "id": "web1"})
        options = buildParser().parse_args(["--node", "minion", "--count", "1"])
        d = Deferred.fromCoroutine(streamEvents(self.reactor, options, config))
        [(path, _, _, _)] = self.reactor.unixClients
        self.assertEqual(path, minionEventSockets(config["sock_dir"], "web1")[0])
        failUnixConnections(self.reactor)
        self.assertEqual(self.successResultOf(d), 2)
        self.assertIn("the salttwist minion is not running", self.stderr.getvalue())

    def test_nodeMaster(self) -> None:
        """
        By default the command still watches the master's bus.
        """
        options = buildParser().parse_args([])
        d = Deferred.fromCoroutine(streamEvents(self.reactor, options, self.config))
        [(path, _, _, _)] = self.reactor.unixClients
        self.assertEqual(path, os.path.join(self.config["sock_dir"], EVENT_PUB_SOCKET))
        failUnixConnections(self.reactor)
        self.assertEqual(self.successResultOf(d), 2)
        self.assertIn("the salttwist master is not running", self.stderr.getvalue())
