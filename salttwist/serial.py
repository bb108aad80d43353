# -*- test-case-name: tests.test_serial -*-
"""
msgpack with limits: the only (de)serialiser used on the wire and on the bus.

Ext types are refused, maps must have string or bytes keys, and the declared
sizes of containers are bounded by the size of the buffer, so a small frame
cannot make the decoder allocate a large structure.
"""

from __future__ import annotations

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


def dumps(obj: Any) -> bytes:
    """
    Serialise C{obj} to msgpack bytes.

    @raise SerialError: if C{obj} holds a type msgpack cannot encode.
    """
    try:
        return msgpack.packb(obj, use_bin_type=True)
    except (TypeError, ValueError, OverflowError) as e:
        raise SerialError(f"cannot serialise: {e}") from e


def loads(data: bytes, maxDepth: int = 64) -> Any:
    """
    Deserialise exactly one msgpack object from C{data}.

    @param maxDepth: the deepest nesting of containers accepted.
    @raise SerialError: on malformed, trailing or out-of-limit input.
    """
    size = len(data)
    try:
        obj = msgpack.unpackb(
            data,
            raw=False,
            use_list=True,
            strict_map_key=True,
            ext_hook=_refuseExt,
            max_str_len=size,
            max_bin_len=size,
            max_array_len=size,
            max_map_len=size // 2 + 1,
            max_ext_len=0,
        )
    except SerialError:
        raise
    except (msgpack.ExtraData, msgpack.FormatError, msgpack.StackError) as e:
        raise SerialError(f"malformed msgpack: {e}") from e
    except (ValueError, TypeError, UnicodeDecodeError, RecursionError) as e:
        raise SerialError(f"malformed msgpack: {e}") from e
    _checkDepth(obj, maxDepth)
    return obj


def _checkDepth(obj: Any, maxDepth: int) -> None:
    # Level by level, keeping only the containers: scalars (most of a big
    # return) are skipped by one type test each, and nothing is allocated
    # per scalar.
    level = [obj] if type(obj) in _CONTAINERS else []
    depth = 0
    while level:
        if depth >= maxDepth:
            raise SerialError(f"msgpack nesting deeper than {maxDepth}")
        below: list[Any] = []
        for item in level:
            children = item.values() if type(item) is dict else item
            below.extend([child for child in children if type(child) in _CONTAINERS])
        level = below
        depth += 1
