# -*- test-case-name: tests.test_cluster -*-
"""
An in-memory broker and its members' buses, for unit tests: the same
guarantees as L{salttwist.cluster.nats.NatsClusterBus} (durable kinds held
for members away and delivered again until handled, best-effort kinds to
the members connected), without a process or a socket. The broker can be
taken down and brought up (L{MemoryBroker.down}, L{MemoryBroker.up}) to
test what masters do meanwhile; time is an injected clock.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from twisted.internet.defer import Deferred, maybeDeferred, succeed
from twisted.logger import Logger
from zope.interface import implementer

from salttwist.cluster.interfaces import (
    DEFAULT_MAX_PAYLOAD,
    DURABLE_KINDS,
    HEADER_ROOM,
    KINDS,
    IClusterBus,
    checkPublishable,
)
from salttwist.cluster.outbox import Outbox


class MemoryBroker:
    """
    The broker: stored durable messages per kind, and which of them each
    member has handled.

    @ivar running: whether members can reach it.
    """

    def __init__(self) -> None:
        self.running = True
        self.stored: dict[str, list[tuple[str, bytes]]] = {kind: [] for kind in DURABLE_KINDS}
        self._members: dict[str, MemoryClusterBus] = {}
        # member -> kind -> index of the first message not yet handled.
        self._positions: dict[str, dict[str, int]] = {}

    def down(self) -> None:
        """
        The broker stops: every member loses its connection.
        """
        self.running = False
        for member in list(self._members.values()):
            member._lost()

    def up(self) -> None:
        """
        The broker is back: every started member reconnects.
        """
        self.running = True
        for member in list(self._members.values()):
            member._reconnect()

    def _join(self, member: MemoryClusterBus) -> None:
        self._members[member.memberId] = member
        if member.memberId not in self._positions:
            # A new member starts with the messages sent from now on.
            self._positions[member.memberId] = {k: len(v) for k, v in self.stored.items()}

    def _leave(self, member: MemoryClusterBus) -> None:
        if self._members.get(member.memberId) is member:
            del self._members[member.memberId]

    def _store(self, kind: str, msgId: str, payload: bytes) -> None:
        messages = self.stored[kind]
        if all(existing != msgId for existing, _ in messages[-1000:]):
            messages.append((msgId, payload))
        for member in list(self._members.values()):
            member._deliverDurable(kind)

    def _volatile(self, kind: str, payload: bytes) -> None:
        for member in list(self._members.values()):
            member._deliverVolatile(kind, payload)


@implementer(IClusterBus)
class MemoryClusterBus:
    """
    One member of a L{MemoryBroker}.
    """

    log = Logger()

    def __init__(
        self,
        broker: MemoryBroker,
        memberId: str,
        clock: Any,
        maxMessages: int = 10000,
        maxBytes: int = 64 * 1024 * 1024,
        unreachableLimit: float = 10.0,
        maxPayload: int = DEFAULT_MAX_PAYLOAD - HEADER_ROOM,
    ) -> None:
        self.memberId = memberId
        self.maxPayload = maxPayload
        self._broker = broker
        self._clock = clock
        self.outbox = Outbox(memberId, maxMessages, maxBytes)
        self.unreachableLimit = unreachableLimit
        self._handlers: dict[str, Callable[[bytes], Any]] = {}
        self._started = False
        self.connected = False
        self._downSince = clock.seconds()
        self._handling: set[str] = set()

    def subscribe(self, kind: str, handler: Callable[[bytes], Any]) -> None:
        """
        See L{IClusterBus.subscribe}.
        """
        if kind not in KINDS:
            raise ValueError(f"unknown message kind {kind!r}")
        self._handlers[kind] = handler

    def start(self) -> None:
        """
        See L{IClusterBus.start}.
        """
        self._started = True
        self._reconnect()

    def stop(self) -> Deferred[None]:
        """
        See L{IClusterBus.stop}.
        """
        self._started = False
        self._lost()
        self._broker._leave(self)
        return succeed(None)

    def publish(self, kind: str, payload: bytes) -> Deferred[None]:
        """
        See L{IClusterBus.publish}.
        """
        checkPublishable(kind, payload, self.maxPayload)
        if kind not in DURABLE_KINDS:
            if self.connected:
                self._broker._volatile(kind, payload)
            return succeed(None)
        pending = self.outbox.add(kind, payload)
        self._flush()
        return pending.acked

    def whyUnavailable(self) -> str | None:
        """
        See L{IClusterBus.whyUnavailable}.
        """
        full = self.outbox.whyFull()
        if full is not None:
            return full
        if not self.connected:
            away = self._clock.seconds() - self._downSince
            if away >= self.unreachableLimit:
                return f"the cluster's broker has been unreachable for {away:.0f} s"
        return None

    def _reconnect(self) -> None:
        if not self._started or not self._broker.running:
            return
        self.connected = True
        self._broker._join(self)
        self._flush()
        for kind in DURABLE_KINDS:
            self._deliverDurable(kind)

    def _lost(self) -> None:
        if self.connected:
            self.connected = False
            self._downSince = self._clock.seconds()
            self.outbox.disconnected()

    def _flush(self) -> None:
        if not self.connected:
            return
        for pending in self.outbox.toSend():
            self._broker._store(pending.kind, pending.msgId, pending.payload)
            self.outbox.acknowledged(pending.msgId)

    def _deliverDurable(self, kind: str) -> None:
        handler = self._handlers.get(kind)
        if handler is None or not self.connected or kind in self._handling:
            return
        # One message at a time per kind, in order; a message whose
        # handler fails stays first and is delivered at the next chance.
        self._handling.add(kind)
        try:
            positions = self._broker._positions[self.memberId]
            messages = self._broker.stored[kind]
            while self.connected and positions[kind] < len(messages):
                _, payload = messages[positions[kind]]
                failed: list[Any] = []
                maybeDeferred(handler, payload).addErrback(failed.append)
                if failed:
                    self.log.failure("cluster {kind} handler failed", failed[0], kind=kind)
                    return
                positions[kind] += 1
        finally:
            self._handling.discard(kind)

    def _deliverVolatile(self, kind: str, payload: bytes) -> None:
        handler = self._handlers.get(kind)
        if handler is not None and self.connected:
            handler(payload)
