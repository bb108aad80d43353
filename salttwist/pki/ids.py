# -*- test-case-name: tests.test_ids -*-
"""
Minion ids.

A minion id names a file under C{pki_dir} and appears in event tags, job
returns and terminal output, so it is checked once, at every boundary where
one comes in, before it is used for anything.
"""

from __future__ import annotations

import re
import socket
import unicodedata
from collections.abc import Mapping
from typing import Any

MAX_ID_BYTES = 255
"""
The longest id, in bytes of UTF-8: the usual C{NAME_MAX} of a file name.
"""


class InvalidMinionId(ValueError):
    """
    Raised for a minion id that is not safe to use as a file name, in a tag
    or on a terminal. The message names the problem.
    """


def _describe(char: str) -> str:
    """
    Name a refused character by code point and Unicode name, so that an
    invisible one can be recognised in an error message.
    """
    name = unicodedata.name(char, "unnamed character")
    return f"U+{ord(char):04X} ({name})"


#: The ids most fleets use, safe at a glance: printable ASCII without a
#: space, C{/} or C{\\}, not starting with C{.}, at most L{MAX_ID_BYTES}
#: long (one byte per character). Anything else is checked character by
#: character (L{_checkThoroughly}).
_PLAIN_ASCII_ID = re.compile(rf"[!-\-0-\[\]-~][!-.0-\[\]-~]{{0,{MAX_ID_BYTES - 1}}}")


def validateMinionId(minionId: object) -> str:
    """
    Check that C{minionId} is a safe minion id.

    An id must be a non-empty L{str} of at most L{MAX_ID_BYTES} bytes of
    UTF-8 with no path separator (C{/} or C{\\}), no NUL, no control or format
    character (Unicode categories Cc and Cf, which include bidi overrides and
    zero-width characters), no whitespace, and must not start with C{.} (so
    neither C{.}, C{..} nor a hidden file).

    @param minionId: the candidate id.
    @return: C{minionId}, unchanged.
    @raise InvalidMinionId: naming the first problem found.
    """
    if isinstance(minionId, str) and _PLAIN_ASCII_ID.fullmatch(minionId):
        return minionId
    return _checkThoroughly(minionId)


def _checkThoroughly(minionId: object) -> str:
    """
    L{validateMinionId} for any id, one rule after the other.
    """
    if not isinstance(minionId, str):
        raise InvalidMinionId(f"minion id must be a string, not {type(minionId).__name__}")
    if not minionId:
        raise InvalidMinionId("minion id is empty")
    try:
        size = len(minionId.encode("utf-8"))
    except UnicodeEncodeError as e:
        raise InvalidMinionId("minion id is not valid Unicode (lone surrogate)") from e
    if size > MAX_ID_BYTES:
        raise InvalidMinionId(f"minion id is {size} bytes long; the limit is {MAX_ID_BYTES}")
    for separator in ("/", "\\"):
        if separator in minionId:
            raise InvalidMinionId(f"minion id contains a path separator {separator!r}")
    if "\0" in minionId:
        raise InvalidMinionId("minion id contains a NUL character")
    for char in minionId:
        category = unicodedata.category(char)
        if category in ("Cc", "Cf"):
            kind = "control" if category == "Cc" else "format (invisible or bidi)"
            raise InvalidMinionId(f"minion id contains a {kind} character {_describe(char)}")
        if char.isspace():
            raise InvalidMinionId(f"minion id contains whitespace {_describe(char)}")
    if minionId in (".", ".."):
        raise InvalidMinionId(f"minion id must not be {minionId!r}")
    if minionId.startswith("."):
        raise InvalidMinionId("minion id must not start with '.'")
    return minionId


def configuredMinionId(config: Mapping[str, Any]) -> str:
    """
    The minion id a minion configuration gives: its C{id}, or this host's
    FQDN, as Salt's minion does (not validated here).
    """
    return config["id"] or socket.getfqdn()
