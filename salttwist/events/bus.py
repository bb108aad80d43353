# -*- test-case-name: tests.test_events -*-
"""
The master's event bus.

L{LocalEventBus} is the in-process bus every part of the master fires into.
L{EventPublisherFactory} serves it on C{master_event_pub.ipc} to subscribers
in other processes (the CLI, salttwist-event), and L{EventPullFactory} takes
events from other local processes on C{master_event_pull.ipc}.

A subscriber that reads too slowly cannot grow the master's memory without
bound: while its socket's write buffer is full, events wait in a queue of at
most C{event_queue_max} events and C{ipc_write_buffer} bytes (kept as a
running total: constant time per event); past either they are counted, not
kept, and the
subscriber receives a C{salt/event/dropped} event saying how many it missed
exactly where they are missing: after the events queued before the gap and
before those after it. Nothing is dropped silently. An event's frame is
serialised once for all the subscribers of the socket.

Subscribers choose their tags by prefix or by glob, and the master sends
each of them only the events it chose: the filter runs in the master, so a
subscriber to C{salt/presence/*} costs nothing for the job returns it does
not want.
"""

from __future__ import annotations

import fnmatch
import re
import time
from collections import deque
from collections.abc import Callable, Iterable
from typing import Any

from twisted.internet.interfaces import IPushProducer
from twisted.logger import Logger
from zope.interface import implementer

from salttwist import serial
from salttwist.interfaces import IEventBus
from salttwist.transport.framing import FrameProtocol, QuietFactory

EventCallback = Callable[[str, dict[str, Any]], None]
DROPPED_TAG = "salt/event/dropped"
#: The most bytes of events queued for one slow subscriber by default
#: (C{ipc_write_buffer}): sixteen of the biggest events a minion may send.
DEFAULT_QUEUE_BYTES = 16 * 1024 * 1024


class StampClock:
    """
    The current UTC time as Salt's C{_stamp} (ISO 8601, microseconds, no
    zone: C{2026-11-22T05:00:00.123456}). The part up to the second is
    formatted once a second, not for every event (formatting it took more
    than anything else in stamping an event).
    """

    def __init__(self, now: Callable[[], float] = time.time) -> None:
        self._now = now
        self._second = -1
        self._prefix = ""

    def __call__(self) -> str:
        now = self._now()
        second = int(now)
        if second != self._second:
            self._prefix = time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(second))
            self._second = second
        micro = int((now - second) * 1e6)
        if micro > 999999:
            micro = 999999
        # %-formatting: an f-string's format spec and min() took twice as long.
        return "%s.%06d" % (self._prefix, micro)  # noqa: UP031


_STAMP_CLOCK = StampClock()


def stamp(data: dict[str, Any]) -> dict[str, Any]:
    """
    @return: a copy of C{data} with C{_stamp}, the current UTC time in ISO 8601.
    """
    stamped = dict(data)
    stamped["_stamp"] = _STAMP_CLOCK()
    return stamped


#: The most globs one subscription may hold, and the longest glob (the
#: longest tag the pull socket takes): every event is matched against every
#: glob of every subscriber, in the master.
MAX_GLOBS = 64
MAX_GLOB_LENGTH = 512


def tagMatches(tag: str, prefixes: tuple[str, ...]) -> bool:
    """
    @return: whether C{tag} starts with one of C{prefixes}; everything matches
        an empty tuple.
    """
    return not prefixes or tag.startswith(prefixes)


class TagFilter:
    """
    Which tags one subscriber wants: those starting with one of C{prefixes}
    or matching one of C{globs} (shell-style, case-sensitive, as Salt's
    C{fnmatch}; C{*} also matches C{/}). With neither, every tag.
    """

    def __init__(self, prefixes: Iterable[str] = (), globs: Iterable[str] = ()) -> None:
        self.prefixes = tuple(prefixes)
        self.globs = tuple(globs)
        self._patterns = tuple(re.compile(fnmatch.translate(glob)) for glob in self.globs)

    def __call__(self, tag: str) -> bool:
        """
        @return: whether C{tag} is wanted.
        """
        if not self._patterns:
            # tagMatches, inline: this runs for every subscription on every event.
            return not self.prefixes or tag.startswith(self.prefixes)
        return tag.startswith(self.prefixes) or any(p.match(tag) for p in self._patterns)


class _Subscription:
    def __init__(self, bus: LocalEventBus, wanted: TagFilter, callback: EventCallback):
        self._bus = bus
        self.wanted = wanted
        self.prefixes = wanted.prefixes
        self.callback = callback

    def stop(self) -> None:
        self._bus._subscriptions.discard(self)


@implementer(IEventBus)
class LocalEventBus:
    """
    An in-process publish/subscribe bus.
    """

    log = Logger()

    def __init__(self) -> None:
        self._subscriptions: set[_Subscription] = set()

    def fire(self, tag: str, data: dict[str, Any]) -> None:
        """
        Deliver C{(tag, data + _stamp)} to every matching subscriber. A
        subscriber that raises is logged and does not stop the others.
        """
        event = stamp(data)
        for sub in list(self._subscriptions):
            if sub.wanted(tag):
                try:
                    sub.callback(tag, event)
                except Exception:
                    self.log.failure("event subscriber failed on {tag}", tag=tag)

    def subscribe(
        self, prefixes: Iterable[str], callback: EventCallback, globs: Iterable[str] = ()
    ) -> _Subscription:
        """
        Call C{callback(tag, data)} for every event whose tag starts with one of
        C{prefixes} or matches one of C{globs} (see L{TagFilter}).
        """
        sub = _Subscription(self, TagFilter(prefixes, globs), callback)
        self._subscriptions.add(sub)
        return sub

    def subscriptionCount(self) -> int:
        """
        @return: how many subscriptions the bus has (in this process and for
            the subscribers on its socket).
        """
        return len(self._subscriptions)


@implementer(IPushProducer)
class EventSubscriberProtocol(FrameProtocol):
    """
    One subscriber on C{master_event_pub.ipc}: it sends
    C{{"subscribe": [prefix, ...]}}, optionally with C{"globs": [glob, ...]}
    (at most L{MAX_GLOBS}, each at most L{MAX_GLOB_LENGTH} characters), is
    answered C{{"subscribed": True}}, then receives C{{"tag": ..., "data":
    ...}} frames of the events whose tag starts with one of the prefixes or
    matches one of the globs (every event when both lists are empty).
    """

    # Events come in bursts: let the transport's buffer send a burst in one
    # system call rather than one per event.
    directWrites = False

    def __init__(
        self, bus: LocalEventBus, maxQueue: int, maxQueueBytes: int = DEFAULT_QUEUE_BYTES
    ) -> None:
        """
        @param maxQueue: the most events queued (C{event_queue_max}).
        @param maxQueueBytes: the most bytes of frames queued
            (C{ipc_write_buffer}); one event is queued whatever its size
            when the queue is empty.
        """
        self._bus = bus
        self._maxQueue = maxQueue
        self._maxQueueBytes = maxQueueBytes
        self._subscription: _Subscription | None = None
        self._paused = False
        self._queue: deque[bytes] = deque()
        #: The bytes of the frames in L{_queue}, kept as they come and go.
        self.queuedBytes = 0
        self.dropped = 0

    def connectionMade(self) -> None:
        super().connectionMade()
        self.transport.registerProducer(self, True)
        if isinstance(self.factory, EventPublisherFactory):
            self.factory.subscribers.add(self)

    def frameReceived(self, message: dict[str, Any]) -> None:
        prefixes = message.get("subscribe")
        globs = message.get("globs", [])
        if self._subscription is not None or not isinstance(prefixes, list):
            self.protocolViolation("expected one {'subscribe': [prefix, ...]} frame")
            return
        if not all(isinstance(p, str) for p in prefixes):
            self.protocolViolation("subscription prefixes must be strings")
            return
        if (
            not isinstance(globs, list)
            or len(globs) > MAX_GLOBS
            or not all(isinstance(g, str) and len(g) <= MAX_GLOB_LENGTH for g in globs)
        ):
            self.protocolViolation(
                f"subscription globs must be at most {MAX_GLOBS} strings of at most "
                f"{MAX_GLOB_LENGTH} characters"
            )
            return
        self._subscription = self._bus.subscribe(prefixes, self._deliver, globs)
        self.sendFrame({"subscribed": True})

    @property
    def queued(self) -> int:
        """
        The events waiting for this subscriber to catch up.
        """
        return len(self._queue)

    def _deliver(self, tag: str, data: dict[str, Any]) -> None:
        if isinstance(self.factory, EventPublisherFactory):
            frame = self.factory.frameFor(tag, data)
        else:
            frame = serial.dumps({"tag": tag, "data": data})
        if not self._paused:
            self.sendString(frame)
        elif len(self._queue) < self._maxQueue and (
            self.queuedBytes + len(frame) <= self._maxQueueBytes or not self._queue
        ):
            if self.dropped:
                # The gap is here, between what was queued before and this
                # event: the notice takes its place in the queue.
                notice = self._droppedNotice()
                self._queue.append(notice)
                self.queuedBytes += len(notice)
            self._queue.append(frame)
            self.queuedBytes += len(frame)
        else:
            self.dropped += 1

    def _droppedNotice(self) -> bytes:
        """
        The C{salt/event/dropped} frame for the events missed since the last
        one, logged once; the count starts again at zero.
        """
        self.log.warn(
            "event subscriber {peer} was too slow: {n} events dropped",
            peer=self.peerName,
            n=self.dropped,
        )
        notice = serial.dumps({"tag": DROPPED_TAG, "data": stamp({"dropped": self.dropped})})
        self.dropped = 0
        return notice

    def pauseProducing(self) -> None:
        """
        The socket's write buffer is full: queue events from now on.
        """
        self._paused = True

    def resumeProducing(self) -> None:
        """
        The subscriber caught up: flush the queue, then, once it is empty,
        report the events dropped after it filled. A notice stands where
        its gap is, so the subscriber knows which events it missed.
        """
        self._paused = False
        queue = self._queue
        while queue and not self._paused:
            frame = queue.popleft()
            self.queuedBytes -= len(frame)
            self.sendString(frame)
        if not self._queue and not self._paused and self.dropped:
            self.sendString(self._droppedNotice())

    def stopProducing(self) -> None:
        """
        The connection is going away.
        """
        self._queue.clear()
        self.queuedBytes = 0

    def connectionLost(self, reason: object = None) -> None:
        if self._subscription is not None:
            self._subscription.stop()
            self._subscription = None
        self._queue.clear()
        self.queuedBytes = 0
        if isinstance(self.factory, EventPublisherFactory):
            self.factory.subscribers.discard(self)


class EventPublisherFactory(QuietFactory):
    """
    Serves L{LocalEventBus} to subscribers on a UNIX socket.

    @ivar subscribers: the connected subscribers.
    """

    #: Frames up to this size are built once per event for all subscribers.
    SHARED_FRAME_MAX = 65536

    def __init__(
        self,
        bus: LocalEventBus,
        maxQueue: int = 10000,
        maxQueueBytes: int = DEFAULT_QUEUE_BYTES,
    ) -> None:
        """
        @param maxQueue: the most events queued for one slow subscriber
            (C{event_queue_max}).
        @param maxQueueBytes: the most bytes queued for one slow subscriber
            (C{ipc_write_buffer}).
        """
        self.bus = bus
        self.maxQueue = maxQueue
        self.maxQueueBytes = maxQueueBytes
        self.subscribers: set[EventSubscriberProtocol] = set()
        self._lastFrame: tuple[str, dict[str, Any], bytes] | None = None

    def frameFor(self, tag: str, data: dict[str, Any]) -> bytes:
        """
        The frame of one event, serialised once for all the subscribers the
        bus hands it to: the bus gives each of them the same stamped C{data}
        object, made anew for each event. Only small frames are kept (a big
        return is not held in memory after its event).
        """
        last = self._lastFrame
        if last is not None and last[0] == tag and last[1] is data:
            return last[2]
        frame = serial.dumps({"tag": tag, "data": data})
        self._lastFrame = (tag, data, frame) if len(frame) <= self.SHARED_FRAME_MAX else None
        return frame

    def stats(self) -> dict[str, int]:
        """
        @return: C{subscriptions} (on the bus: this socket's subscribers and
            the master's own), C{subscribers} (connected to the socket),
            C{queued} (events waiting for slow ones), C{queued_bytes} (their
            size) and C{dropped} (events slow ones missed and have not been
            told about yet).
        """
        return {
            "subscriptions": self.bus.subscriptionCount(),
            "subscribers": len(self.subscribers),
            "queued": sum(proto.queued for proto in self.subscribers),
            "queued_bytes": sum(proto.queuedBytes for proto in self.subscribers),
            "dropped": sum(proto.dropped for proto in self.subscribers),
        }

    def buildProtocol(self, addr: object) -> EventSubscriberProtocol:
        proto = EventSubscriberProtocol(self.bus, self.maxQueue, self.maxQueueBytes)
        proto.factory = self
        return proto


class EventPullProtocol(FrameProtocol):
    """
    A local publisher on C{master_event_pull.ipc}: each frame
    C{{"tag": str, "data": map}} is fired on the bus.
    """

    def __init__(self, bus: LocalEventBus, maxFrame: int) -> None:
        self._bus = bus
        self.MAX_LENGTH = maxFrame

    def frameReceived(self, message: dict[str, Any]) -> None:
        tag, data = message.get("tag"), message.get("data")
        if not isinstance(tag, str) or not tag or len(tag) > 512 or not isinstance(data, dict):
            self.protocolViolation("an event is {'tag': non-empty str, 'data': map}")
            return
        self._bus.fire(tag, data)


class EventPullFactory(QuietFactory):
    """
    Takes events from local processes on a UNIX socket.
    """

    def __init__(self, bus: LocalEventBus, maxFrame: int) -> None:
        self.bus = bus
        self.maxFrame = maxFrame

    def buildProtocol(self, addr: object) -> EventPullProtocol:
        proto = EventPullProtocol(self.bus, self.maxFrame)
        proto.factory = self
        return proto
