# -*- test-case-name: tests.test_render_blockyaml -*-
"""
The fastest path for the YAML that Jinja-rendered pillar and SLS files
almost always are: block mappings and sequences of one-line scalars, read
line by line in Python without libyaml's event objects (which cost most of
a 200-key pillar's compile even on L{salttwist.render.fastyaml}'s path).

What it reads, and nothing else:

  - block mappings (C{key: value}, C{key:} then a deeper block, or a
    sequence at the key's own indentation) and block sequences (C{- value},
    C{- key: value} starting a mapping, C{-} then a deeper block);
  - keys: plain (no C{:} nor C{#} in them), C{'single'} or C{"double"}
    quoted;
  - values: one-line plain scalars, resolved by PyYAML's own YAML 1.1
    resolvers and constructors (L{resolvePlain}: C{yes}, C{012}, C{1_000},
    C{.inf}, C{~} ... as the full loader; timestamps stay text), one-line
    quoted scalars (C{"..."} with the escapes C{\\\\ \\" \\n \\t} only), the
    empty flow collections C{[]} and C{{}};
  - whole-line and trailing comments, blank lines.

Anything else (flow collections, block and multi-line scalars, anchors,
aliases, tags, merge keys, documents markers, tabs, CR line ends, a
repeated key, a line indented in a way it does not expect ...) raises
L{Unhandled}: the caller then loads the text with the next loader, which
gives the same data or the error naming the line. So this path never
decides what a document means where the full loader would decide
otherwise; it is only faster.
"""

from __future__ import annotations

import re
from typing import Any

from salttwist.render.fastyaml import RESOLVABLE_FIRST, Unhandled, resolvePlain

__all__ = ["blockLoad"]

#: A character this path does not read: anything but a line feed and the
#: printable characters of YAML (no tab, no CR, no other line break, no
#: byte order mark).
_OUTSIDE = re.compile(
    "[^\n\x20-\x7e\xa0-\u2027\u202a-\ud7ff\ue000-\ufefe\uff00-\ufffd\U00010000-\U0010ffff]"
)
#: A mapping entry's key (plain, with the spaces before its colon;
#: single- or double-quoted) and its colon.
_KEY = (
    r"""(?:([^\s'"#?:,\[\]{}&*!|>%@`\-][^:#]*)"""
    r"""|'([^']*(?:''[^']*)*)'"""
    r"""|"([^"\\]*(?:\\.[^"\\]*)*)") *:"""
)
#: A plain scalar with no C{:} nor C{#} in it ending the line (with the
#: spaces after it): most values.
_SIMPLE = r"""([^\s'"#?:,\[\]{}&*!|>%@`\-][^:#]*)"""
#: Any line: its indentation (1); the spaces after its dash (2: L{None}
#: without a dash, C{""} for a dash ending the line); then a mapping entry
#: (its plain, single- or double-quoted key: 3, 4, 5; a simple value: 6;
#: anything else after the colon and its spaces: 7, L{None} when the line
#: ends at the colon), or a simple scalar (8), or the rest of the line (9).
_LINE = re.compile(
    r"( *)(?:-( +|$))?(?:" + _KEY + r"(?: +(?:" + _SIMPLE + r"|(.*)))?|" + _SIMPLE + r"|(.*))"
)
# Greedy patterns and a strip after: lazy ones cost three times more.
#: A quoted scalar alone on the rest of its line (maybe a comment after).
_SINGLE = re.compile(r"'([^']*(?:''[^']*)*)'(?: *| +#.*)")
_DOUBLE = re.compile(r'"([^"\\]*(?:\\.[^"\\]*)*)"(?: *| +#.*)')
_EMPTY_FLOW = re.compile(r"(\[\]|\{\})(?: *| +#.*)")
_ESCAPE = re.compile(r"\\(.)")
_ESCAPES = {"\\": "\\", '"': '"', "n": "\n", "t": "\t"}
#: The characters a plain scalar may not start with here (C{-} may, when
#: something other than a space follows it).
_INDICATORS = frozenset("-?:,[]{}#&*!|>'\"%@`")
#: Longer keys are left to the full loader (libyaml's simple keys stop at
#: 1,024 characters).
_MAX_KEY = 1000
_MAX_INT = 2**64
_MIN_INT = -(2**63)

#: Plain scalars an implicit type may claim (by their first character),
#: resolved: C{yes}, C{12}, C{name}; values are immutable, so shared.
_RESOLVED: dict[str, Any] = {}
_MAX_RESOLVED = 20_000


def _plain(text: str, wire: bool) -> Any:
    """
    @return: the value of the plain scalar C{text} (see L{resolvePlain});
        with C{wire}, an integer beyond 64 bits as its text.
    """
    if text[0] not in RESOLVABLE_FIRST:
        return text
    try:
        value = _RESOLVED[text]
    except KeyError:
        value = resolvePlain(text)
        if len(_RESOLVED) >= _MAX_RESOLVED:
            _RESOLVED.clear()
        _RESOLVED[text] = value
    if wire and type(value) is int and not _MIN_INT <= value < _MAX_INT:
        return str(value)
    return value


def _unescape(text: str) -> str:
    """
    @return: the value of a double-quoted scalar's C{text}.
    @raise Unhandled: for an escape other than C{\\\\ \\" \\n \\t}.
    """
    if "\\" not in text:
        return text

    def one(match: re.Match[str]) -> str:
        try:
            return _ESCAPES[match.group(1)]
        except KeyError:
            raise Unhandled("escape") from None

    return _ESCAPE.sub(one, text)


def _scalar(raw: str, wire: bool) -> Any:
    """
    @param raw: the rest of a line after C{key: } or C{- }, starting with
        something other than a space or C{#}.
    @return: the one-line scalar it holds; the type C{list} or C{dict}
        for C{[]} or C{{}} (a new one goes in each document).
    @raise Unhandled: when it is anything else.
    """
    first = raw[0]
    if first == "'":
        match = _SINGLE.fullmatch(raw)
        if match is None:
            raise Unhandled("quoted scalar")
        return match.group(1).replace("''", "'")
    if first == '"':
        match = _DOUBLE.fullmatch(raw)
        if match is None:
            raise Unhandled("quoted scalar")
        return _unescape(match.group(1))
    if first in _INDICATORS:
        if first == "-" and len(raw) > 1 and raw[1] != " ":
            pass
        elif first in "[{" and (match := _EMPTY_FLOW.fullmatch(raw)) is not None:
            return list if match.group(1) == "[]" else dict
        else:
            raise Unhandled("indicator")
    comment = raw.find(" #")
    if comment != -1:
        raw = raw[:comment].rstrip(" ")
    else:
        raw = raw.rstrip(" ")
    if ": " in raw or raw[-1] == ":":
        raise Unhandled("colon")
    return _plain(raw, wire)


#: What a line is (L{_classify}): nothing (blank, a comment); a mapping
#: entry with its value, or with nothing after its colon; a sequence entry
#: with its value, or with nothing after its dash; a sequence entry that
#: starts a mapping, with the value of its first entry or with nothing.
#: The kinds with nothing after them are even.
_SKIP = 0
_ENTRY_VALUE = 1
_ENTRY_EMPTY = 2
_ITEM_VALUE = 3
_ITEM_EMPTY = 4
_ITEM_ENTRY_VALUE = 5
_ITEM_ENTRY_EMPTY = 6
#: Added to the kind of a line whose value is a new empty one or whose key
#: was not text before the wire: the others take the shortest way.
_SPECIAL = 8

#: The key of a line whose key was text before the wire (or no key).
_TEXT = object()

#: One line's meaning: its indentation, kind, key, value, the type of a
#: new empty value (C{[]} or C{{}}: L{None} for the others), the column
#: of the mapping's keys (the line's own, or after its dash), and on the
#: wire the key as it was when it is not text (else L{_TEXT}).
_Line = tuple[int, int, Any, Any, Any, int, Any]
_SKIPPED: _Line = (0, _SKIP, None, None, None, 0, _TEXT)


def _classify(line: str, wire: bool) -> _Line:
    """
    @return: what C{line} is, on its own.
    @raise Unhandled: for a line this path does not read.
    """
    if not (line.isascii() and line.isprintable()) and _OUTSIDE.search(line) is not None:
        raise Unhandled("character")
    spaces, dash, plainKey, singleKey, doubleKey, simple, other, item, rest = _LINE.fullmatch(
        line
    ).groups()  # type: ignore[union-attr]
    indent = len(spaces)
    if dash is None:
        if rest is not None:
            if not rest or rest[0] == "#":
                return _SKIPPED
            raise Unhandled("not block YAML")
        if item is not None:
            raise Unhandled("a scalar alone on its line")
        kind = _ENTRY_VALUE
        column = indent
    else:
        if plainKey is None and singleKey is None and doubleKey is None:
            if item is not None:
                value = _plain(item.rstrip(" "), wire)
                return (indent, _ITEM_VALUE, None, value, None, indent, _TEXT)
            if rest and rest[0] != "#":
                if rest[0] == "-" and (len(rest) == 1 or rest[1] == " "):
                    raise Unhandled("compact sequence")
                value = _scalar(rest, wire)
                if value is list or value is dict:
                    return (indent, _ITEM_VALUE | _SPECIAL, None, None, value, indent, _TEXT)
                return (indent, _ITEM_VALUE, None, value, None, indent, _TEXT)
            return (indent, _ITEM_EMPTY, None, None, None, indent, _TEXT)
        kind = _ITEM_ENTRY_VALUE
        column = indent + 1 + len(dash)
    raw = _TEXT
    if plainKey is not None:
        plainKey = plainKey.rstrip(" ")
        if len(plainKey) > _MAX_KEY:
            raise Unhandled("long key")
        # A merge key (C{<<}) raises here.
        key = _plain(plainKey, False)
        if wire and type(key) is not str:
            raw = key
            key = str(key)
    elif singleKey is not None:
        key = singleKey.replace("''", "'")
    else:
        key = _unescape(doubleKey)
    if raw is not _TEXT:
        kind += _SPECIAL
    if simple is not None:
        return (indent, kind, key, _plain(simple.rstrip(" "), wire), None, column, raw)
    if other and other[0] != "#":
        value = _scalar(other, wire)
        if value is list or value is dict:
            return (indent, kind | _SPECIAL, key, None, value, column, raw)
        return (indent, kind, key, value, None, column, raw)
    return (indent, kind + 1, key, None, None, column, raw)


#: A plain scalar with no C{:} nor C{#} in it, alone.
_SIMPLE_ALONE = re.compile(_SIMPLE)
#: The kinds of a line C{key:} (with or without a dash before it).
_KEYED_EMPTY = frozenset(
    (_ENTRY_EMPTY, _ITEM_ENTRY_EMPTY, _ENTRY_EMPTY + _SPECIAL, _ITEM_ENTRY_EMPTY + _SPECIAL)
)
_UNKNOWN = object()
#: What C{head + ":"} is, by C{head}, when it is a key with nothing after
#: it (else L{None}), for wire and other documents.
_HEADS: dict[bool, dict[str, _Line | None]] = {False: {}, True: {}}


def _meaning(line: str, wire: bool) -> _Line:
    """
    L{_classify}, the short way for a line C{key: value} whose key was seen
    before with another simple value (a line that holds a minion's grains
    is new for each minion; its key is not).
    """
    head, colon, tail = line.partition(": ")
    if (
        colon
        and _SIMPLE_ALONE.fullmatch(tail) is not None
        and ((tail.isascii() and tail.isprintable()) or _OUTSIDE.search(tail) is None)
    ):
        heads = _HEADS[wire]
        entry = heads.get(head, _UNKNOWN)
        if entry is _UNKNOWN:
            try:
                entry = _classify(head + ":", wire)
            except Unhandled:
                entry = None
            if entry is not None and entry[1] not in _KEYED_EMPTY:
                entry = None
            if len(heads) >= MAX_LINES:
                heads.clear()
            heads[head] = entry
        if entry is not None:
            indent, kind, key, _, _, column, raw = entry  # type: ignore[misc]
            return (indent, kind - 1, key, _plain(tail.rstrip(" "), wire), None, column, raw)
    return _classify(line, wire)


#: Lines already classified, by their text (most lines of a pillar are the
#: same for every minion: only those that hold its grains differ), for
#: wire and other documents. Each is a tuple of immutable values.
_LINES: dict[bool, dict[str, _Line]] = {False: {}, True: {}}
#: The most lines each keeps (then it starts again, empty).
MAX_LINES = 20_000


def blockLoad(text: str, wire: bool = False) -> Any:
    """
    Load one YAML document of block mappings, sequences and one-line
    scalars (see the module's docstring).

    One pass over the lines with a stack of the open blocks: each line
    closes the blocks deeper than it, then adds an entry to the block at
    its indentation (or starts a block below an entry that had no value).

    @param wire: as L{salttwist.render.yamlio.loadYaml}'s: keys become
        text, integers beyond 64 bits their text.
    @return: the data (L{None} for an empty document).
    @raise Unhandled: when the document is anything else, or is not valid
        YAML: load it with another loader then.
    """
    known = _LINES[wire]
    holder: list[Any] = [None]
    # The blocks open around the current one (top): (block, indentation,
    # is a mapping); the first, at -1, stands for the document.
    stack: list[tuple[Any, int, bool]] = []
    top: Any = None
    topIndent = -1
    topIsMap = False
    # An entry with nothing after its colon or dash, whose value is the
    # block on the next lines if there is one: its container, key (or
    # index) and indentation, and whether a sequence at that same
    # indentation is its value (a mapping's entry).
    pending = True
    pendingIn: Any = holder
    pendingKey: Any = 0
    pendingIndent = -1
    pendingSame = False
    # The keys that were not text, as they were, by mapping (its id: each
    # lives as long as this call).
    notText: dict[int, list[Any]] = {}
    for line in text.split("\n"):
        meaning = known.get(line)
        if meaning is None:
            meaning = _meaning(line, wire)
            if len(known) >= MAX_LINES:
                known.clear()
            known[line] = meaning
        indent, kind, key, value, make, column, raw = meaning
        if indent == topIndent and not pending:
            # The shortest way, for most lines: a next entry of the block.
            if kind == _ENTRY_VALUE:
                if topIsMap and key not in top:
                    top[key] = value
                    continue
            elif kind == _ITEM_VALUE and not topIsMap:
                top.append(value)
                continue
        if not kind:
            continue
        if kind & _SPECIAL:
            kind -= _SPECIAL
            if make is not None:
                value = make()
        isItem = kind >= _ITEM_VALUE
        if pending:
            pending = False
            if indent > pendingIndent or (pendingSame and indent == pendingIndent and isItem):
                block: Any = [] if isItem else {}
                pendingIn[pendingKey] = block
                stack.append((top, topIndent, topIsMap))
                top, topIndent, topIsMap = block, indent, not isItem
        if indent != topIndent:
            while indent < topIndent:
                top, topIndent, topIsMap = stack.pop()
            if indent != topIndent:
                raise Unhandled("indentation")
        if topIsMap:
            if isItem:
                raise Unhandled("a sequence entry in a mapping")
        elif not isItem:
            # The end of a sequence at its mapping's indentation.
            top, topIndent, topIsMap = stack.pop()
            if not topIsMap or indent != topIndent:
                raise Unhandled("indentation")
        elif kind == _ITEM_VALUE:
            top.append(value)
            continue
        elif kind == _ITEM_EMPTY:
            top.append(None)
            pending = True
            pendingIn = top
            pendingKey = len(top) - 1
            pendingIndent = indent
            pendingSame = False
            continue
        else:
            # A mapping starts on the entry's line, at its key's column.
            block = {}
            top.append(block)
            stack.append((top, topIndent, topIsMap))
            top, topIndent, topIsMap = block, column, True
        # A mapping entry.
        if key in top:
            # The full loader names the line.
            raise Unhandled("duplicate key")
        if raw is not _TEXT:
            # A key made text for the wire: the full loader refuses it if
            # it repeats another as it was (C{1} and C{true} are the same
            # key to it).
            seen = notText.setdefault(id(top), [])
            if raw in seen:
                raise Unhandled("duplicate key")
            seen.append(raw)
        if kind & 1:
            top[key] = value
        else:
            top[key] = None
            pending = True
            pendingIn = top
            pendingKey = key
            pendingIndent = column
            pendingSame = True
    return holder[0]
