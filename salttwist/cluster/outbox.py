# -*- test-case-name: tests.test_cluster -*-
"""
The bounded buffer of durable messages a master has sent to the cluster's
broker and the broker has not yet acknowledged.

A message stays here, in order, from L{Outbox.add} until the broker
acknowledges it (L{Outbox.acknowledged}); after a reconnection every
message still here is sent again (the broker drops the copies it already
stored by their message id). When the buffer holds C{maxMessages} messages
or C{maxBytes} bytes, L{Outbox.add} refuses new ones: memory stays bounded
however long the broker is away, and the refusal reaches whoever sent the
message instead of a message being lost.
"""

from __future__ import annotations

import os
from collections import OrderedDict
from dataclasses import dataclass, field

from twisted.internet.defer import Deferred

from salttwist.cluster.interfaces import ClusterUnavailable


@dataclass
class Pending:
    """
    One durable message waiting for the broker's acknowledgement.

    @ivar msgId: its id, unique in the cluster (the broker drops copies).
    @ivar inFlight: whether it was sent on the current connection and its
        acknowledgement is awaited.
    """

    msgId: str
    kind: str
    payload: bytes
    acked: Deferred[None] = field(default_factory=Deferred)
    inFlight: bool = False


class Outbox:
    """
    The durable messages not yet acknowledged, at most C{maxMessages} of
    them and C{maxBytes} bytes.
    """

    def __init__(self, memberId: str, maxMessages: int, maxBytes: int, broker: str = "") -> None:
        """
        @param broker: the broker's URL (without credentials), named when
            the buffer is full.
        """
        self._memberId = memberId
        self._broker = f"the broker {broker}" if broker else "the broker"
        self.maxMessages = maxMessages
        self.maxBytes = maxBytes
        self._pending: OrderedDict[str, Pending] = OrderedDict()
        # Those of _pending not in flight, in the order to send them (kept
        # apart: a flush must not walk thousands of messages in flight).
        self._unsent: OrderedDict[str, Pending] = OrderedDict()
        self._bytes = 0
        self._counter = 0
        # Ids differ between two runs of the same master: the broker's
        # duplicate window must not drop a new message as an old one.
        self._epoch = os.urandom(6).hex()

    def __len__(self) -> int:
        return len(self._pending)

    @property
    def bytes(self) -> int:
        """
        The bytes of the payloads held.
        """
        return self._bytes

    def whyNoRoom(self) -> str | None:
        """
        Whether no message at all can be added now, whatever its size: the
        buffer holds C{maxMessages} messages. Cheap (a length), so a
        sender checks it before it makes the message.

        @return: L{None} if the count leaves room, else why not.
        """
        if len(self._pending) >= self.maxMessages:
            return self._countFull()
        return None

    def _countFull(self) -> str:
        return (
            f"the cluster's outgoing buffer is full ({len(self._pending)} messages "
            f"not yet acknowledged by {self._broker}, at most {self.maxMessages})"
        )

    def whyFull(self, extra: int = 0) -> str | None:
        """
        @param extra: the size of a message about to be added.
        @return: L{None} if a message of C{extra} bytes fits, else why not.
        """
        if len(self._pending) >= self.maxMessages:
            return self._countFull()
        if self._bytes + extra > self.maxBytes:
            return (
                f"the cluster's outgoing buffer is full ({self._bytes} bytes not yet "
                f"acknowledged by {self._broker}, at most {self.maxBytes})"
            )
        return None

    def add(self, kind: str, payload: bytes) -> Pending:
        """
        Hold a new message.

        @raise ClusterUnavailable: the buffer is full.
        """
        problem = self.whyFull(len(payload))
        if problem is not None:
            raise ClusterUnavailable(problem)
        self._counter += 1
        msgId = f"{self._memberId}.{self._epoch}.{self._counter}"
        pending = Pending(msgId, kind, payload)
        self._pending[msgId] = pending
        self._unsent[msgId] = pending
        self._bytes += len(payload)
        return pending

    def toSend(self) -> list[Pending]:
        """
        The messages not in flight, oldest first, now marked in flight.
        """
        out = list(self._unsent.values())
        self._unsent.clear()
        for pending in out:
            pending.inFlight = True
        return out

    def retry(self, msgId: str) -> None:
        """
        Message C{msgId} was not acknowledged (an error, a lost
        connection): send it again next time.
        """
        pending = self._pending.get(msgId)
        if pending is not None and pending.inFlight:
            pending.inFlight = False
            self._unsent[msgId] = pending

    def disconnected(self) -> None:
        """
        The connection is lost: every message is to be sent again.
        """
        for pending in self._pending.values():
            pending.inFlight = False
        self._unsent = OrderedDict(self._pending)

    def drop(self, msgId: str, error: Exception) -> None:
        """
        Message C{msgId} can never be sent (the broker's limit fell below
        its size): forget it and fail its sender's L{Deferred}.
        """
        pending = self._pending.pop(msgId, None)
        if pending is None:
            return
        self._unsent.pop(msgId, None)
        self._bytes -= len(pending.payload)
        pending.acked.errback(error)

    def acknowledged(self, msgId: str) -> None:
        """
        The broker stored message C{msgId}: forget it and tell its sender.
        """
        pending = self._pending.pop(msgId, None)
        if pending is None:
            return
        self._unsent.pop(msgId, None)
        self._bytes -= len(pending.payload)
        pending.acked.callback(None)
