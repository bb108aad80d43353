# -*- test-case-name: tests.test_minion_connection,tests.test_minion -*-
"""
The life of a minion's connection to its master, apart from what it does
with it.

  - L{ConnectionMachine}: an automat machine for where the minion is
    (stopped, connecting, authenticating, subscribing, ready, waiting after
    a failure, pending while its key waits for an admin). Each attempt is an
    L{Attempt}, the data of the states it runs through: leaving them ends
    it, so a callback of an older attempt sees that it is over and never
    acts on a newer one.
  - L{ReconnectPolicy}: Salt's C{recon_default}, C{recon_max} and
    C{recon_randomize} as a C{retryPolicy} for L{ClientService}, which
    makes the req connection and waits between attempts.
  - L{ChannelFactory} and L{ChannelEndpoint}: the factories know which
    channel (req or pub) they are for, and the endpoint connects them with
    the minion's C{connectTCP}.
"""

from __future__ import annotations

import random
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Protocol

from automat import TypeMachineBuilder, pep614
from twisted.internet.defer import Deferred, maybeDeferred
from twisted.internet.interfaces import IAddress, IProtocol, IProtocolFactory
from twisted.internet.protocol import Factory
from twisted.logger import Logger

#: The logger name of the minion's log lines (Salt's logger name in the
#: JSON lines, the prefix of twistd's): L{salttwist.minion.core.Minion}'s,
#: also for the parts it delegates to.
MINION_LOG_NAMESPACE = "salttwist.minion.core.Minion"

#: Builds a connection: C{connectTCP(host, port, factory)}.
ConnectTCP = Callable[[str, int, Factory], Deferred]


class AttemptFailed(Exception):
    """
    This connection attempt ended; C{retryIn} says when to try again
    (L{None} means the back-off decides); C{pending}, that the master
    waits for an admin to accept this minion's key; C{lost}, that a ready
    session ended (its master failed); C{failBack}, that the minion leaves
    its master for its first one (C{master_failback}), which is back.
    """

    def __init__(
        self,
        message: str,
        retryIn: float | None = None,
        pending: bool = False,
        lost: bool = False,
        failBack: bool = False,
    ) -> None:
        super().__init__(message)
        self.retryIn = retryIn
        self.pending = pending
        self.lost = lost
        self.failBack = failBack


class ChannelFactory(Factory):
    """
    A quiet factory of the protocols of one channel of the minion.

    @ivar channel: L{salttwist.transport.interfaces.ROLE_REQ} or
        L{ROLE_PUB<salttwist.transport.interfaces.ROLE_PUB>}: the connector
        picks the transport's endpoint for it.
    @ivar built: the last protocol built (L{ClientService} hands the
        minion a proxy of it).
    """

    noisy = False

    def __init__(self, build: Callable[[], Any], channel: str) -> None:
        self._build = build
        self.channel = channel
        self.built: Any = None

    def buildProtocol(self, addr: IAddress) -> Any:
        self.built = proto = self._build()
        proto.factory = self
        return proto


class _CancellableFactory(Factory):
    """
    What L{ChannelEndpoint} connects: the factory L{ClientService} gave it,
    until the attempt is cancelled; then a bare protocol of the channel,
    which nobody reports lost to the service (it has stopped).
    """

    noisy = False

    def __init__(self, factory: IProtocolFactory, bare: ChannelFactory) -> None:
        self._factory = factory
        self._bare = bare
        self.cancelled = False
        self.channel = bare.channel

    def buildProtocol(self, addr: IAddress) -> IProtocol | None:
        if self.cancelled:
            return self._bare.buildProtocol(addr)  # type: ignore[no-any-return]
        return self._factory.buildProtocol(addr)


class ChannelEndpoint:
    """
    A client endpoint connecting to C{host:port} with the minion's
    C{connectTCP} (looked up on each attempt, so it can be replaced).
    A cancelled attempt closes its connection if it still comes.

    @ivar connecting: called as each attempt begins.
    @ivar failed: called with the reason of each failed attempt.
    @ivar where: if given, called as each attempt begins for the
        C{(host, port)} to connect to (the master a failover minion tries
        now); C{host} and C{port} are then only the first.
    """

    def __init__(
        self,
        connectTCP: Callable[[], ConnectTCP],
        host: str,
        port: int,
        factory: ChannelFactory,
        connecting: Callable[[], None],
        failed: Callable[[Exception], None],
        where: Callable[[], tuple[str, int]] | None = None,
    ) -> None:
        self._connectTCP = connectTCP
        self._host = host
        self._port = port
        self._factory = factory
        self._connecting = connecting
        self._failed = failed
        self._where = where

    def connect(self, factory: IProtocolFactory) -> Deferred[Any]:
        if self._where is not None:
            self._host, self._port = self._where()
        self._connecting()
        wrapper = _CancellableFactory(factory, self._factory)
        outer: Deferred[Any] = Deferred(lambda _: setattr(wrapper, "cancelled", True))

        def made(proto: Any) -> None:
            if wrapper.cancelled:
                # Nobody waits for this connection's greeting any more.
                hello = getattr(proto, "hello", None)
                if isinstance(hello, Deferred):
                    hello.addErrback(lambda _: None)
                proto.transport.loseConnection()
                return
            outer.callback(proto)

        def notMade(failure: Any) -> None:
            if wrapper.cancelled:
                return
            self._failed(failure.value)
            outer.errback(failure)

        # maybeDeferred: a transport that cannot even try (its endpoint
        # raises) fails this attempt, not the connection service.
        connecting = maybeDeferred(self._connectTCP(), self._host, self._port, wrapper)
        connecting.addCallbacks(made, notMade)
        return outer

    def __repr__(self) -> str:
        return f"<{self._factory.channel} channel to {self._host}:{self._port}>"


class ReconnectPolicy:
    """
    How long a minion waits before its next attempt, as a C{retryPolicy}
    of L{ClientService}: an exponential back-off from C{recon_default} to
    C{recon_max} milliseconds, drawn between half and all of it when
    C{recon_randomize} is set; or the wait the failure asked for
    (L{retryIn}). It logs why and how long the minion waits.

    @ivar retryIn: the wait for the next retry, if the failure fixed it.
    @ivar reason: why the minion retries.
    """

    def __init__(self, config: dict[str, Any], minionId: str) -> None:
        self.base = config["recon_default"] / 1000.0
        self.cap = max(self.base, config["recon_max"] / 1000.0)
        self.randomize = bool(config["recon_randomize"])
        self.id = minionId
        # The minion's log lines keep the logger name they always had.
        self.log = Logger(namespace=MINION_LOG_NAMESPACE, source=self)
        self.failures = 0
        self.retryIn: float | None = None
        self.reason = "lost the connection to the master"

    def backoff(self) -> float:
        """
        @return: the next delay of the back-off, which grows.
        """
        delay = min(self.cap, self.base * (2 ** min(self.failures, 16)))
        self.failures += 1
        if self.randomize:
            delay = random.uniform(delay / 2, delay)
        return delay

    def __call__(self, attempt: int) -> float:
        """
        @param attempt: how many attempts failed in a row (L{ClientService}
            counts from the last connection made; the minion counts from its
            last subscription, in L{failures}).
        """
        delay, self.retryIn = self.retryIn, None
        if delay is None:
            delay = self.backoff()
        self.log.warn(
            # Not "message": the legacy log bridge reserves that key and
            # replaces it with () in the shared event.
            "minion {id}: {reason}; retrying in {delay:.1f}s",
            id=self.id,
            reason=self.reason,
            delay=delay,
        )
        return delay


@dataclass(eq=False)
class Attempt:
    """
    One attempt to authenticate and subscribe on a req connection.

    @ivar req: its req connection's protocol.
    @ivar live: whether it still is the minion's current attempt.
    """

    req: Any
    live: bool = True


class ConnectionMachine(Protocol):
    """
    The inputs of the minion's connection machine.
    """

    def start(self) -> bool:
        """
        The minion starts.

        @return: whether it was stopped (its connection service starts).
        """

    def connecting(self) -> None:
        """
        The req connection is being made.
        """

    def connected(self, attempt: Attempt) -> bool:
        """
        The req connection of C{attempt} was made: authenticate on it.

        @return: whether the minion still wants it (not if it stopped).
        """

    def authenticated(self, attempt: Attempt) -> None:
        """
        The master opened a session: subscribe to its publications.
        """

    def subscribed(self, attempt: Attempt) -> None:
        """
        The master confirmed the subscription: the minion is ready.
        """

    def pending(self) -> bool:
        """
        The master has not accepted (or has refused) this minion's key:
        wait for an admin.

        @return: whether an attempt was running.
        """

    def failed(self) -> bool:
        """
        The attempt failed, or the ready connection was lost.

        @return: whether an attempt was running or the minion was ready.
        """

    def stop(self) -> None:
        """
        The minion stops.
        """

    def describe(self) -> str:
        """
        @return: C{"stopped"}, C{"connecting"}, C{"waiting"} or
            C{"ready"}.
        """


@dataclass
class _Core:
    """
    Nothing is shared between the states but what their data holds.
    """


def _makeMachine() -> Callable[[_Core], ConnectionMachine]:
    machine = TypeMachineBuilder(ConnectionMachine, _Core)

    def sameAttempt(m: ConnectionMachine, core: _Core, attempt: Attempt) -> Attempt:
        return attempt

    Stopped = machine.state("Stopped")
    Connecting = machine.state("Connecting")
    Authenticating = machine.state("Authenticating", sameAttempt)
    Subscribing = machine.state("Subscribing", sameAttempt)
    Ready = machine.state("Ready", sameAttempt)
    Waiting = machine.state("Waiting")
    Pending = machine.state("Pending")

    for state, name in (
        (Stopped, "stopped"),
        (Connecting, "connecting"),
        (Authenticating, "connecting"),
        (Subscribing, "connecting"),
        (Ready, "ready"),
        (Waiting, "waiting"),
        (Pending, "waiting"),
    ):
        state.upon(ConnectionMachine.describe).loop().returns(name)

    Stopped.upon(ConnectionMachine.start).to(Connecting).returns(True)
    for state in (Connecting, Waiting, Pending):
        state.upon(ConnectionMachine.start).loop().returns(False)
        state.upon(ConnectionMachine.stop).to(Stopped).returns(None)
    Stopped.upon(ConnectionMachine.stop).loop().returns(None)
    Stopped.upon(ConnectionMachine.failed).loop().returns(False)
    Stopped.upon(ConnectionMachine.pending).loop().returns(False)
    Stopped.upon(ConnectionMachine.connecting).loop().returns(None)
    for state in (Stopped, Waiting, Pending):
        state.upon(ConnectionMachine.connected).loop().returns(False)

    Connecting.upon(ConnectionMachine.connecting).loop().returns(None)
    Waiting.upon(ConnectionMachine.connecting).to(Connecting).returns(None)
    Pending.upon(ConnectionMachine.connecting).to(Connecting).returns(None)
    Connecting.upon(ConnectionMachine.failed).to(Waiting).returns(True)
    for state in (Waiting, Pending):
        state.upon(ConnectionMachine.failed).loop().returns(False)
        state.upon(ConnectionMachine.pending).loop().returns(False)

    Connecting.upon(ConnectionMachine.connected).to(Authenticating).returns(True)

    @pep614(Authenticating.upon(ConnectionMachine.authenticated).to(Subscribing))
    @pep614(Subscribing.upon(ConnectionMachine.subscribed).to(Ready))
    def advance(m: ConnectionMachine, core: _Core, current: Attempt, attempt: Attempt) -> None:
        pass

    def endAttempt(m: ConnectionMachine, core: _Core, attempt: Attempt) -> bool:
        attempt.live = False
        return True

    def stopAttempt(m: ConnectionMachine, core: _Core, attempt: Attempt) -> None:
        attempt.live = False

    for state in (Authenticating, Subscribing, Ready):
        pep614(state.upon(ConnectionMachine.failed).to(Waiting))(endAttempt)
        pep614(state.upon(ConnectionMachine.stop).to(Stopped))(stopAttempt)
        state.upon(ConnectionMachine.start).loop().returns(False)
    for state in (Authenticating, Subscribing):
        pep614(state.upon(ConnectionMachine.pending).to(Pending))(endAttempt)
    Ready.upon(ConnectionMachine.pending).to(Waiting).returns(False)

    @pep614(Authenticating.upon(ConnectionMachine.connecting).to(Connecting))
    @pep614(Subscribing.upon(ConnectionMachine.connecting).to(Connecting))
    @pep614(Ready.upon(ConnectionMachine.connecting).to(Connecting))
    def reconnecting(m: ConnectionMachine, core: _Core, attempt: Attempt) -> None:
        # Not expected (the connection service makes a new connection only
        # once the last one is lost), but then that attempt is over.
        attempt.live = False

    return machine.build()


#: Makes a L{ConnectionMachine}, in state C{Stopped}.
_MachineOf = _makeMachine()


def newConnectionMachine() -> ConnectionMachine:
    """
    @return: a L{ConnectionMachine} in its C{Stopped} state.
    """
    return _MachineOf(_Core())
