# -*- test-case-name: tests.test_modules_config -*-
"""
Salt's C{config} module: a setting looked up, in Salt's order, in the
minion's options, its grains, its pillar, the master's options (the
pillar's C{master} key, when the master sends it), then Salt's "sane
defaults" (L{DEFAULTS}).

Formulas use C{salt['config.get']('nginx:lookup', {})} to let any of these
sources configure them. Reading never blocks: the functions run where they
are called (a thread for a job, the render's thread in a template).
"""

from __future__ import annotations

import copy
import fnmatch
from collections.abc import Mapping
from typing import Any

from salttwist.modules import LoaderContext, needsContext
from salttwist.modules.pillar import _traverse

#: Salt's C{config} defaults (those that make sense here).
DEFAULTS: dict[str, Any] = {
    "mongo.db": "salt",
    "mongo.password": "",
    "mongo.port": 27017,
    "mongo.user": "",
    "redis.db": "0",
    "redis.host": "salt",
    "redis.port": 6379,
    "test.foo": "unconfigured",
    "ca.cert_base_path": "/etc/pki",
    "ldap.uri": "",
    "ldap.server": "localhost",
    "ldap.port": "389",
    "hosts.file": "/etc/hosts",
    "aliases.file": "/etc/aliases",
}

_MISSING = object()
_STRATEGIES = ("recurse", "overwrite")


def _sources(
    context: LoaderContext,
    omit_opts: bool,
    omit_grains: bool,
    omit_pillar: bool,
    omit_master: bool,
) -> list[Mapping[str, Any]]:
    """
    @return: the mappings looked in, first first.
    """
    pillar = context.pillar or {}
    master = pillar.get("master", {}) if isinstance(pillar, Mapping) else {}
    sources: list[Mapping[str, Any]] = []
    if not omit_opts:
        sources.append(context.opts)
    if not omit_grains:
        sources.append(context.grains)
    if not omit_pillar:
        sources.append(pillar)
    if not omit_master and isinstance(master, Mapping):
        sources.append(master)
    return sources


@needsContext
def get(
    context: LoaderContext,
    key: str,
    default: Any = "",
    delimiter: str = ":",
    merge: str | None = None,
    omit_opts: bool = False,
    omit_pillar: bool = False,
    omit_master: bool = False,
    omit_grains: bool = False,
) -> Any:
    """
    Return the value of C{key} (nested with C{delimiter}: C{pkg:apache})
    from the first source holding it: the minion's options, its grains,
    its pillar, the master's options, Salt's defaults; C{default} when none
    does. With C{merge} (C{recurse} or C{overwrite}), every source is
    merged (the options winning over the grains, over the pillar, over the
    master's options, over the defaults; the C{omit_*} flags do not apply)
    and the key looked up in the result.

    CLI Example:

        salttwist '*' config.get pkg:apache
        salttwist '*' config.get lxc.container_profile:centos merge=recurse
    """
    if merge is None:
        sources = _sources(context, omit_opts, omit_grains, omit_pillar, omit_master)
        for source in [*sources, DEFAULTS]:
            found = _traverse(source, key, _MISSING, delimiter)
            if found is not _MISSING:
                return found
        return default
    from salttwist.pillar.merge import merge as mergeData

    if merge not in _STRATEGIES:
        merge = "recurse"
    mergeLists = bool(context.opts.get("pillar_merge_lists", False))
    # As Salt, a merged lookup reads every source (the omit_* flags are
    # for the plain lookup).
    data: dict[str, Any] = dict(DEFAULTS)
    for source in reversed(_sources(context, False, False, False, False)):
        data = mergeData(data, source, merge, mergeLists=mergeLists)
    found = _traverse(data, key, _MISSING, delimiter)
    return copy.deepcopy(found) if found is not _MISSING else default


@needsContext
def option(
    context: LoaderContext,
    value: str,
    default: Any = None,
    omit_opts: bool = False,
    omit_grains: bool = False,
    omit_pillar: bool = False,
    omit_master: bool = False,
    omit_all: bool = False,
    wildcard: bool = False,
) -> Any:
    """
    Return the top-level setting C{value} (not nested) from the first
    source holding it, as C{config.get} orders them, then Salt's defaults;
    C{default} (C{""}, or C{{}} with C{wildcard}) when none does. With
    C{wildcard}, C{value} is a glob and the answer maps every matching key
    to its value. C{omit_all} looks in the defaults only.

    CLI Example:

        salttwist '*' config.option redis.host
        salttwist '*' config.option 'mongo.*' wildcard=True
    """
    if omit_all:
        omit_opts = omit_grains = omit_pillar = omit_master = True
    if default is None:
        default = {} if wildcard else ""
    sources = _sources(context, omit_opts, omit_grains, omit_pillar, omit_master)
    if not wildcard:
        for source in [*sources, DEFAULTS]:
            if value in source:
                return source[value]
        return default
    found: dict[str, Any] = {}
    for source in reversed(sources):
        found.update({key: source[key] for key in fnmatch.filter(list(source), value)})
    for key in fnmatch.filter(list(DEFAULTS), value):
        found.setdefault(key, DEFAULTS[key])
    return found or default


@needsContext
def merge(
    context: LoaderContext,
    value: str,
    default: Any = "",
    omit_opts: bool = False,
    omit_master: bool = False,
    omit_pillar: bool = False,
) -> Any:
    """
    Return the top-level setting C{value} with every match merged: from
    the options, the master's options and the pillar, dictionaries
    combined (the earlier source winning) and lists joined; a string is
    returned as found first. Then Salt's defaults, then C{default}.

    CLI Example:

        salttwist '*' config.merge schedule
    """
    ret: Any = None
    pillar = context.pillar or {}
    master = pillar.get("master", {}) if isinstance(pillar, Mapping) else {}
    sources: list[Mapping[str, Any]] = []
    if not omit_opts:
        sources.append(context.opts)
    if not omit_master and isinstance(master, Mapping):
        sources.append(master)
    if not omit_pillar:
        sources.append(pillar)
    for source in sources:
        if value not in source:
            continue
        found = source[value]
        if ret is None:
            ret = found
            if isinstance(ret, str):
                return ret
        elif isinstance(ret, dict) and isinstance(found, dict):
            combined = dict(found)
            combined.update(ret)
            ret = combined
        elif isinstance(ret, (list, tuple)) and isinstance(found, (list, tuple)):
            ret = list(ret) + list(found)
    if ret is None:
        return DEFAULTS.get(value, default)
    return ret


@needsContext
def items(context: LoaderContext) -> dict[str, Any]:
    """
    Return the minion's options.

    CLI Example:

        salttwist '*' config.items
    """
    return dict(context.opts)


#: The protocols Salt's C{config.valid_fileproto} accepts.
VALID_PROTOS = ("salt", "file", "http", "https", "ftp", "swift", "s3")


@needsContext
def backup_mode(context: LoaderContext, backup: str = "") -> Any:
    """
    Return C{backup} when given, else the C{backup_mode} setting (as
    C{config.option} finds it).

    CLI Example:

        salttwist '*' config.backup_mode
    """
    if backup:
        return backup
    return option(context, "backup_mode")


def manage_mode(mode: Any) -> str | None:
    """
    Return a file mode as a string with a leading zero, four digits
    (C{644}, C{0o644} and C{"0644"} are all C{"0644"}).

    CLI Example:

        salttwist '*' config.manage_mode 644
    """
    if mode is None:
        return None
    text = str(mode).replace("0o", "0")
    return text.strip('"').strip("'").lstrip("0").zfill(4)


def valid_fileproto(uri: str) -> bool:
    """
    Return whether C{uri} names a file protocol Salt fetches from
    (C{salt://}, C{file://}, C{http(s)://}, C{ftp://}, C{swift://},
    C{s3://}).

    CLI Example:

        salttwist '*' config.valid_fileproto salt://path/to/file
    """
    from urllib.parse import urlparse

    return urlparse(str(uri)).scheme in VALID_PROTOS


@needsContext
def dot_vals(context: LoaderContext, value: str) -> dict[str, Any]:
    """
    Return the settings named C{<value>.<something>} from the master's
    options (the pillar's C{master} key) and the minion's options, the
    minion's winning.

    CLI Example:

        salttwist '*' config.dot_vals mongo
    """
    ret: dict[str, Any] = {}
    pillar = context.pillar or {}
    master = pillar.get("master", {}) if isinstance(pillar, Mapping) else {}
    for source in (master if isinstance(master, Mapping) else {}, context.opts):
        for key, val in source.items():
            if isinstance(key, str) and key.startswith(f"{value}."):
                ret[key] = val
    return ret
