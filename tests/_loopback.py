# -*- test-case-name: tests.test_master_core,tests.test_minion -*-
"""
In-memory connections for protocol tests.

This is the only module that imports L{twisted.test.iosim}: Twisted calls its
test helpers private, so any change to them must touch this one file.

Two helpers:

  - L{connectPair} joins one server and one client protocol and returns the
    L{iosim.IOPump} that moves their bytes; L{Loopback} keeps many pumps and
    flushes them all until nothing moves.
  - L{MasterMinionNetwork} runs a whole L{Master} and its minions against
    one L{MemoryReactorClock}: each minion's C{connectTCP} builds a protocol
    from the master's req or pub factory and joins it to the minion's
    protocol in memory. Time only passes when a test calls L{advance}.
"""

from __future__ import annotations

from typing import Any

from twisted.internet import defer
from twisted.internet.error import ConnectionRefusedError
from twisted.internet.protocol import Factory, Protocol
from twisted.internet.testing import MemoryReactorClock
from twisted.test import iosim

from salttwist.events.bus import LocalEventBus
from salttwist.master.core import Master, runSynchronously
from salttwist.master.keys import MasterKeys
from salttwist.master.publisher import PubServerFactory
from salttwist.master.reqserver import ReqServerFactory
from salttwist.minion.core import Minion
from salttwist.minion.service import buildMinion
from salttwist.pki.keystore import InMemoryKeyStore

__all__ = ["Loopback", "MasterMinionNetwork", "connectPair"]


class _FakeTransport(iosim.FakeTransport):
    """
    An L{iosim.FakeTransport} with the C{connected} flag of a real TCP
    transport, which L{ReqServerProtocol} reads to skip replies to a peer
    that left while its authentication ran.
    """

    connected = True

    def reportDisconnect(self) -> None:
        """
        Clear C{connected}, then tell the protocol its connection was lost.
        """
        self.connected = False
        super().reportDisconnect()


def connectPair(server: Protocol, client: Protocol, clock: Any = None) -> iosim.IOPump:
    """
    Connect C{server} and C{client} in memory. Both get C{connectionMade}
    now; no byte moves until the returned pump is flushed.

    @param clock: advanced by zero at every pump, so C{callLater(0, ...)}
        calls run as bytes move.
    """
    return iosim.connect(
        server,
        _FakeTransport(server, isServer=True),
        client,
        _FakeTransport(client, isServer=False),
        greet=False,
        clock=clock,
    )


class Loopback:
    """
    Many in-memory connections, flushed together.

    @ivar clock: the clock every pump advances by zero.
    @ivar pumps: the pumps of connections not yet closed on both sides.
    """

    def __init__(self, clock: Any = None) -> None:
        self.clock = clock if clock is not None else MemoryReactorClock()
        self.pumps: list[iosim.IOPump] = []

    def connect(self, server: Protocol, client: Protocol) -> iosim.IOPump:
        """
        Connect a pair (see L{connectPair}) and keep its pump.
        """
        pump = connectPair(server, client, self.clock)
        self.pumps.append(pump)
        return pump

    def flush(self) -> None:
        """
        Pump every connection, including those opened while flushing, until
        no byte moves and no close is pending; forget closed connections.
        """
        for _ in range(1000):
            moved = False
            for pump in list(self.pumps):
                moved = pump.flush() or moved
            self.pumps = [
                p for p in self.pumps if not (p.clientIO.disconnected and p.serverIO.disconnected)
            ]
            if not moved:
                return
        raise AssertionError("the connections never went idle")

    def closeAll(self) -> None:
        """
        Close every open connection from the server side, as a network
        failure would, and deliver the closes.
        """
        for pump in self.pumps:
            pump.serverIO.loseConnection()
        self.flush()


class MasterMinionNetwork(Loopback):
    """
    A L{Master} (in-memory key store, local event bus, blocking work run
    synchronously) and minions connected to it in memory.

    @ivar reactor: the L{MemoryReactorClock} of the master and every minion.
    @ivar master: the L{Master}.
    @ivar keyStore: its L{InMemoryKeyStore}.
    @ivar events: every C{(tag, data)} fired on the master's bus.
    @ivar attempts: the port of every connection attempt, refused or not.
    @ivar refuse: how many of the next connection attempts fail with
        L{ConnectionRefusedError}.
    """

    def __init__(self, masterConfig: dict[str, Any], masterKeys: MasterKeys) -> None:
        reactor = MemoryReactorClock()
        super().__init__(reactor)
        self.reactor = reactor
        self.keyStore = InMemoryKeyStore()
        self.bus = LocalEventBus()
        self.events: list[tuple[str, dict[str, Any]]] = []
        self.bus.subscribe([], lambda tag, data: self.events.append((tag, data)))
        self.master = Master(
            masterConfig, masterKeys, self.keyStore, self.bus, runSynchronously, reactor
        )
        self._servers: dict[int, Factory] = {
            masterConfig["ret_port"]: ReqServerFactory(self.master),
            self.master.publishPort: PubServerFactory(self.master),
        }
        self.attempts: list[int] = []
        self.refuse = 0

    def connectTCP(self, host: str, port: int, factory: Factory) -> defer.Deferred:
        """
        The minions' C{connectTCP}: connect C{factory}'s protocol to a new
        protocol of the master's factory for C{port}.

        @return: a L{Deferred} that has fired with the client protocol, or
            failed with L{ConnectionRefusedError} if L{refuse} is set or no
            master factory listens on C{port}.
        """
        self.attempts.append(port)
        server = self._servers.get(port)
        if self.refuse > 0 or server is None:
            self.refuse = max(0, self.refuse - 1)
            return defer.fail(ConnectionRefusedError(string=f"{host}:{port}"))
        addr = iosim.FakeAddress()
        client = factory.buildProtocol(addr)
        self.connect(server.buildProtocol(addr), client)
        return defer.succeed(client)

    def buildMinion(self, minionConfig: dict[str, Any]) -> Minion:
        """
        Build a minion (L{buildMinion}) that connects through this network
        and runs its blocking work synchronously. It is not started.
        """
        return buildMinion(
            minionConfig, self.reactor, connectTCP=self.connectTCP, runBlocking=runSynchronously
        )

    def advance(self, seconds: float) -> None:
        """
        Let C{seconds} pass, then deliver whatever that caused.
        """
        self.reactor.advance(seconds)
        self.flush()

    def eventsTagged(self, prefix: str) -> list[tuple[str, dict[str, Any]]]:
        """
        @return: the events so far whose tag starts with C{prefix}.
        """
        return [(tag, data) for tag, data in self.events if tag.startswith(prefix)]
