# -*- test-case-name: tests.test_minion -*-
"""
The minion's side of the pub channel.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from twisted.internet.defer import Deferred
from twisted.internet.error import ConnectionLost

from salttwist.transport.framing import FrameProtocol


class PubClientProtocol(FrameProtocol):
    """
    Greeted with a challenge, subscribes once, then receives publications.

    @ivar hello: fires with the master's challenge.
    @ivar subscribed: fires with the master's answer (C{"subscribed"} or not).
    @ivar lost: fires when the connection ends.
    @ivar onPublication: called with each publication frame.
    """

    def __init__(self, maxFrame: int) -> None:
        self._maxFrame = maxFrame
        self.hello: Deferred[bytes] = Deferred()
        self.subscribed: Deferred[str] = Deferred()
        self.lost: Deferred[None] = Deferred()
        self.onPublication: Callable[[dict[str, Any]], None] | None = None
        #: The master's subscription answer, with its clock and MAC.
        self.confirmation: dict[str, Any] = {}
        self._subscribing = False

    def frameReceived(self, message: dict[str, Any]) -> None:
        if not self.hello.called:
            challenge = message.get("challenge")
            if message.get("cmd") != "hello" or not isinstance(challenge, bytes):
                self.protocolViolation("the master did not greet with a challenge")
                return
            self.hello.callback(challenge)
        elif not self.subscribed.called:
            ret = message.get("ret")
            if ret == "subscribed":
                self.setMaxFrame(self._maxFrame)
            self.confirmation = message
            self.subscribed.callback(ret)
        elif self.onPublication is not None:
            self.onPublication(message)

    def subscribe(self, minionId: str, mac: bytes, acknowledgements: bool = True) -> Deferred[str]:
        """
        Ask for publications, proving the session with C{mac}.

        @param acknowledgements: ask for the acknowledgements of this
            minion's returns to come with its publications (see
            L{salttwist.master.publisher}), not on the req channel.
        """
        self._subscribing = True
        frame: dict[str, Any] = {"cmd": "subscribe", "id": minionId, "mac": mac}
        if acknowledgements:
            frame["acks"] = True
        self.sendFrame(frame)
        return self.subscribed

    def connectionLost(self, reason: object = None) -> None:
        # Fail C{subscribed} only if a subscription was asked for: nobody
        # waits for it before that, and an unwaited failure is logged as an
        # unhandled error for a connection lost while connecting.
        waiters = (self.hello, self.subscribed) if self._subscribing else (self.hello,)
        for waiter in waiters:
            if not waiter.called:
                waiter.errback(ConnectionLost("pub connection to the master lost"))
        self.lost.callback(None)
