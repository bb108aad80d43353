# -*- test-case-name: tests.test_minion_connection -*-
"""
Tests for L{salttwist.minion.connection}: the minion's connection machine
fed its inputs one by one, its reconnect policy, and the endpoint and
factories of its channels.
"""

from __future__ import annotations

from typing import Any

from twisted.internet.defer import Deferred, fail
from twisted.internet.error import ConnectionRefusedError
from twisted.internet.protocol import Factory, Protocol
from twisted.internet.testing import EventLoggingObserver, StringTransport
from twisted.logger import globalLogPublisher
from twisted.trial.unittest import SynchronousTestCase

from salttwist.minion.connection import (
    Attempt,
    ChannelEndpoint,
    ChannelFactory,
    ReconnectPolicy,
    newConnectionMachine,
)
from salttwist.minion.service import transportConnector
from salttwist.transport.interfaces import ROLE_PUB, ROLE_REQ


class ConnectionMachineTests(SynchronousTestCase):
    """
    L{newConnectionMachine}: each input's answer and the state it leaves
    the machine in, and the end of an attempt when the machine leaves its
    states.
    """

    def setUp(self) -> None:
        self.machine = newConnectionMachine()
        self.events: list[tuple[str, Any]] = []

    def feed(self, name: str, *args: Any) -> Any:
        """
        Feed the input C{name}, record its answer and the state after it.
        """
        result = getattr(self.machine, name)(*args)
        self.events.append((name, result, self.machine.describe()))  # type: ignore[arg-type]
        return result

    def ready(self) -> Attempt:
        """
        Take the machine from stopped to ready through one attempt.
        """
        attempt = Attempt(object())
        self.feed("start")
        self.feed("connecting")
        self.feed("connected", attempt)
        self.feed("authenticated", attempt)
        self.feed("subscribed", attempt)
        return attempt

    def test_stoppedAtFirst(self) -> None:
        """
        A new machine is stopped.
        """
        self.assertEqual(self.machine.describe(), "stopped")

    def test_toReady(self) -> None:
        """
        Started, connected, authenticated and subscribed, the machine is
        ready; it says "connecting" all the way there.
        """
        attempt = self.ready()
        self.assertEqual(
            self.events,
            [
                ("start", True, "connecting"),
                ("connecting", None, "connecting"),
                ("connected", True, "connecting"),
                ("authenticated", None, "connecting"),
                ("subscribed", None, "ready"),
            ],
        )
        self.assertTrue(attempt.live)

    def test_startOnce(self) -> None:
        """
        Only the first start of a stopped machine says to start the
        connection service.
        """
        self.assertTrue(self.machine.start())
        self.assertFalse(self.machine.start())
        self.ready()
        self.assertFalse(self.machine.start())

    def test_lostWhenReady(self) -> None:
        """
        A failure of a ready minion ends its attempt and makes it wait; a
        second report of it changes nothing.
        """
        attempt = self.ready()
        self.assertTrue(self.feed("failed"))
        self.assertFalse(attempt.live)
        self.assertEqual(self.machine.describe(), "waiting")
        self.assertFalse(self.feed("failed"))
        self.assertFalse(self.feed("pending"))

    def test_failedWhileAuthenticating(self) -> None:
        """
        An attempt that fails while authenticating is over; the next
        connection starts a new one.
        """
        first = Attempt(object())
        self.feed("start")
        self.feed("connecting")
        self.feed("connected", first)
        self.assertTrue(self.feed("failed"))
        self.assertFalse(first.live)
        self.feed("connecting")
        second = Attempt(object())
        self.assertTrue(self.feed("connected", second))
        self.assertTrue(second.live)

    def test_pending(self) -> None:
        """
        A key the master has not accepted makes the machine wait (it says
        "waiting") until the next connection.
        """
        attempt = Attempt(object())
        self.feed("start")
        self.feed("connecting")
        self.feed("connected", attempt)
        self.feed("authenticated", attempt)
        self.assertTrue(self.feed("pending"))
        self.assertFalse(attempt.live)
        self.assertEqual(self.machine.describe(), "waiting")
        self.feed("connecting")
        self.assertEqual(self.machine.describe(), "connecting")

    def test_cannotReach(self) -> None:
        """
        A connection that cannot be made makes the machine wait.
        """
        self.feed("start")
        self.feed("connecting")
        self.assertTrue(self.feed("failed"))
        self.assertEqual(self.machine.describe(), "waiting")

    def test_stopEndsAttempt(self) -> None:
        """
        Stopping ends the running attempt; a connection made after it is
        not wanted.
        """
        attempt = self.ready()
        self.feed("stop")
        self.assertFalse(attempt.live)
        self.assertEqual(self.machine.describe(), "stopped")
        self.assertFalse(self.feed("connected", Attempt(object())))
        self.assertFalse(self.feed("failed"))
        self.assertTrue(self.feed("start"))

    def test_stopFromEveryState(self) -> None:
        """
        The machine stops from every state.
        """
        for steps in ([], ["start"], ["start", "connecting"]):
            machine = newConnectionMachine()
            for step in steps:
                getattr(machine, step)()
            machine.stop()
            self.assertEqual(machine.describe(), "stopped")


class ReconnectPolicyTests(SynchronousTestCase):
    """
    L{ReconnectPolicy} as C{ClientService}'s C{retryPolicy}.
    """

    def policy(self, **overrides: Any) -> ReconnectPolicy:
        config = {"recon_default": 1000, "recon_max": 10000, "recon_randomize": False}
        config.update(overrides)
        return ReconnectPolicy(config, "m1")

    def test_doubles(self) -> None:
        """
        The back-off doubles from C{recon_default} up to C{recon_max}
        milliseconds, whatever attempt number the service passes.
        """
        policy = self.policy()
        self.assertEqual([policy(1) for _ in range(6)], [1.0, 2.0, 4.0, 8.0, 10.0, 10.0])
        policy.failures = 0
        self.assertEqual(policy(7), 1.0)

    def test_jitter(self) -> None:
        """
        With C{recon_randomize}, each delay is between half and all of the
        back-off's.
        """
        policy = self.policy(recon_randomize=True, recon_default=2000)
        for expected in (2.0, 4.0, 8.0):
            self.assertTrue(expected / 2 <= policy(1) <= expected)

    def test_retryIn(self) -> None:
        """
        A wait the failure asked for is used once, and the back-off does
        not grow for it.
        """
        policy = self.policy()
        policy.retryIn = 10.0
        self.assertEqual(policy(1), 10.0)
        self.assertEqual(policy(2), 1.0)

    def test_logsReason(self) -> None:
        """
        Each retry is logged with its reason and delay.
        """
        events = EventLoggingObserver.createWithCleanup(self, globalLogPublisher)
        policy = self.policy()
        policy.reason = "the master went away"
        policy(1)
        [event] = events
        self.assertEqual(event["log_namespace"], "salttwist.minion.core.Minion")
        self.assertEqual(event["reason"], "the master went away")
        self.assertEqual(event["delay"], 1.0)


class ChannelTests(SynchronousTestCase):
    """
    L{ChannelFactory} and L{ChannelEndpoint}.
    """

    def test_factoryChannel(self) -> None:
        """
        A L{ChannelFactory} says its channel and remembers the protocol it
        built last.
        """
        factory = ChannelFactory(Protocol, ROLE_PUB)
        proto = factory.buildProtocol(None)  # type: ignore[arg-type]
        self.assertEqual(factory.channel, ROLE_PUB)
        self.assertIs(factory.built, proto)
        self.assertIs(proto.factory, factory)

    def test_connectorTakesChannel(self) -> None:
        """
        L{transportConnector} asks the transport for the endpoint of the
        channel the factory says, whatever the port; a factory that says no
        channel (or another one) is refused with an error naming it, never
        guessed from the port.
        """
        roles: list[str] = []

        class Transport:
            def clientEndpoint(
                self, reactor: Any, config: Any, host: str, port: int, role: str
            ) -> Any:
                roles.append(role)

                class Endpoint:
                    def connect(self, factory: Any) -> Deferred[Any]:
                        return fail(ConnectionRefusedError())

                return Endpoint()

        connect = transportConnector(None, {"master_port": 4506}, Transport())  # type: ignore[arg-type]
        for factory in (ChannelFactory(Protocol, ROLE_PUB), ChannelFactory(Protocol, ROLE_REQ)):
            self.failureResultOf(connect("h", 4506, factory))
        self.assertEqual(roles, [ROLE_PUB, ROLE_REQ])
        bare = Factory.forProtocol(Protocol)
        error = self.assertRaises(ValueError, connect, "h", 4506, bare)
        self.assertIn("its channel is None", str(error))
        self.assertIn(repr(bare), str(error))
        other = ChannelFactory(Protocol, "client")
        error = self.assertRaises(ValueError, connect, "h", 4505, other)
        self.assertIn("its channel is 'client'", str(error))
        self.assertEqual(roles, [ROLE_PUB, ROLE_REQ])

    def endpoint(self, connect: Any) -> tuple[ChannelEndpoint, list[Any]]:
        calls: list[Any] = []
        endpoint = ChannelEndpoint(
            lambda: connect,
            "salt",
            4506,
            ChannelFactory(Protocol, ROLE_REQ),
            lambda: calls.append("connecting"),
            calls.append,
        )
        return endpoint, calls

    def test_connects(self) -> None:
        """
        L{ChannelEndpoint.connect} says an attempt begins and connects the
        factory it is given with the minion's C{connectTCP}.
        """
        made: list[Any] = []

        def connect(host: str, port: int, factory: Any) -> Deferred[Any]:
            made.append((host, port, factory.channel))
            d: Deferred[Any] = Deferred()
            d.callback(factory.buildProtocol(None))
            return d

        endpoint, calls = self.endpoint(connect)
        proto = self.successResultOf(endpoint.connect(Factory.forProtocol(Protocol)))
        self.assertIsInstance(proto, Protocol)
        self.assertEqual(made, [("salt", 4506, ROLE_REQ)])
        self.assertEqual(calls, ["connecting"])

    def test_notReached(self) -> None:
        """
        A connection that cannot be made is reported, and fails the attempt.
        """
        error = ConnectionRefusedError()
        endpoint, calls = self.endpoint(lambda host, port, factory: fail(error))
        self.failureResultOf(
            endpoint.connect(Factory.forProtocol(Protocol)), ConnectionRefusedError
        )
        self.assertEqual(calls, ["connecting", error])

    def test_cancelledClosesLateConnection(self) -> None:
        """
        A connection that arrives after its attempt was cancelled is a bare
        protocol of the channel, closed at once; nothing is reported.
        """
        pending: Deferred[Any] = Deferred()
        made: list[Any] = []

        def connect(host: str, port: int, factory: Any) -> Deferred[Any]:
            made.append(factory)
            return pending

        endpoint, calls = self.endpoint(connect)
        built: list[Any] = []

        class Wanted(Factory):
            def buildProtocol(self, addr: Any) -> Protocol:
                built.append(addr)
                return Protocol()

        attempt = endpoint.connect(Wanted())
        attempt.cancel()
        self.failureResultOf(attempt)
        proto = made[0].buildProtocol(None)
        self.assertEqual(built, [])
        transport = StringTransport()
        proto.makeConnection(transport)
        pending.callback(proto)
        self.assertTrue(transport.disconnecting)
        self.assertEqual(calls, ["connecting"])
