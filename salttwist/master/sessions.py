# -*- test-case-name: tests.test_session,tests.test_transient_sessions -*-
"""
Sessions and subscriptions: the minions' req sessions (and transient ones),
the connection each subscribed minion's publications go to, and the
replies sessions hold back until the next publication.

L{Sessions} sees connections only through L{IMinionSession} (a req
session) and L{ISubscriber} (a connection publications are written to).
"""

from __future__ import annotations

import time
from typing import Any

from twisted.logger import Logger
from zope.interface import implementer

from salttwist import crypt, wire
from salttwist.interfaces import IEventBus
from salttwist.master.interfaces import IMinionSession, IPubChannel, ISessions, ISubscriber
from salttwist.master.keywatch import AcceptedIds
from salttwist.pki.ids import InvalidMinionId, validateMinionId
from salttwist.transport.backlog import writeBacklog
from salttwist.transport.framing import PREAUTH_DEADLINE

#: Seconds at most the acknowledgement of a job's return is held back
#: (L{Sessions.holdingReplies}): while jobs keep coming, each minion gets its
#: acknowledgements inside its next publication frame (or on its req
#: connection right after, if it did not ask for that), in the same wake-up;
#: otherwise they go this long after the return came, well before the
#: minion would keep the return on disk (its C{PERSIST_AFTER}, 1 s). Long
#: enough for a busy master's next publication to come first (jobs a few
#: hundred milliseconds apart): an acknowledgement sent alone costs the
#: master a seal and a write, and the minion a wake-up. A minion that stops
#: does not wait for it: it leaves the pub channel, and the master sends
#: what it holds for a subscription that ends at once (L{unsubscribe}).
ACK_DELAY = 0.2
#: Transient sessions (C{salttwist-call}) kept per minion id; opening one
#: more closes the oldest.
MAX_TRANSIENT_SESSIONS = 16
#: The most bytes a subscriber's connection may hold unread before the
#: publications to it are dropped (C{pub_write_buffer}, as ZeroMQ's
#: C{pub_hwm} drops them for a subscriber past its high-water mark).
DEFAULT_PUB_WRITE_BUFFER = 16 * 1024 * 1024


@implementer(ISessions, IPubChannel)
class Sessions:
    """
    The master's sessions and subscriptions room.

    @ivar sessions: authenticated minion req sessions by minion id.
    @ivar transients: the transient sessions (C{salttwist-call}) of each
        minion id, oldest first; they never replace or close C{sessions}.
    @ivar subscribers: the connection each subscribed minion receives its
        publications on, by minion id: its pub connection, or its req
        session's own for a minion with C{single_connection}
        (L{sessionSubscribe}).
    @ivar preauthTimeout: seconds a pub connection may take to subscribe.
    @ivar pubWriteBuffer: the most bytes a subscriber's connection may hold
        that the minion has not read: while it holds more, publications
        to it are dropped (C{pub_write_buffer}); a publication is written
        whatever its size while the connection holds less.
    @ivar publicationsDropped: publications dropped so since the master
        started, all subscribers together.
    """

    # The master's namespace: log lines read as they always did.
    log = Logger(namespace="salttwist.master.core.Master")

    def __init__(
        self,
        bus: IEventBus,
        clock: Any,
        accepted: AcceptedIds,
        pubWriteBuffer: int = DEFAULT_PUB_WRITE_BUFFER,
    ) -> None:
        """
        @param accepted: the accepted ids as last listed, forgotten when a
            minion not among them opens a session.
        @param pubWriteBuffer: C{pub_write_buffer}.
        """
        self.pubWriteBuffer = pubWriteBuffer
        self.publicationsDropped = 0
        #: The minions whose publications are being dropped, with how many
        #: since the drops began (logged when they end).
        self._droppingFor: dict[str, int] = {}
        self.bus = bus
        self.clock = clock
        self._accepted = accepted
        self.preauthTimeout: float = PREAUTH_DEADLINE
        self.sessions: dict[str, IMinionSession] = {}
        self.transients: dict[str, dict[IMinionSession, None]] = {}
        self.subscribers: dict[str, ISubscriber] = {}
        #: The sessions holding replies back (L{holdingReplies}), with when
        #: each began to, oldest first; and the delayed call that sends
        #: those held for L{ACK_DELAY}.
        self._replyHolders: dict[IMinionSession, float] = {}
        self._replyTimer: Any = None

    def sessionStarted(self, proto: IMinionSession) -> None:
        """
        A req session opened; a minion's replaces any older one of its id.

        A transient session (C{salttwist-call} beside the minion daemon) is
        kept apart: it replaces nothing, so the daemon stays connected and
        subscribed, and it cannot subscribe itself. At most
        L{MAX_TRANSIENT_SESSIONS} are kept per minion; the oldest goes.
        """
        if proto.role == "transient" and proto.minionId is not None:
            transients = self.transients.setdefault(proto.minionId, {})
            transients[proto] = None
            while len(transients) > MAX_TRANSIENT_SESSIONS:
                oldest = next(iter(transients))
                del transients[oldest]
                oldest.transport.loseConnection()
            return
        if proto.role != "minion" or proto.minionId is None:
            return
        accepted = self._accepted
        if accepted.ids is not None and proto.minionId not in accepted.ids:
            # Accepted since the last listing (auto_accept fires no
            # salt/key event): the next publication must target it.
            accepted.forget()
        old = self.sessions.get(proto.minionId)
        self.sessions[proto.minionId] = proto
        if old is not None and old is not proto:
            self.log.info(
                "minion {id} re-authenticated; closing its old session", id=proto.minionId
            )
            old.transport.loseConnection()
            # The old session's pub subscription goes with it: the minion
            # subscribes again with a token from its new session.
            subscriber = self.subscribers.pop(proto.minionId, None)
            if subscriber is not None:
                subscriber.transport.loseConnection()

    def sessionEnded(self, proto: IMinionSession) -> None:
        """
        A req session closed: its pub subscription ends with it.
        """
        minionId = proto.minionId
        if proto.role == "transient" and minionId is not None:
            transients = self.transients.get(minionId, {})
            transients.pop(proto, None)
            if not transients:
                self.transients.pop(minionId, None)
            return
        self._replyHolders.pop(proto, None)
        if minionId is None or self.sessions.get(minionId) is not proto:
            return
        del self.sessions[minionId]
        subscriber = self.subscribers.pop(minionId, None)
        if subscriber is not None:
            subscriber.transport.loseConnection()

    def holdingReplies(self, proto: IMinionSession) -> None:
        """
        C{proto} holds replies back (the acknowledgements of returns, see
        L{salttwist.master.reqserver.HELD_REPLIES}): they go with the next
        publication (L{deliver}), or L{ACK_DELAY} seconds from now,
        whichever comes first.
        """
        holders = self._replyHolders
        # Oldest first: a holder that sent its replies meanwhile (before a
        # reply sent at once) goes to the end again.
        holders.pop(proto, None)
        holders[proto] = self.clock.seconds()
        if self._replyTimer is None:
            self._replyTimer = self.clock.callLater(ACK_DELAY, self._sendDueReplies)

    def _sendDueReplies(self) -> None:
        """
        Send the replies held for L{ACK_DELAY} seconds; come back when the
        oldest of the others is due. The holders are kept oldest first, so
        this looks at the due ones and one more, not at every holder.
        """
        self._replyTimer = None
        now = self.clock.seconds()
        holders = self._replyHolders
        due = []
        for proto, since in holders.items():
            if since + ACK_DELAY > now + 1e-6:
                break
            due.append(proto)
        for proto in due:
            if holders.pop(proto, None) is not None:
                proto.sendHeld()
        oldest = next(iter(holders.values()), None)
        if oldest is not None:
            self._replyTimer = self.clock.callLater(oldest + ACK_DELAY - now, self._sendDueReplies)

    def sendHeldReplies(self) -> None:
        """
        Send every reply held back now (after a publication: each minion
        then reads them when it wakes up for the publication).
        """
        holders, self._replyHolders = self._replyHolders, {}
        for proto in holders:
            proto.sendHeld()

    def subscribe(self, proto: ISubscriber, minionId: object, mac: object) -> str | None:
        """
        A minion asks for publications.

        @return: its id if the MAC proves it holds the current session of
            that id, else L{None}.
        """
        try:
            validId = validateMinionId(minionId)
        except InvalidMinionId as e:
            self.log.warn("pub subscription from {peer} refused: {e}", peer=proto.peerName, e=e)
            return None
        session = self.sessions.get(validId)
        key = session.sessionKey if session is not None else None
        if key is None:
            self.log.warn("pub subscription for {id} refused: no session", id=validId)
            return None
        token = crypt.deriveKey(key, wire.PUB_TOKEN_CONTEXT)
        expected = crypt.hmacSha256(token, wire.pubSubscribeMessage(proto.challenge, validId))
        if not crypt.hmacEqual(expected, mac):  # type: ignore[arg-type]
            self.log.warn("pub subscription for {id} refused: bad proof", id=validId)
            return None
        proto.session = session
        self._addSubscriber(validId, proto, token)
        return validId

    def sessionSubscribe(self, proto: IMinionSession, load: dict[str, Any]) -> dict[str, Any]:
        """
        C{_subscribe}: a minion with C{single_connection} asks for its
        publications on this req session's connection instead of a pub
        connection. The session itself is the proof; the publications'
        MAC key derives from the session's pub token and this connection's
        challenge, as on a pub connection. With C{"acks": True}, the
        acknowledgements of its returns come with its publications.

        @return: the confirmation of L{subscribedFrame}.
        @raise ValueError: if this is not the minion's current session.
        """
        minionId = proto.minionId
        key = proto.sessionKey
        if minionId is None or key is None or self.sessions.get(minionId) is not proto:
            raise ValueError("only a minion's current session can subscribe")
        proto.carriesAcknowledgements = load.get("acks") is True
        self._addSubscriber(minionId, proto, crypt.deriveKey(key, wire.PUB_TOKEN_CONTEXT))
        return self.subscribedFrame(proto)

    def sessionUnsubscribe(self, proto: IMinionSession, load: dict[str, Any]) -> dict[str, Any]:
        """
        C{_unsubscribe}: a stopping minion with C{single_connection} takes
        no more jobs (as closing its pub connection says otherwise); the
        replies held for its next publication are sent now.
        """
        if self.subscribers.get(proto.minionId) is proto:  # type: ignore[arg-type]
            self.unsubscribe(proto)
        return {"ret": True}

    def _addSubscriber(self, minionId: str, proto: ISubscriber, token: bytes) -> None:
        """
        Make C{proto} the connection C{minionId}'s publications go to, with
        their MAC keyed from the session's pub C{token} and C{proto}'s
        challenge; close a pub connection it replaces, and fire Salt's
        C{salt/minion/<id>/start}.
        """
        proto.publicationMac = crypt.HmacSha256(
            crypt.deriveKey(token, wire.publicationMacContext(proto.challenge, minionId))
        )
        old = self.subscribers.get(minionId)
        self.subscribers[minionId] = proto
        if old is not None and old is not proto and old is not self.sessions.get(minionId):
            old.transport.loseConnection()
        self.bus.fire(
            f"salt/minion/{minionId}/start",
            {
                "id": minionId,
                "cmd": "_minion_event",
                "data": f"Minion {minionId} started at {time.ctime()}",
            },
        )

    def subscribedFrame(self, proto: ISubscriber) -> dict[str, Any]:
        """
        The confirmation of a subscription: the master's clock now, MACed
        with the minion's pub token, so the minion refuses any publication
        stamped earlier (a recorded one replayed after it restarted).
        """
        assert proto.minionId is not None
        session = self.sessions[proto.minionId]
        token = crypt.deriveKey(session.sessionKey, wire.PUB_TOKEN_CONTEXT)  # type: ignore[arg-type]
        now = float(self.clock.seconds())
        mac = crypt.hmacSha256(
            token, wire.pubSubscribedMessage(proto.challenge, proto.minionId, now)
        )
        return {"ret": "subscribed", "now": now, "mac": mac}

    def unsubscribe(self, proto: ISubscriber) -> None:
        """
        A pub connection closed (or a minion with C{single_connection}
        unsubscribed). The replies its session holds back for a next
        publication are sent now: none will come on this connection (a
        stopping minion leaves the pub channel while it waits for the
        acknowledgements of its last returns).
        """
        if proto.minionId is not None and self.subscribers.get(proto.minionId) is proto:
            del self.subscribers[proto.minionId]
            self._droppingFor.pop(proto.minionId, None)
        session = proto.session
        if session is not None and self._replyHolders.pop(session, None) is not None:
            session.sendHeld()

    def cutOff(self, minionId: str) -> bool:
        """
        Close the session, transient sessions and pub subscription of
        C{minionId}.

        @return: whether it had any.
        """
        session = self.sessions.pop(minionId, None)
        subscriber = self.subscribers.pop(minionId, None)
        transients = list(self.transients.pop(minionId, {}))
        for proto in (session, subscriber, *transients):
            if proto is not None:
                proto.transport.loseConnection()
        if session is not None or subscriber is not None or transients:
            self.log.warn("minion {id} is no longer accepted: cut off", id=minionId)
            return True
        return False

    def connectedIds(self) -> set[str]:
        return set(self.sessions) | set(self.subscribers) | set(self.transients)

    def connectionsOf(self, minionId: str) -> tuple[Any, ...]:
        return (
            self.sessions.get(minionId),
            self.subscribers.get(minionId),
            frozenset(self.transients.get(minionId, ())),
        )

    def deliver(self, prefix: bytes, acknowledgingPrefix: Any, macMessage: bytes) -> None:
        """
        Write one publication to every subscriber: the frame's C{prefix}
        and the MAC of C{macMessage} under that subscription's key.

        Each minion's acknowledgements held back go with its publication:
        in the frame itself if it asked for that and they all fit (a frame
        from C{acknowledgingPrefix}, see
        L{salttwist.wire.acknowledgingFramePrefixes}), else on its req
        connection right after. Either way it reads them in the wake-up the
        publication causes.

        A subscriber whose connection holds more than L{pubWriteBuffer}
        bytes it has not read gets nothing: the publication is dropped for
        it and counted (L{publicationsDropped}), and logged when the drops
        begin and when they end; the acknowledgements held for it go on its
        req connection.
        """
        holders = self._replyHolders
        sessions = self.sessions
        limit = self.pubWriteBuffer
        for minionId, subscriber in list(self.subscribers.items()):
            mac = subscriber.publicationMac
            session = sessions.get(minionId)
            holding = session is not None and holders.pop(session, None) is not None
            if writeBacklog(subscriber.transport) > limit:
                self._publicationDropped(minionId, subscriber)
                if holding:
                    session.sendHeld()  # type: ignore[union-attr]
                continue
            if self._droppingFor:
                self._publicationsResumed(minionId)
            rids = (
                session.takeHeldAcknowledgements()  # type: ignore[union-attr]
                if holding and subscriber.carriesAcknowledgements and subscriber.session is session
                else None
            )
            if rids:
                subscriber.sendString(
                    acknowledgingPrefix(rids)
                    + mac.mac(macMessage + wire.publicationAcksMessage(rids))
                )
            else:
                subscriber.sendString(prefix + mac.mac(macMessage))
            if holding:
                session.sendHeld()  # type: ignore[union-attr]
        self.sendHeldReplies()

    def _publicationDropped(self, minionId: str, subscriber: ISubscriber) -> None:
        """
        A publication was not written to C{minionId}, whose connection holds
        too much it has not read: count it, and log the first of a run.
        """
        self.publicationsDropped += 1
        dropped = self._droppingFor.get(minionId, 0)
        self._droppingFor[minionId] = dropped + 1
        if not dropped:
            self.log.warn(
                "minion {id} is not reading its publications ({backlog} bytes unread, more "
                "than pub_write_buffer {limit}): publications to it are dropped until it "
                "catches up",
                id=minionId,
                backlog=writeBacklog(subscriber.transport),
                limit=self.pubWriteBuffer,
            )

    def _publicationsResumed(self, minionId: str) -> None:
        """
        C{minionId} caught up: log how many publications it missed.
        """
        dropped = self._droppingFor.pop(minionId, 0)
        if dropped:
            self.log.warn(
                "minion {id} caught up: {n} publications to it were dropped", id=minionId, n=dropped
            )

    def closeAll(self) -> None:
        """
        Close every session, transient session and subscription (the
        master stops).
        """
        transients = [proto for each in self.transients.values() for proto in each]
        for proto in [*self.subscribers.values(), *self.sessions.values(), *transients]:
            proto.transport.loseConnection()
