# -*- test-case-name: tests.test_serial -*-
"""
Tests for L{salttwist.serial}: msgpack with limits.
"""

from __future__ import annotations

import threading

import msgpack
from twisted.trial.unittest import SynchronousTestCase

from salttwist import serial
from salttwist.serial import SerialError


def _nested(depth: int) -> object:
    """
    @return: C{depth} lists, each holding the next, around an integer.
    """
    value: object = 1
    for _ in range(depth):
        value = [value]
    return value


class RoundTripTests(SynchronousTestCase):
    """
    L{serial.dumps} and L{serial.loads} carry the types the wire uses.
    """

    def test_roundTrip(self) -> None:
        """
        A map of strings, bytes, numbers, booleans, L{None}, lists and nested
        maps comes back equal from L{serial.loads}.
        """
        value = {
            "str": "h\u00e9llo",
            "bytes": b"\x00\xff",
            "int": -(2**63),
            "big": 2**64 - 1,
            "float": 1.5,
            "bool": True,
            "none": None,
            "list": [1, "two", [3.0]],
            "map": {"nested": {"deeper": []}},
        }
        self.assertEqual(serial.loads(serial.dumps(value)), value)

    def test_packedValues(self) -> None:
        """
        A map whose values are L{serial.Packed} (msgpack bytes encoded
        already) gives the bytes the same map of decoded values gives, and
        decodes to it.
        """
        pillar = {"a": {"b": [1, "x", None]}, "n": 2**64 - 1}
        plain = {"ret": pillar, "rid": 7}
        spliced = serial.dumps({"ret": serial.Packed(serial.dumps(pillar)), "rid": 7})
        self.assertEqual(spliced, serial.dumps(plain))
        self.assertEqual(serial.loads(spliced), plain)
        self.assertEqual(serial.dumps({"p": serial.Packed(b"\xc0")}), serial.dumps({"p": None}))

    def test_packedValuesElsewhere(self) -> None:
        """
        L{serial.Packed} is put in as it is only as a value of a map given
        to L{serial.dumps}; deeper, or alone, it is an error as any object
        msgpack does not know; another bad value beside it still is.
        """
        packed = serial.Packed(serial.dumps(1))
        for value in (packed, [packed], {"a": {"b": packed}}, {"a": packed, "b": object()}):
            self.assertRaises(SerialError, serial.dumps, value)
        self.assertEqual(serial.loads(serial.dumps({"a": 1})), {"a": 1})

    def test_bytesStayBytes(self) -> None:
        """
        Bytes and strings stay distinct: bytes come back as L{bytes}, text as
        L{str}.
        """
        result = serial.loads(serial.dumps({"b": b"x", "s": "x"}))
        self.assertIsInstance(result["b"], bytes)
        self.assertIsInstance(result["s"], str)

    def test_tuplesBecomeLists(self) -> None:
        """
        Arrays always decode to lists.
        """
        self.assertEqual(serial.loads(serial.dumps({"t": (1, 2)})), {"t": [1, 2]})

    def test_dumpsUnserialisable(self) -> None:
        """
        L{serial.dumps} raises L{SerialError} (not L{TypeError}) for an object
        msgpack cannot encode, and for an integer out of msgpack's range.
        """
        for value in [object(), {"a": {1, 2}}, 1j, 2**70]:
            self.assertRaises(SerialError, serial.dumps, value)

    def test_dumpsAfterFailure(self) -> None:
        """
        A failed L{serial.dumps} leaves nothing behind: the next value is
        encoded alone, exactly as C{msgpack.packb} encodes it, and a result
        over the kept size drops the thread's packer without changing the
        bytes.
        """
        value = {"a": [1, "b", b"c"], "d": {"e": None}}
        self.assertRaises(SerialError, serial.dumps, {"partly": "encoded", "then": object()})
        self.assertEqual(serial.dumps(value), msgpack.packb(value, use_bin_type=True))
        big = {"data": b"x" * (serial._KEEP_PACKER_MAX + 1)}
        self.assertEqual(serial.dumps(big), msgpack.packb(big, use_bin_type=True))
        self.assertFalse(hasattr(serial._packers, "packer"))
        self.assertEqual(serial.dumps(value), msgpack.packb(value, use_bin_type=True))

    def test_dumpsInThreads(self) -> None:
        """
        Threads packing at once each use their own packer: every result is
        the value's own encoding.
        """
        values = [{"n": n, "data": "x" * (n % 50)} for n in range(400)]
        expected = [msgpack.packb(v, use_bin_type=True) for v in values]
        results: list[list[bytes]] = [[] for _ in range(4)]

        def pack(out: list[bytes]) -> None:
            for v in values:
                out.append(serial.dumps(v))

        threads = [threading.Thread(target=pack, args=(out,)) for out in results]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        self.assertEqual(results, [expected] * 4)

    def test_serialErrorIsValueError(self) -> None:
        """
        L{SerialError} is a L{ValueError}, so callers treating bad input as a
        value error catch it.
        """
        self.assertTrue(issubclass(SerialError, ValueError))


class LimitTests(SynchronousTestCase):
    """
    L{serial.loads} refuses input outside its limits with L{SerialError}.
    """

    def test_extTypeRefused(self) -> None:
        """
        msgpack ext types (including fixext and the timestamp type) are
        refused.
        """
        for data in [
            msgpack.packb(msgpack.ExtType(5, b"payload")),
            msgpack.packb({"a": msgpack.ExtType(1, b"x")}),
            b"\xd4\x01\x00",
            b"\xd6\xff\x00\x00\x00\x00",
        ]:
            self.assertRaises(SerialError, serial.loads, data)

    def test_declaredSizesLargerThanBuffer(self) -> None:
        """
        A header declaring more elements or bytes than the buffer could
        possibly hold is refused before anything is allocated: array 32, map
        32, str 32, bin 32, and their 16-bit forms.
        """
        for data in [
            b"\xdd\xff\xff\xff\xff",
            b"\xdf\xff\xff\xff\xff",
            b"\xdb\xff\xff\xff\xff",
            b"\xc6\xff\xff\xff\xff",
            b"\xdc\xff\xff",
            b"\xde\xff\xff",
            b"\xda\xff\xffabc",
            b"\xc5\xff\xffabc",
        ]:
            self.assertRaises(SerialError, serial.loads, data)

    def test_maxDepth(self) -> None:
        """
        Nesting of exactly C{maxDepth} containers is accepted; one more is
        refused.
        """
        self.assertEqual(serial.loads(serial.dumps(_nested(64))), _nested(64))
        self.assertRaises(SerialError, serial.loads, serial.dumps(_nested(65)))
        self.assertEqual(serial.loads(serial.dumps(_nested(3)), maxDepth=3), _nested(3))
        self.assertRaises(SerialError, serial.loads, serial.dumps(_nested(4)), maxDepth=3)

    def test_maxDepthSmallBuffers(self) -> None:
        """
        The depth of a buffer no longer than C{maxDepth} is not walked (each
        container takes a byte); one byte longer, it is: the boundary holds
        with empty containers, the densest nesting msgpack can encode.
        """
        self.assertEqual(serial.loads(b"\x91\x91\x90", maxDepth=3), [[[]]])
        self.assertRaises(SerialError, serial.loads, b"\x91\x91\x91\x90", maxDepth=3)
        self.assertRaises(SerialError, serial.loads, b"\x81\xa0\x81\xa0\x80", maxDepth=1)

    def test_maxDepthMaps(self) -> None:
        """
        Maps count towards the nesting depth like lists do.
        """
        value = {"a": {"b": {"c": 1}}}
        self.assertRaises(SerialError, serial.loads, serial.dumps(value), maxDepth=2)

    def test_veryDeepNesting(self) -> None:
        """
        Nesting far beyond any limit (deeper than msgpack's own stack) is a
        L{SerialError}, not a crash.
        """
        self.assertRaises(SerialError, serial.loads, b"\x91" * 5000 + b"\x00")

    def test_trailingBytes(self) -> None:
        """
        Bytes after the one object are refused.
        """
        self.assertRaises(SerialError, serial.loads, serial.dumps({"a": 1}) + b"\x00")

    def test_truncated(self) -> None:
        """
        Empty or truncated input is refused.
        """
        self.assertRaises(SerialError, serial.loads, b"")
        self.assertRaises(SerialError, serial.loads, serial.dumps({"a": "bcd"})[:-1])

    def test_reservedByte(self) -> None:
        """
        The never-used byte C{0xc1} is refused.
        """
        self.assertRaises(SerialError, serial.loads, b"\xc1")

    def test_nonStringMapKeys(self) -> None:
        """
        Maps keyed by integers, floats, booleans, L{None} or arrays are
        refused.
        """
        for data in [
            msgpack.packb({1: "x"}),
            msgpack.packb({1.5: "x"}),
            msgpack.packb({True: "x"}),
            msgpack.packb({None: "x"}),
            b"\x81\x91\x01\x02",
        ]:
            self.assertRaises(SerialError, serial.loads, data)

    def test_invalidUtf8(self) -> None:
        """
        A str whose bytes are not UTF-8 is refused.
        """
        self.assertRaises(SerialError, serial.loads, b"\xa2\xff\xfe")
