# -*- test-case-name: tests.test_reqclient -*-
"""
The client side of the req channel, shared by the minion and the local client.

The master speaks first with C{{"cmd": "hello", "challenge": bytes}}. The
client then sends one clear-text request (C{_auth} or C{_client_auth}) and
reads one clear-text reply; after that, if the reply opened a session, every
frame is sealed by a L{SessionCipher}. Session requests carry a C{rid}; the
reply to each carries the same C{rid}, and frames without one are pushes from
the master.

A minion that subscribed on its session (C{_subscribe}, its
C{single_connection} option) also receives its publications here: the
master's clear C{{"pub": ...}} and C{{"rotate": ...}} frames, each with its
own MAC or sealing, which go to L{ReqClientProtocol.onPublication} as they
would come on a pub connection.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from twisted.internet.defer import Deferred
from twisted.internet.error import ConnectionLost
from twisted.internet.protocol import Factory

from salttwist.transport.errors import RequestError
from salttwist.transport.framing import FrameProtocol, quietFactory
from salttwist.transport.session import SessionCipher, SessionError, sessionBlob

__all__ = ["PROTOCOL_VERSION", "ReqClientProtocol", "RequestError", "reqClientFactory"]

PROTOCOL_VERSION = 1


class ReqClientProtocol(FrameProtocol):
    """
    One req-channel connection to the master.

    @ivar hello: fires with the master's challenge.
    @ivar challenge: that challenge, once it came.
    @ivar lost: fires when the connection ends.
    @ivar onPush: called with each unsolicited session payload.
    @ivar onPublication: called with each publication frame, once the
        minion subscribed on this connection; until then such a frame is a
        protocol violation.
    """

    challenge: bytes | None = None

    def __init__(self, maxFrame: int = 104857600) -> None:
        self._maxFrame = maxFrame
        self.hello: Deferred[bytes] = Deferred()
        self.lost: Deferred[None] = Deferred()
        self.onPush: Callable[[dict[str, Any]], None] | None = None
        self.onPublication: Callable[[dict[str, Any]], None] | None = None
        self._clearWaiter: Deferred[dict[str, Any]] | None = None
        self._session: SessionCipher | None = None
        self._nextRid = 1
        self._waiting: dict[int, Deferred[dict[str, Any]]] = {}

    def stringReceived(self, data: bytes) -> None:
        """
        A session frame in its usual encoding (every reply the master
        sends) is opened without decoding its map first (L{sessionBlob}):
        a file chunk's ciphertext is not copied out of the frame before it
        is decrypted. Anything else is decoded and checked as every frame
        is.
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
                self._sessionPayload(payload)
                return
        super().stringReceived(data)

    def frameReceived(self, message: dict[str, Any]) -> None:
        if self._session is not None:
            onPublication = self.onPublication
            if onPublication is not None and "enc" not in message:
                onPublication(message)
            else:
                self._sessionFrame(message)
        elif not self.hello.called:
            challenge = message.get("challenge")
            if message.get("cmd") != "hello" or not isinstance(challenge, bytes):
                self.protocolViolation("the master did not greet with a challenge")
                return
            self.challenge = challenge
            self.hello.callback(challenge)
        elif self._clearWaiter is not None:
            waiter, self._clearWaiter = self._clearWaiter, None
            waiter.callback(message)
        else:
            self.protocolViolation("unexpected clear-text frame from the master")

    def sendClear(self, message: dict[str, Any]) -> Deferred[dict[str, Any]]:
        """
        Send one clear-text request.

        @return: a L{Deferred} firing with the master's clear-text reply.
        """
        self._clearWaiter = Deferred()
        self.sendFrame(message)
        return self._clearWaiter

    def startSession(self, key: bytes) -> None:
        """
        Seal every frame from now on with C{key}; accept frames up to the
        post-authentication limit.
        """
        self._session = SessionCipher(key, isServer=False)
        self.setMaxFrame(self._maxFrame)

    def request(self, payload: dict[str, Any]) -> Deferred[dict[str, Any]]:
        """
        Send a session request.

        @return: a L{Deferred} firing with the reply payload, or failing with
            L{RequestError} if the master answered C{error}.
        @raise salttwist.serial.SerialError: if C{payload} cannot be
            serialised (nothing is sent).
        """
        if self._session is None:
            raise RuntimeError("no session: authenticate first")
        rid = self._nextRid
        self._nextRid += 1
        head, blob = self._session.sealFrameParts(dict(payload, rid=rid))
        d: Deferred[dict[str, Any]] = Deferred()
        self._waiting[rid] = d
        self.sendSealed(head, blob)
        return d

    def acknowledged(self, rids: list[int]) -> None:
        """
        The master acknowledged the requests C{rids} of this session on the
        pub channel (the returns of jobs; see
        L{salttwist.master.publisher}): each fires as if answered
        C{{"ret": True}}. Ids not waiting (answered already, or from before
        a reconnect) are ignored.
        """
        waiting = self._waiting
        for rid in rids:
            waiter = waiting.pop(rid, None)
            if waiter is not None:
                waiter.callback({"ret": True, "rid": rid})

    def _sessionFrame(self, message: dict[str, Any]) -> None:
        assert self._session is not None
        try:
            payload = self._session.open(message)
        except SessionError as e:
            self.protocolViolation(str(e))
            return
        self._sessionPayload(payload)

    def _sessionPayload(self, payload: dict[str, Any]) -> None:
        rid = payload.get("rid")
        if rid is None:
            if self.onPush is not None:
                self.onPush(payload)
            return
        waiter = self._waiting.pop(rid, None)
        if waiter is None:
            self.protocolViolation(f"reply to unknown request {rid!r}")
        elif "error" in payload:
            waiter.errback(RequestError(str(payload["error"])))
        else:
            waiter.callback(payload)

    def connectionLost(self, reason: object = None) -> None:
        waiters = list(self._waiting.values())
        if self._clearWaiter is not None:
            waiters.append(self._clearWaiter)
        if not self.hello.called:
            waiters.append(self.hello)  # type: ignore[arg-type]
        self._waiting.clear()
        self._clearWaiter = None
        for waiter in waiters:
            waiter.errback(ConnectionLost("connection to the master lost"))
        self.lost.callback(None)


def reqClientFactory(maxFrame: int = 104857600) -> Factory:
    """
    @return: a factory of L{ReqClientProtocol}s.
    """
    return quietFactory(lambda: ReqClientProtocol(maxFrame))
