# -*- test-case-name: tests.test_state_runner_requisites -*-
"""
Requisites at run time: which chunks a chunk's requisites name, and what
the returns of those chunks mean for it (Salt's C{DependencyGraph} lookups
and C{State._check_requisites}).

A requisite item is C{{<state module, "sls" or "id">: <id or name>}} (a
bare string is C{{"id": <string>}}); C{"cmd.run": x} counts as
C{"cmd": x}. Values may be globs. C{{"sls": "web"}} names every chunk of
that SLS.
"""

from __future__ import annotations

import fnmatch
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

#: The requisite kinds a chunk may carry that the runner evaluates, in
#: Salt's order of precedence.
REQUISITES = (
    "onfail",
    "onfail_any",
    "onfail_all",
    "require",
    "require_any",
    "onchanges",
    "onchanges_any",
    "watch",
    "watch_any",
    "prereq",
)

#: The kind the runner gives the edge from a prereq'd chunk back to the
#: chunk that declared the C{prereq} (it runs after it, as a C{require}).
PREREQUIRED = "prerequired"

#: Every requisite key a chunk may carry (the C{_in} forms are the
#: compiler's, but are never state arguments either).
REQUISITE_KEYS = frozenset(
    [
        *REQUISITES,
        "listen",
        "onfail_stop",
        "require_in",
        "watch_in",
        "onchanges_in",
        "onfail_in",
        "prereq_in",
        "listen_in",
        "use",
        "use_in",
    ]
)


def stateTag(chunk: Mapping[str, Any]) -> str:
    """
    @return: the key of a chunk's return in a state run's result:
        C{"file_|-nginx_conf_|-/etc/nginx/nginx.conf_|-managed"}.
    """
    return f"{chunk['state']}_|-{chunk['__id__']}_|-{chunk['name']}_|-{chunk['fun']}"


def _isGlob(value: str) -> bool:
    return any(c in value for c in "*?[]")


def normalizeItem(item: Any) -> tuple[str, Any] | None:
    """
    @return: a requisite item as C{(key, value)}: a bare string is an
        C{"id"} item and C{"cmd.run"} counts as C{"cmd"}; L{None} for
        something that is not a requisite item (not a 1-key dict).
    """
    if isinstance(item, str):
        return ("id", item)
    if isinstance(item, Mapping) and len(item) == 1:
        key, value = next(iter(item.items()))
        key = str(key).split(".", 1)[0]
        return (key, value)
    return None


class ChunkIndex:
    """
    The chunks of one run, looked up as requisites name them.
    """

    def __init__(self, chunks: Sequence[Mapping[str, Any]]) -> None:
        #: Ordered sets of tags (dicts of C{None}s).
        self._byKey: dict[tuple[str, str], dict[str, None]] = {}
        self._bySls: dict[str, dict[str, None]] = {}
        self._order: dict[str, int] = {}
        for position, chunk in enumerate(chunks):
            tag = stateTag(chunk)
            self._order.setdefault(tag, position)
            names = {str(chunk["__id__"]), str(chunk["name"])}
            for value in names:
                for key in (str(chunk["state"]), "id"):
                    self._byKey.setdefault((key, value), {})[tag] = None
            slses = [chunk.get("__sls__")] + list(chunk.get("__sls_included_from__") or [])
            for sls in slses:
                if sls is not None:
                    self._bySls.setdefault(str(sls), {})[tag] = None

    def find(self, key: str, value: Any) -> list[str]:
        """
        @return: the tags of the chunks a requisite item names, in run
            order; empty when none.
        """
        value = str(value)
        found: list[str] = []
        if key == "sls":
            if _isGlob(value):
                for sls, tags in self._bySls.items():
                    if fnmatch.fnmatchcase(sls, value):
                        found.extend(t for t in tags if t not in found)
            else:
                found = list(self._bySls.get(value, ()))
        elif _isGlob(value):
            for (kind, name), tags in self._byKey.items():
                if kind == key and fnmatch.fnmatchcase(name, value):
                    found.extend(t for t in tags if t not in found)
        else:
            found = list(self._byKey.get((key, value), ()))
        return sorted(found, key=self._order.__getitem__)


def resolve(
    chunk: Mapping[str, Any], index: ChunkIndex, disabled: Iterable[str] = ()
) -> tuple[list[tuple[str, str]], dict[str, list[dict[str, Any]]]]:
    """
    Find the chunks a chunk's requisites name.

    @param disabled: C{disabled_requisites}: those kinds are ignored, as
        Salt's dependency graph leaves them out.

    @return: C{(deps, lost)}: C{deps} the C{(kind, tag)} of each chunk
        named (a chunk never depends on itself); C{lost} the items that
        name no chunk, by kind.
    """
    own = stateTag(chunk)
    deps: list[tuple[str, str]] = []
    lost: dict[str, list[dict[str, Any]]] = {}
    for kind in REQUISITES:
        items = chunk.get(kind)
        if not items or kind in disabled:
            continue
        if not isinstance(items, list):
            items = [items]
        for item in items:
            pair = normalizeItem(item)
            if pair is None:
                lost.setdefault(kind, []).append(item if isinstance(item, dict) else {"id": item})
                continue
            key, value = pair
            if value is None:
                continue
            tags = [t for t in index.find(key, value) if t != own]
            if not tags and not index.find(key, value):
                lost.setdefault(kind, []).append({key: value})
            for tag in tags:
                if (kind, tag) not in deps:
                    deps.append((kind, tag))
    return deps, lost


def lostComment(lost: Mapping[str, Iterable[Mapping[str, Any]]]) -> str:
    """
    @return: Salt's comment for requisites that name no state:
        C{"The following requisites were not found:\\n" + "   require:\\n" ...}.
    """
    comment = "The following requisites were not found:\n"
    for kind, items in lost.items():
        items = list(items)
        if not items:
            continue
        comment += f"{' ' * 19}{kind}:\n"
        for item in items:
            key, value = next(iter(item.items()))
            comment += f"{' ' * 23}{key}: {value}\n"
    return comment


def requisiteStatus(
    deps: Iterable[tuple[str, str]],
    returnOf: Callable[[str, str], Mapping[str, Any] | None],
) -> str:
    """
    What the returns of a chunk's requisites mean for it (Salt's
    C{_check_requisites}).

    @param deps: C{(kind, tag)} of each requisite target.
    @param returnOf: C{returnOf(kind, tag)}: the target's return (for
        C{prereq}, its test-mode return), L{None} when it has not run.
    @return: one of C{"unmet"}, C{"fail"}, C{"skip_req"},
        C{"skip_watch"}, C{"pre"}, C{"onfail"}, C{"onchanges"},
        C{"change"}, C{"met"}.
    """
    byKind: dict[str, list[str]] = {}
    for kind, tag in deps:
        byKind.setdefault(kind, []).append(tag)
    stats: set[str] = set()
    for kind, tags in byKind.items():
        base = kind.removesuffix("_any").removesuffix("_all")
        if kind == PREREQUIRED:
            base = "require"
        kindStats: set[str] = set()
        for tag in tags:
            ret = returnOf(kind, tag)
            if ret is None:
                kindStats.add("unmet")
                continue
            if ret.get("skip_req"):
                kindStats.add("skip_req")
            if base == "onfail":
                if ret.get("result") is True:
                    kindStats.add("onfail")
                    continue
            elif base == "onchanges":
                if ret.get("result") is False or not ret.get("changes"):
                    kindStats.add("onchanges")
                else:
                    kindStats.add("onchangesmet")
                continue
            elif ret.get("result") is False:
                kindStats.add("fail")
                continue
            if base == "watch" and ret.get("changes"):
                kindStats.add("change")
                continue
            if base == "prereq":
                kindStats.add("premet" if ret.get("result") is None else "pre")
            elif ret.get("__state_ran__", True):
                kindStats.add("met")
        if kind.endswith("_any") or kind == "onfail":
            if {"met", "change"} & kindStats:
                kindStats.discard("fail")
            if "onchangesmet" in kindStats:
                kindStats.discard("onchanges")
                kindStats.discard("fail")
            if "onfail" in kindStats and "met" in kindStats:
                kindStats.discard("onfail")
        if kind.endswith("_all") and "onfail" in kindStats:
            kindStats.discard("met")
        stats |= kindStats
    if "unmet" in stats:
        return "unmet"
    if "fail" in stats:
        return "fail"
    if "skip_req" in stats and stats & {"onchangesmet", "premet"}:
        return "skip_req"
    if "skip_req" in stats and "change" in stats:
        return "skip_watch"
    if "pre" in stats:
        return "met" if "premet" in stats else "pre"
    if "onfail" in stats and "onchangesmet" not in stats:
        return "onfail"
    if "onchanges" in stats and "onchangesmet" not in stats:
        return "onchanges"
    if "change" in stats:
        return "change"
    if "onfail" in stats:
        return "onfail"
    return "met"
