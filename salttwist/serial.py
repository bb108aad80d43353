# -*- test-case-name: tests.test_serial -*-
"""
msgpack with limits: the only (de)serialiser used on the wire and on the bus.

Ext types are refused, maps must have string or bytes keys, and the declared
sizes of containers are bounded by the size of the buffer, so a small frame
cannot make the decoder allocate a large structure.
"""

from __future__ import annotations

import threading
from typing import Any

import msgpack


class SerialError(ValueError):
    """
    Raised when bytes are not one well-formed msgpack object within the limits.
    """


#: The container types msgpack decodes to (with C{use_list=True}).
_CONTAINERS = frozenset((dict, list))


def _refuseExt(code: int, data: bytes) -> Any:
    raise SerialError(f"msgpack ext type {code} is not allowed")


#: Each thread's msgpack packer: C{msgpack.packb} builds a new one (and its
#: buffer) for every call, which costs more than packing a small map.
_packers = threading.local()
#: After a result larger than this, the thread's packer (whose buffer grew
#: to that size and never shrinks) is dropped, so a big return does not
#: stay in memory.
_KEEP_PACKER_MAX = 1 << 20


class Packed:
    """
    One object's msgpack bytes, encoded already (by L{dumps}): as a value
    of a map given to L{dumps}, they go into its bytes as they are, so data
    that arrives encoded (a pillar from a worker) is sent on without being
    decoded and encoded again.

    @ivar data: the bytes.
    """

    __slots__ = ("data",)

    def __init__(self, data: bytes) -> None:
        self.data = data

    def __repr__(self) -> str:
        return f"<Packed {len(self.data)} bytes>"

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Packed) and other.data == self.data

    def __hash__(self) -> int:
        return hash(self.data)


def dumps(obj: Any) -> bytes:
    """
    Serialise C{obj} to msgpack bytes.

    @param obj: what to serialise; if it is a L{dict}, its values may be
        L{Packed}.
    @raise SerialError: if C{obj} holds a type msgpack cannot encode.
    """
    try:
        packer = _packers.packer
    except AttributeError:
        packer = _packers.packer = msgpack.Packer(use_bin_type=True)
    try:
        data = packer.pack(obj)
    except (TypeError, ValueError, OverflowError) as e:
        # The packer empties its buffer when packing fails. A map with
        # packed values fails here too (msgpack knows no Packed): so
        # looking for them costs other data nothing.
        if type(obj) is dict and any(type(value) is Packed for value in obj.values()):
            return _dumpsSpliced(obj)
        raise SerialError(f"cannot serialise: {e}") from e
    if len(data) > _KEEP_PACKER_MAX:
        del _packers.packer
    return data


def _dumpsSpliced(obj: dict[Any, Any]) -> bytes:
    """
    @return: the msgpack bytes of the map C{obj}, its L{Packed} values put
        in as they are.
    @raise SerialError: as L{dumps}.
    """
    pieces = [msgpack.Packer(use_bin_type=True).pack_map_header(len(obj))]
    for key, value in obj.items():
        pieces.append(dumps(key))
        pieces.append(value.data if type(value) is Packed else dumps(value))
    return b"".join(pieces)


def loads(data: bytes, maxDepth: int = 64) -> Any:
    """
    Deserialise exactly one msgpack object from C{data}.

    @param maxDepth: the deepest nesting of containers accepted.
    @raise SerialError: on malformed, trailing or out-of-limit input.
    """
    try:
        # msgpack (1.0 and later) bounds every declared length by the size
        # of the buffer itself unless told otherwise (maps by half of it);
        # ext types are refused outright.
        obj = msgpack.unpackb(
            data, raw=False, strict_map_key=True, ext_hook=_refuseExt, max_ext_len=0
        )
    except SerialError:
        raise
    except (msgpack.ExtraData, msgpack.FormatError, msgpack.StackError) as e:
        raise SerialError(f"malformed msgpack: {e}") from e
    except (ValueError, TypeError, UnicodeDecodeError, RecursionError) as e:
        raise SerialError(f"malformed msgpack: {e}") from e
    # Each container takes at least one byte: a buffer no longer than
    # maxDepth cannot nest deeper.
    if len(data) > maxDepth:
        _checkDepth(obj, maxDepth)
    return obj


def _checkDepth(obj: Any, maxDepth: int) -> None:
    # Level by level, keeping only the containers: scalars (most of a big
    # return) are skipped by one type test each, and nothing is allocated
    # per scalar. Plain loops: a comprehension is a function call of its
    # own, which costs more than the few values of most frames.
    if type(obj) not in _CONTAINERS:
        return
    level = [obj]
    depth = 0
    while level:
        if depth >= maxDepth:
            raise SerialError(f"msgpack nesting deeper than {maxDepth}")
        below: list[Any] = []
        for item in level:
            for child in item.values() if type(item) is dict else item:
                if type(child) in _CONTAINERS:
                    below.append(child)
        level = below
        depth += 1
