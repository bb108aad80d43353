# -*- test-case-name: tests.test_ids -*-
"""
Minion ids.

A minion id names a file under C{pki_dir} and appears in event tags, job
returns and terminal output, so it is checked once, at every boundary where
one comes in, before it is used for anything.
"""

from __future__ import annotations

import functools
import re
import socket
import string
import unicodedata
from collections.abc import Mapping
from dataclasses import dataclass
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


# -- The rules for a new id --------------------------------------------------
#
# validateMinionId above only makes an id safe to use as a file name, in a
# tag or on a terminal; every key store operation applies it, so keys
# written before the rules below (or by hand) can still be listed and
# deleted. The rules below decide which *new* ids the master admits
# (IdRules.check, before any key file is written): ids an admin can tell
# apart on screen, that are not target expressions themselves.

#: A host name's grammar: labels of ASCII letters, digits, C{-} and C{_},
#: separated by single dots, none empty, none starting with C{-}; so no
#: leading or trailing dot. Unambiguous (a dot ends a label), so the match is
#: linear in the id's length.
_HOST_NAME_ID = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_-]*(?:\.[A-Za-z0-9_][A-Za-z0-9_-]*)*")

HOST_NAME_RULE = (
    "a minion id is ASCII letters, digits, '-', '_' and '.', in labels separated by "
    "single dots that are not empty and do not start with '-' (so it neither starts "
    "nor ends with '.'), at most 255 bytes"
)
"""
The default rule for new ids, as told to an admin and a refused minion.
"""

UNICODE_IDS_OPTION = "allow_unicode_minion_ids"
"""
The master option that widens the rule to Unicode ids (L{IdRules.unicode}).
"""

_ASCII_LOWER = str.maketrans(string.ascii_uppercase, string.ascii_lowercase)


class IdClash(InvalidMinionId):
    """
    Raised for a new id that is the same as an existing one regardless of
    ASCII case (or, with Unicode ids, that looks the same: the same TR39
    skeleton).

    @ivar clashes: C{(state, existingId)} pairs.
    """

    def __init__(self, message: str, clashes: list[tuple[str, str]]) -> None:
        super().__init__(message)
        self.clashes = clashes


class UnicodeIdsUnavailable(RuntimeError):
    """
    C{allow_unicode_minion_ids} is set but PyICU, which holds the Unicode
    security data (UTS #39), is not installed.
    """


def escapeId(minionId: str) -> str:
    """
    An id as it can be shown in a log line or on a terminal: printable ASCII
    as it is (a backslash doubled), anything else as a Python escape
    (C{\\u3164}), so two ids that differ are told apart on screen.
    """
    if minionId.isascii() and minionId.isprintable() and "\\" not in minionId:
        return minionId
    out = []
    for char in minionId:
        if char == "\\":
            out.append("\\\\")
        elif " " <= char <= "~":
            out.append(char)
        else:
            code = ord(char)
            if code < 0x100:
                out.append(f"\\x{code:02x}")
            elif code < 0x10000:
                out.append(f"\\u{code:04x}")
            else:
                out.append(f"\\U{code:08x}")
    return "".join(out)


def _isPlainHostName(minionId: object) -> bool:
    """
    The fast path of every id rule: a string of at most L{MAX_ID_BYTES}
    characters that the host-name pattern matches (so ASCII, and as many
    bytes).
    """
    return (
        isinstance(minionId, str)
        and len(minionId) <= MAX_ID_BYTES
        and _HOST_NAME_ID.fullmatch(minionId) is not None
    )


def checkHostNameId(minionId: object) -> str:
    """
    Check a new id against the default rule, L{HOST_NAME_RULE}.

    @return: C{minionId}, unchanged.
    @raise InvalidMinionId: naming the rule it breaks.
    """
    if _isPlainHostName(minionId):
        return minionId
    validateMinionId(minionId)
    assert isinstance(minionId, str)
    raise InvalidMinionId(f"{_hostNameProblem(minionId)}; {HOST_NAME_RULE}")


def _hostNameProblem(minionId: str) -> str:
    """
    What in an id that passed L{validateMinionId} breaks the host-name rule.
    """
    shown = escapeId(minionId)
    for char in minionId:
        if not (char.isascii() and (char.isalnum() or char in "-_.")):
            what = _describe(char) if not char.isascii() else repr(char)
            return f"minion id '{shown}' contains {what}"
    if len(minionId) > MAX_ID_BYTES:
        return f"minion id is {len(minionId)} bytes long"
    if minionId.startswith("-"):
        return f"minion id '{shown}' starts with '-'"
    if minionId.endswith("."):
        return f"minion id '{shown}' ends with '.'"
    if ".." in minionId:
        return f"minion id '{shown}' has an empty label ('..')"
    return f"minion id '{shown}' has a label starting with '-'"


class _Icu:
    """
    ICU's spoof checker (UTS #39) as L{IdRules} uses it, built once.
    """

    def __init__(self) -> None:
        try:
            import icu
        except ImportError as e:
            raise UnicodeIdsUnavailable(
                f"{UNICODE_IDS_OPTION} needs PyICU: pip install 'salttwist[unicode-ids]' "
                "(building it needs ICU's headers and pkg-config: on Debian, "
                "apt-get install libicu-dev pkg-config), or set it to False"
            ) from e
        self.icu = icu
        checker = icu.SpoofChecker()
        checks = icu.USpoofChecks
        # Only characters of UTS #39's Identifier_Status=Allowed (no blank
        # letters such as U+3164, no Braille blank, no full-width forms, no
        # punctuation: so no target expression), no repeated combining mark
        # on one letter, one script per id at most besides Latin (the
        # "moderately restrictive" level: no Latin mixed with Cyrillic or
        # Greek), digits of one system.
        checker.setAllowedUnicodeSet(checker.getRecommendedUnicodeSet())
        checker.setChecks(
            checks.RESTRICTION_LEVEL | checks.INVISIBLE | checks.MIXED_NUMBERS | checks.CHAR_LIMIT
        )
        checker.setRestrictionLevel(icu.URestrictionLevel.MODERATELY_RESTRICTIVE)
        self.checker = checker
        self.failures = (
            (checks.CHAR_LIMIT, "a character not allowed in identifiers by Unicode (UTS #39)"),
            (checks.INVISIBLE, "an invisible sequence (a combining mark repeated)"),
            (checks.RESTRICTION_LEVEL, "mixed scripts (UTS #39 moderately restrictive)"),
            (checks.MIXED_NUMBERS, "digits of more than one numbering system"),
        )
        # A fresh checker for skeletons: setChecks does not change them.
        self.skeletons = icu.SpoofChecker()

    def problem(self, minionId: str) -> str | None:
        # '-' and '.' are not identifier characters to UTS #39: check the id
        # with them as '_' (Common script, allowed), so the script rules
        # still see the whole id.
        failed = self.checker.check(minionId.replace("-", "_").replace(".", "_"))
        for flag, what in self.failures:
            if failed & flag:
                return what
        return None

    def skeleton(self, text: str) -> str:
        return str(self.skeletons.getSkeleton(0, text))


@functools.lru_cache(maxsize=1)
def _icu() -> _Icu:
    return _Icu()


def _charsUnicode(minionId: str) -> str | None:
    """
    The structural rules of a Unicode id: NFC, labels as a host name's
    (not empty, not starting with C{-}), no label starting with a combining
    mark.
    """
    if unicodedata.normalize("NFC", minionId) != minionId:
        nfc = escapeId(unicodedata.normalize("NFC", minionId))
        return f"is not in Unicode NFC form (its NFC form is '{nfc}')"
    if minionId.endswith("."):
        return "ends with '.'"
    for label in minionId.split("."):
        if not label:
            return "has an empty label"
        if label.startswith("-"):
            return "has a label starting with '-'"
        if unicodedata.category(label[0]).startswith("M"):
            return f"has a label starting with a combining mark {_describe(label[0])}"
    return None


@dataclass(frozen=True)
class IdRules:
    """
    Which new minion ids a master admits, and which existing ids a new one
    must not look like.

    @ivar unicode: the master's C{allow_unicode_minion_ids}. False (the
        default): L{HOST_NAME_RULE}, and ids unique regardless of ASCII case.
        True: also ids in Unicode, which must be in NFC form, made of
        characters Unicode allows in identifiers (UTS #39, through ICU), not
        mixing scripts beyond Latin and one other, with no label starting
        with a combining mark; and unique regardless of case and of
        confusable letters (see L{IdIndex}).
    """

    unicode: bool = False

    def require(self) -> None:
        """
        @raise UnicodeIdsUnavailable: Unicode ids are on but PyICU is missing.
        """
        if self.unicode:
            _icu()

    def check(self, minionId: object) -> str:
        """
        Check a new id against these rules (not against existing ids: see
        L{IdIndex}).

        @return: C{minionId}, unchanged.
        @raise InvalidMinionId: naming the rule it breaks.
        """
        if not self.unicode:
            return checkHostNameId(minionId)
        if _isPlainHostName(minionId):
            return minionId
        validateMinionId(minionId)
        assert isinstance(minionId, str)
        problem = _charsUnicode(minionId) or _icu().problem(minionId)
        if problem is not None:
            raise InvalidMinionId(
                f"minion id '{escapeId(minionId)}' {_withVerb(problem)} "
                f"({UNICODE_IDS_OPTION} is on)"
            )
        return minionId

    def sameness(self, minionId: str, other: str) -> str:
        """
        How two ids that clash are alike, for a message.
        """
        if self.unicode and not (minionId.isascii() and other.isascii()):
            return "looks the same as (Unicode case fold and confusables, UTS #39)"
        return "is the same regardless of ASCII case as"


class IdIndex:
    """
    Existing ids by what a new one must not share with them: ASCII ids by
    their ASCII lower case; with Unicode ids, also every id by the UTS #39
    skeleton of its NFKC case fold, which a new id must not share with an
    existing id unless both are ASCII (then only case counts: C{web1} and
    C{webl} have one skeleton, and both are plain to see).
    """

    def __init__(self, rules: IdRules) -> None:
        self.rules = rules
        self._lower: dict[str, list[tuple[str, str]]] = {}
        self._skeleton: dict[str, list[tuple[str, str]]] = {}

    def add(self, state: str, minionId: str) -> None:
        """
        Index C{minionId}, which has a key in C{state}.
        """
        self._lower.setdefault(minionId.translate(_ASCII_LOWER), []).append((state, minionId))
        if self.rules.unicode:
            self._skeleton.setdefault(_unicodeFold(minionId), []).append((state, minionId))

    def remove(self, state: str, minionId: str) -> None:
        """
        Forget C{minionId} in C{state} (its key left that state).
        """
        keys = [(self._lower, minionId.translate(_ASCII_LOWER))]
        if self.rules.unicode:
            keys.append((self._skeleton, _unicodeFold(minionId)))
        for table, key in keys:
            entries = table.get(key)
            if entries is not None and (state, minionId) in entries:
                entries.remove((state, minionId))
                if not entries:
                    del table[key]

    def move(self, minionId: str, added: str | None, removed: str | None) -> None:
        """
        Follow a write of a key store: C{minionId} left state C{removed}
        and/or came into state C{added} (either may be L{None}).
        """
        if removed is not None:
            self.remove(removed, minionId)
        if added is not None:
            self.remove(added, minionId)
            self.add(added, minionId)

    def clashes(self, minionId: str) -> list[tuple[str, str]]:
        """
        @return: the C{(state, id)} of every other id C{minionId} clashes with.
        """
        found = [
            (state, other)
            for state, other in self._lower.get(minionId.translate(_ASCII_LOWER), ())
            if other != minionId
        ]
        if self.rules.unicode:
            plain = minionId.isascii()
            for state, other in self._skeleton.get(_unicodeFold(minionId), ()):
                if other != minionId and not (plain and other.isascii()):
                    if (state, other) not in found:
                        found.append((state, other))
        return found


def _withVerb(problem: str) -> str:
    """
    A problem phrase after the id: "contains ..." for a character.
    """
    if problem.startswith(("is ", "ends ", "has ")):
        return problem
    return f"contains {problem}"


@functools.lru_cache(maxsize=16384)
def _unicodeFold(minionId: str) -> str:
    return _icu().skeleton(unicodedata.normalize("NFKC", minionId).casefold())


DEFAULT_ID_RULES = IdRules()
"""
The rules of a master with default options.
"""


def idRulesFromConfig(config: Mapping[str, Any]) -> IdRules:
    """
    The L{IdRules} of a master configuration.
    """
    return IdRules(unicode=bool(config.get(UNICODE_IDS_OPTION, False)))
