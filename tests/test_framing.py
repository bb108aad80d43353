# -*- test-case-name: tests.test_framing -*-
"""
Tests for L{salttwist.transport.framing}.
"""

from __future__ import annotations

import socket
import struct
import tracemalloc
from typing import Any

from twisted.internet.error import ConnectionDone
from twisted.internet.protocol import Protocol
from twisted.internet.testing import EventLoggingObserver, StringTransport
from twisted.logger import formatEvent, globalLogPublisher
from twisted.trial.unittest import SynchronousTestCase

from salttwist import crypt, serial
from salttwist.transport.framing import (
    BIG_READ,
    PREAUTH_MAX_FRAME,
    FrameProtocol,
    QuietFactory,
    quietFactory,
    writeNow,
    writeNowParts,
)
from salttwist.transport.session import SessionCipher


def frame(payload: bytes) -> bytes:
    """
    @return: C{payload} behind its 4-byte big-endian length.
    """
    return struct.pack("!I", len(payload)) + payload


def encode(message: Any) -> bytes:
    """
    @return: C{message} as one msgpack frame.
    """
    return frame(serial.dumps(message))


def decodeFrames(data: bytes) -> list[Any]:
    """
    @return: the decoded objects of the complete frames in C{data}.
    """
    messages = []
    while len(data) >= 4:
        (length,) = struct.unpack("!I", data[:4])
        messages.append(serial.loads(data[4 : 4 + length]))
        data = data[4 + length :]
    return messages


class AbortRecordingTransport(StringTransport):
    """
    A L{StringTransport} that records whether the connection was aborted
    (rather than closed cleanly).
    """

    aborted = False

    def abortConnection(self) -> None:
        """
        Record the abort, then close.
        """
        self.aborted = True
        super().abortConnection()


class RecordingProtocol(FrameProtocol):
    """
    A L{FrameProtocol} that records every frame it receives.
    """

    def __init__(self) -> None:
        self.frames: list[dict[str, Any]] = []

    def frameReceived(self, message: dict[str, Any]) -> None:
        """
        Record C{message}.
        """
        self.frames.append(message)


class FrameProtocolTests(SynchronousTestCase):
    """
    L{FrameProtocol} turns length-prefixed msgpack maps into
    L{FrameProtocol.frameReceived} calls and closes the connection on
    anything else.
    """

    def setUp(self) -> None:
        """
        Connect a L{RecordingProtocol} to an in-memory transport.
        """
        self.transport = AbortRecordingTransport()
        self.proto = RecordingProtocol()
        self.proto.makeConnection(self.transport)

    def assertClosed(self) -> None:
        """
        The connection was aborted.
        """
        self.assertTrue(self.transport.aborted)
        self.assertTrue(self.transport.disconnecting)

    def test_largeFrameInManyReads(self) -> None:
        """
        A 5 MB frame arriving in 64 KiB reads (the header split too) is
        delivered once, intact, followed by a small frame from the same last
        read; nothing is left buffered.
        """
        self.proto.setMaxFrame(10 * 1024 * 1024)
        big = serial.dumps({"return": b"x" * 5_000_000})
        small = serial.dumps({"n": 1})
        data = struct.pack("!I", len(big)) + big + struct.pack("!I", len(small)) + small
        self.proto.dataReceived(data[:2])
        for start in range(2, len(data), 65536):
            self.proto.dataReceived(data[start : start + 65536])
        self.assertEqual(len(self.proto.frames), 2)
        self.assertEqual(len(self.proto.frames[0]["return"]), 5_000_000)
        self.assertEqual(self.proto.frames[1], {"n": 1})
        self.assertEqual(self.proto._unprocessed, b"")

    def test_bufferFreedForTheLastFrame(self) -> None:
        """
        A frame that ends what was received is handed on with nothing left
        buffered, so a big frame's bytes are not held twice while it is
        handled (a frame with another behind it in the same read is handed
        on from the buffer as it is).
        """
        buffered: list[int] = []
        realStringReceived = self.proto.stringReceived

        def stringReceived(data: bytes) -> None:
            buffered.append(len(self.proto._buffer))
            realStringReceived(data)

        self.proto.stringReceived = stringReceived  # type: ignore[method-assign]
        self.proto.setMaxFrame(10 * 1024 * 1024)
        big = encode({"return": b"x" * 1_000_000})
        small = encode({"n": 1})
        for start in range(0, len(big), 65536):
            self.proto.dataReceived(big[start : start + 65536])
        self.proto.dataReceived(small + big)
        self.assertEqual(buffered, [0, len(small) + len(big), 0])
        self.assertEqual(len(self.proto.frames), 3)

    def test_bigFramePeakMemory(self) -> None:
        """
        Receiving a 4 MB frame in 64 KiB reads and decoding it takes at most
        about twice its size at the peak: the buffer, then one copy of the
        frame (not the buffer, a slice of it and a copy of the slice) while
        it is decoded without the buffer.
        """
        self.proto.setMaxFrame(10 * 1024 * 1024)
        size = 4_000_000
        frame = encode({"r": b"x" * size})
        reads = [frame[start : start + 65536] for start in range(0, len(frame), 65536)]
        del frame
        tracemalloc.start()
        self.addCleanup(tracemalloc.stop)
        base = tracemalloc.get_traced_memory()[0]
        for data in reads:
            self.proto.dataReceived(data)
        peak = tracemalloc.get_traced_memory()[1] - base
        self.assertEqual(len(self.proto.frames[0]["r"]), size)
        self.assertLess(peak, 2.5 * size)

    def test_goodFrame(self) -> None:
        """
        A well-formed frame holding a map is delivered, and the connection
        stays open.
        """
        self.proto.dataReceived(encode({"cmd": "ping", "n": 1}))
        self.assertEqual(self.proto.frames, [{"cmd": "ping", "n": 1}])
        self.assertFalse(self.transport.disconnecting)

    def test_twoFramesOneWrite(self) -> None:
        """
        Two frames arriving in one read are both delivered, in order.
        """
        self.proto.dataReceived(encode({"n": 1}) + encode({"n": 2}))
        self.assertEqual(self.proto.frames, [{"n": 1}, {"n": 2}])

    def test_wholeFrameOverLimitInOneRead(self) -> None:
        """
        A complete frame over C{MAX_LENGTH} arriving in one read (header and
        body together) is refused and not delivered, like one whose header
        arrives alone.
        """
        payload = serial.dumps({"k": "x" * 20})
        self.proto.setMaxFrame(len(payload) - 1)
        self.proto.dataReceived(frame(payload))
        self.assertClosed()
        self.assertEqual(self.proto.frames, [])

    def test_wholeFrameWhilePaused(self) -> None:
        """
        A complete frame read while the protocol is paused is kept, not
        delivered, until it resumes; nothing is left buffered after.
        """
        self.proto.pauseProducing()
        self.proto.dataReceived(encode({"n": 1}))
        self.assertEqual(self.proto.frames, [])
        self.assertEqual(self.proto._unprocessed, encode({"n": 1}))
        self.proto.resumeProducing()
        self.assertEqual(self.proto.frames, [{"n": 1}])
        self.assertEqual(self.proto._unprocessed, b"")

    def test_wholeFrameAfterClose(self) -> None:
        """
        A complete frame read after the connection started closing is not
        delivered.
        """
        self.transport.loseConnection()
        self.proto.dataReceived(encode({"n": 1}))
        self.assertEqual(self.proto.frames, [])

    def test_wholeFrameBehindPartial(self) -> None:
        """
        A read that would be one whole frame on its own, arriving behind a
        partial frame, completes the buffered frame first: both are
        delivered in order.
        """
        first, second = encode({"n": 1}), encode({"n": 2})
        self.proto.dataReceived(first[:3])
        self.proto.dataReceived(first[3:] + second)
        self.proto.dataReceived(encode({"n": 3}))
        self.assertEqual(self.proto.frames, [{"n": 1}, {"n": 2}, {"n": 3}])
        self.assertEqual(self.proto._unprocessed, b"")

    def test_frameSplitByteByByte(self) -> None:
        """
        A frame arriving one byte at a time is delivered once, when its last
        byte arrives.
        """
        data = encode({"cmd": "hello", "payload": b"x" * 20})
        for i, byte in enumerate(data):
            self.assertEqual(self.proto.frames, [], f"delivered early at byte {i}")
            self.proto.dataReceived(bytes([byte]))
        self.assertEqual(self.proto.frames, [{"cmd": "hello", "payload": b"x" * 20}])
        self.assertFalse(self.transport.disconnecting)

    def test_oversizeHeaderClosesBeforeBody(self) -> None:
        """
        A length header over C{MAX_LENGTH} aborts the connection as soon as
        the 4 header bytes arrive, before any of the body was sent, and a
        warning names the announced size and the limit.
        """
        events = EventLoggingObserver.createWithCleanup(self, globalLogPublisher)
        size = PREAUTH_MAX_FRAME + 1
        self.proto.dataReceived(struct.pack("!I", size))
        self.assertClosed()
        self.assertEqual(self.proto.frames, [])
        self.assertEqual(len(events), 1)
        text = formatEvent(events[0])
        self.assertIn(str(size), text)
        self.assertIn(str(PREAUTH_MAX_FRAME), text)

    def test_limitIsInclusive(self) -> None:
        """
        A frame of exactly C{MAX_LENGTH} bytes is accepted.
        """
        payload = serial.dumps({"k": "x" * 11})
        self.proto.setMaxFrame(len(payload))
        self.proto.dataReceived(frame(payload))
        self.assertEqual(self.proto.frames, [{"k": "x" * 11}])
        self.assertFalse(self.transport.disconnecting)

    def test_malformedClosesConnection(self) -> None:
        """
        A frame that is not valid msgpack aborts the connection and is not
        delivered.
        """
        self.proto.dataReceived(frame(b"\xc1"))
        self.assertClosed()
        self.assertEqual(self.proto.frames, [])

    def test_trailingBytesInFrameClose(self) -> None:
        """
        A frame holding a map followed by extra bytes is malformed.
        """
        self.proto.dataReceived(frame(serial.dumps({"a": 1}) + b"\x00"))
        self.assertClosed()
        self.assertEqual(self.proto.frames, [])

    def test_nonMapFrameCloses(self) -> None:
        """
        A frame holding valid msgpack that is not a map (a list, a string, an
        integer) aborts the connection.
        """
        for message in [[1, 2], "text", 7]:
            transport = AbortRecordingTransport()
            proto = RecordingProtocol()
            proto.makeConnection(transport)
            proto.dataReceived(encode(message))
            self.assertTrue(transport.aborted)
            self.assertEqual(proto.frames, [])

    def test_violationLogged(self) -> None:
        """
        Closing on a malformed frame logs a warning naming the peer and the
        reason.
        """
        events = EventLoggingObserver.createWithCleanup(self, globalLogPublisher)
        self.proto.dataReceived(encode([1]))
        self.assertEqual(len(events), 1)
        text = formatEvent(events[0])
        self.assertIn("192.168.1.1:54321", text)
        self.assertIn("not a map", text)

    def test_nothingAfterViolation(self) -> None:
        """
        Frames read in the same chunk behind a frame that broke the protocol
        are not delivered: the peer's connection is already being aborted.
        """
        self.proto.dataReceived(encode([1]) + encode({"cmd": "after"}))
        self.assertClosed()
        self.assertEqual(self.proto.frames, [])

    def test_setMaxFrame(self) -> None:
        """
        L{FrameProtocol.setMaxFrame} raises the limit for later frames: a
        frame over the pre-authentication limit is then accepted.
        """
        big = {"blob": b"x" * (PREAUTH_MAX_FRAME + 10)}
        self.proto.setMaxFrame(PREAUTH_MAX_FRAME * 4)
        self.proto.dataReceived(encode(big))
        self.assertEqual(self.proto.frames, [big])
        self.assertFalse(self.transport.disconnecting)

    def test_setMaxFrameLowers(self) -> None:
        """
        L{FrameProtocol.setMaxFrame} can also lower the limit.
        """
        self.proto.setMaxFrame(8)
        self.proto.dataReceived(encode({"k": "x" * 20}))
        self.assertClosed()

    def test_setMaxFramePerConnection(self) -> None:
        """
        Raising the limit on one connection leaves other connections (and the
        class default) at the pre-authentication limit.
        """
        self.proto.setMaxFrame(PREAUTH_MAX_FRAME * 4)
        other = RecordingProtocol()
        self.assertEqual(other.MAX_LENGTH, PREAUTH_MAX_FRAME)
        self.assertEqual(FrameProtocol.MAX_LENGTH, PREAUTH_MAX_FRAME)

    def test_sendFrame(self) -> None:
        """
        L{FrameProtocol.sendFrame} writes one length-prefixed msgpack map.
        """
        self.proto.sendFrame({"ret": "ok"})
        self.assertEqual(self.transport.value(), encode({"ret": "ok"}))
        self.assertEqual(decodeFrames(self.transport.value()), [{"ret": "ok"}])

    def test_sendSealed(self) -> None:
        """
        L{FrameProtocol.sendSealed} writes a sealed session frame given in
        two parts (L{SessionCipher.sealFrameParts}), small or big, as the
        bytes of the whole frame: one write for a small one, two for a big
        one (its blob is not copied to join them).
        """
        cipher = SessionCipher(crypt.newAesKey(), isServer=False)
        opener = SessionCipher(cipher.key, isServer=True)
        writes: list[bytes] = []
        write = self.transport.write

        def recordingWrite(data: bytes) -> None:
            writes.append(data)
            write(data)

        self.transport.write = recordingWrite  # type: ignore[method-assign]
        for size in (10, 300 * 1024):
            payload = {"data": b"x" * size}
            head, blob = cipher.sealFrameParts(payload)
            self.proto.sendSealed(head, blob)
            [frame] = decodeFrames(self.transport.value())
            self.assertEqual(opener.open(frame), payload)
            self.transport.clear()
        self.assertEqual([len(w) > 1000 for w in writes], [False, False, True])

    def test_peerName(self) -> None:
        """
        L{FrameProtocol.connectionMade} records the peer's host and port for
        log lines.
        """
        self.assertEqual(self.proto.peerName, "192.168.1.1:54321")


class BigFrameReadTests(SynchronousTestCase):
    """
    While a big frame arrives, L{FrameProtocol} lets a socket transport
    read more than Twisted's 64 KiB a call; back to 64 KiB when the
    buffer is empty.
    """

    def test_bufferSize(self) -> None:
        """
        A frame header announcing a big frame raises the transport's
        C{bufferSize} to what is missing (at most L{BIG_READ}); once the
        frame is whole it is 64 KiB again. A small frame changes nothing.
        """
        transport = AbortRecordingTransport()
        transport.bufferSize = 65536  # type: ignore[attr-defined]
        proto = RecordingProtocol()
        proto.setMaxFrame(8 << 20)
        proto.makeConnection(transport)
        data = encode({"data": b"x" * (3 << 20)})
        proto.dataReceived(data[:100_000])
        self.assertEqual(transport.bufferSize, BIG_READ)  # type: ignore[attr-defined]
        proto.dataReceived(data[100_000:-300_000])
        self.assertEqual(transport.bufferSize, 300_000)  # type: ignore[attr-defined]
        proto.dataReceived(data[-300_000:])
        self.assertEqual(transport.bufferSize, 65536)  # type: ignore[attr-defined]
        self.assertEqual(len(proto.frames), 1)
        proto.dataReceived(encode({"small": 1})[:5])
        self.assertEqual(transport.bufferSize, 65536)  # type: ignore[attr-defined]


class QuietFactoryTests(SynchronousTestCase):
    """
    L{quietFactory} builds factories that do not log each connection.
    """

    def test_buildProtocol(self) -> None:
        """
        The factory's protocols come from the given callable and have
        C{factory} set to the factory; the factory is not noisy.
        """
        built: list[Protocol] = []

        def build() -> Protocol:
            proto = RecordingProtocol()
            built.append(proto)
            return proto

        factory = quietFactory(build)
        self.assertIsInstance(factory, QuietFactory)
        self.assertFalse(factory.noisy)
        first = factory.buildProtocol(None)
        second = factory.buildProtocol(None)
        self.assertEqual(built, [first, second])
        self.assertIsNot(first, second)
        self.assertIs(first.factory, factory)
        self.assertIs(second.factory, factory)

    def test_quietFactoryClass(self) -> None:
        """
        L{QuietFactory} is not noisy.
        """
        self.assertFalse(QuietFactory.noisy)


class NoDelayTests(SynchronousTestCase):
    """
    A frame connection over TCP has Nagle's algorithm off: a small frame
    sent while the previous one is unacknowledged leaves at once instead
    of waiting for the peer's delayed acknowledgement (about 40 ms).
    """

    def test_tcpNoDelay(self) -> None:
        """
        C{connectionMade} sets C{TCP_NODELAY} on a real TCP connection.
        """
        from twisted.internet import tcp
        from twisted.internet.testing import MemoryReactor

        listener = socket.socket()
        self.addCleanup(listener.close)
        listener.bind(("127.0.0.1", 0))
        listener.listen(1)
        client = socket.create_connection(listener.getsockname())
        self.addCleanup(client.close)
        ours, _ = listener.accept()
        self.addCleanup(ours.close)
        self.assertEqual(ours.getsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY), 0)
        transport = tcp.Server(ours, Protocol(), ("127.0.0.1", 1), _FakePort(), 1, MemoryReactor())
        protocol = RecordingProtocol()
        protocol.makeConnection(transport)
        self.assertNotEqual(ours.getsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY), 0)

    def test_otherTransports(self) -> None:
        """
        A transport without C{setTcpNoDelay} (a UNIX socket, in memory) is
        left alone; one whose connection is already gone is too.
        """
        protocol = RecordingProtocol()
        protocol.makeConnection(StringTransport())

        class Gone(StringTransport):
            def setTcpNoDelay(self, enabled: bool) -> None:
                raise OSError(9, "Bad file descriptor")

        RecordingProtocol().makeConnection(Gone())


class WriteNowTests(SynchronousTestCase):
    """
    L{writeNow}: one C{send} on an idle socket transport, the transport's
    buffer otherwise, never reordering bytes. A real socket pair stands in
    for the network (no reactor runs: the memory reactor only records the
    transport's wish to write).
    """

    def setUp(self) -> None:
        from twisted.internet import tcp
        from twisted.internet.testing import MemoryReactor

        self.ours, self.peer = socket.socketpair()
        self.ours.setblocking(False)
        self.peer.setblocking(False)
        self.addCleanup(self.peer.close)
        self.reactor = MemoryReactor()
        self.transport = tcp.Server(
            self.ours, Protocol(), ("127.0.0.1", 1), _FakePort(), 1, self.reactor
        )
        self.addCleanup(self.ours.close)

    def received(self) -> bytes:
        chunks = []
        while True:
            try:
                chunk = self.peer.recv(1 << 20)
            except BlockingIOError:
                return b"".join(chunks)
            if not chunk:
                return b"".join(chunks)
            chunks.append(chunk)

    def test_idleSentAtOnce(self) -> None:
        """
        With nothing buffered, the data is on the socket when L{writeNow}
        returns, and the transport did not ask the reactor to watch for
        writability.
        """
        writeNow(self.transport, b"frame one")
        self.assertEqual(self.received(), b"frame one")
        self.assertNotIn(self.transport, self.reactor.getWriters())

    def test_bufferedStaysInOrder(self) -> None:
        """
        With bytes already buffered in the transport, new data is buffered
        behind them, not sent ahead.
        """
        self.transport.write(b"first ")
        writeNow(self.transport, b"second")
        self.assertEqual(self.received(), b"")
        self.transport.doWrite()
        self.assertEqual(self.received(), b"first second")

    def test_partialSendBuffersTheRest(self) -> None:
        """
        What the socket does not take is buffered by the transport and sent
        later, after the part that went at once; data written meanwhile
        follows it.
        """
        big = bytes(range(256)) * 40000  # more than a socket pair takes at once
        writeNow(self.transport, big)
        self.assertIn(self.transport, self.reactor.getWriters())
        writeNow(self.transport, b"tail")
        got = self.received()
        while len(got) < len(big) + 4:
            self.transport.doWrite()
            got += self.received()
        self.assertEqual(got, big + b"tail")

    def test_partsInOneSend(self) -> None:
        """
        L{writeNowParts} on an idle transport sends the head and the body
        together; when the socket takes only part of them the rest is
        buffered in order, whether the cut falls in the head or the body,
        and data written meanwhile follows.
        """
        writeNowParts(self.transport, b"head:", b"body")
        self.assertEqual(self.received(), b"head:body")
        big = bytes(range(256)) * 40000
        writeNowParts(self.transport, b"head:", big)
        self.assertIn(self.transport, self.reactor.getWriters())
        writeNowParts(self.transport, b"second:", b"tail")
        got = self.received()
        while len(got) < len(big) + 16:
            self.transport.doWrite()
            got += self.received()
        self.assertEqual(got, b"head:" + big + b"second:tail")

    def test_partsCutInHead(self) -> None:
        """
        A send that takes only part of the head leaves the rest of the head
        and all of the body to the transport.
        """
        sent: list[int] = []
        writeNowParts(self.transport, b"x", b"y")
        writer = self.transport.producer

        def short(buffers: list[bytes]) -> int:
            sent.append(len(buffers))
            return 2

        writer.sendmsg = short
        writeNowParts(self.transport, b"head:", b"body")
        self.assertEqual(sent, [2])
        self.transport.doWrite()
        self.assertEqual(self.received(), b"xyad:body")

    def test_disconnectingLeftToTransport(self) -> None:
        """
        After C{loseConnection}, data is not sent directly but handed to the
        transport, which sends it before it closes, as Twisted does.
        """
        self.transport.loseConnection()
        writeNow(self.transport, b"late")
        self.assertEqual(self.received(), b"")
        self.transport.doWrite()
        self.assertEqual(self.received(), b"late")

    def test_closesAfterDraining(self) -> None:
        """
        A connection closed while L{writeNow} has bytes buffered sends them,
        then closes: the writer it registered as the transport's producer
        steps aside once the buffer is empty.
        """
        big = bytes(range(256)) * 40000
        writeNow(self.transport, big)
        self.transport.loseConnection()
        got = self.received()
        result = None
        for _ in range(1000):
            result = self.transport.doWrite()
            got += self.received()
            if result is not None:
                break
        self.assertEqual(got, big)
        self.assertIsInstance(result, ConnectionDone)
        self.assertIsNone(self.transport.producer)

    def test_otherProducer(self) -> None:
        """
        A transport with a producer of its own gets every write through
        C{transport.write}.
        """
        producer = _Producer()
        self.transport.registerProducer(producer, True)
        writeNow(self.transport, b"buffered")
        self.assertEqual(self.received(), b"")
        self.assertIs(self.transport.producer, producer)
        self.transport.doWrite()
        self.assertEqual(self.received(), b"buffered")

    def test_protocolsChoose(self) -> None:
        """
        L{FrameProtocol.sendFrame} sends at once by default; a protocol with
        C{directWrites} false (an event subscriber, which gets bursts) leaves
        its frames to the transport's buffer, sent together later.
        """
        from salttwist.events.bus import EventSubscriberProtocol

        self.assertFalse(EventSubscriberProtocol.directWrites)
        proto = RecordingProtocol()
        proto.transport = self.transport
        proto.sendFrame({"a": 1})
        self.assertEqual(self.received(), frame(serial.dumps({"a": 1})))

        class Bursty(RecordingProtocol):
            directWrites = False

        bursty = Bursty()
        bursty.transport = self.transport
        bursty.sendFrame({"b": 1})
        bursty.sendFrame({"c": 1})
        self.assertEqual(self.received(), b"")
        self.transport.doWrite()
        self.assertEqual(
            self.received(), frame(serial.dumps({"b": 1})) + frame(serial.dumps({"c": 1}))
        )

    def test_otherTransportsWrite(self) -> None:
        """
        Any other transport (in-memory here; TLS in production) gets a plain
        C{write}.
        """
        transport = StringTransport()
        writeNow(transport, b"abc")
        self.assertEqual(transport.value(), b"abc")


class _Producer:
    """
    A push producer of the test's own.
    """

    def pauseProducing(self) -> None:
        pass

    def resumeProducing(self) -> None:
        pass

    def stopProducing(self) -> None:
        pass


class _FakePort:
    """
    The listening port a L{tcp.Server} names (only for its log prefix).
    """

    _realPortNumber = 4506

    def _buildAddr(self, address: Any) -> Any:
        return address

    def getHost(self) -> Any:
        return None
