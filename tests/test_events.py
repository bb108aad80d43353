# -*- test-case-name: tests.test_events -*-
"""
Tests for L{salttwist.events.bus} and L{salttwist.events.client}.
"""

from __future__ import annotations

import struct
from datetime import datetime
from typing import Any

from twisted.internet.error import ConnectionDone
from twisted.internet.testing import EventLoggingObserver, StringTransport
from twisted.logger import LogLevel, globalLogPublisher
from twisted.python.failure import Failure
from twisted.trial.unittest import SynchronousTestCase
from zope.interface.verify import verifyObject

from salttwist import serial
from salttwist.events.bus import (
    DROPPED_TAG,
    MAX_GLOB_LENGTH,
    MAX_GLOBS,
    EventPublisherFactory,
    EventPullFactory,
    EventSubscriberProtocol,
    LocalEventBus,
    StampClock,
    TagFilter,
    stamp,
    tagMatches,
)
from salttwist.events.client import EventListenerProtocol
from salttwist.interfaces import IEventBus


def encode(message: Any) -> bytes:
    """
    @return: C{message} as one length-prefixed msgpack frame.
    """
    payload = serial.dumps(message)
    return struct.pack("!I", len(payload)) + payload


def decodeFrames(data: bytes) -> list[Any]:
    """
    @return: the objects of the complete Int32-framed msgpack frames in
        C{data}.
    """
    messages = []
    while len(data) >= 4:
        (length,) = struct.unpack("!I", data[:4])
        if len(data) < 4 + length:
            break
        messages.append(serial.loads(data[4 : 4 + length]))
        data = data[4 + length :]
    return messages


class Recorder:
    """
    An event callback that records C{(tag, data)} pairs.
    """

    def __init__(self) -> None:
        self.events: list[tuple[str, dict[str, Any]]] = []

    def __call__(self, tag: str, data: dict[str, Any]) -> None:
        """
        Record one event.
        """
        self.events.append((tag, data))

    @property
    def tags(self) -> list[str]:
        """
        The tags recorded so far.
        """
        return [tag for tag, _ in self.events]


class LocalEventBusTests(SynchronousTestCase):
    """
    L{LocalEventBus} delivers events to subscribers by tag prefix.
    """

    def setUp(self) -> None:
        """
        Make a bus.
        """
        self.bus = LocalEventBus()

    def test_interface(self) -> None:
        """
        L{LocalEventBus} provides L{IEventBus}.
        """
        self.assertTrue(verifyObject(IEventBus, self.bus))

    def test_prefixFiltering(self) -> None:
        """
        A subscriber receives only events whose tag starts with one of its
        prefixes.
        """
        jobs = Recorder()
        keys = Recorder()
        self.bus.subscribe(["salt/job/"], jobs)
        self.bus.subscribe(["salt/key", "salt/auth"], keys)
        self.bus.fire("salt/job/1/new", {"n": 1})
        self.bus.fire("salt/key", {"n": 2})
        self.bus.fire("salt/auth", {"n": 3})
        self.bus.fire("salt/minion/x/start", {"n": 4})
        self.assertEqual(jobs.tags, ["salt/job/1/new"])
        self.assertEqual(keys.tags, ["salt/key", "salt/auth"])

    def test_emptyPrefixes(self) -> None:
        """
        A subscriber with no prefixes receives every event.
        """
        everything = Recorder()
        self.bus.subscribe([], everything)
        self.bus.fire("a", {})
        self.bus.fire("b/c", {})
        self.assertEqual(everything.tags, ["a", "b/c"])

    def test_stamp(self) -> None:
        """
        Delivered data carries C{_stamp}, an ISO 8601 time, and the caller's
        dict is not modified.
        """
        recorder = Recorder()
        self.bus.subscribe([], recorder)
        data = {"x": 1}
        self.bus.fire("t", data)
        self.assertEqual(data, {"x": 1})
        [(_, delivered)] = recorder.events
        self.assertEqual(delivered["x"], 1)
        self.assertRegex(delivered["_stamp"], r"\A\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{6}\Z")
        datetime.fromisoformat(delivered["_stamp"])

    def test_stampHelper(self) -> None:
        """
        L{stamp} returns a stamped copy.
        """
        data = {"a": 1}
        stamped = stamp(data)
        self.assertEqual(data, {"a": 1})
        self.assertEqual(set(stamped), {"a", "_stamp"})

    def test_tagMatches(self) -> None:
        """
        L{tagMatches} is a prefix test, and every tag matches no prefixes.
        """
        self.assertTrue(tagMatches("salt/job/1", ("salt/",)))
        self.assertFalse(tagMatches("salt/job/1", ("salt/key",)))
        self.assertTrue(tagMatches("anything", ()))

    def test_stop(self) -> None:
        """
        After C{stop()} a subscriber receives nothing; stopping twice is
        harmless.
        """
        recorder = Recorder()
        subscription = self.bus.subscribe([], recorder)
        self.bus.fire("one", {})
        subscription.stop()
        subscription.stop()
        self.bus.fire("two", {})
        self.assertEqual(recorder.tags, ["one"])

    def test_raisingSubscriber(self) -> None:
        """
        A subscriber that raises does not stop the others from receiving the
        event, and the failure is logged.
        """
        events = EventLoggingObserver.createWithCleanup(self, globalLogPublisher)
        before = Recorder()
        after = Recorder()

        def broken(tag: str, data: dict[str, Any]) -> None:
            raise ZeroDivisionError("boom")

        self.bus.subscribe([], before)
        self.bus.subscribe([], broken)
        self.bus.subscribe([], after)
        self.bus.fire("t", {})
        self.bus.fire("u", {})
        self.assertEqual(before.tags, ["t", "u"])
        self.assertEqual(after.tags, ["t", "u"])
        self.assertEqual(len(self.flushLoggedErrors(ZeroDivisionError)), 2)
        failures = [e for e in events if "log_failure" in e]
        self.assertEqual(len(failures), 2)
        self.assertEqual(failures[0]["tag"], "t")

    def test_unsubscribeDuringFire(self) -> None:
        """
        A subscriber may stop its own subscription while an event is being
        delivered.
        """
        recorder = Recorder()
        subscriptions = []

        def once(tag: str, data: dict[str, Any]) -> None:
            recorder(tag, data)
            subscriptions[0].stop()

        subscriptions.append(self.bus.subscribe([], once))
        self.bus.fire("a", {})
        self.bus.fire("b", {})
        self.assertEqual(recorder.tags, ["a"])


class EventSubscriberProtocolTests(SynchronousTestCase):
    """
    L{EventSubscriberProtocol} serves the bus to one subscriber.
    """

    def setUp(self) -> None:
        """
        Connect a subscriber protocol, built by its factory, to a transport.
        """
        self.bus = LocalEventBus()
        self.factory = EventPublisherFactory(self.bus, maxQueue=3)
        self.proto = self.factory.buildProtocol(None)
        self.transport = StringTransport()
        self.proto.makeConnection(self.transport)

    def subscribe(self, prefixes: list[str]) -> None:
        """
        Send the subscribe frame and clear the acknowledgement.
        """
        self.proto.dataReceived(encode({"subscribe": prefixes}))
        self.assertEqual(decodeFrames(self.transport.value()), [{"subscribed": True}])
        self.transport.clear()

    def received(self) -> list[tuple[str, Any]]:
        """
        @return: the C{(tag, data without _stamp)} of the events written so
            far; clears the transport.
        """
        frames = decodeFrames(self.transport.value())
        self.transport.clear()
        result = []
        for frame in frames:
            data = dict(frame["data"])
            self.assertIn("_stamp", data)
            del data["_stamp"]
            result.append((frame["tag"], data))
        return result

    def test_factory(self) -> None:
        """
        The factory builds L{EventSubscriberProtocol}s pointing back at it,
        and is not noisy.
        """
        self.assertIsInstance(self.proto, EventSubscriberProtocol)
        self.assertIs(self.proto.factory, self.factory)
        self.assertFalse(self.factory.noisy)

    def test_registersAsStreamingProducer(self) -> None:
        """
        On connection the protocol registers itself as a streaming producer,
        so the transport can pause it.
        """
        self.assertIs(self.transport.producer, self.proto)
        self.assertTrue(self.transport.streaming)

    def test_subscribe(self) -> None:
        """
        A subscribe frame is answered C{{"subscribed": True}}.
        """
        self.proto.dataReceived(encode({"subscribe": ["salt/"]}))
        self.assertEqual(decodeFrames(self.transport.value()), [{"subscribed": True}])
        self.assertFalse(self.transport.disconnecting)

    def test_nothingBeforeSubscribe(self) -> None:
        """
        Events fired before the subscribe frame are not sent.
        """
        self.bus.fire("salt/x", {})
        self.assertEqual(self.transport.value(), b"")

    def test_eventsDelivered(self) -> None:
        """
        Matching events are written as C{{"tag", "data"}} frames, in order;
        others are not.
        """
        self.subscribe(["salt/job/"])
        self.bus.fire("salt/job/1/new", {"n": 1})
        self.bus.fire("salt/key", {"n": 2})
        self.bus.fire("salt/job/1/ret/web1", {"n": 3})
        self.assertEqual(
            self.received(),
            [("salt/job/1/new", {"n": 1}), ("salt/job/1/ret/web1", {"n": 3})],
        )

    def test_secondSubscribeCloses(self) -> None:
        """
        A second subscribe frame closes the connection.
        """
        self.subscribe([])
        self.proto.dataReceived(encode({"subscribe": ["salt/"]}))
        self.assertTrue(self.transport.disconnecting)

    def test_badFrameCloses(self) -> None:
        """
        A frame that is not a subscription, or subscribes to non-string
        prefixes, closes the connection without subscribing.
        """
        for message in [{"subscribe": "salt/"}, {"hello": 1}, {"subscribe": ["ok", 1]}]:
            bus = LocalEventBus()
            proto = EventPublisherFactory(bus).buildProtocol(None)
            transport = StringTransport()
            proto.makeConnection(transport)
            proto.dataReceived(encode(message))
            self.assertTrue(transport.disconnecting, message)
            bus.fire("salt/x", {})
            self.assertEqual(transport.value(), b"", message)

    def test_pausedQueues(self) -> None:
        """
        While paused, events are queued, and C{resumeProducing} sends them in
        order.
        """
        self.subscribe([])
        self.proto.pauseProducing()
        self.bus.fire("a", {})
        self.bus.fire("b", {})
        self.assertEqual(self.transport.value(), b"")
        self.proto.resumeProducing()
        self.assertEqual(self.received(), [("a", {}), ("b", {})])
        self.bus.fire("c", {})
        self.assertEqual(self.received(), [("c", {})])

    def test_droppedNoticeMarksTheGap(self) -> None:
        """
        When the subscriber pauses again before the queue is flushed and
        later events find room in it, the notice is queued between the
        events before the gap and those after it.
        """
        self.subscribe([])
        self.proto.pauseProducing()
        for n in range(5):
            self.bus.fire("e", {"n": n})
        send = self.proto.sendString

        def sendThenPause(frame: bytes) -> None:
            send(frame)
            self.proto.pauseProducing()

        self.proto.sendString = sendThenPause  # type: ignore[method-assign]
        self.proto.resumeProducing()
        self.proto.sendString = send  # type: ignore[method-assign]
        self.bus.fire("e", {"n": 5})
        self.proto.resumeProducing()
        self.assertEqual(
            self.received(),
            [
                ("e", {"n": 0}),
                ("e", {"n": 1}),
                ("e", {"n": 2}),
                (DROPPED_TAG, {"dropped": 2}),
                ("e", {"n": 5}),
            ],
        )

    def test_frameSharedBetweenSubscribers(self) -> None:
        """
        Subscribers of one publisher factory get the same frame object for
        one event: it is serialised once, not once per subscriber.
        """
        factory = EventPublisherFactory(self.bus)
        frames: list[list[bytes]] = []
        for _ in range(2):
            proto = factory.buildProtocol(None)
            proto.makeConnection(StringTransport())
            proto.dataReceived(encode({"subscribe": []}))
            sent: list[bytes] = []
            proto.sendString = sent.append  # type: ignore[method-assign]
            frames.append(sent)
        self.bus.fire("x", {"a": 1})
        self.bus.fire("x", {"a": 1})
        self.assertIs(frames[0][0], frames[1][0])
        self.assertIsNot(frames[0][0], frames[0][1])

    def test_overflowCountedThenReported(self) -> None:
        """
        Past C{maxQueue} queued events, further events are counted, not kept;
        on resume the queued events come in order, then a
        C{salt/event/dropped} event with the count, where the gap is, and the
        count starts again at zero.
        """
        events = EventLoggingObserver.createWithCleanup(self, globalLogPublisher)
        self.subscribe([])
        self.proto.pauseProducing()
        for n in range(5):
            self.bus.fire("e", {"n": n})
        self.assertEqual(self.transport.value(), b"")
        self.assertEqual(self.proto.dropped, 2)
        self.proto.resumeProducing()
        self.assertEqual(
            self.received(),
            [("e", {"n": 0}), ("e", {"n": 1}), ("e", {"n": 2}), (DROPPED_TAG, {"dropped": 2})],
        )
        self.assertEqual(self.proto.dropped, 0)
        warnings = [e for e in events if e["log_level"] == LogLevel.warn]
        self.assertEqual(len(warnings), 1)
        self.assertEqual(warnings[0]["n"], 2)

        self.proto.pauseProducing()
        self.bus.fire("f", {})
        self.proto.resumeProducing()
        self.assertEqual(self.received(), [("f", {})])

    def test_pauseDuringFlush(self) -> None:
        """
        If the transport pauses the protocol again while it flushes its
        queue, the rest stays queued, ahead of newer events.
        """
        self.subscribe([])
        self.proto.pauseProducing()
        for n in range(3):
            self.bus.fire("e", {"n": n})
        written: list[bytes] = []
        originalWrite = self.transport.write

        def write(data: bytes) -> None:
            originalWrite(data)
            written.append(data)
            if len(written) == 1:
                self.proto.pauseProducing()

        self.patch(self.transport, "write", write)
        self.proto.resumeProducing()
        self.assertEqual(self.received(), [("e", {"n": 0})])
        self.bus.fire("e", {"n": 3})
        self.assertEqual(self.received(), [])
        self.proto.resumeProducing()
        self.assertEqual(self.received(), [("e", {"n": n}) for n in (1, 2, 3)])

    def test_connectionLostStopsSubscription(self) -> None:
        """
        When the connection is lost the subscription ends: the bus no longer
        delivers to the protocol.
        """
        self.subscribe([])
        self.proto.connectionLost(Failure(ConnectionDone()))
        self.assertEqual(self.bus._subscriptions, set())
        self.bus.fire("after", {})
        self.assertEqual(self.transport.value(), b"")

    def test_stopProducingClearsQueue(self) -> None:
        """
        C{stopProducing} throws away queued events.
        """
        self.subscribe([])
        self.proto.pauseProducing()
        self.bus.fire("a", {})
        self.proto.stopProducing()
        self.proto.resumeProducing()
        self.assertEqual(self.received(), [])


class SubscriberByteBoundTests(SynchronousTestCase):
    """
    L{EventSubscriberProtocol} holds at most C{maxQueueBytes} (the
    C{ipc_write_buffer} option) of events for a subscriber that does not
    read, whatever their number (issue 22: 10,000 events of 1 MiB each were
    10 GiB).
    """

    #: Serialised, one event of L{fireBig} takes a little over this.
    EVENT_BYTES = 1000

    def setUp(self) -> None:
        """
        Connect a subscriber whose queue may hold many events but only
        2,500 bytes, and pause it (its socket is full).
        """
        self.bus = LocalEventBus()
        self.factory = EventPublisherFactory(self.bus, maxQueue=10000, maxQueueBytes=2500)
        self.proto = self.factory.buildProtocol(None)
        self.transport = StringTransport()
        self.proto.makeConnection(self.transport)
        self.proto.dataReceived(encode({"subscribe": []}))
        self.transport.clear()
        self.proto.pauseProducing()

    def fireBig(self, n: int) -> None:
        """
        Fire event C{n} with about L{EVENT_BYTES} bytes of data.
        """
        self.bus.fire("big", {"n": n, "blob": b"x" * self.EVENT_BYTES})

    def received(self) -> list[Any]:
        """
        @return: the C{n} of each event written (C{("dropped", count)} for a
            notice); clears the transport.
        """
        out = []
        for frame in decodeFrames(self.transport.value()):
            if frame["tag"] == DROPPED_TAG:
                out.append(("dropped", frame["data"]["dropped"]))
            else:
                out.append(frame["data"]["n"])
        self.transport.clear()
        return out

    def test_newestDroppedPastTheByteBound(self) -> None:
        """
        Events that would take the queue past C{maxQueueBytes} are counted,
        not kept, however few are queued; on resume the queued ones come,
        then the notice of those dropped; the running total goes back to 0.
        """
        events = EventLoggingObserver.createWithCleanup(self, globalLogPublisher)
        for n in range(6):
            self.fireBig(n)
        self.assertEqual(self.proto.queued, 2)
        self.assertEqual(self.proto.dropped, 4)
        self.assertLessEqual(self.proto.queuedBytes, 2500)
        self.assertEqual(self.factory.stats()["queued_bytes"], self.proto.queuedBytes)
        self.proto.resumeProducing()
        self.assertEqual(self.received(), [0, 1, ("dropped", 4)])
        self.assertEqual(self.proto.queuedBytes, 0)
        self.assertEqual(self.proto.dropped, 0)
        warnings = [e for e in events if e["log_level"] == LogLevel.warn]
        self.assertEqual([w["n"] for w in warnings], [4])

    def test_runningTotal(self) -> None:
        """
        C{queuedBytes} is the size of the frames queued, notices included,
        as events are queued, sent and dropped.
        """
        self.fireBig(0)
        self.fireBig(1)
        self.fireBig(2)
        self.assertEqual(self.proto.dropped, 1)
        # The queue drains one frame and pauses again: room for one more,
        # which comes after the notice of the gap.
        written: list[bytes] = []
        originalWrite = self.transport.write

        def write(data: bytes) -> None:
            originalWrite(data)
            written.append(data)
            self.proto.pauseProducing()

        self.patch(self.transport, "write", write)
        self.proto.resumeProducing()
        self.fireBig(3)
        queued = list(self.proto._queue)
        self.assertEqual(self.proto.queuedBytes, sum(map(len, queued)))
        self.assertEqual([serial.loads(f)["tag"] for f in queued], ["big", DROPPED_TAG, "big"])
        self.proto.connectionLost(Failure(ConnectionDone()))
        self.assertEqual(self.proto.queuedBytes, 0)

    def test_oneEventWhateverItsSize(self) -> None:
        """
        An event bigger than C{maxQueueBytes} is still queued when the queue
        is empty (the subscriber gets it once it reads); the next is not.
        """
        self.proto._maxQueueBytes = 100
        self.fireBig(0)
        self.fireBig(1)
        self.assertEqual((self.proto.queued, self.proto.dropped), (1, 1))
        self.proto.resumeProducing()
        self.assertEqual(self.received(), [0, ("dropped", 1)])

    def test_countBoundStillHolds(self) -> None:
        """
        Small events stop at C{maxQueue}, as before the byte bound.
        """
        self.proto._maxQueue = 3
        for n in range(5):
            self.bus.fire("small", {"n": n})
        self.assertEqual((self.proto.queued, self.proto.dropped), (3, 2))

    def test_defaultBound(self) -> None:
        """
        By default a subscriber's queue holds 16 MiB at most, the master's
        C{ipc_write_buffer} default, which the master passes on.
        """
        from salttwist.config import MASTER_DEFAULTS

        self.assertEqual(EventPublisherFactory(self.bus).maxQueueBytes, 16 * 1024 * 1024)
        self.assertEqual(MASTER_DEFAULTS["ipc_write_buffer"], 16 * 1024 * 1024)
        proto = EventPublisherFactory(self.bus, 10, 70000).buildProtocol(None)
        self.assertEqual(proto._maxQueueBytes, 70000)


class EventPullProtocolTests(SynchronousTestCase):
    """
    L{EventPullProtocol} fires the events local processes send it.
    """

    def setUp(self) -> None:
        """
        Connect a pull protocol to a transport and record the bus.
        """
        self.bus = LocalEventBus()
        self.recorder = Recorder()
        self.bus.subscribe([], self.recorder)
        self.factory = EventPullFactory(self.bus, maxFrame=4096)
        self.proto = self.factory.buildProtocol(None)
        self.transport = StringTransport()
        self.proto.makeConnection(self.transport)

    def test_factory(self) -> None:
        """
        The factory sets the frame limit and itself on its protocols.
        """
        self.assertIs(self.proto.factory, self.factory)
        self.assertEqual(self.proto.MAX_LENGTH, 4096)

    def test_fires(self) -> None:
        """
        Each valid frame is fired on the bus.
        """
        self.proto.dataReceived(
            encode({"tag": "custom/a", "data": {"x": 1}}) + encode({"tag": "custom/b", "data": {}})
        )
        self.assertEqual(self.recorder.tags, ["custom/a", "custom/b"])
        self.assertEqual(self.recorder.events[0][1]["x"], 1)
        self.assertFalse(self.transport.disconnecting)

    def test_invalidCloses(self) -> None:
        """
        A non-string, empty or over-long tag, or data that is not a map,
        closes the connection and fires nothing.
        """
        for message in [
            {"tag": 7, "data": {}},
            {"tag": b"bytes", "data": {}},
            {"tag": "", "data": {}},
            {"tag": "t" * 513, "data": {}},
            {"tag": "ok", "data": [1]},
            {"tag": "ok"},
        ]:
            proto = self.factory.buildProtocol(None)
            transport = StringTransport()
            proto.makeConnection(transport)
            proto.dataReceived(encode(message))
            self.assertTrue(transport.disconnecting, message)
        self.assertEqual(self.recorder.events, [])

    def test_oversizeCloses(self) -> None:
        """
        A frame over the limit closes the connection.
        """
        self.proto.dataReceived(encode({"tag": "t", "data": {"blob": b"x" * 5000}}))
        self.assertTrue(self.transport.disconnecting)
        self.assertEqual(self.recorder.events, [])


class EventListenerProtocolTests(SynchronousTestCase):
    """
    L{EventListenerProtocol} subscribes and hands events to a callback.
    """

    def setUp(self) -> None:
        """
        Connect a listener to a transport.
        """
        self.recorder = Recorder()
        self.proto = EventListenerProtocol(["salt/job/"], self.recorder, maxFrame=4096)
        self.transport = StringTransport()
        self.proto.makeConnection(self.transport)

    def test_sendsSubscribe(self) -> None:
        """
        On connection the listener sends its subscription.
        """
        self.assertEqual(decodeFrames(self.transport.value()), [{"subscribe": ["salt/job/"]}])
        self.assertEqual(self.proto.MAX_LENGTH, 4096)

    def test_subscribedOnAck(self) -> None:
        """
        C{subscribed} fires when the acknowledgement arrives, not before.
        """
        self.assertNoResult(self.proto.subscribed)
        self.proto.dataReceived(encode({"subscribed": True}))
        self.assertIsNone(self.successResultOf(self.proto.subscribed))

    def test_events(self) -> None:
        """
        Event frames are passed to C{onEvent}; frames of another shape are
        ignored.
        """
        self.proto.dataReceived(encode({"subscribed": True}))
        self.proto.dataReceived(
            encode({"tag": "salt/job/1/new", "data": {"n": 1}})
            + encode({"tag": 5, "data": {}})
            + encode({"tag": "salt/job/1/ret/a", "data": "not a map"})
            + encode({"tag": "salt/job/1/ret/b", "data": {"n": 2}})
        )
        self.assertEqual(
            self.recorder.events,
            [("salt/job/1/new", {"n": 1}), ("salt/job/1/ret/b", {"n": 2})],
        )

    def test_lostBeforeAck(self) -> None:
        """
        If the connection ends before the acknowledgement, C{subscribed}
        fails and C{lost} fires.
        """
        self.proto.connectionLost(Failure(ConnectionDone()))
        self.failureResultOf(self.proto.subscribed, ConnectionError)
        self.assertIsNone(self.successResultOf(self.proto.lost))

    def test_lostAfterAck(self) -> None:
        """
        If the connection ends after the acknowledgement, only C{lost} fires.
        """
        self.proto.dataReceived(encode({"subscribed": True}))
        self.proto.connectionLost(Failure(ConnectionDone()))
        self.assertIsNone(self.successResultOf(self.proto.subscribed))
        self.assertIsNone(self.successResultOf(self.proto.lost))


class PublisherListenerTests(SynchronousTestCase):
    """
    A listener and a subscriber protocol, wired by hand, talk to each other.
    """

    def test_endToEnd(self) -> None:
        """
        The listener's subscription reaches the bus, and events fired after
        the acknowledgement reach the listener's callback.
        """
        bus = LocalEventBus()
        server = EventPublisherFactory(bus).buildProtocol(None)
        serverTransport = StringTransport()
        server.makeConnection(serverTransport)
        recorder = Recorder()
        client = EventListenerProtocol(["salt/"], recorder, maxFrame=4096)
        clientTransport = StringTransport()
        client.makeConnection(clientTransport)

        server.dataReceived(clientTransport.value())
        client.dataReceived(serverTransport.value())
        serverTransport.clear()
        self.successResultOf(client.subscribed)
        bus.fire("salt/test", {"v": 1})
        bus.fire("other", {"v": 2})
        client.dataReceived(serverTransport.value())
        self.assertEqual(recorder.tags, ["salt/test"])
        self.assertEqual(recorder.events[0][1]["v"], 1)


class GlobSubscriptionTests(SynchronousTestCase):
    """
    Subscribers choose tags by prefix or by glob, and the master sends them
    only those (issue 5).
    """

    def test_tagFilter(self) -> None:
        """
        L{TagFilter} takes a tag that starts with one of its prefixes or
        matches one of its globs as a whole (case-sensitively; C{*} also
        matches C{/}); with neither, every tag.
        """
        wanted = TagFilter(["salt/key"], ["salt/job/*/ret/*", "salt/presence/[pc]*"])
        for tag in ("salt/key", "salt/keys", "salt/job/1/ret/m1", "salt/presence/change"):
            self.assertTrue(wanted(tag), tag)
        for tag in ("salt/job/1/new", "Salt/key", "salt/presence/x", "x/salt/job/1/ret/m"):
            self.assertFalse(wanted(tag), tag)
        self.assertTrue(TagFilter()("anything"))
        self.assertFalse(TagFilter([], ["a*"])("b"))

    def test_busGlobs(self) -> None:
        """
        L{LocalEventBus.subscribe} takes globs beside prefixes.
        """
        bus = LocalEventBus()
        recorder = Recorder()
        bus.subscribe(["salt/auth"], recorder, globs=["salt/job/*/new"])
        for tag in ("salt/auth", "salt/job/1/new", "salt/job/1/ret/m1", "salt/key"):
            bus.fire(tag, {})
        self.assertEqual(recorder.tags, ["salt/auth", "salt/job/1/new"])

    def test_protocolSendsOnlyMatches(self) -> None:
        """
        A subscriber on the socket that sends C{globs} beside its prefixes
        receives only the matching events: the master filters them.
        """
        bus = LocalEventBus()
        proto = EventPublisherFactory(bus).buildProtocol(None)
        transport = StringTransport()
        proto.makeConnection(transport)
        proto.dataReceived(encode({"subscribe": [], "globs": ["salt/presence/*"]}))
        self.assertEqual(decodeFrames(transport.value()), [{"subscribed": True}])
        transport.clear()
        bus.fire("salt/job/1/new", {})
        bus.fire("salt/presence/present", {"present": []})
        bus.fire("salt/key", {})
        self.assertEqual(
            [frame["tag"] for frame in decodeFrames(transport.value())],
            ["salt/presence/present"],
        )

    def test_badGlobsClose(self) -> None:
        """
        Globs that are not a list of strings, too many of them, or one too
        long close the connection without subscribing.
        """
        for globs in ["salt/*", [1], ["a*"] * (MAX_GLOBS + 1), ["*" * (MAX_GLOB_LENGTH + 1)]]:
            bus = LocalEventBus()
            proto = EventPublisherFactory(bus).buildProtocol(None)
            transport = StringTransport()
            proto.makeConnection(transport)
            proto.dataReceived(encode({"subscribe": [], "globs": globs}))
            self.assertTrue(transport.disconnecting, globs)
            self.assertEqual(bus.subscriptionCount(), 0, globs)

    def test_listenerSendsGlobs(self) -> None:
        """
        L{EventListenerProtocol} sends its globs with its prefixes, and
        leaves them out when it has none (the frame older masters know).
        """
        for globs, expected in [
            (["salt/job/*"], {"subscribe": ["salt/key"], "globs": ["salt/job/*"]}),
            (None, {"subscribe": ["salt/key"]}),
        ]:
            proto = EventListenerProtocol(["salt/key"], Recorder(), 4096, globs)
            transport = StringTransport()
            proto.makeConnection(transport)
            self.assertEqual(decodeFrames(transport.value()), [expected])

    def test_factoryStats(self) -> None:
        """
        L{EventPublisherFactory.stats} counts the bus's subscriptions, the
        connected subscribers, and the events queued for and dropped by
        slow ones; a subscriber that leaves is no longer counted.
        """
        bus = LocalEventBus()
        bus.subscribe(["salt/key"], Recorder())
        factory = EventPublisherFactory(bus, maxQueue=2)
        self.assertEqual(
            factory.stats(),
            {"subscriptions": 1, "subscribers": 0, "queued": 0, "queued_bytes": 0, "dropped": 0},
        )
        protos = []
        for _ in range(2):
            proto = factory.buildProtocol(None)
            proto.makeConnection(StringTransport())
            proto.dataReceived(encode({"subscribe": []}))
            protos.append(proto)
        protos[0].pauseProducing()
        for n in range(3):
            bus.fire("salt/x", {"n": n})
        queuedBytes = protos[0].queuedBytes
        self.assertGreater(queuedBytes, 0)
        self.assertEqual(
            factory.stats(),
            {
                "subscriptions": 3,
                "subscribers": 2,
                "queued": 2,
                "queued_bytes": queuedBytes,
                "dropped": 1,
            },
        )
        protos[0].connectionLost(Failure(ConnectionDone()))
        self.assertEqual(
            factory.stats(),
            {"subscriptions": 2, "subscribers": 1, "queued": 0, "queued_bytes": 0, "dropped": 0},
        )


class StampClockTests(SynchronousTestCase):
    """
    L{StampClock}: Salt's C{_stamp} format, the second formatted once.
    """

    def test_format(self) -> None:
        """
        The stamp is the UTC time to the microsecond, without a zone, the
        same text C{datetime.strftime} gives, across a change of second.
        """
        times = iter([1795000000.25, 1795000000.5, 1795000001.125, 0.999999999])
        clock = StampClock(lambda: next(times))
        self.assertEqual(clock(), "2026-11-18T11:06:40.250000")
        self.assertEqual(clock(), "2026-11-18T11:06:40.500000")
        self.assertEqual(clock(), "2026-11-18T11:06:41.125000")
        self.assertEqual(clock(), "1970-01-01T00:00:00.999999")

    def test_matchesDatetime(self) -> None:
        """
        For the real clock, the stamp parses as ISO 8601 and lies between
        C{datetime.now(UTC)} read before and after it (truncated to the
        microsecond).
        """
        from datetime import UTC

        before = datetime.now(UTC).replace(microsecond=0)
        stamped = datetime.fromisoformat(StampClock()()).replace(tzinfo=UTC)
        after = datetime.now(UTC)
        self.assertLessEqual(before, stamped)
        self.assertLessEqual(stamped, after)
