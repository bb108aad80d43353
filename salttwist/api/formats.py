# -*- test-case-name: tests.test_api_formats -*-
"""
What the API reads and writes, as Salt's rest_cherrypy does.

Bodies (by C{Content-Type}): JSON (C{application/json}), YAML
(C{application/x-yaml}, C{text/yaml}; C{yaml.safe_load}: no Python
objects, and no aliases either), form fields (C{application/x-www-form-urlencoded}: a field given
several times is a list, and C{arg} and C{kwarg} are read as YAML the way
the command line reads them), and C{text/plain} read as JSON if it is JSON
and kept as text otherwise. Any other type is refused with 406, as Salt
does.

Answers (by C{Accept}): JSON by default, YAML when the client prefers it;
406 when it accepts neither.
"""

from __future__ import annotations

import json
from typing import Any
from urllib.parse import parse_qsl

import yaml

from salttwist.api.errors import BadRequest, NotAcceptable

__all__ = ["JSON", "YAML", "chooseFormat", "dump", "parseBody", "yamlArg"]

JSON = "application/json"
YAML = "application/x-yaml"
#: What the API writes, in order of preference.
WRITTEN = (JSON, YAML)
_YAML_TYPES = (YAML, "text/yaml", "application/yaml")


def _mediaType(header: str | None) -> str:
    return (header or "").split(";", 1)[0].strip().lower()


class _Loader(yaml.SafeLoader):
    """
    C{yaml.safe_load}'s loader without aliases: C{*name} refers to an
    anchored node, and a few kilobytes of nested aliases make a structure
    of billions of nodes once written out (to the master, to JSON).
    """

    def compose_node(self, parent: Any, index: Any) -> Any:
        if self.check_event(yaml.AliasEvent):
            event = self.peek_event()
            raise yaml.composer.ComposerError(
                None, None, "aliases (*name) are not accepted", event.start_mark
            )
        return super().compose_node(parent, index)


def safeLoad(text: str) -> Any:
    """
    Read YAML as C{yaml.safe_load} does (no Python objects), refusing
    aliases.

    @raise yaml.YAMLError: it is not valid YAML, or has an alias.
    """
    return yaml.load(text, Loader=_Loader)


def yamlArg(value: str) -> Any:
    """
    One form value of C{arg} or C{kwarg} read as YAML where that gives a
    scalar, a flow-style list or map (Salt's C{yamlify_arg}); otherwise the
    text as sent.
    """
    if value.strip() in ("", "---", "...") or any(c in value for c in "\t\r\n#"):
        return value
    if value == "None":
        return None
    try:
        loaded = safeLoad(value)
    except (yaml.YAMLError, RecursionError):
        return value
    if isinstance(loaded, dict) and not value.startswith("{"):
        return value
    if isinstance(loaded, list) and not value.startswith("["):
        return value
    if loaded is None or isinstance(loaded, (bool, int, float, str, list, dict)):
        return loaded
    return value


def _parseForm(text: str) -> dict[str, Any]:
    fields: dict[str, Any] = {}
    for key, value in parse_qsl(text, keep_blank_values=True):
        fields.setdefault(key, []).append(value)
    data: dict[str, Any] = {k: v[0] if len(v) == 1 else v for k, v in fields.items()}
    if "kwarg" in data:
        kwarg = data["kwarg"]
        data["kwarg"] = [yamlArg(v) for v in kwarg] if isinstance(kwarg, list) else yamlArg(kwarg)
    if "arg" in data:
        arg = data["arg"]
        data["arg"] = [yamlArg(v) for v in (arg if isinstance(arg, list) else [arg])]
    return data


def parseBody(contentType: str | None, body: bytes) -> Any:
    """
    Read a request's body.

    @return: the data; L{None} for an empty body.
    @raise BadRequest: it is not valid in its format, or not UTF-8.
    @raise NotAcceptable: its type is not one the API reads.
    """
    if not body:
        return None
    try:
        text = body.decode("utf-8")
    except UnicodeDecodeError as e:
        raise BadRequest(f"the request body is not UTF-8 text ({e})") from None
    kind = _mediaType(contentType)
    if kind == JSON:
        try:
            return json.loads(text)
        except ValueError as e:
            raise BadRequest(f"Invalid JSON document: {e}") from None
        except RecursionError:
            raise BadRequest("Invalid JSON document: nested too deeply") from None
    if kind in _YAML_TYPES:
        try:
            return safeLoad(text)
        except yaml.YAMLError as e:
            raise BadRequest(f"Invalid YAML document: {e}") from None
        except RecursionError:
            raise BadRequest("Invalid YAML document: nested too deeply") from None
    if kind == "application/x-www-form-urlencoded":
        return _parseForm(text)
    if kind == "text/plain":
        try:
            return json.loads(text)
        except (ValueError, RecursionError):
            return text
    raise NotAcceptable(
        f"Content type not supported: {kind or 'none given'}; send"
        " application/json, application/x-yaml or application/x-www-form-urlencoded"
    )


def _acceptRanges(header: str) -> list[tuple[float, str]]:
    ranges = []
    for part in header.split(","):
        pieces = part.split(";")
        media = pieces[0].strip().lower()
        if not media:
            continue
        quality = 1.0
        for param in pieces[1:]:
            name, _, value = param.strip().partition("=")
            if name.strip() == "q":
                try:
                    quality = float(value)
                except ValueError:
                    quality = 0.0
        ranges.append((quality, media))
    return ranges


def chooseFormat(accept: str | None) -> str:
    """
    The format of the answer to a client that sent C{accept}: the one of
    L{WRITTEN} it prefers (JSON when it does not say, or likes both alike).

    @raise NotAcceptable: it accepts neither.
    """
    if not accept or not accept.strip():
        return JSON
    best: tuple[float, int, int, str] | None = None
    for quality, media in _acceptRanges(accept):
        if quality <= 0:
            continue
        for preference, written in enumerate(WRITTEN):
            kind = written.partition("/")[0]
            if media == written or (written == YAML and media in _YAML_TYPES):
                specificity = 2
            elif media == f"{kind}/*":
                specificity = 1
            elif media == "*/*":
                specificity = 0
            else:
                continue
            # The highest quality, then the most specific range, then ours.
            candidate = (quality, specificity, -preference, written)
            if best is None or candidate > best:
                best = candidate
    if best is None:
        raise NotAcceptable(
            f"Not Acceptable: this API writes {' or '.join(WRITTEN)}, not {accept.strip()}"
        )
    return best[3]


def dump(data: Any, media: str) -> bytes:
    """
    @return: C{data} written as C{media} (one of L{WRITTEN}).
    """
    if media == YAML:
        return yaml.safe_dump(data, default_flow_style=False).encode("utf-8")
    return json.dumps(data, default=_jsonDefault).encode("utf-8")


def _jsonDefault(value: Any) -> Any:
    if isinstance(value, bytes):
        return value.decode("utf-8", "replace")
    if isinstance(value, (set, frozenset, tuple)):
        return list(value)
    raise TypeError(f"cannot write a {type(value).__name__} as JSON")
