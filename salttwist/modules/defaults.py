# -*- test-case-name: tests.test_modules_defaults -*-
"""
Salt's C{defaults} module: deep merges and copies for formulas (mostly
called from Jinja: C{{% do salt['defaults.merge'](config, osmap) %}}), and
C{defaults.get}, a value from a formula's C{defaults.yaml}.

As in Salt, C{merge} and C{update} change their first argument in place
by default (formulas rely on it with C{{% do %}}); pass C{in_place=False}
for a merged copy.
"""

from __future__ import annotations

import copy
import json
from collections.abc import Mapping
from typing import Any

from salttwist.modules import (
    CommandExecutionError,
    LoaderContext,
    SaltInvocationError,
    needsContext,
)


def _dictUpdate(dest: Any, upd: Any, recursive: bool = True, mergeLists: bool = False) -> Any:
    """
    Salt's C{salt.utils.dictupdate.update}: merge C{upd} into C{dest} in
    place, mappings key by key at every depth, other values replaced (two
    lists joined, without repeats, with C{mergeLists}).

    @return: C{dest}.
    @raise SaltInvocationError: when either is not a mapping.
    """
    if not isinstance(dest, Mapping) or not isinstance(upd, Mapping):
        raise SaltInvocationError("Cannot update using non-dict types in dictupdate.update()")
    keys = list(upd)
    if not recursive or not set(dest) & set(keys):
        for key in keys:
            dest[key] = upd[key]  # type: ignore[index]
        return dest
    for key in keys:
        value = upd[key]
        old = dest.get(key)
        if isinstance(old, Mapping) and isinstance(value, Mapping):
            dest[key] = _dictUpdate(old, value, True, mergeLists)  # type: ignore[index]
        elif isinstance(old, list) and isinstance(value, list) and mergeLists:
            merged = copy.deepcopy(old)
            merged.extend(item for item in value if item not in merged)
            dest[key] = merged  # type: ignore[index]
        else:
            dest[key] = value  # type: ignore[index]
    return dest


def merge(
    dest: Any,
    src: Any,
    merge_lists: bool = False,
    in_place: bool = True,
    convert_none: bool = True,
) -> Any:
    """
    Deep-merge dictionary C{src} into C{dest} and return the result: nested
    dictionaries are merged key by key, other values of C{src} win. With
    C{merge_lists}, lists are joined instead of replaced. With C{in_place}
    (the default), C{dest} itself is changed; otherwise a merged copy is
    returned. With C{convert_none}, a C{None} C{src} (or C{dest}, when not
    in place) counts as C{{}}.

    CLI Example:

        salttwist '*' defaults.merge '{a: b}' '{d: e}'
    """
    if src is None and convert_none:
        src = {}
    if dest is None and convert_none:
        if in_place:
            raise SaltInvocationError("Can't perform in-place merge into NoneType")
        dest = {}
    merged = dest if in_place else copy.deepcopy(dest)
    return _dictUpdate(merged, src, mergeLists=merge_lists)


def deepcopy(source: Any) -> Any:
    """
    Return a deep copy of C{source} (in Jinja, assignment binds the same
    object: copy a map before changing it).

    CLI Example:

        salttwist '*' defaults.deepcopy '{a: [1, 2]}'
    """
    return copy.deepcopy(source)


def update(
    dest: Any,
    defaults: Any,
    merge_lists: bool = True,
    in_place: bool = True,
    convert_none: bool = True,
) -> Any:
    """
    Give each entry of dictionary C{dest} the values of C{defaults} it does
    not set itself: every node becomes C{defaults} deep-merged with the
    node (lists joined unless C{merge_lists=False}). With C{in_place} (the
    default) C{dest} is changed and returned; otherwise a copy.

    CLI Example:

        salttwist '*' defaults.update '{host1: {port: 81}}' '{port: 80, tls: true}'
    """
    if in_place:
        if dest is None:
            raise SaltInvocationError("Can't perform in-place update into NoneType")
        nodes = dest
    else:
        if dest is None and convert_none:
            dest = {}
        nodes = copy.deepcopy(dest)
    if defaults is None and convert_none:
        defaults = {}
    if not isinstance(nodes, Mapping):
        raise SaltInvocationError(f"dest must be a dictionary, not {type(nodes).__name__}")
    for nodeName, nodeVars in list(nodes.items()):
        nodes[nodeName] = merge(  # type: ignore[index]
            copy.deepcopy(defaults),
            nodeVars,
            merge_lists=merge_lists,
            convert_none=convert_none,
        )
    return nodes


def _traverse(data: Any, key: str, default: Any) -> Any:
    from salttwist.modules.pillar import _traverse as traverse

    return traverse(data, key, default)


def _loadDefaults(context: LoaderContext, formula: str, saltenv: str) -> Any:
    """
    @return: the formula's C{salt://<formula>/defaults.yaml} (or
        C{defaults.json}) fetched with C{cp.cache_file}, or C{{}} when
        there is neither.
    @raise CommandExecutionError: when the file does not parse.
    """
    from salttwist.modules.extmods import SaltFunctions
    from salttwist.render import RenderError, loadYaml, readSource

    cacheFile = SaltFunctions(context)["cp.cache_file"]
    for ext in ("yaml", "json"):
        url = f"salt://{formula}/defaults.{ext}"
        path = cacheFile(url, saltenv=saltenv)
        if not path:
            continue
        try:
            text = readSource(path)
            data = loadYaml(text, path) if ext == "yaml" else json.loads(text or "null")
        except (RenderError, ValueError) as e:
            raise CommandExecutionError(f"{url}: {e}") from None
        return data or {}
    return {}


@needsContext
def get(context: LoaderContext, key: str, default: Any = "", saltenv: str = "base") -> Any:
    """
    Return a value from a formula's defaults file: the first part of C{key}
    names the formula, whose C{salt://<formula>/defaults.yaml} (or
    C{defaults.json}) is read; the rest (nested with C{:}) is looked up in
    it, C{default} when missing. With the formula's name alone, the whole
    file.

    CLI Example:

        salttwist '*' defaults.get core:users:root
    """
    namespace, _, rest = str(key).partition(":")
    data = _loadDefaults(context, namespace, saltenv)
    if rest:
        return _traverse(data, rest, default)
    return data
