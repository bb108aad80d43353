# -*- test-case-name: tests.test_modules_grains -*-
"""
Salt's C{grains} module: read the minion's grains, and set grains that
persist in the minion's grains file (C{grains} next to its config file,
YAML, replaced atomically).

As in Salt, grains set here change the running minion at once, but a grain
also set under C{grains:} in the minion config gets the config's value
back at the next start: the config wins over the grains file.
"""

from __future__ import annotations

import copy
import fnmatch
import os
import threading
from collections.abc import Callable
from typing import Any

import yaml
from twisted.python import threadable

from salttwist.files import atomicWrite
from salttwist.grains import grainsFilePath
from salttwist.modules import (
    CommandExecutionError,
    LoaderContext,
    SaltInvocationError,
    needsContext,
    onReactor,
)

#: Salt's delimiter for nested keys.
DEFAULT_TARGET_DELIM = ":"

_MISSING = object()

#: Serialises read-modify-write of grains files across worker threads.
_FILE_LOCK = threading.Lock()


def _maskSerial(value: Any) -> str:
    """
    Replace the last quarter of a serial number with C{X}s, as Salt does.
    """
    text = str(value)
    keep = int(len(text) * 0.75)
    return text[:keep] + "X" * (len(text) - keep)


_SANITIZERS: dict[str, Callable[[Any], Any]] = {
    "serialnumber": _maskSerial,
    "domain": lambda v: "DOMAINNAME",
    "fqdn": lambda v: "MINION.DOMAINNAME",
    "id": lambda v: "MINION.DOMAINNAME",
    "host": lambda v: "MINION",
    "localhost": lambda v: "MINION",
    "nodename": lambda v: "MINION",
}


def _traverse(data: Any, key: Any, default: Any = "", delimiter: str = DEFAULT_TARGET_DELIM) -> Any:
    """
    Look up C{a:b:c} in nested maps and lists as Salt's
    C{traverse_dict_and_list} does: a part indexes a list when it is a
    number, otherwise it picks the first map in the list holding it.
    """
    value = data
    for part in str(key).split(delimiter):
        if isinstance(value, dict):
            if part not in value:
                return default
            value = value[part]
        elif isinstance(value, list):
            try:
                value = value[int(part)]
                continue
            except (ValueError, IndexError):
                pass
            for item in value:
                if isinstance(item, dict) and part in item:
                    value = item[part]
                    break
            else:
                return default
        else:
            return default
    return value


def _sanitize(grains: dict[str, Any]) -> dict[str, Any]:
    return {k: (_SANITIZERS[k](v) if k in _SANITIZERS else v) for k, v in grains.items()}


@onReactor
@needsContext
def items(context: LoaderContext, sanitize: bool = False) -> dict[str, Any]:
    """
    Return every grain. With C{sanitize=True}, the host names and the serial
    number are masked.

    CLI Example:

        salttwist '*' grains.items
        salttwist '*' grains.items sanitize=True
    """
    grains = dict(context.grains)
    return _sanitize(grains) if sanitize is True else grains


@onReactor
@needsContext
def item(
    context: LoaderContext,
    *args: str,
    default: Any = "",
    delimiter: str = DEFAULT_TARGET_DELIM,
    sanitize: bool = False,
) -> dict[str, Any]:
    """
    Return the named grains as a map; a name may be nested (C{a:b}); a
    missing grain is C{default} (the empty string).

    CLI Example:

        salttwist '*' grains.item os
        salttwist '*' grains.item os osrelease oscodename
    """
    ret = {arg: _traverse(context.grains, arg, default, delimiter) for arg in args}
    return _sanitize(ret) if sanitize is True else ret


@onReactor
@needsContext
def get(
    context: LoaderContext, key: str, default: Any = "", delimiter: str = DEFAULT_TARGET_DELIM
) -> Any:
    """
    Return one grain, or C{default} (the empty string) when it is missing.
    C{a:b} looks into nested maps (and C{ipv4:0} into lists); C{delimiter}
    picks another separator.

    CLI Example:

        salttwist '*' grains.get pkg:apache
        salttwist '*' grains.get abc::def|ghi delimiter='|'
    """
    return _traverse(context.grains, key, default, delimiter)


@onReactor
@needsContext
def has_value(context: LoaderContext, key: str) -> bool:
    """
    Return C{True} if the grain C{key} (C{a:b} for nested) exists.

    CLI Example:

        salttwist '*' grains.has_value pkg:apache
    """
    return _traverse(context.grains, key, _MISSING) is not _MISSING


@onReactor
@needsContext
def ls(context: LoaderContext) -> list[str]:
    """
    Return the names of every grain, sorted.

    CLI Example:

        salttwist '*' grains.ls
    """
    return sorted(context.grains)


def _onReactorThread(reactor: Any, f: Callable[[], None]) -> None:
    """
    Run C{f} on the reactor thread: the grains are read there (targeting,
    other jobs), so they are only changed there. Called from a worker
    thread, this queues C{f} ahead of the job's result.
    """
    inIOThread = threadable.isInIOThread() or (
        threadable.ioThread is None and threading.current_thread() is threading.main_thread()
    )
    if inIOThread or not hasattr(reactor, "callFromThread"):
        f()
    else:
        reactor.callFromThread(f)


def _readStored(path: str) -> dict[str, Any]:
    try:
        with open(path, "rb") as f:
            stored = yaml.safe_load(f)
    except FileNotFoundError:
        return {}
    except yaml.YAMLError as e:
        raise CommandExecutionError(f"Unable to read existing grains file: {e}") from e
    except OSError as e:
        raise CommandExecutionError(f"Unable to read grains file at {path}: {e}") from e
    return stored if isinstance(stored, dict) else {}


def _atomicWrite(path: str, data: bytes) -> None:
    # The grains file keeps its mode (0644 when new), as Salt leaves it.
    try:
        mode = os.stat(path).st_mode & 0o7777
    except FileNotFoundError:
        mode = 0o644
    os.makedirs(os.path.dirname(path) or ".", exist_ok=True)
    atomicWrite(path, data, mode)


def _persist(context: LoaderContext, updates: dict[str, Any], destructive: bool) -> None:
    """
    Apply C{updates} to the grains file and to the running grains; a
    C{None} value with C{destructive} removes the key. Blocking.
    """
    if not context.opts.get("conf_file"):
        raise CommandExecutionError("the minion's config file is unknown: cannot persist grains")
    path = grainsFilePath(context.opts)
    with _FILE_LOCK:
        stored = _readStored(path)
        for key, val in updates.items():
            if val is None and destructive is True:
                stored.pop(key, None)
            else:
                stored[key] = val
        try:
            _atomicWrite(path, yaml.safe_dump(stored, default_flow_style=False).encode("utf-8"))
        except OSError as e:
            raise CommandExecutionError(
                f"Unable to write to grains file at {path}. Check permissions. ({e})"
            ) from e
    updates = copy.deepcopy(updates)

    def apply() -> None:
        for key, val in updates.items():
            if val is None and destructive is True:
                context.grains.pop(key, None)
            else:
                context.grains[key] = val
        if context.onGrainsChanged is not None:
            context.onGrainsChanged()

    _onReactorThread(context.reactor, apply)


@needsContext
def setvals(context: LoaderContext, grains: dict[str, Any], destructive: bool = False) -> Any:
    """
    Set several grains at once, in the grains file and in the running
    minion; return the map given. With C{destructive=True} a C{None} value
    deletes its grain.

    CLI Example:

        salttwist '*' grains.setvals "{'key1': 'val1', 'key2': 'val2'}"
    """
    if not isinstance(grains, dict):
        raise SaltInvocationError("setvals grains must be a dictionary.")
    _persist(context, grains, destructive)
    return grains


@needsContext
def setval(context: LoaderContext, key: str, val: Any, destructive: bool = False) -> Any:
    """
    Set the grain C{key} to C{val} (any YAML value), in the grains file and
    in the running minion; return C{{key: val}}.

    CLI Example:

        salttwist '*' grains.setval key val
        salttwist '*' grains.setval key "{'sub-key': 'val', 'sub-key2': 'val2'}"
    """
    return setvals(context, {key: val}, destructive)


def _nestUnder(
    context: LoaderContext, key: str, value: Any, delimiter: str, drop: bool = False
) -> tuple[str, Any]:
    """
    Put C{value} at the nested C{key} (C{a:b:c}), or with C{drop} remove
    that key: return the top-level key and its new whole value.
    """
    while delimiter in key:
        key, rest = key.rsplit(delimiter, 1)
        parent = copy.deepcopy(_traverse(context.grains, key, {}, delimiter))
        if not isinstance(parent, dict):
            parent = {}
        if drop:
            parent.pop(rest, None)
            drop = False
        else:
            parent[rest] = value
        value = parent
    return key, value


@needsContext
def append(
    context: LoaderContext,
    key: str,
    val: Any,
    convert: bool = False,
    delimiter: str = DEFAULT_TARGET_DELIM,
) -> Any:
    """
    Append C{val} to the list grain C{key} (created if missing; C{a:b} for
    nested) and persist it; a list C{val} appends each item. A grain that
    is not a list is an error unless C{convert=True} makes it one; a value
    already there is left alone. Returns C{{key: list}}, or Salt's message.

    CLI Example:

        salttwist '*' grains.append roles web
    """
    grains = copy.deepcopy(_traverse(context.grains, key, [], delimiter))
    if convert is True and not isinstance(grains, list):
        grains = [] if grains is None else [grains]
    if not isinstance(grains, list):
        return f"The key {key} is not a valid list"
    if val in grains:
        return f"The val {val} was already in the list {key}"
    if isinstance(val, list):
        grains.extend(val)
    else:
        grains.append(val)
    top, value = _nestUnder(context, key, grains, delimiter)
    return setval(context, top, value)


@needsContext
def remove(
    context: LoaderContext, key: str, val: Any, delimiter: str = DEFAULT_TARGET_DELIM
) -> Any:
    """
    Remove C{val} from the list grain C{key} and persist it. Returns
    C{{key: list}}, or Salt's message when C{key} is no list or C{val} is
    not in it.

    CLI Example:

        salttwist '*' grains.remove roles web
    """
    grains = copy.deepcopy(_traverse(context.grains, key, [], delimiter))
    if not isinstance(grains, list):
        return f"The key {key} is not a valid list"
    if val not in grains:
        return f"The val {val} was not in the list {key}"
    grains.remove(val)
    top, value = _nestUnder(context, key, grains, delimiter)
    return setval(context, top, value)


@needsContext
def delval(
    context: LoaderContext,
    key: str,
    destructive: bool = False,
    force: bool = False,
    delimiter: str = DEFAULT_TARGET_DELIM,
) -> dict[str, Any]:
    """
    Set the grain C{key} (C{a:b} for nested) to C{None} in the grains file
    and the running minion; with C{destructive=True} remove it altogether.
    A map or list grain is only replaced with C{force=True}. Returns Salt's
    C{{"comment", "changes", "result"}}.

    CLI Example:

        salttwist '*' grains.delval key
        salttwist '*' grains.delval key destructive=True
    """
    ret: dict[str, Any] = {"comment": "", "changes": {}, "result": True}
    existing = _traverse(context.grains, key, _MISSING, delimiter)
    if existing is None and destructive is not True:
        ret["comment"] = "Grain is already set"
        return ret
    if isinstance(existing, dict | list) and force is not True:
        ret["comment"] = (
            f"The key '{key}' exists but is a dict or a list. Use 'force=True' to overwrite."
        )
        ret["result"] = False
        return ret
    top, value = _nestUnder(context, key, None, delimiter, drop=destructive is True)
    if top != key:
        # Nested: the top-level grain is rewritten, not deleted.
        ret["changes"] = setval(context, top, value)
    else:
        ret["changes"] = setval(context, key, None, destructive=destructive)
    return ret


@needsContext
def delkey(
    context: LoaderContext, key: str, force: bool = False, delimiter: str = DEFAULT_TARGET_DELIM
) -> dict[str, Any]:
    """
    Remove the grain C{key} altogether: C{grains.delval} with
    C{destructive=True}.

    CLI Example:

        salttwist '*' grains.delkey key
    """
    return delval(context, key, destructive=True, force=force, delimiter=delimiter)


def _filterBy(
    data: Any,
    lookup_dict: Any,
    lookup: str,
    merge: Any = None,
    default: Any = "default",
    base: Any = None,
) -> Any:
    """
    Salt's C{salt.utils.data.filter_by}: the entry of C{lookup_dict} whose
    key (a glob) matches the value at C{lookup} in C{data} (each item when
    it is a list), else the C{default} entry; merged over the C{base} entry
    and under C{merge}.
    """
    from salttwist.modules.defaults import _dictUpdate as dictUpdate

    if not isinstance(lookup_dict, dict):
        raise SaltInvocationError(
            f"filter_by lookup_dict must be a dictionary, not {type(lookup_dict).__name__}"
        )
    ret = None
    found = _traverse(data, lookup, [])
    for each in found if isinstance(found, list) else [found]:
        for key in lookup_dict:
            if fnmatch.fnmatchcase(str(each), str(key)):
                ret = lookup_dict[key]
                break
        if ret is not None:
            break
    if ret is None:
        ret = lookup_dict.get(default)
    if base and base in lookup_dict:
        baseValues = lookup_dict[base]
        if ret is None:
            ret = baseValues
        elif isinstance(baseValues, dict):
            if not isinstance(ret, dict):
                raise CommandExecutionError(
                    "filter_by default and look-up values must both be dictionaries."
                )
            ret = dictUpdate(copy.deepcopy(baseValues), ret)
    if merge:
        if not isinstance(merge, dict):
            raise CommandExecutionError("filter_by merge argument must be a dictionary.")
        if ret is None:
            ret = merge
        else:
            dictUpdate(ret, copy.deepcopy(merge))
    return ret


@needsContext
def filter_by(
    context: LoaderContext,
    lookup_dict: dict[str, Any],
    grain: str = "os_family",
    merge: dict[str, Any] | None = None,
    default: str = "default",
    base: str | None = None,
) -> Any:
    """
    Look up the minion's value of C{grain} (C{os_family} by default; nested
    with C{:}) in C{lookup_dict} and return the entry whose key matches it
    (keys may be globs; for a list grain, its first item that matches).
    Without a match, the C{default} entry. With C{base}, the entry of that
    key is the base the match is merged over; with C{merge}, a dictionary
    merged over the result (as Salt, that result is changed in place).
    Mostly used in Jinja: C{salt['grains.filter_by']({'Debian': {...},
    'RedHat': {...}}, default='Debian')}.

    CLI Example:

        salttwist '*' grains.filter_by '{Debian: Debheads rule, RedHat: I love my hat}'
        salttwist '*' grains.filter_by '{default: {a: 1}, Debian: {b: 2}}' base=default
    """
    return _filterBy(context.grains, lookup_dict, grain, merge, default, base)
