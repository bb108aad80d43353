# -*- test-case-name: tests.test_master_core -*-
"""
The req channel's server side.

Before a session exists only the clear-text allow-list answers:
L{CLEAR_FUNCS}. After C{_auth} a minion session may call only
L{MINION_FUNCS} (a transient one, C{_auth} with C{"transient": True}, only
L{TRANSIENT_FUNCS}); after C{_client_auth} the local client only
L{CLIENT_FUNCS}. Every name maps to a method of L{IReqChannel} (each the
method of one of the master's rooms); nothing else is reachable from the
wire.
"""

from __future__ import annotations

import os
from typing import Any

from twisted.internet.defer import Deferred, maybeDeferred
from twisted.python.failure import Failure
from zope.interface import implementer

from salttwist import wire
from salttwist.master.interfaces import IMinionSession, IReqChannel, ISubscriber
from salttwist.symmetric import HmacSha256
from salttwist.transport.backlog import writeBacklog
from salttwist.transport.framing import FrameProtocol, QuietFactory, writeNow
from salttwist.transport.reqclient import PROTOCOL_VERSION
from salttwist.transport.session import SessionCipher, SessionError, sessionBlob
from salttwist.transport.tcp import keepAlive

#: Clear-text commands -> L{IReqChannel} method. Each returns a Deferred of
#: C{(reply, sessionKey or None, role, minionId)}.
CLEAR_FUNCS = {"_auth": "clearAuth", "_client_auth": "clearClientAuth"}
#: Commands an authenticated minion session may send.
MINION_FUNCS = {
    "_return": "minionReturn",
    "_grains": "minionGrains",
    "_minion_event": "minionEvent",
    "_ping": "minionPing",
    "_subscribe": "sessionSubscribe",
    "_unsubscribe": "sessionUnsubscribe",
}
#: The file server's and pillar's commands (L{salttwist.master.fileserving},
#: L{salttwist.master.pillarserving}): a minion's own session and its
#: transient ones (C{salttwist-call}) may send them, each answered for the
#: session's minion id only.
FILE_AND_PILLAR_FUNCS = {
    "_file_envs": "fileEnvs",
    "_file_list": "fileList",
    "_dir_list": "dirList",
    "_file_hash": "fileHash",
    "_file_hashes": "fileHashes",
    "_file_hash_many": "fileHashMany",
    "_serve_files": "serveFiles",
    "_serve_file": "serveFile",
    "_file_recv": "fileRecv",
    "_pillar": "minionPillar",
    "_master_opts": "masterOpts",
}
MINION_FUNCS.update(FILE_AND_PILLAR_FUNCS)
#: Commands a minion's transient session (C{salttwist-call}) may send: a
#: return with jid C{req}, events, and the file server's and pillar's.
TRANSIENT_FUNCS = {
    "_return": "minionReturn",
    "_minion_event": "minionEvent",
    **FILE_AND_PILLAR_FUNCS,
}
#: Commands an authenticated local-client session may send.
CLIENT_FUNCS = {"publish": "clientPublish", "runner": "clientRunner"}
#: Commands of a minion session whose replies are held back briefly and
#: sent together (L{ReqServerProtocol.holdPayload}): the acknowledgement of
#: a job's return only tells the minion it need not keep the return for a
#: resend, nobody waits for it, and one sent alone wakes the minion up once
#: more per job for nothing else.
HELD_REPLIES = frozenset({"_return"})

ROLE_FUNCS = {"minion": MINION_FUNCS, "transient": TRANSIENT_FUNCS, "client": CLIENT_FUNCS}
#: The most replies a session holds back (L{ReqServerProtocol.holdPayload}):
#: past that they are sent at once, whatever the publications do.
MAX_HELD_REPLIES = 1024
#: The most bytes of replies a connection may hold that its peer has not
#: read, by default (C{req_write_buffer}): a peer that sends requests and
#: reads no reply is cut off there rather than grow the master.
DEFAULT_REQ_WRITE_BUFFER = 16 * 1024 * 1024


@implementer(IMinionSession, ISubscriber)
class ReqServerProtocol(FrameProtocol):
    """
    One req-channel connection: clear-text authentication, then a session.

    @ivar role: C{"minion"}, C{"transient"} (a minion's short-lived
        session, see L{salttwist.master.sessions.Sessions.sessionStarted})
        or C{"client"} once
        authenticated.
    @ivar minionId: the authenticated minion's id (minion sessions).
    @ivar clientUser: the local client's user (client sessions): the one
        whose key it proved, see
        L{salttwist.master.admission.Admission.clearClientAuth}.
    @ivar clientAcl: whether that key was a publisher_acl user's, whose
        requests the ACL checks, rather than the root key.
    """

    role: str | None = None
    minionId: str | None = None
    clientUser: str | None = None
    clientAcl: bool = False
    #: Set when the minion subscribed on this connection (C{_subscribe},
    #: a minion with C{single_connection}): the master then writes its
    #: publications here, as on a L{PubServerProtocol}.
    publicationMac: HmacSha256 | None = None
    carriesAcknowledgements = False
    #: C{req_write_buffer}, read when the connection is made.
    _writeLimit = DEFAULT_REQ_WRITE_BUFFER

    def __init__(self, master: IReqChannel) -> None:
        self._master = master
        self.challenge = os.urandom(32)
        self._session: SessionCipher | None = None
        self._authenticating = False
        #: Reply payloads held back (L{holdPayload}), oldest first; sealed
        #: when they are sent, in order.
        self._held: list[dict[str, Any]] = []

    def connectionMade(self) -> None:
        super().connectionMade()
        # A peer that vanished without closing (a half-open connection) is
        # found by TCP keepalive probes after 300 s of silence.
        keepAlive(self)
        self.startDeadline(self._master.clock, self._master.preauthTimeout)
        self._writeLimit = self._master.config.get("req_write_buffer", DEFAULT_REQ_WRITE_BUFFER)
        self.sendFrame({"cmd": "hello", "challenge": self.challenge, "version": PROTOCOL_VERSION})

    def stringReceived(self, data: bytes) -> None:
        """
        A session frame in its usual encoding (every one a minion sends) is
        opened without decoding its map first (L{sessionBlob}); anything
        else is decoded and checked as every frame is.
        """
        session = self._session
        if session is not None:
            blob = sessionBlob(data)
            if blob is not None:
                if getattr(self.transport, "disconnecting", False):
                    return
                try:
                    payload = session.openBlob(blob)
                except SessionError as e:
                    self.protocolViolation(str(e))
                    return
                self._sessionRequest(payload)
                return
        super().stringReceived(data)

    def frameReceived(self, message: dict[str, Any]) -> None:
        if self._session is None:
            self._clearFrame(message)
        else:
            self._sessionFrame(message)

    def _clearFrame(self, message: dict[str, Any]) -> None:
        if self._authenticating:
            self.protocolViolation("frame sent while authentication is in progress")
            return
        cmd = message.get("cmd")
        method = CLEAR_FUNCS.get(cmd) if isinstance(cmd, str) else None
        if method is None:
            self.sendFrame({"ret": "error", "error": f"{cmd!r} is not available without a session"})
            self.transport.loseConnection()
            return
        self._authenticating = True
        d = maybeDeferred(getattr(self._master, method), self, message)
        self._timed(d, cmd)
        d.addCallbacks(self._authDone, self._authFailed)

    def _authDone(
        self, result: tuple[dict[str, Any], bytes | None, str | None, str | None]
    ) -> None:
        reply, sessionKey, role, minionId = result
        self._authenticating = False
        if not self.transport.connected:
            return
        self.sendFrame(reply)
        if sessionKey is None:
            self.transport.loseConnection()
            return
        self._session = SessionCipher(sessionKey, isServer=True)
        self.cancelDeadline()
        self.role, self.minionId = role, minionId
        self.setMaxFrame(self._master.maxFrameBytes)
        self._master.sessionStarted(self)

    def _authFailed(self, failure: Failure) -> None:
        self.log.failure("authentication of {peer} failed", failure, peer=self.peerName)
        self._authenticating = False
        if self.transport.connected:
            self.sendFrame({"ret": "error", "error": "internal error during authentication"})
            self.transport.loseConnection()

    def _sessionFrame(self, message: dict[str, Any]) -> None:
        assert self._session is not None and self.role is not None
        try:
            payload = self._session.open(message)
        except SessionError as e:
            self.protocolViolation(str(e))
            return
        self._sessionRequest(payload)

    def _sessionRequest(self, payload: dict[str, Any]) -> None:
        assert self.role is not None
        rid = payload.get("rid")
        cmd = payload.get("cmd")
        method = ROLE_FUNCS[self.role].get(cmd) if isinstance(cmd, str) else None
        if method is None:
            self.sendPayload(
                {"rid": rid, "error": f"{cmd!r} is not available to a {self.role} session"}
            )
            return
        handler = getattr(self._master, method)
        # Most requests (a job's return above all) are answered at once:
        # reply without building a Deferred chain for them.
        try:
            result = handler(self, payload)
        except Exception:
            # A refusal or an error is answered at once, never held back.
            self._timed(None, cmd)
            self.sendPayload(dict(self._requestFailed(Failure(), cmd), rid=rid))
            return
        if isinstance(result, Deferred):
            self._timed(result, cmd)
            if cmd in HELD_REPLIES and self.role == "minion":
                # A return acknowledged once stored: held back as any.
                result.addCallbacks(
                    self._answer, self._requestFailed, (rid, cmd), None, (cmd,)
                ).addCallback(self._sendFailure, rid)
                return
            result.addErrback(self._requestFailed, cmd)
            result.addCallback(lambda answer: self.sendPayload(dict(answer, rid=rid)))
            return
        if self._master.config.get("master_stats"):
            self._timed(None, cmd)
        self._answer(result, rid, cmd)

    def _answer(self, result: dict[str, Any], rid: Any, cmd: str) -> None:
        if cmd in HELD_REPLIES and self.role == "minion" and "jid" not in result:
            self.holdPayload(dict(result, rid=rid))
        else:
            self.sendPayload(dict(result, rid=rid))

    def _sendFailure(self, failed: dict[str, Any] | None, rid: Any) -> None:
        # What _requestFailed made of a failure; None once answered.
        if failed is not None:
            self.sendPayload(dict(failed, rid=rid))

    def _timed(self, d: Deferred[Any] | None, cmd: str) -> None:
        """
        Record in the master's C{requestStats} how long C{cmd} took to
        answer, success or failure, when C{master_stats} is on (nothing
        reports the figures otherwise: no work on every request for them):
        until C{d} fires, or no time at all when it was answered at once
        (C{d} is L{None}).
        """
        if not self._master.config.get("master_stats"):
            return
        if d is None:
            self._master.requestStats.record(cmd, 0.0)
            return
        clock = self._master.clock
        start = clock.seconds()

        def record(result: object) -> object:
            self._master.requestStats.record(cmd, clock.seconds() - start)
            return result

        d.addBoth(record)

    def _requestFailed(self, failure: Failure, cmd: str) -> dict[str, Any]:
        if failure.check(ValueError):
            return {"error": str(failure.value)}
        self.log.failure("{cmd} from {peer} failed", failure, cmd=cmd, peer=self.peerName)
        return {"error": f"internal error in {cmd}"}

    def sendPayload(self, payload: dict[str, Any]) -> None:
        """
        Seal and send one session payload (a reply, or a push when it has no
        C{rid}), after the payloads held back (sealed in the order they are
        sent, as the session's counters require).

        A peer that has not read more than C{req_write_buffer} bytes of
        what was sent to it is cut off instead (L{_overWriteLimit}).
        """
        if self._session is not None and self.transport.connected:
            if self._overWriteLimit():
                return
            if self._held:
                self._held.append(payload)
                self.sendHeld()
            else:
                # One msgpack pass, and a big payload's ciphertext (a file's
                # chunk) is written without being copied into a frame.
                self.sendSealed(*self._session.sealFrameParts(payload))

    def holdPayload(self, payload: dict[str, Any]) -> None:
        """
        Send one session payload later, with the others held: when the
        master flushes the held replies (with or after its next publication,
        or L{salttwist.master.sessions.ACK_DELAY} seconds at the latest), or
        before any payload sent at once.
        """
        if self._session is not None and self.transport.connected:
            held = self._held
            held.append(payload)
            if len(held) == 1:
                self._master.holdingReplies(self)
            elif len(held) >= MAX_HELD_REPLIES:
                self.sendHeld()

    def sendHeld(self) -> None:
        """
        Seal and send the payloads held back, in one write.
        """
        held, self._held = self._held, []
        if held and self._session is not None and self.transport.connected:
            if self._overWriteLimit():
                return
            sealFrame = self._session.sealFrame
            writeNow(
                self.transport,
                sealFrame(held[0]) if len(held) == 1 else b"".join(map(sealFrame, held)),
            )

    def _overWriteLimit(self) -> bool:
        """
        Whether the peer left more than C{req_write_buffer} bytes unread on
        this connection (it sends requests and reads no reply): then it is
        cut off, with a log line saying why, and nothing more is written.
        A reply is written whatever its size while less is unread.
        """
        backlog = writeBacklog(self.transport)
        if backlog <= self._writeLimit:
            return False
        self.protocolViolation(
            f"not reading its replies: {backlog} bytes unread, more than "
            f"req_write_buffer {self._writeLimit}"
        )
        return True

    def takeHeldAcknowledgements(self) -> list[int]:
        """
        Take the replies held back for a publication to carry (see
        L{salttwist.wire.acknowledgingFramePrefixes}), if every one is a plain
        acknowledgement C{{"ret": True, "rid": n}}: they are then not sent
        on this connection.

        @return: their request ids, oldest first; empty (and nothing taken)
            if some held reply says more than that, or the frame could not
            carry their request ids (L{salttwist.wire.publicationAcks}: a
            minion picks its own, and one frame carries a bounded number).
        """
        held = self._held
        if any(len(payload) != 2 or payload.get("ret") is not True for payload in held):
            return []
        try:
            rids = wire.publicationAcks([payload.get("rid") for payload in held])
        except ValueError:
            return []
        self._held = []
        return rids

    @property
    def session(self) -> ReqServerProtocol:
        """
        The session a subscription on this connection proves: its own (as
        L{PubServerProtocol.session} is the req session it proved).
        """
        return self

    @property
    def sessionKey(self) -> bytes | None:
        """
        The key of this connection's session, if it has one.
        """
        return self._session.key if self._session is not None else None

    def connectionLost(self, reason: object = None) -> None:
        self.cancelDeadline()
        self._held = []
        if self.role is not None:
            self._master.sessionEnded(self)


class ReqServerFactory(QuietFactory):
    """
    Builds L{ReqServerProtocol}s bound to one L{IReqChannel}.
    """

    def __init__(self, master: IReqChannel) -> None:
        self.master = master

    def buildProtocol(self, addr: object) -> ReqServerProtocol:
        proto = ReqServerProtocol(self.master)
        proto.factory = self
        return proto
