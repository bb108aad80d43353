# -*- test-case-name: tests.test_cli_event -*-
"""
Tests for L{salttwist.cli.event}, the C{salttwist-event} command.

As in L{tests.test_cli_run}, the command connects to the event bus through a
L{MemoryReactorClock}; the tests play the bus's side of that connection on a
L{StringTransport}, or connect it to a real L{EventPublisherFactory} to
check what the master sends.
"""

from __future__ import annotations

import os
from typing import Any

from twisted.internet import task
from twisted.internet.defer import Deferred
from twisted.internet.testing import StringTransport
from twisted.python.failure import Failure

import salttwist
from salttwist.cli import event
from salttwist.cli.event import buildParser, formatEvent, splitTags, streamEvents
from salttwist.events import EVENT_PUB_SOCKET
from salttwist.events.bus import EventPublisherFactory, LocalEventBus
from tests.test_cli_run import OutputTestCase, frame, frames
from tests.test_cli_salt import FakeReact, failUnixConnections


class ParserTests(OutputTestCase):
    """
    L{buildParser} reads C{salttwist-event}'s flags.
    """

    def test_defaults(self) -> None:
        """
        By default: every tag, no count, one line per event, the master's
        bus from the config's C{sock_dir}.
        """
        options = buildParser().parse_args([])
        self.assertEqual(
            (options.tag, options.count, options.pretty, options.node, options.sock_dir),
            ([], None, False, "master", None),
        )

    def test_options(self) -> None:
        """
        C{--tag} repeats; C{--count}, C{--pretty}, C{-c}, C{--node master}
        and C{--sock-dir} are read.
        """
        options = buildParser().parse_args(
            [
                "-c",
                "/x",
                "--tag",
                "salt/job/*",
                "--tag",
                "salt/key",
                "--count",
                "3",
                "--pretty",
                "--node",
                "master",
                "--sock-dir",
                "/run/m",
            ]
        )
        self.assertEqual(
            (options.config_dir, options.tag, options.count, options.pretty, options.sock_dir),
            ("/x", ["salt/job/*", "salt/key"], 3, True, "/run/m"),
        )

    def test_badCount(self) -> None:
        """
        A count that is not a whole number of at least 1 is a usage error.
        """
        for count in ("0", "-1", "many", "1.5"):
            e = self.assertRaises(SystemExit, buildParser().parse_args, ["--count", count])
            self.assertEqual(e.code, 2, count)
        self.assertIn("at least 1", self.stderr.getvalue())

    def test_onlyMasterNode(self) -> None:
        """
        C{--node} is C{master} or C{minion} (the minion's own bus); any other
        node is a usage error.
        """
        self.assertEqual(buildParser().parse_args(["--node", "minion"]).node, "minion")
        e = self.assertRaises(SystemExit, buildParser().parse_args, ["--node", "syndic"])
        self.assertEqual(e.code, 2)

    def test_version(self) -> None:
        """
        C{--version} prints the version and exits 0.
        """
        e = self.assertRaises(SystemExit, buildParser().parse_args, ["--version"])
        self.assertEqual(e.code, 0)
        self.assertEqual(self.stdout.getvalue(), f"salttwist {salttwist.__version__}\n")

    def test_splitTags(self) -> None:
        """
        A tag holding C{*}, C{?} or C{[} is a glob, any other a prefix.
        """
        self.assertEqual(
            splitTags(["salt/key", "salt/job/*", "salt/presence/?", "salt/[ab]", "x"]),
            (["salt/key", "x"], ["salt/job/*", "salt/presence/?", "salt/[ab]"]),
        )
        self.assertEqual(splitTags([]), ([], []))

    def test_sharedFormat(self) -> None:
        """
        The format is the one of C{salttwist-run state.event}: one shared
        function.
        """
        from salttwist.cli import run

        self.assertIs(run.formatEvent, formatEvent)


class StreamEventsTests(OutputTestCase):
    """
    L{streamEvents} subscribes to the master's bus and prints the events.
    """

    def stream(self, *argv: str) -> Deferred[int]:
        """
        @return: the L{Deferred} of C{salttwist-event ARGV}.
        """
        options = buildParser().parse_args(list(argv))
        return Deferred.fromCoroutine(streamEvents(self.reactor, options, self.config))

    def connect(self) -> tuple[Any, StringTransport]:
        """
        Accept the command's connection and confirm its subscription.

        @return: the command's protocol and the transport it writes to.
        """
        self.path, factory, _, _ = self.reactor.unixClients.pop(0)
        proto = factory.buildProtocol(None)
        transport = StringTransport()
        proto.makeConnection(transport)
        proto.dataReceived(frame({"subscribed": True}))
        return proto, transport

    def connectToBus(self) -> tuple[LocalEventBus, Any, StringTransport]:
        """
        Connect the command to a real bus's subscriber protocol.

        @return: the bus, the command's protocol and the transport the bus
            writes to.
        """
        _, factory, _, _ = self.reactor.unixClients.pop(0)
        client = factory.buildProtocol(None)
        clientTransport = StringTransport()
        client.makeConnection(clientTransport)
        bus = LocalEventBus()
        server = EventPublisherFactory(bus).buildProtocol(None)
        serverTransport = StringTransport()
        server.makeConnection(serverTransport)
        server.dataReceived(clientTransport.value())
        client.dataReceived(serverTransport.value())
        serverTransport.clear()
        return bus, client, serverTransport

    def fire(self, proto: Any, tag: str, data: dict[str, Any] | None = None) -> None:
        """
        Deliver one event to the command.
        """
        proto.dataReceived(frame({"tag": tag, "data": data or {}}))

    def test_everything(self) -> None:
        """
        Without C{--tag} the command subscribes to every tag, on the socket
        in the config's C{sock_dir}, and prints each event as
        C{tag<TAB>json}.
        """
        d = self.stream()
        proto, transport = self.connect()
        self.assertEqual(self.path, os.path.join(self.config["sock_dir"], EVENT_PUB_SOCKET))
        self.assertEqual(frames(transport.value()), [{"subscribe": []}])
        self.fire(proto, "salt/key", {"act": "accept", "id": "m1"})
        self.fire(proto, "anything", {})
        self.assertNoResult(d)
        self.assertEqual(
            self.stdout.getvalue(), 'salt/key\t{"act": "accept", "id": "m1"}\nanything\t{}\n'
        )

    def test_tagsSubscribed(self) -> None:
        """
        The C{--tag} values go to the master: prefixes as C{subscribe},
        globs as C{globs}.
        """
        self.stream("--tag", "salt/key", "--tag", "salt/job/*/ret/*")
        _, transport = self.connect()
        self.assertEqual(
            frames(transport.value()),
            [{"subscribe": ["salt/key"], "globs": ["salt/job/*/ret/*"]}],
        )

    def test_masterSendsOnlyChosenTags(self) -> None:
        """
        Connected to the master's bus, the command receives, and prints,
        only the tags it chose: the bus filters them before sending.
        """
        d = self.stream("--tag", "salt/presence/*", "--tag", "salt/key")
        bus, client, serverTransport = self.connectToBus()
        for tag in ("salt/job/1/new", "salt/presence/present", "salt/keys", "salt/job/1/ret/m"):
            bus.fire(tag, {"n": 1})
        sent = serverTransport.value()
        self.assertEqual(
            [message["tag"] for message in frames(sent)], ["salt/presence/present", "salt/keys"]
        )
        client.dataReceived(sent)
        self.assertEqual(
            [line.split("\t")[0] for line in self.stdout.getvalue().splitlines()],
            ["salt/presence/present", "salt/keys"],
        )
        self.assertNoResult(d)

    def test_count(self) -> None:
        """
        With C{--count N} the command exits 0 after N events and closes its
        connection; later events are not printed.
        """
        d = self.stream("--count", "2")
        proto, transport = self.connect()
        self.fire(proto, "a")
        self.assertNoResult(d)
        self.fire(proto, "b")
        self.assertEqual(self.successResultOf(d), 0)
        self.assertTrue(transport.disconnecting)
        self.fire(proto, "c")
        self.assertEqual(self.stdout.getvalue(), "a\t{}\nb\t{}\n")

    def test_pretty(self) -> None:
        """
        C{--pretty} indents the JSON by 4 and sorts its keys, as Salt's
        C{pretty=True}.
        """
        d = self.stream("--pretty", "--count", "1")
        proto, _ = self.connect()
        self.fire(proto, "salt/x", {"b": 1, "a": [2]})
        self.assertEqual(self.successResultOf(d), 0)
        self.assertEqual(
            self.stdout.getvalue(), 'salt/x\t{\n    "a": [\n        2\n    ],\n    "b": 1\n}\n'
        )

    def test_sockDir(self) -> None:
        """
        C{--sock-dir} points at another master's sockets.
        """
        self.stream("--sock-dir", "/elsewhere")
        self.connect()
        self.assertEqual(self.path, os.path.join("/elsewhere", EVENT_PUB_SOCKET))

    def test_noMaster(self) -> None:
        """
        Without a master the command exits 2, naming the socket.
        """
        d = self.stream()
        failUnixConnections(self.reactor)
        self.assertEqual(self.successResultOf(d), 2)
        self.assertIn(
            os.path.join(self.config["sock_dir"], EVENT_PUB_SOCKET), self.stderr.getvalue()
        )

    def test_busClosed(self) -> None:
        """
        When the master closes the bus, the command says so and exits 2.
        """
        d = self.stream()
        proto, _ = self.connect()
        proto.connectionLost(Failure(ConnectionError("gone")))
        self.assertEqual(self.successResultOf(d), 2)
        self.assertIn("closed the event bus", self.stderr.getvalue())

    def test_shutdown(self) -> None:
        """
        Ctrl-C stops the reactor, which closes the connection: no error is
        printed and the command's own result never comes (L{event.main}
        exits 0).
        """
        d = self.stream()
        proto, _ = self.connect()
        for trigger, args, kwargs in self.reactor.triggers["before"]["shutdown"]:
            trigger(*args, **kwargs)
        proto.connectionLost(Failure(ConnectionError("closed")))
        self.assertNoResult(d)
        self.assertEqual(self.stderr.getvalue(), "")


class MainTests(OutputTestCase):
    """
    L{event.main}, with L{task.react} replaced by a stand-in on a memory
    reactor whose UNIX connections all fail.
    """

    def test_noMaster(self) -> None:
        """
        With no master running, L{event.main} returns 2 and names the
        socket.
        """
        self.patch(task, "react", FakeReact(self))
        self.assertEqual(event.main(["-c", self.root]), 2)
        self.assertIn(EVENT_PUB_SOCKET, self.stderr.getvalue())

    def test_badConfig(self) -> None:
        """
        A config with a bad value exits 2 with the config's message, before
        any connection.
        """
        with open(os.path.join(self.root, "master"), "w") as f:
            f.write("max_frame_bytes: lots\n")
        react = FakeReact(self)
        self.patch(task, "react", react)
        self.assertEqual(event.main(["-c", self.root]), 2)
        self.assertIn("max_frame_bytes", self.stderr.getvalue())
        self.assertEqual(react.calls, 0)
