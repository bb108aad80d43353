# -*- test-case-name: tests.test_state_runhooks -*-
"""
The hooks Salt's runner calls around a chunk besides the state function
itself (C{salt/state.py}: C{_mod_aggregate}, C{_mod_init}, the C{umask}
state argument):

  - aggregation: with the C{state_aggregate} option (C{True}, or a list
    of state modules) or a chunk's own C{aggregate: True}, a chunk whose
    state module has C{mod_aggregate(ctx, low, chunks, running)} gets,
    before it runs, the chunks of the same module it may be merged with,
    those ready to run (L{AggregateGroups}); the hook changes C{low}
    (C{pkg.installed} installs the packages of all of them at once) and
    marks the chunks it took C{__agg__};
  - C{mod_init(ctx, low)}: called before the first chunk of its module in
    a run, again for later chunks until it returns something true;
  - C{umask}: the chunk's state function runs under that umask
    (L{umaskOf}, L{underUmask}).
"""

from __future__ import annotations

import bisect
import contextlib
import logging
import os
import threading
from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import Any

log = logging.getLogger(__name__)

#: Salt's cap on the chunks merged into one aggregate.
MAX_GROUP = 500

#: One umask change at a time: the umask is the process's, so two state
#: runs of one minion must not interleave their changes and restores.
_UMASK_LOCK = threading.Lock()


def _has(states: Mapping[str, Any], full: str) -> bool:
    try:
        return full in states
    except Exception:
        log.exception("Loading state function %s failed", full)
        return False


def aggregateAllowed(chunk: Mapping[str, Any], option: Any, states: Mapping[str, Any]) -> bool:
    """
    Salt's C{_allow_aggregate}: whether C{chunk} takes part in
    aggregation.

    @param option: the C{state_aggregate} option: C{True}, or a list of
        state module names; a chunk's own C{aggregate} overrides it.
    @param states: the state functions: the chunk's module must have a
        C{mod_aggregate}.
    """
    if "aggregate" in chunk:
        option = chunk["aggregate"]
    if option is True:
        wanted = True
    elif isinstance(option, (list, tuple, set, frozenset)):
        wanted = chunk.get("state") in option
    else:
        wanted = False
    return wanted and _has(states, f"{chunk.get('state')}.mod_aggregate")


class AggregateGroups:
    """
    Which chunks may be merged into which (Salt's
    C{DependencyGraph.get_aggregate_chunks}): the chunks allowed to
    aggregate, by state module, in run order. A chunk about to run is
    offered those of its module that are ready to run now (L{chunksFor}):
    not run, not merged, their requisites run and met. That also keeps
    out a chunk that depends on it, or on a state yet to run (Salt 3008
    merges such a chunk, installing its packages before its requisites
    ran: saltstack/salt#65304).
    """

    def __init__(
        self,
        byTag: Mapping[str, dict[str, Any]],
        order: Sequence[str],
        allowed: Callable[[Mapping[str, Any]], bool],
        deps: Mapping[str, Sequence[tuple[str, str]]] | None = None,
    ) -> None:
        """
        @param byTag: the run's chunks by tag (the same dicts the runner
            runs: the hook's C{__agg__} marks must reach them).
        @param order: the tags in run order.
        @param allowed: L{aggregateAllowed} for the run.
        @param deps: each tag's requisites as C{(kind, tag)}: a chunk is
            not offered (its C{ready} not even asked) while one of them
            (but C{prereq}s) has not run (L{ran}).
        """
        self._byTag = byTag
        #: Whether any chunk may aggregate.
        self.any = False
        self._allowed: set[str] = set()
        self._byModule: dict[str, list[str]] = {}
        self._waiting: dict[str, set[str]] = {}
        self._waiters: dict[str, list[str]] = {}
        self._index: dict[str, int] = {}
        for tag in order:
            chunk = byTag[tag]
            if tag not in self._allowed and allowed(chunk):
                self._allowed.add(tag)
                self._index[tag] = len(self._index)
                self.any = True
                pending = {dep for kind, dep in (deps or {}).get(tag, ()) if kind != "prereq"}
                if pending:
                    self._waiting[tag] = pending
                    for dep in pending:
                        self._waiters.setdefault(dep, []).append(tag)
                else:
                    self._byModule.setdefault(chunk["state"], []).append(tag)

    def ran(self, tag: str) -> None:
        """
        The chunk C{tag} has run: the chunks waiting for it wait for one
        requisite fewer.
        """
        for member in self._waiters.pop(tag, ()):
            waiting = self._waiting.get(member)
            if waiting is not None:
                waiting.discard(tag)
                if not waiting:
                    del self._waiting[member]
                    module = self._byModule.setdefault(self._byTag[member]["state"], [])
                    bisect.insort(module, member, key=self._index.__getitem__)

    def chunksFor(
        self, tag: str, ready: Callable[[str], bool], finished: Callable[[str], bool]
    ) -> list[dict[str, Any]]:
        """
        @param ready: whether a chunk (by tag) could run now: not run,
            its requisites run and met.
        @param finished: whether a chunk (by tag) has run.
        @return: the chunks C{tag} may be merged with, itself first (Salt's
            C{get_aggregate_chunks}), at most L{MAX_GROUP}; none when no
            other is ready.
        """
        if tag not in self._allowed:
            return []
        module = self._byModule.get(self._byTag[tag]["state"], [])
        # Only the chunks whose requisites have all run are listed (L{ran}
        # adds them), and those run or merged are dropped as they are
        # seen: a chain of chunks waiting for each other costs no more
        # than a run of unrelated ones.
        module[:] = [
            m for m in module if m == tag or not (self._byTag[m].get("__agg__") or finished(m))
        ]
        members = [tag]
        for other in module:
            if len(members) >= MAX_GROUP:
                break
            if other != tag and ready(other):
                members.append(other)
        if len(members) < 2:
            return []
        return [self._byTag[member] for member in members]


def callAggregate(
    states: Mapping[str, Callable[..., Any]],
    ctx: Any,
    low: dict[str, Any],
    chunks: list[dict[str, Any]],
    running: Mapping[str, Any],
) -> None:
    """
    Salt's C{_mod_aggregate}: mark C{low} C{__agg__} and let its module's
    C{mod_aggregate} merge C{chunks} into it; C{low} is updated in place
    with what the hook returns. A failing hook is logged, the chunk runs
    as it was.
    """
    full = f"{low['state']}.mod_aggregate"
    low["__agg__"] = True
    try:
        merged = states[full](ctx, low, chunks, dict(running))
    except Exception:
        log.error("Failed to execute aggregate for state %s", low["state"], exc_info=True)
        return
    if isinstance(merged, dict) and merged is not low:
        low.clear()
        low.update(merged)


class ModInit:
    """
    Salt's C{_mod_init}: each state module's C{mod_init(ctx, low)} before
    its first chunk of the run, again until it returns something true.
    """

    def __init__(self, states: Mapping[str, Callable[..., Any]]) -> None:
        self._states = states
        #: The modules whose C{mod_init} succeeded (or that have none).
        self.done: set[Any] = set()

    def before(self, low: Mapping[str, Any], contextFor: Callable[[Any], Any]) -> None:
        """
        Call C{low}'s module's C{mod_init} unless it already succeeded in
        this run (nothing for a state function that does not exist, as
        Salt). A raising C{mod_init} is logged.
        """
        module = low.get("state")
        if module in self.done:
            return
        if not _has(self._states, f"{module}.{low.get('fun')}"):
            return
        full = f"{module}.mod_init"
        if not _has(self._states, full):
            self.done.add(str(module))
            return
        try:
            if self._states[full](contextFor(low), low):
                self.done.add(str(module))
        except Exception:
            log.exception("%s failed", full)


def umaskOf(low: Mapping[str, Any]) -> int | None:
    """
    @return: the chunk's C{umask} as a number, its digits read as octal
        as Salt reads them (C{"022"} and C{22} are both 0o22), or
        L{None}.
    @raise ValueError: C{Invalid umask: <value>} (Salt's words).
    """
    if "umask" not in low or low["umask"] is None:
        return None
    value = low["umask"]
    try:
        mask = int(str(value), 8)
    except (TypeError, ValueError):
        raise ValueError(f"Invalid umask: {value}") from None
    if isinstance(value, bool) or not 0 <= mask <= 0o777:
        raise ValueError(f"Invalid umask: {value}")
    return mask


@contextlib.contextmanager
def underUmask(mask: int | None) -> Iterator[None]:
    """
    Run the block under umask C{mask} (nothing when L{None}), then
    restore the umask.

    The umask belongs to the whole process, as in Salt (whose state
    function runs in its job's process): while the block runs, every
    other thread of the minion creates its files under it too. Changes
    are serialised by a lock so that two runs never restore each other's
    values out of order.
    """
    if mask is None:
        yield
        return
    with _UMASK_LOCK:
        old = os.umask(mask)
        try:
            yield
        finally:
            os.umask(old)


__all__ = [
    "AggregateGroups",
    "ModInit",
    "aggregateAllowed",
    "callAggregate",
    "umaskOf",
    "underUmask",
]
