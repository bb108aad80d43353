# -*- test-case-name: tests.test_events -*-
"""
The subscriber side of the event bus, used by the CLI and other local tools.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from twisted.internet.defer import Deferred
from twisted.internet.endpoints import UNIXClientEndpoint

from salttwist.transport.framing import FrameProtocol, quietFactory


class EventListenerProtocol(FrameProtocol):
    """
    Subscribes to tag prefixes and globs and hands each event to
    C{onEvent(tag, data)}; the master sends only the events they match.

    @ivar subscribed: fires once the bus confirmed the subscription, so no
        event fired after that can be missed.
    @ivar lost: fires when the connection ends.
    """

    def __init__(
        self,
        prefixes: list[str],
        onEvent: Callable[[str, dict[str, Any]], None],
        maxFrame: int,
        globs: list[str] | None = None,
    ) -> None:
        self._prefixes = prefixes
        self._globs = globs or []
        self._onEvent = onEvent
        self.MAX_LENGTH = maxFrame
        self.subscribed: Deferred[None] = Deferred()
        self.lost: Deferred[None] = Deferred()

    def connectionMade(self) -> None:
        super().connectionMade()
        subscription: dict[str, Any] = {"subscribe": self._prefixes}
        if self._globs:
            subscription["globs"] = self._globs
        self.sendFrame(subscription)

    def frameReceived(self, message: dict[str, Any]) -> None:
        if message.get("subscribed") is True and not self.subscribed.called:
            self.subscribed.callback(None)
            return
        tag, data = message.get("tag"), message.get("data")
        if isinstance(tag, str) and isinstance(data, dict):
            self._onEvent(tag, data)

    def connectionLost(self, reason: object = None) -> None:
        if not self.subscribed.called:
            self.subscribed.errback(ConnectionError("the event bus closed the connection"))
        self.lost.callback(None)


async def listenEvents(
    reactor: Any,
    socketPath: str,
    prefixes: list[str],
    onEvent: Callable[[str, dict[str, Any]], None],
    timeout: float = 2.0,
    maxFrame: int = 104857600,
    globs: list[str] | None = None,
) -> EventListenerProtocol:
    """
    Connect to the bus at C{socketPath} and subscribe to the tags starting
    with one of C{prefixes} or matching one of C{globs} (every tag when both
    are empty).

    @param timeout: seconds allowed for connecting and for the confirmation
        (a hung master must not hang its clients).
    @return: the connected protocol, once the subscription is confirmed.
    """
    endpoint = UNIXClientEndpoint(reactor, socketPath, timeout=timeout)
    factory = quietFactory(lambda: EventListenerProtocol(prefixes, onEvent, maxFrame, globs))
    proto = await endpoint.connect(factory)
    try:
        await proto.subscribed.addTimeout(timeout, reactor)
    except Exception:
        proto.transport.abortConnection()
        raise
    return proto
