# -*- test-case-name: tests.test_render_fastyaml -*-
"""
A fast path for the YAML that pillar and SLS files are made of: plain
mappings, sequences and scalars built straight from libyaml's event stream
(PyYAML's C parser), without PyYAML's node graph and its constructor, which
cost about 5 us a node in Python (a 200-key pillar of 2,600 nodes: 12 ms,
most of a minion's pillar compile).

Scalars are resolved by PyYAML's own implicit resolvers (YAML 1.1, as
Salt's loader) and built by its own constructors for the few tags that are
not strings; what this path does not handle (explicit tags, anchors and
aliases, merge keys, complex keys, a repeated key, several documents)
raises L{Unhandled}, and the caller loads the text with the full loader,
which gives the same data or the error naming the line. So this path never
decides what a document means where the full loader would decide
otherwise: it is only faster.
"""

from __future__ import annotations

from typing import Any

import yaml
from yaml.events import (
    AliasEvent,
    DocumentEndEvent,
    DocumentStartEvent,
    MappingEndEvent,
    MappingStartEvent,
    ScalarEvent,
    SequenceEndEvent,
    SequenceStartEvent,
    StreamEndEvent,
    StreamStartEvent,
)
from yaml.nodes import ScalarNode

__all__ = ["RESOLVABLE_FIRST", "Unhandled", "fastLoad", "resolvePlain"]

try:
    from yaml.cyaml import CParser as _CParser
except ImportError:  # PyYAML built without libyaml: the full loader only.
    _CParser = None

_STR = "tag:yaml.org,2002:str"
_NULL = "tag:yaml.org,2002:null"
_BOOL = "tag:yaml.org,2002:bool"
_INT = "tag:yaml.org,2002:int"
_FLOAT = "tag:yaml.org,2002:float"
_TIMESTAMP = "tag:yaml.org,2002:timestamp"

_RESOLVERS: dict[Any, list[tuple[str, Any]]] = yaml.resolver.Resolver.yaml_implicit_resolvers
_WILDCARD = _RESOLVERS.get(None, [])
#: The resolvers to try for a plain scalar, by its first character.
_BY_FIRST: dict[str, list[tuple[str, Any]]] = {
    key: list(value) + list(_WILDCARD) for key, value in _RESOLVERS.items() if key is not None
}
_NO_RESOLVERS: list[tuple[str, Any]] = list(_WILDCARD)
#: The first characters of the plain scalars an implicit type may claim:
#: any other plain scalar is text (L{resolvePlain} gives it back as it is).
RESOLVABLE_FIRST: frozenset[str] = frozenset(
    key for key, value in _BY_FIRST.items() if key and value
)
if _WILDCARD:  # pragma: no cover (PyYAML has no such resolver)
    raise ImportError("PyYAML has an implicit resolver for every first character")
#: PyYAML's constructors of the scalar tags, bound to one loader of no text.
_CONSTRUCTOR = yaml.SafeLoader("")
_BUILD = {
    _BOOL: _CONSTRUCTOR.construct_yaml_bool,
    _INT: _CONSTRUCTOR.construct_yaml_int,
    _FLOAT: _CONSTRUCTOR.construct_yaml_float,
}


class Unhandled(Exception):
    """
    The document holds something this path leaves to the full loader.
    """


def _scalar(event: Any) -> Any:
    """
    @return: the value of a plain or quoted scalar without an explicit tag.
    @raise Unhandled: for anything else.
    """
    value = event.value
    if event.anchor is not None or (event.tag is not None and event.tag != "!"):
        raise Unhandled("anchor or tag")
    if not event.implicit[0]:
        return value
    return resolvePlain(value)


def resolvePlain(value: str) -> Any:
    """
    @param value: the text of a plain scalar (one with no tag).
    @return: its value as the full loader gives it (YAML 1.1 implicit types
        by PyYAML's own resolvers and constructors; timestamps stay text).
    @raise Unhandled: for a merge key C{<<}, C{=} and other implicit types
        the full loader decides.
    """
    resolvers = _BY_FIRST.get(value[0] if value else "", _NO_RESOLVERS)
    if not resolvers:
        # Most strings: no implicit type starts with their first character.
        return value
    tag = _resolve(value, resolvers)
    if tag is None or tag == _STR or tag == _TIMESTAMP:
        # Timestamps stay text, as the full loader keeps them.
        return value
    if tag == _NULL:
        return None
    build = _BUILD.get(tag)
    if build is None:
        raise Unhandled(tag)
    return build(ScalarNode(tag, value))


def _resolve(value: str, resolvers: list[tuple[str, Any]]) -> str | None:
    """
    @return: the implicit tag of the plain scalar C{value} among
        C{resolvers} (those of its first character), as PyYAML's resolver
        finds it, or L{None} (a string).
    """
    for tag, regexp in resolvers:
        if regexp.match(value):
            return tag
    return None


def _wireValue(value: int) -> int | str:
    """
    @return: C{value}, or its text beyond what msgpack carries (64 bits).
    """
    return value if -(2**63) <= value < 2**64 else str(value)


class _Builder:
    """
    Builds one document from the parser's events.
    """

    def __init__(self, parser: Any, wire: bool) -> None:
        self._next = parser.get_event
        self._wire = wire

    def value(self, event: Any) -> Any:
        kind = type(event)
        if kind is ScalarEvent:
            value = _scalar(event)
            return _wireValue(value) if self._wire and type(value) is int else value
        if kind is MappingStartEvent:
            return self.mapping(event)
        if kind is SequenceStartEvent:
            return self.sequence(event)
        if kind is AliasEvent:
            raise Unhandled("alias")
        raise Unhandled(kind.__name__)

    def mapping(self, start: Any) -> dict[Any, Any]:
        if start.anchor is not None or (start.tag is not None and start.tag != "!"):
            raise Unhandled("tagged mapping")
        result: dict[Any, Any] = {}
        # The keys that are not text, as they were before the wire made
        # them text: the full loader refuses a repeated one (C{1} and
        # C{true} are the same key to it) before it looks at their texts.
        notText: list[Any] = []
        get = self._next
        while True:
            event = get()
            if type(event) is MappingEndEvent:
                return result
            if type(event) is not ScalarEvent:
                raise Unhandled("complex key")
            key = _scalar(event)
            if key == "<<" and event.implicit[0]:
                raise Unhandled("merge key")
            if self._wire and type(key) is not str:
                if key in notText:
                    raise Unhandled("duplicate key")
                notText.append(key)
                key = str(key)
            if key in result:
                # The full loader names the line.
                raise Unhandled("duplicate key")
            try:
                result[key] = self.value(get())
            except TypeError:
                raise Unhandled("unhashable key") from None

    def sequence(self, start: Any) -> list[Any]:
        if start.anchor is not None or (start.tag is not None and start.tag != "!"):
            raise Unhandled("tagged sequence")
        result: list[Any] = []
        get = self._next
        value = self.value
        while True:
            event = get()
            if type(event) is SequenceEndEvent:
                return result
            result.append(value(event))


def fastLoad(text: str, wire: bool = False) -> Any:
    """
    Load one YAML document made of plain mappings, sequences and scalars.

    @param wire: as L{salttwist.render.yamlio.loadYaml}'s: keys become
        text, integers beyond 64 bits their text.
    @return: the data (L{None} for an empty document).
    @raise Unhandled: when the document is anything else, or is not valid
        YAML: load it with the full loader then.
    """
    if _CParser is None:
        raise Unhandled("no libyaml")
    parser = _CParser(text)
    try:
        get = parser.get_event
        if type(get()) is not StreamStartEvent:
            raise Unhandled("stream")
        event = get()
        if type(event) is StreamEndEvent:
            return None
        if type(event) is not DocumentStartEvent:
            raise Unhandled("document")
        builder = _Builder(parser, wire)
        data = builder.value(get())
        if type(get()) is not DocumentEndEvent or type(get()) is not StreamEndEvent:
            raise Unhandled("several documents")
        return data
    except yaml.YAMLError:
        raise Unhandled("invalid YAML") from None
    finally:
        parser.dispose()
