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
    stack = [(obj, 0)]
    while stack:
        item, depth = stack.pop()
        if isinstance(item, dict):
            children = item.values()
        elif isinstance(item, list):
            children = item
        else:
            continue
        if depth >= maxDepth:
            raise SerialError(f"msgpack nesting deeper than {maxDepth}")
        stack.extend((child, depth + 1) for child in children)
