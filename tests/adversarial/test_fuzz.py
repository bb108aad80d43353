# -*- test-case-name: tests.adversarial.test_fuzz -*-
"""
Property tests (hypothesis) over the parsers an attacker reaches first: the
frame decoder, msgpack, the session envelope, the target parser and the
minion id check. Each must fail only in its documented way.

Runs are deterministic (C{derandomize=True}, no example database) and small
(200 examples per property, no deadline) so the suite stays fast on
two cores. The agreement of master- and minion-side compound matching over
fixed word pools is in L{tests.test_targeting_property}; here the words
themselves are generated.
"""

from __future__ import annotations

import os
import struct
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from twisted.internet.testing import StringTransport
from twisted.trial.unittest import SynchronousTestCase

from salttwist import serial
from salttwist.pki.ids import MAX_ID_BYTES, InvalidMinionId, validateMinionId
from salttwist.targeting import (
    TARGET_TYPES,
    TargetError,
    checkMinions,
    compileTarget,
    matchMinion,
)
from salttwist.transport.framing import PREAUTH_MAX_FRAME, FrameProtocol
from salttwist.transport.session import SessionCipher, SessionError

FUZZ = settings(
    max_examples=200,
    deadline=None,
    derandomize=True,
    database=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)


class _Recorder(FrameProtocol):
    """
    A frame protocol that keeps the maps it receives.
    """

    def __init__(self) -> None:
        self.frames: list[dict[str, Any]] = []
        self.violations: list[str] = []

    def frameReceived(self, message: dict[str, Any]) -> None:
        self.frames.append(message)

    def protocolViolation(self, reason: str) -> None:
        self.violations.append(reason)
        super().protocolViolation(reason)


def _feed(stream: bytes, cuts: list[int]) -> tuple[_Recorder, StringTransport]:
    """
    Feed C{stream} to a fresh protocol, cut at C{cuts}.
    """
    proto = _Recorder()
    transport = StringTransport()
    proto.makeConnection(transport)
    bounds = sorted({c % (len(stream) + 1) for c in cuts} | {0, len(stream)})
    for start, end in zip(bounds, bounds[1:], strict=False):
        proto.dataReceived(stream[start:end])
    return proto, transport


def _reference(stream: bytes) -> tuple[list[dict[str, Any]], bool]:
    """
    What the decoder must do with C{stream}: the maps before the first bad
    frame, and whether the connection is closed.
    """
    frames: list[dict[str, Any]] = []
    offset = 0
    while len(stream) - offset >= 4:
        (length,) = struct.unpack_from("!I", stream, offset)
        if length > PREAUTH_MAX_FRAME:
            return frames, True
        if len(stream) - offset - 4 < length:
            break
        body = stream[offset + 4 : offset + 4 + length]
        offset += 4 + length
        try:
            message = serial.loads(body)
        except serial.SerialError:
            return frames, True
        if not isinstance(message, dict):
            return frames, True
        frames.append(message)
    return frames, False


_scalars = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(min_value=-(2**63), max_value=2**64 - 1),
    st.floats(allow_nan=False),
    st.text(max_size=20),
    st.binary(max_size=20),
)
_values = st.recursive(
    _scalars,
    lambda children: st.one_of(
        st.lists(children, max_size=4), st.dictionaries(st.text(max_size=8), children, max_size=4)
    ),
    max_leaves=12,
)
_maps = st.dictionaries(st.text(max_size=8), _values, max_size=4)


def _frame(body: bytes) -> bytes:
    return struct.pack("!I", len(body)) + body


#: Streams mixing good frames, frames with junk bodies, raw junk and
#: oversized length headers.
_streams = st.lists(
    st.one_of(
        _maps.map(lambda m: _frame(serial.dumps(m))),
        st.binary(max_size=40).map(_frame),
        st.binary(max_size=12),
        st.integers(min_value=PREAUTH_MAX_FRAME + 1, max_value=2**32 - 1).map(
            lambda n: struct.pack("!I", n)
        ),
    ),
    max_size=6,
).map(b"".join)


class FrameFuzzTests(SynchronousTestCase):
    """
    L{FrameProtocol} fed arbitrary byte streams in arbitrary chunks.
    """

    @FUZZ
    @given(_streams, st.lists(st.integers(min_value=0), max_size=12))
    def test_framesOrClose(self, stream: bytes, cuts: list[int]) -> None:
        """
        C{dataReceived} never raises: the protocol hands on exactly the maps
        before the first bad frame, then closes the connection (with one
        violation) if there is one, whatever the chunking.
        """
        proto, transport = _feed(stream, cuts)
        frames, closed = _reference(stream)
        self.assertEqual(proto.frames, frames)
        self.assertEqual(transport.disconnecting, closed)
        self.assertEqual(len(proto.violations), 1 if closed else 0)

    @FUZZ
    @given(st.lists(_maps, max_size=5), st.lists(st.integers(min_value=0), max_size=20))
    def test_validFramesAnyChunking(self, maps: list[dict[str, Any]], cuts: list[int]) -> None:
        """
        Well-formed frames are decoded in order, however the stream is cut,
        and the connection stays open.
        """
        stream = b"".join(_frame(serial.dumps(m)) for m in maps)
        proto, transport = _feed(stream, cuts)
        self.assertEqual(proto.frames, [serial.loads(serial.dumps(m)) for m in maps])
        self.assertFalse(transport.disconnecting)


class SerialFuzzTests(SynchronousTestCase):
    """
    L{serial.loads} on arbitrary bytes.
    """

    @FUZZ
    @given(st.binary(max_size=200))
    def test_onlySerialError(self, data: bytes) -> None:
        """
        Arbitrary bytes decode to a value or raise L{serial.SerialError},
        never anything else.
        """
        try:
            serial.loads(data)
        except serial.SerialError:
            pass

    @FUZZ
    @given(_values, st.data())
    def test_mutatedEncodings(self, value: Any, data: st.DataObject) -> None:
        """
        A valid encoding with bytes flipped, cut or appended still decodes
        or raises only L{serial.SerialError}; an intact one round-trips.
        """
        encoded = serial.dumps(value)
        self.assertEqual(serial.dumps(serial.loads(encoded)), encoded)
        mutated = bytearray(encoded)
        for _ in range(data.draw(st.integers(0, 3))):
            i = data.draw(st.integers(0, len(mutated) - 1))
            mutated[i] = data.draw(st.integers(0, 255))
        mutated = mutated[: data.draw(st.integers(0, len(mutated)))] + data.draw(
            st.binary(max_size=8)
        )
        try:
            serial.loads(bytes(mutated))
        except serial.SerialError:
            pass


KEY = os.urandom(32)


class SessionFuzzTests(SynchronousTestCase):
    """
    L{SessionCipher.open} on hostile frames.
    """

    @FUZZ
    @given(st.one_of(st.binary(max_size=120).map(lambda b: {"enc": b}), _maps))
    def test_onlySessionError(self, frame: dict[str, Any]) -> None:
        """
        A random frame (an C{enc} blob or any map) raises
        L{SessionError}, never anything else, and does not advance the
        receive counter: the next genuine frame still opens.
        """
        server = SessionCipher(KEY, isServer=True)
        client = SessionCipher(KEY, isServer=False)
        self.assertRaises(SessionError, server.open, frame)
        self.assertEqual(server.open(client.seal({"n": 1})), {"n": 1})

    @FUZZ
    @given(_maps, st.data())
    def test_tamperedSealedFrame(self, payload: dict[str, Any], data: st.DataObject) -> None:
        """
        A sealed frame with any byte changed, or cut, is refused with
        L{SessionError}.
        """
        server = SessionCipher(KEY, isServer=True)
        client = SessionCipher(KEY, isServer=False)
        blob = bytearray(client.seal(payload)["enc"])
        if data.draw(st.booleans()):
            i = data.draw(st.integers(0, len(blob) - 1))
            blob[i] ^= data.draw(st.integers(1, 255))
        else:
            blob = blob[: data.draw(st.integers(0, len(blob) - 1))]
        self.assertRaises(SessionError, server.open, {"enc": bytes(blob)})


#: Characters the target grammars care about, plus some others.
_TARGET_ALPHABET = st.sampled_from(
    list("abw1*?[]!^-,:|@()\\.$+{} \t\n") + ["G@", "P@", "E@", "L@", "N@", "I@", "and", "not"]
)
_TARGET_TEXT = st.one_of(st.text(max_size=40), st.lists(_TARGET_ALPHABET, max_size=20).map("".join))
_NODEGROUPS = {"g1": "web*", "g2": ["db1", "db2"], "g3": "N@g1 or G@os:Debian", "loop": "N@loop"}
_GRAINS = {"os": "Debian", "roles": ["web", "db"], "cpu": {"count": 4}, "num": 7}


class TargetFuzzTests(SynchronousTestCase):
    """
    The target parser on arbitrary input: only L{TargetError}.
    """

    @FUZZ
    @given(
        st.one_of(_TARGET_TEXT, st.lists(_TARGET_TEXT, max_size=5), _values),
        st.sampled_from(TARGET_TYPES),
        st.sampled_from([":", "|", "::"]),
    )
    def test_onlyTargetError(self, tgt: Any, tgtType: str, delimiter: str) -> None:
        """
        For every target type, any text (or list, or other value) compiles
        or raises L{TargetError}; a compiled target matches a minion
        without raising.
        """
        try:
            compileTarget(tgt, tgtType, _NODEGROUPS, delimiter)
        except TargetError:
            return
        result = matchMinion(
            "web1", tgt, tgtType, grains=_GRAINS, nodegroups=_NODEGROUPS, delimiter=delimiter
        )
        self.assertIsInstance(result, bool)

    @FUZZ
    @given(_TARGET_TEXT, st.text(max_size=8))
    def test_unknownType(self, tgt: str, tgtType: str) -> None:
        """
        An unknown target type is a L{TargetError} too.
        """
        if tgtType in TARGET_TYPES:
            return
        self.assertRaises(TargetError, compileTarget, tgt, tgtType)


_IDS = ["web1", "web2", "db1", "db2", "cache1", "a*b", "w1"]
_GRAINS_BY_ID: dict[str, dict[str, Any]] = {
    "web1": {"os": "Debian", "roles": ["web"]},
    "web2": {"os": "Ubuntu", "roles": ["web", "db"]},
    "db1": {"os": "Debian", "roles": ["db"], "num": 1},
    "db2": {"os": "CentOS"},
    "cache1": {"os": "debian", "roles": []},
    "a*b": {"os": "Arch"},
    "w1": {},
}
_GLOB_WORDS = st.lists(st.sampled_from(list("abdew12*?[]!")), min_size=1, max_size=6).map("".join)
_words = st.one_of(
    _GLOB_WORDS,
    _GLOB_WORDS.map(lambda g: "E@" + g.replace("*", ".*").replace("?", ".")),
    st.lists(st.sampled_from(_IDS), min_size=1, max_size=3).map(lambda ids: "L@" + ",".join(ids)),
    st.tuples(st.sampled_from(["os", "roles", "num", "x"]), _GLOB_WORDS).map(
        lambda kv: f"G@{kv[0]}:{kv[1]}"
    ),
    st.sampled_from(["N@g1", "N@g2", "N@g3"]),
)
_expressions = st.recursive(
    _words.map(lambda w: [w]),
    lambda sub: st.one_of(
        st.tuples(sub, st.sampled_from(["and", "or"]), sub).map(lambda t: [*t[0], t[1], *t[2]]),
        sub.map(lambda e: ["not", *e]),
        sub.map(lambda e: ["(", *e, ")"]),
    ),
    max_leaves=6,
)


class CompoundAgreementTests(SynchronousTestCase):
    """
    Master and minions agree on generated compound targets.
    """

    @FUZZ
    @given(_expressions)
    def test_masterAgreesWithMinions(self, words: list[str]) -> None:
        """
        For a compound target built from generated words (globs and regexes
        with metacharacters, lists, grains, nodegroups), L{checkMinions}
        names exactly the minions whose own L{matchMinion} is true, or both
        sides refuse it with L{TargetError}.
        """
        expr = " ".join(words)
        try:
            expected = checkMinions(_IDS, expr, "compound", _GRAINS_BY_ID, _NODEGROUPS)
        except TargetError:
            self.assertRaises(TargetError, compileTarget, expr, "compound", _NODEGROUPS)
            return
        mine = {
            m
            for m in _IDS
            if matchMinion(m, expr, "compound", grains=_GRAINS_BY_ID[m], nodegroups=_NODEGROUPS)
        }
        self.assertEqual(set(expected), mine, expr)


class MinionIdFuzzTests(SynchronousTestCase):
    """
    L{validateMinionId} on arbitrary values.
    """

    @FUZZ
    @given(st.one_of(st.text(max_size=300), _values))
    def test_safeOrInvalid(self, value: Any) -> None:
        """
        Any value is returned unchanged as a safe id or refused with
        L{InvalidMinionId}; a returned id never holds a path separator or
        NUL, never starts with a dot and fits in L{MAX_ID_BYTES} bytes.
        """
        try:
            minionId = validateMinionId(value)
        except InvalidMinionId:
            return
        self.assertEqual(minionId, value)
        self.assertIsInstance(minionId, str)
        for bad in ("/", "\\", "\x00"):
            self.assertNotIn(bad, minionId)
        self.assertFalse(minionId.startswith("."))
        self.assertNotIn(minionId, ("", ".", ".."))
        self.assertLessEqual(len(minionId.encode("utf-8")), MAX_ID_BYTES)
        self.assertEqual(minionId, minionId.strip())
