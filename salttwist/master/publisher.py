# -*- test-case-name: tests.test_master_core -*-
"""
The pub channel's server side: minions subscribe, the master broadcasts.

A minion subscribes with C{{"cmd": "subscribe", "id": ..., "mac": ...}},
where the MAC over this connection's challenge is keyed with a token derived
from its current req-channel session key: only a minion holding a live
session receives publications, and deleting its key cuts it off.

Each publication is C{{"pub": blob, "kid": n, "mac": m}}: the load sealed
with the publication key (AES-256-GCM), which every accepted minion holds,
and an HMAC-SHA256 of it under a key only this subscription's minion and
the master hold (derived from the minion's pub token and this connection's
challenge), so no minion can forge a job for another and nothing recorded
on one connection is accepted on the next. The frame is encoded once; each
subscriber's MAC is appended to it (L{salttwist.wire.publicationFramePrefix}).

A minion that subscribes with C{"acks": True} also gets the acknowledgements
of the returns it sent on its req session in its next publication, as
C{{"pub": blob, "kid": n, "ack": [rid, ...], "mac": m}} with the MAC over
those request ids too (L{salttwist.wire.publicationAcksMessage}): it reads
them in the wake-up the publication causes, and the master seals and writes
nothing more for them.

A minion with C{single_connection} does not connect here: it subscribes
inside its req session (L{salttwist.master.sessions.Sessions.sessionSubscribe}),
and the same frames, MACed with the req connection's challenge, are written
on that connection.
"""

from __future__ import annotations

import os
from typing import Any

from zope.interface import implementer

from salttwist.master.interfaces import IMinionSession, IPubChannel, ISubscriber
from salttwist.symmetric import HmacSha256
from salttwist.transport.framing import FrameProtocol, QuietFactory
from salttwist.transport.tcp import keepAlive


@implementer(ISubscriber)
class PubServerProtocol(FrameProtocol):
    """
    One minion's pub-channel connection. It calls only what
    L{IPubChannel} offers: the master's sessions room.

    @ivar minionId: the subscribed minion's id, once it has subscribed.
    @ivar publicationMac: the MAC of this subscription's publications, once
        it has subscribed.
    @ivar session: the req session this subscription proved (its MAC key
        derives from that session's key).
    @ivar carriesAcknowledgements: whether the minion asked for the
        acknowledgements of its returns on that session to come with its
        publications (C{"acks": True} when subscribing).
    """

    minionId: str | None = None
    publicationMac: HmacSha256 | None = None
    session: IMinionSession | None = None
    carriesAcknowledgements = False

    def __init__(self, master: IPubChannel) -> None:
        self._master = master
        self.challenge = os.urandom(32)

    def connectionMade(self) -> None:
        super().connectionMade()
        # A peer that vanished without closing (a half-open connection) is
        # found by TCP keepalive probes after 300 s of silence.
        keepAlive(self)
        self.startDeadline(self._master.clock, self._master.preauthTimeout)
        self.sendFrame({"cmd": "hello", "challenge": self.challenge})

    def frameReceived(self, message: dict[str, Any]) -> None:
        if self.minionId is not None:
            if message.get("cmd") != "ping":
                self.protocolViolation("minions only listen on the pub channel")
            return
        if message.get("cmd") != "subscribe":
            self.protocolViolation("expected a subscribe frame")
            return
        minionId = self._master.subscribe(self, message.get("id"), message.get("mac"))
        if minionId is None:
            self.sendFrame({"ret": "refused"})
            self.transport.loseConnection()
            return
        self.minionId = minionId
        self.carriesAcknowledgements = message.get("acks") is True
        self.cancelDeadline()
        self.sendFrame(self._master.subscribedFrame(self))

    def connectionLost(self, reason: object = None) -> None:
        self.cancelDeadline()
        if self.minionId is not None:
            self._master.unsubscribe(self)


class PubServerFactory(QuietFactory):
    """
    Builds L{PubServerProtocol}s bound to one L{IPubChannel} (the master,
    or its sessions room).
    """

    def __init__(self, master: IPubChannel) -> None:
        self.master = master

    def buildProtocol(self, addr: object) -> PubServerProtocol:
        proto = PubServerProtocol(self.master)
        proto.factory = self
        return proto
