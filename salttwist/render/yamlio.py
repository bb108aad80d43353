# -*- test-case-name: tests.test_render -*-
"""
Salt's YAML: PyYAML's safe loader (the C parser when present), with two
decisions of ours:

  - a mapping that repeats a key is an error naming the key and its line
    (Salt only warns and keeps the last value, which hides typos in pillar);
  - timestamps stay strings (C{2024-01-31} is C{"2024-01-31"}): a pillar
    travels as msgpack, which has no date type.

And the dumpers behind the C{yaml}, C{yaml_encode}, C{yaml_dquote} and
C{yaml_squote} Jinja filters.
"""

from __future__ import annotations

from typing import Any

import yaml

from salttwist.render.blockyaml import blockLoad
from salttwist.render.errors import RenderError
from salttwist.render.fastyaml import Unhandled, fastLoad

_BaseLoader: Any = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
_BaseDumper: Any = getattr(yaml, "CSafeDumper", yaml.SafeDumper)


class _SaltLoader(_BaseLoader):  # type: ignore[misc,valid-type]
    """
    The safe loader, refusing duplicate keys and keeping timestamps as text.
    """

    def construct_mapping(self, node: Any, deep: bool = False) -> dict[Any, Any]:
        if not isinstance(node, yaml.MappingNode):
            raise yaml.constructor.ConstructorError(
                None, None, f"expected a mapping node, but found {node.id}", node.start_mark
            )
        self.flatten_mapping(node)
        mapping: dict[Any, Any] = {}
        for keyNode, valueNode in node.value:
            key = self.construct_object(keyNode, deep=deep)
            try:
                hash(key)
            except TypeError:
                raise yaml.constructor.ConstructorError(
                    "while constructing a mapping",
                    node.start_mark,
                    "found an unhashable key",
                    keyNode.start_mark,
                ) from None
            if key in mapping:
                raise yaml.constructor.ConstructorError(
                    None, None, f"duplicate key {key!r}", keyNode.start_mark
                )
            mapping[key] = self.construct_object(valueNode, deep=deep)
        return mapping


_SaltLoader.add_constructor("tag:yaml.org,2002:map", _SaltLoader.construct_mapping)
_SaltLoader.add_constructor("tag:yaml.org,2002:timestamp", _SaltLoader.construct_yaml_str)


class _WireLoader(_SaltLoader):
    """
    Salt's YAML made of what the wire carries (msgpack, string keys): keys
    that are not strings become their text (C{80: http} gives C{"80"}),
    sets become lists, integers beyond 64 bits their text.
    """

    def construct_mapping(self, node: Any, deep: bool = False) -> dict[Any, Any]:
        mapping = super().construct_mapping(node, deep)
        if all(type(key) is str for key in mapping):
            return mapping
        result: dict[str, Any] = {}
        for (keyNode, _), (key, value) in zip(node.value, mapping.items(), strict=False):
            text = key if isinstance(key, str) else str(key)
            if text in result:
                raise yaml.constructor.ConstructorError(
                    None, None, f"duplicate key {text!r}", keyNode.start_mark
                )
            result[text] = value
        return result

    def construct_wire_int(self, node: Any) -> Any:
        value = self.construct_yaml_int(node)
        return value if -(2**63) <= value < 2**64 else str(value)

    def construct_wire_set(self, node: Any) -> Any:
        return sorted(self.construct_mapping(node), key=str)


_WireLoader.add_constructor("tag:yaml.org,2002:map", _WireLoader.construct_mapping)
_WireLoader.add_constructor("tag:yaml.org,2002:int", _WireLoader.construct_wire_int)
_WireLoader.add_constructor("tag:yaml.org,2002:set", _WireLoader.construct_wire_set)


def loadYaml(text: str, path: str = "<string>", *, wire: bool = False) -> Any:
    """
    Parse one YAML document as Salt does (safe: no Python objects): block
    mappings and sequences of one-line scalars through L{blockLoad} (what
    Jinja-rendered pillar and SLS files almost always are: some four times
    faster than L{fastLoad}), other plain data through L{fastLoad} (several
    times faster than the full loader), anything else, and every error,
    through PyYAML's loader.

    Blocking CPU work: callers run it in a worker process or a thread.

    @param text: the YAML text.
    @param path: the file it came from, for errors.
    @param wire: give only what msgpack with string keys carries (for data
        sent to a minion, the pillar): keys that are not strings become
        their text, sets lists, integers beyond 64 bits their text.
    @return: the data; an empty document is L{None}.
    @raise RenderError: on a syntax error or a duplicate key, naming C{path},
        the 1-based line and the cause (the key, for a duplicate).
    """
    try:
        return blockLoad(text, wire)
    except Unhandled:
        pass
    try:
        return fastLoad(text, wire)
    except Unhandled:
        pass
    try:
        return yaml.load(text, Loader=_WireLoader if wire else _SaltLoader)  # noqa: S506
    except yaml.MarkedYAMLError as e:
        mark = e.problem_mark or e.context_mark
        line = mark.line + 1 if mark is not None else None
        cause = e.problem or e.context or "invalid YAML"
        if e.context and e.problem and "duplicate key" not in e.problem:
            cause = f"{e.problem} ({e.context})"
        raise RenderError(path, line, cause) from None
    except yaml.YAMLError as e:
        raise RenderError(path, None, str(e)) from None


def _stripDocumentEnd(text: str) -> str:
    text = text.strip()
    if text.endswith("\n..."):
        text = text[:-4].rstrip()
    elif text == "...":
        text = ""
    return text


def dumpYaml(value: Any, flowStyle: bool | None = True) -> str:
    """
    The C{yaml} filter: C{value} as YAML, in flow style by default
    (C{{a: 1, b: [x, y]}}) so it fits on the line of a template.
    """
    return _stripDocumentEnd(
        yaml.dump(
            value, Dumper=_BaseDumper, default_flow_style=flowStyle, allow_unicode=True, width=10**9
        )
    )


def encodeYamlScalar(value: Any) -> str:
    """
    The C{yaml_encode} filter: one scalar as a YAML literal (C{true},
    C{12}, C{'a: b'}).
    """
    return _stripDocumentEnd(
        yaml.dump(
            value, Dumper=_BaseDumper, default_flow_style=True, allow_unicode=True, width=10**9
        )
    )


def quoteYaml(value: Any, style: str) -> str:
    """
    The C{yaml_dquote} (C{style='"'}) and C{yaml_squote} (C{style="'"})
    filters: C{str(value)} as a quoted YAML string.
    """
    return _stripDocumentEnd(
        yaml.dump(
            str(value), Dumper=_BaseDumper, default_style=style, allow_unicode=True, width=10**9
        )
    )
