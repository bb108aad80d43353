# -*- test-case-name: tests.test_modules_pillar -*-
"""
Salt's C{pillar} module: the minion's pillar, with Salt's functions,
arguments and return shapes.

The pillar is the one the minion keeps in memory (C{LoaderContext.pillar},
fetched from its master at start and by C{saltutil.refresh_pillar}, or
compiled locally by C{salttwist-call --local}); reading it never blocks, so
every function runs on the reactor. Difference from Salt: Salt's
C{pillar.items} compiles the pillar again at each call; here it answers
from memory unless C{pillar}, C{pillarenv} or C{saltenv} is given, when a
fresh one is fetched (and not kept).

Nested keys use C{delimiter} (C{:} by default): C{pillar.get
users:alice:uid} reads C{pillar["users"]["alice"]["uid"]}; a number indexes
a list.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping
from typing import Any

from twisted.internet.defer import Deferred
from twisted.logger import Logger

from salttwist.modules import (
    CommandExecutionError,
    LoaderContext,
    SaltInvocationError,
    needsContext,
    onReactor,
)

#: Salt's C{DEFAULT_TARGET_DELIM}.
DEFAULT_DELIMITER = ":"

_log = Logger(namespace="salttwist.modules.pillar")

_MISSING = object()


def _traverse(data: Any, key: Any, default: Any, delimiter: str = DEFAULT_DELIMITER) -> Any:
    """
    Salt's C{traverse_dict_and_list}: follow C{key}, split on C{delimiter},
    through nested mappings and lists (a number indexes a list; a name in a
    list is looked up in the mappings it holds).

    @return: the value found, or C{default}.
    """
    pointer = data
    for part in str(key).split(delimiter):
        if isinstance(pointer, list):
            found = _MISSING
            index: int | None
            try:
                index = int(part)
            except ValueError:
                index = None
            for embedded in pointer:
                if isinstance(embedded, Mapping):
                    lookup = part if index is None else index
                    if lookup in embedded:
                        found = embedded[lookup]
                        break
            if found is _MISSING and index is not None and -len(pointer) <= index < len(pointer):
                found = pointer[index]
            if found is _MISSING:
                return default
            pointer = found
        elif isinstance(pointer, Mapping):
            if part in pointer:
                pointer = pointer[part]
                continue
            try:
                number = int(part)
            except ValueError:
                return default
            if number not in pointer:
                return default
            pointer = pointer[number]
        else:
            return default
    return pointer


def _fresh(
    context: LoaderContext,
    saltenv: str | None,
    pillarenv: str | None,
    override: Any,
) -> Deferred[dict[str, Any]]:
    """
    @return: a L{Deferred} of the minion's pillar fetched now with these
        inputs (not kept).
    @raise SaltInvocationError: if C{override} is not a mapping.
    @raise CommandExecutionError: if this minion cannot fetch its pillar.
    """
    if override is not None and not isinstance(override, Mapping):
        raise SaltInvocationError(
            f"pillar must be a dictionary of pillar data, not {type(override).__name__}"
        )
    fetch = context.fetchPillar
    if fetch is None:
        raise CommandExecutionError("this minion cannot compile its pillar with other inputs")

    def failed(failure: Any) -> Any:
        raise CommandExecutionError(f"the pillar could not be fetched: {failure.value}")

    d = fetch(saltenv=saltenv, pillarenv=pillarenv, override=dict(override or {}))
    return d.addErrback(failed)


def _pillarThen(
    context: LoaderContext,
    saltenv: str | None,
    pillarenv: str | None,
    then: Any,
) -> Any:
    """
    @return: C{then(pillar)} with the pillar in memory, or a L{Deferred} of
        it with one fetched for C{saltenv}/C{pillarenv} when given.
    """
    if saltenv is None and pillarenv is None:
        return then(context.pillar)
    return _fresh(context, saltenv, pillarenv, None).addCallback(then)


@onReactor
@needsContext
def items(
    context: LoaderContext,
    *args: Any,
    pillar: Any = None,
    pillarenv: str | None = None,
    saltenv: str | None = None,
    **kwargs: Any,
) -> Any:
    """
    Return the minion's pillar. With key names, return those keys only (as
    C{pillar.item}). With C{pillar} (a dictionary merged over it),
    C{pillarenv} or C{saltenv}, a fresh pillar is compiled by the master
    for these inputs and returned (the minion keeps its own).

    CLI Example: C{salttwist '*' pillar.items}
    """
    if args:
        return item(context, *args, saltenv=saltenv, pillarenv=pillarenv)
    if pillar is None and pillarenv is None and saltenv is None:
        return dict(context.pillar)
    return _fresh(context, saltenv, pillarenv, pillar)


@onReactor
@needsContext
def data(
    context: LoaderContext,
    *args: Any,
    pillar: Any = None,
    pillarenv: str | None = None,
    saltenv: str | None = None,
    **kwargs: Any,
) -> Any:
    """
    Return the minion's pillar (Salt's alias of C{pillar.items}).

    CLI Example: C{salttwist '*' pillar.data}
    """
    return items(context, *args, pillar=pillar, pillarenv=pillarenv, saltenv=saltenv)


@onReactor
@needsContext
def get(
    context: LoaderContext,
    key: str,
    default: Any = "",
    merge: bool = False,
    merge_nested_lists: bool | None = None,
    delimiter: str = DEFAULT_DELIMITER,
    pillarenv: str | None = None,
    saltenv: str | None = None,
) -> Any:
    """
    Return the pillar value at C{key}, nested keys separated by
    C{delimiter} (C{pkg:apache}), or C{default} when there is none. With
    C{merge}, a dictionary (or list) C{default} is merged with the value
    found, the value winning (lists joined).

    CLI Example: C{salttwist '*' pillar.get pkg:apache}
    """

    def lookup(pillarData: dict[str, Any]) -> Any:
        fallback = default
        if merge:
            if isinstance(fallback, dict):
                found = _traverse(pillarData, key, {}, delimiter)
                if isinstance(found, Mapping):
                    mergeLists = (
                        bool(merge_nested_lists)
                        if merge_nested_lists is not None
                        else bool(context.opts.get("pillar_merge_lists", False))
                    )
                    # Imported here: the compiler's package (Jinja) is not
                    # loaded into the minion for a plain pillar.get.
                    from salttwist.pillar.merge import mergeRecurse

                    return copy.deepcopy(mergeRecurse(fallback, found, mergeLists))
                _log.error(
                    "pillar.get: the default of {key} is a dict but the pillar value is a "
                    "{type}: merge skipped",
                    key=key,
                    type=type(found).__name__,
                )
            elif isinstance(fallback, list):
                found = _traverse(pillarData, key, [], delimiter)
                if isinstance(found, list):
                    merged = copy.deepcopy(fallback)
                    merged.extend(entry for entry in found if entry not in merged)
                    return merged
                _log.error(
                    "pillar.get: the default of {key} is a list but the pillar value is a "
                    "{type}: merge skipped",
                    key=key,
                    type=type(found).__name__,
                )
            else:
                _log.error(
                    "pillar.get: the default of {key} is a {type}, it must be a dict or a "
                    "list to merge: merge skipped",
                    key=key,
                    type=type(fallback).__name__,
                )
        return _traverse(pillarData, key, fallback, delimiter)

    return _pillarThen(context, saltenv, pillarenv, lookup)


@onReactor
@needsContext
def fetch(
    context: LoaderContext,
    key: str,
    default: Any = "",
    merge: bool = False,
    merge_nested_lists: bool | None = None,
    delimiter: str = DEFAULT_DELIMITER,
    pillarenv: str | None = None,
    saltenv: str | None = None,
) -> Any:
    """
    Return the pillar value at C{key} (Salt's alias of C{pillar.get}).

    CLI Example: C{salttwist '*' pillar.fetch pkg:apache}
    """
    return get(context, key, default, merge, merge_nested_lists, delimiter, pillarenv, saltenv)


@onReactor
@needsContext
def item(
    context: LoaderContext,
    *args: Any,
    default: Any = "",
    delimiter: str = DEFAULT_DELIMITER,
    pillarenv: str | None = None,
    saltenv: str | None = None,
) -> Any:
    """
    Return the named pillar keys as a dictionary C{{key: value}}, each key
    nested with C{delimiter}, C{default} for those missing.

    CLI Example: C{salttwist '*' pillar.item foo bar:baz}
    """

    def pick(pillarData: dict[str, Any]) -> dict[str, Any]:
        return {str(arg): _traverse(pillarData, arg, default, delimiter) for arg in args}

    return _pillarThen(context, saltenv, pillarenv, pick)


@onReactor
@needsContext
def raw(context: LoaderContext, key: str | None = None) -> Any:
    """
    Return the pillar in memory, or its top-level C{key} (C{{}} when
    missing); no nesting.

    CLI Example: C{salttwist '*' pillar.raw}
    """
    if key:
        return context.pillar.get(key, {})
    return dict(context.pillar)


@onReactor
@needsContext
def keys(context: LoaderContext, key: str, delimiter: str = DEFAULT_DELIMITER) -> list[Any]:
    """
    Return the keys of the dictionary at pillar C{key} (nested with
    C{delimiter}). Raises C{KeyError} when there is no such key and
    C{ValueError} when its value is not a dictionary, as Salt's.

    CLI Example: C{salttwist '*' pillar.keys web:sites}
    """
    found = _traverse(context.pillar, key, _MISSING, delimiter)
    if found is _MISSING:
        raise KeyError(f"Pillar key not found: {key}")
    if not isinstance(found, Mapping):
        raise ValueError(f"Pillar value in key {key} is not a dict")
    return list(found)


@onReactor
@needsContext
def ls(context: LoaderContext, *args: Any) -> list[Any]:
    """
    Return the top-level keys of the pillar (with key names, those of them
    present as C{pillar.item} gives them).

    CLI Example: C{salttwist '*' pillar.ls}
    """
    if args:
        return list(item(context, *args))
    return list(context.pillar)


def _obfuscate(value: Any) -> Any:
    if isinstance(value, Mapping):
        return {key: _obfuscate(inner) for key, inner in value.items()}
    if isinstance(value, (list, tuple, set)):
        return type(value)(_obfuscate(inner) for inner in value)
    return f"<{type(value).__name__}>"


@onReactor
@needsContext
def obfuscate(context: LoaderContext, *args: Any) -> Any:
    """
    Return the pillar's structure with each value replaced by its type
    (C{<str>}, C{<int>} ...): what a pillar holds without showing it.

    CLI Example: C{salttwist '*' pillar.obfuscate}
    """
    if args:
        return _obfuscate(item(context, *args))
    return _obfuscate(context.pillar)
