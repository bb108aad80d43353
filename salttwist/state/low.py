# -*- test-case-name: tests.test_state_compile_low,tests.test_state_compile_cases -*-
"""
Low chunks from high data, in execution order (Salt's
C{compile_high_data} and C{order_chunks}, what C{state.show_lowstate}
shows).

  1. L{highToChunks}: one chunk per state of each id (one per name of
     C{names:}, a name given as C{{name: [{arg: value}, ...]}} with its own
     arguments), the state's arguments as top-level keys.
  2. L{orderChunks}: the requisites (C{require}, C{watch}, C{onchanges},
     C{onfail}, C{prereq} and their C{_any}/C{_all} forms) become edges of
     a graph; a requisite naming nothing is an error, as is a cycle (named
     with its chain). The chunks are sorted topologically, among those
     ready by C{order} (a required state takes the smallest order of the
     states requiring it) then by C{state + name + fun}, as Salt does.

C{order}: a number; C{first} (0); C{last} (after every number); a
negative number counts back from C{last}; without one (C{state_auto_order}
off) the highest number plus 100. The chunks carry the number used.

Differences from Salt, each for the runner of this project: C{prereq}
gives the prereq'd state once (Salt lists it twice, a test run first, and
flags both with C{__prereq__}); the runner runs it in test mode itself.
C{listen} is not an ordering edge (as in Salt) and a C{listen} target is
checked by the runner, as Salt's.

Ground: imports no wing.
"""

from __future__ import annotations

import copy
import fnmatch
import heapq
from collections.abc import Callable, Iterable, Mapping
from typing import Any

#: The requisite kinds that order chunks, with Salt's precedence weight.
REQUISITE_WEIGHTS: dict[str, int] = {
    "onfail": 0,
    "onfail_any": 1,
    "onfail_all": 2,
    "require": 3,
    "require_any": 4,
    "onchanges": 5,
    "onchanges_any": 6,
    "watch": 7,
    "watch_any": 8,
    "prereq": 9,
    "prerequired": 10,
    "listen": 11,
}

#: The kinds checked and turned into edges, in Salt's order.
_EDGE_KINDS = (
    "require",
    "require_any",
    "watch",
    "watch_any",
    "prereq",
    "onfail",
    "onfail_any",
    "onfail_all",
    "onchanges",
    "onchanges_any",
)

_GLOB = frozenset("*?[]")
_LAST = 1000000


def stateTag(chunk: Mapping[str, Any]) -> str:
    """
    @return: Salt's tag of a chunk: C{state_|-id_|-name_|-fun}.
    """
    return f"{chunk['state']}_|-{chunk['__id__']}_|-{chunk['name']}_|-{chunk['fun']}"


#: Values L{_copyData} shares instead of copying.
_IMMUTABLE = (str, int, float, bool, type(None), bytes)


def _copyData(value: Any) -> Any:
    """
    A deep copy of high data (dicts, lists, strings, numbers: what the
    renderers give), made without C{copy.deepcopy}'s bookkeeping (a
    chunk's copy was 4% of a warm state run's CPU); anything else is
    given to C{copy.deepcopy}. Unlike it, an object met twice is copied
    twice.
    """
    kind = type(value)
    if kind in _IMMUTABLE:
        return value
    if kind is dict:
        return {key: _copyData(item) for key, item in value.items()}
    if kind is list:
        return [_copyData(item) for item in value]
    return copy.deepcopy(value)


def highToChunks(high: Mapping[str, Any]) -> list[dict[str, Any]]:
    """
    Salt's C{compile_high_data} before ordering: the chunks in definition
    order (C{name_order} set on the chunks of C{names:}).
    """
    chunks: list[dict[str, Any]] = []
    for id_, body in high.items():
        if str(id_).startswith("__") or not isinstance(body, dict):
            continue
        for state, run in body.items():
            if str(state).startswith("__") or not isinstance(run, list):
                continue
            chunk: dict[str, Any] = {"state": state, "name": id_}
            for key in ("__sls__", "__env__", "__sls_included_from__"):
                if key in body:
                    chunk[key] = body[key]
            chunk["__id__"] = id_
            funs: list[str] = []
            names: list[Any] = []
            for arg in run:
                if isinstance(arg, str):
                    if arg not in funs:
                        funs.append(arg)
                    continue
                if not isinstance(arg, dict):
                    continue
                for key, value in arg.items():
                    if key == "names":
                        for name in value if isinstance(value, list) else [value]:
                            if name not in names:
                                names.append(name)
                    elif key == "state":
                        continue
                    elif key == "name" and not isinstance(value, str):
                        chunk[key] = id_
                    else:
                        chunk[key] = value
            if not funs:
                continue
            if not names:
                live = _copyData(chunk)
                live["fun"] = funs[0]
                chunks.append(live)
                continue
            for nameOrder, entry in enumerate(names, 1):
                live = _copyData(chunk)
                if isinstance(entry, dict) and entry:
                    lowName = next(iter(entry))
                    live["name"] = lowName
                    extra = entry[lowName]
                    for more in extra if isinstance(extra, list) else [extra]:
                        if isinstance(more, dict):
                            live.update(_copyData(more))
                else:
                    live["name"] = entry
                live["name_order"] = nameOrder
                live["fun"] = funs[0]
                chunks.append(live)
    return chunks


class _Graph:
    """
    The requisite graph: nodes by tag (insertion order kept), edges
    C{source -> target} by kind (C{target} runs after C{source}).
    """

    def __init__(self) -> None:
        self.chunks: dict[str, dict[str, Any]] = {}
        self.out: dict[str, dict[str, dict[str, None]]] = {}
        self.into: dict[str, dict[str, dict[str, None]]] = {}
        #: Tags by C{(kind, name or id)} and by SLS, each an ordered set
        #: (a dict of C{None}s: a run of 500 states in one SLS adds each
        #: tag at no cost, not after a search of a list).
        self.byRef: dict[tuple[str, str], dict[str, None]] = {}
        self.bySls: dict[str, dict[str, None]] = {}
        self.childMin: dict[str, float] = {}
        #: C{(prerequiring tag, prereq'd tag)} pairs.
        self.prereqs: list[tuple[str, str]] = []

    def copyPrereqDependencies(self) -> None:
        """
        A state declaring C{prereq: B} runs after what B requires, so that
        the test run of B that decides it sees B's requisites done (Salt
        gives these requisites to its test-run node of B).
        """
        pairs = set(self.prereqs)
        for tag, target in self.prereqs:
            for source, kinds in list(self.into.get(target, {}).items()):
                if (source, target) in pairs:
                    continue
                for kind in list(kinds):
                    self.edge(source, tag, kind)

    def add(self, chunk: dict[str, Any]) -> None:
        tag = stateTag(chunk)
        self.chunks[tag] = chunk
        self.out.setdefault(tag, {})
        self.into.setdefault(tag, {})
        for ref in (
            (chunk["state"], chunk["name"]),
            (chunk["state"], chunk["__id__"]),
            ("id", chunk["__id__"]),
            ("id", chunk["name"]),
        ):
            self.byRef.setdefault((str(ref[0]), str(ref[1])), {})[tag] = None
        slsNames = [chunk.get("__sls__")] + list(chunk.get("__sls_included_from__") or [])
        for sls in slsNames:
            if sls:
                self.bySls.setdefault(str(sls), {})[tag] = None

    def edge(self, source: str, target: str, kind: str) -> None:
        self.out.setdefault(source, {}).setdefault(target, {})[kind] = None
        self.into.setdefault(target, {}).setdefault(source, {})[kind] = None

    def lookup(self, key: str, value: str) -> list[str]:
        """
        @return: the tags a requisite C{{key: value}} names (globs allowed).
        """
        if key == "sls":
            if _GLOB & set(value):
                return [
                    t
                    for sls, tags in self.bySls.items()
                    if fnmatch.fnmatch(sls, value)
                    for t in tags
                ]
            return list(self.bySls.get(value, ()))
        if _GLOB & set(value):
            return [
                t
                for (kind, nameOrId), tags in self.byRef.items()
                if kind == key and fnmatch.fnmatch(nameOrId, value)
                for t in tags
            ]
        return list(self.byRef.get((key, value), ()))

    def findCycle(self) -> list[tuple[str, str, str]]:
        """
        @return: the edges C{(source, target, kind)} of one cycle, or C{[]}.
        """
        white, grey, black = 0, 1, 2
        colour = dict.fromkeys(self.chunks, white)
        parent: dict[str, tuple[str, str]] = {}
        for start in self.chunks:
            if colour[start] != white:
                continue
            stack: list[tuple[str, Iterable[tuple[str, str]]]] = [(start, self._edgesFrom(start))]
            colour[start] = grey
            while stack:
                node, edges = stack[-1]
                advanced = False
                for target, kind in edges:
                    if colour[target] == grey:
                        cycle = [(node, target, kind)]
                        current = node
                        while current != target:
                            prev, prevKind = parent[current]
                            cycle.append((prev, current, prevKind))
                            current = prev
                        return list(reversed(cycle))
                    if colour[target] == white:
                        parent[target] = (node, kind)
                        colour[target] = grey
                        stack.append((target, self._edgesFrom(target)))
                        advanced = True
                        break
                if not advanced:
                    colour[node] = black
                    stack.pop()
        return []

    def _edgesFrom(self, node: str) -> Iterable[tuple[str, str]]:
        return iter([(t, k) for t, kinds in self.out.get(node, {}).items() for k in kinds])


def _normalOrder(chunk: dict[str, Any], cap: int) -> float:
    order = chunk.get("order")
    if order is None or not isinstance(order, (int, float)):
        if order == "last":
            order = cap + _LAST
        elif order == "first":
            order = 0
        else:
            order = cap
        chunk["order"] = order
    return order


def _chunkOrder(graph: _Graph, tag: str, cap: int) -> tuple[float, float]:
    """
    Salt's C{_get_chunk_order}: the chunk's own order (normalised and kept
    in the chunk), lowered to the smallest order of the chunks that
    depend on it through the heaviest requisite kinds met.
    """
    chunk = graph.chunks[tag]
    order = _normalOrder(chunk, cap)
    nameOrder = chunk.pop("name_order", 0)
    if nameOrder:
        order += nameOrder / 10000.0
        chunk["order"] = order
    if order < 0:
        order += cap + _LAST
        chunk["order"] = order
    if tag not in graph.childMin:
        childMin = float("inf")
        heaviest = float("-inf")
        for child, kinds in graph.out.get(tag, {}).items():
            for kind in kinds:
                weight = REQUISITE_WEIGHTS.get(kind, 0)
                if heaviest <= weight:
                    heaviest = weight
                    childChunk = graph.chunks[child]
                    childOrder = childChunk.get("order", float("inf"))
                    if childOrder is None or not isinstance(childOrder, (int, float)):
                        childOrder = _normalOrder(childChunk, cap)
                    childMin = min(childMin, childOrder)
        graph.childMin[tag] = childMin
    order = min(order, graph.childMin[tag])
    return (order, chunk["order"])


def _chunkWords(chunk: Mapping[str, Any]) -> str:
    words = {"SLS": chunk.get("__sls__"), "ID": chunk["__id__"]}
    if chunk["__id__"] != chunk["name"]:
        words["NAME"] = chunk["name"]
    return str(words)


def _addRequisites(graph: _Graph, chunk: dict[str, Any], disabled: Iterable[str]) -> str | None:
    """
    Salt's C{add_requisites}: the chunk's requisites as edges.

    @return: an error for the first requisite that names nothing or is
        malformed, else L{None}.
    """
    tag = stateTag(chunk)
    for kind in _EDGE_KINDS:
        reqs = chunk.get(kind)
        if not reqs:
            continue
        if kind in disabled:
            continue
        if not isinstance(reqs, list):
            reqs = [reqs]
        for ref in reqs:
            if isinstance(ref, str):
                ref = {"id": ref}
            if not isinstance(ref, dict) or len(ref) != 1:
                return (
                    f"Requisite [{kind}: {ref!r}] in state [{chunk['name']}] in SLS"
                    f" [{chunk.get('__sls__')}] must be a single-key mapping"
                )
            key, value = next(iter(ref.items()))
            key = str(key).split(".", 1)[0]
            if value is None:
                continue
            if not isinstance(value, str):
                return (
                    f"Requisite [{kind}: {key}] in state"
                    f" [{chunk['name']}] in SLS [{chunk.get('__sls__')}]"
                    " must have a string as the value"
                )
            targets = graph.lookup(key, value)
            if not targets:
                error = (
                    "Referenced state does not exist"
                    f" for requisite [{kind}: ({key}: {value})] in state"
                    f" [{chunk['name']}] in SLS [{chunk.get('__sls__')}]"
                )
                if chunk["__id__"] != chunk["name"]:
                    error += f" (ID '{chunk['__id__']}')"
                return error
            for target in targets:
                if kind == "prereq":
                    # The prereq'd state runs after the one declaring the
                    # prereq (which the runner runs only if a test run of
                    # the prereq'd state would change something).
                    graph.edge(tag, target, "require")
                    graph.prereqs.append((tag, target))
                else:
                    graph.edge(target, tag, kind)
    return None


def orderChunks(
    chunks: list[dict[str, Any]],
    opts: Mapping[str, Any] | None = None,
    hasModWatch: Callable[[str], bool] | None = None,
    where: Callable[[Any, Any], str] | None = None,
) -> tuple[list[dict[str, Any]], list[str]]:
    """
    Salt's C{order_chunks}: check the requisites and sort the chunks.

    @param opts: C{disabled_requisites}.
    @param hasModWatch: C{hasModWatch(state module)}: when given, the
        C{watch} (C{watch_any}) requisites of a module without
        C{mod_watch} become C{require} (C{require_any}), as Salt does.
    @param where: C{where(sls, saltenv)}: the file of an SLS, added to
        the errors of its chunks (see L{salttwist.state.sls.HighBuilder.where}).
    @return: C{(chunks in execution order, errors)}; no chunks when a
        cycle is found.
    """
    opts = opts or {}
    disabled = opts.get("disabled_requisites") or []
    if not isinstance(disabled, (list, tuple)):
        disabled = [disabled]
    graph = _Graph()
    for chunk in chunks:
        graph.add(chunk)
    cap = 1
    errors: list[str] = []
    for chunk in chunks:
        if hasModWatch is not None:
            for watch, require in (("watch", "require"), ("watch_any", "require_any")):
                if watch in chunk and not hasModWatch(chunk["state"]):
                    moved = chunk.pop(watch)
                    chunk.setdefault(require, []).extend(
                        moved if isinstance(moved, list) else [moved]
                    )
        error = _addRequisites(graph, chunk, disabled)
        if error:
            if where is not None:
                error += where(chunk.get("__sls__"), chunk.get("__env__"))
            errors.append(error)
        elif "order" in chunk:
            order = chunk["order"]
            if isinstance(order, int) and order > cap - 1 and order > 0:
                cap = order + 100
    graph.copyPrereqDependencies()
    cycle = graph.findCycle()
    if cycle:
        edges = ", ".join(
            f"({_chunkWords(graph.chunks[target])}, '{kind}', {_chunkWords(graph.chunks[source])})"
            for source, target, kind in cycle
        )
        # Each edge runs source then target (target requires source): the
        # chain reads "x -> y" for "x requires y".
        nodes = [cycle[0][0]] + [target for _, target, _ in cycle]
        chain = " -> ".join(_short(graph.chunks[tag]) for tag in reversed(nodes))
        errors.append(f"Recursive requisites were found: {edges} (chain: {chain})")
        return [], errors
    return _topological(graph, cap), errors


def _short(chunk: Mapping[str, Any]) -> str:
    return f"{chunk['state']}:{chunk['__id__']}"


def _topological(graph: _Graph, cap: int) -> list[dict[str, Any]]:
    """
    Kahn's sort, the ready chunks taken by (order, label) as Salt's
    C{lexicographical_topological_sort}.
    """

    def key(tag: str) -> tuple[Any, ...]:
        chunk = graph.chunks[tag]
        label = f"{chunk['state']}{chunk['name']}{chunk['fun']}"
        return (_chunkOrder(graph, tag, cap), label)

    inDegree = {
        tag: sum(len(kinds) for kinds in graph.into.get(tag, {}).values()) for tag in graph.chunks
    }
    heap: list[tuple[Any, str]] = []
    for tag in graph.chunks:
        if inDegree[tag] == 0:
            heapq.heappush(heap, (key(tag), tag))
    ordered: list[dict[str, Any]] = []
    while heap:
        _, tag = heapq.heappop(heap)
        ordered.append(graph.chunks[tag])
        for target, kinds in graph.out.get(tag, {}).items():
            inDegree[target] -= len(kinds)
            if inDegree[target] == 0:
                heapq.heappush(heap, (key(target), target))
    return ordered
