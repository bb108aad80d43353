# -*- test-case-name: tests.test_frames -*-
"""
Tests for L{salttwist.transport.frames}: the frame format without Twisted.
"""

from __future__ import annotations

import struct

from twisted.trial.unittest import SynchronousTestCase

from salttwist import serial
from salttwist.transport.frames import (
    PREAUTH_MAX_FRAME,
    FrameError,
    FrameReader,
    encodeFrame,
)


class EncodeFrameTests(SynchronousTestCase):
    """
    L{encodeFrame} writes a 4-byte big-endian length and the msgpack body.
    """

    def test_headerAndBody(self) -> None:
        """
        The header is the body's length; the body is the message's msgpack.
        """
        frame = encodeFrame({"cmd": "hello"})
        body = serial.dumps({"cmd": "hello"})
        self.assertEqual(frame, struct.pack("!I", len(body)) + body)

    def test_unserialisable(self) -> None:
        """
        A message msgpack cannot carry raises L{serial.SerialError}.
        """
        self.assertRaises(serial.SerialError, encodeFrame, {"x": object()})


class FrameReaderTests(SynchronousTestCase):
    """
    L{FrameReader} cuts frames out of a stream, checking each length first.
    """

    def test_roundTrip(self) -> None:
        """
        Frames fed whole come back decoded, in order.
        """
        reader = FrameReader()
        data = encodeFrame({"a": 1}) + encodeFrame({"b": [1, 2]})
        self.assertEqual(reader.feed(data), [{"a": 1}, {"b": [1, 2]}])

    def test_split(self) -> None:
        """
        A frame fed a byte at a time comes out once, when its last byte
        arrives; the bytes of the next frame are kept.
        """
        reader = FrameReader()
        data = encodeFrame({"a": "x" * 10}) + encodeFrame({"b": 2})[:3]
        out: list[dict[str, object]] = []
        for i in range(len(data)):
            out.extend(reader.feed(data[i : i + 1]))
        self.assertEqual(out, [{"a": "x" * 10}])
        self.assertEqual(reader.feed(encodeFrame({"b": 2})[3:]), [{"b": 2}])

    def test_limitCheckedOnHeader(self) -> None:
        """
        A header announcing more than the limit raises L{FrameError} naming
        both sizes, before any of the body arrived.
        """
        reader = FrameReader()
        e = self.assertRaises(FrameError, reader.feed, struct.pack("!I", PREAUTH_MAX_FRAME + 1))
        self.assertIn(str(PREAUTH_MAX_FRAME + 1), str(e))
        self.assertIn(str(PREAUTH_MAX_FRAME), str(e))

    def test_raisedLimit(self) -> None:
        """
        After L{FrameReader.maxFrame} is raised, a larger frame is accepted.
        """
        reader = FrameReader()
        reader.maxFrame = 10 * PREAUTH_MAX_FRAME
        big = {"data": b"x" * (2 * PREAUTH_MAX_FRAME)}
        self.assertEqual(reader.feed(encodeFrame(big)), [big])

    def test_malformed(self) -> None:
        """
        A body that is not msgpack raises L{FrameError}.
        """
        reader = FrameReader()
        body = b"\xc1"
        e = self.assertRaises(FrameError, reader.feed, struct.pack("!I", len(body)) + body)
        self.assertIn("malformed frame", str(e))

    def test_notAMap(self) -> None:
        """
        A frame holding a list, not a map, raises L{FrameError}.
        """
        reader = FrameReader()
        body = serial.dumps([1, 2])
        e = self.assertRaises(FrameError, reader.feed, struct.pack("!I", len(body)) + body)
        self.assertIn("not a map", str(e))
