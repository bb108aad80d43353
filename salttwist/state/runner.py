# -*- test-case-name: tests.test_state_runner -*-
"""
The state runner: runs a list of low chunks (the compiler's output) with
Salt's execution semantics (C{salt/state.py}: C{call_chunks},
C{call_chunk}, C{call_listen}) and returns Salt's result, one entry per
chunk keyed by its L{stateTag}.

Chunks run in the order given; a chunk whose requisites have not run yet
runs them first. Requisites (C{require}, C{watch}, C{onchanges},
C{onfail}, C{prereq}, their C{_any} forms, C{onfail_all}) decide whether
and how a chunk runs (L{salttwist.state.requisites}); C{listen} runs
C{mod_watch} after every chunk. C{unless}/C{onlyif}/C{creates}/C{retry}
are L{salttwist.state.runcall}'s. Before a chunk, its module's
C{mod_aggregate} (with C{state_aggregate}) and C{mod_init} are called; a
chunk's C{umask} is set around its call (process-wide, as in Salt; not for
C{parallel} states); C{state_max_parallel} caps the C{parallel} states
running at once (L{salttwist.state.runhooks}).

Blocking: a run happens in a thread, never on the reactor.
"""

from __future__ import annotations

import dataclasses
import datetime
import logging
import random
import threading
import time
from collections.abc import Callable, Mapping
from typing import Any

from salttwist.state.requisites import (
    PREREQUIRED,
    ChunkIndex,
    lostComment,
    normalizeItem,
    requisiteStatus,
    resolve,
    stateTag,
)
from salttwist.state.runafter import fireStateResult
from salttwist.state.runcall import StateCall, exceptionReturn
from salttwist.state.runhooks import (
    AggregateGroups,
    ModInit,
    aggregateAllowed,
    callAggregate,
    umaskOf,
    underUmask,
)

log = logging.getLogger(__name__)

__all__ = ["StateRunner", "singleChunk", "stateTag"]

#: The requisites a C{listen} mod_watch chunk drops.
_DROPPED_FOR_LISTENER = (
    "require",
    "require_any",
    "watch",
    "watch_any",
    "onchanges",
    "onchanges_any",
    "onfail",
    "onfail_any",
    "onfail_all",
    "prereq",
    "listen",
)


def singleChunk(fun: str, name: str, saltenv: str = "base", **kwargs: Any) -> dict[str, Any]:
    """
    The low chunk for one state called directly (Salt's C{state.single}).

    @param fun: C{"file.managed"}.
    @param name: the state's name (also its id).
    @param kwargs: the state's arguments.
    @raise ValueError: C{fun} is not C{module.function}.
    """
    module, dot, function = fun.partition(".")
    if not dot or not module or not function:
        raise ValueError(f"Invalid function passed to state.single: {fun!r} (not module.function)")
    chunk: dict[str, Any] = dict(kwargs)
    chunk.update(
        {
            "state": module,
            "fun": function,
            "__id__": name,
            "name": name,
            "__env__": saltenv,
            "__sls__": None,
        }
    )
    return chunk


def _fakeTimes(clock: Callable[[], float]) -> tuple[str, float]:
    when = datetime.datetime.fromtimestamp(clock()).time()
    return when.isoformat(timespec="microseconds"), 0.0


class StateRunner:
    """
    Runs low chunks with Salt's semantics. One runner may run several
    lists, one after another.

    @ivar states: state functions by C{module.function}.
    @ivar contextFor: the L{StateContext} for a chunk (its C{test} the
        run's); the runner overrides C{test} for a chunk with its own
        C{test:} and for C{prereq} checks.
    """

    def __init__(
        self,
        states: Mapping[str, Callable[..., Any]],
        contextFor: Callable[[dict[str, Any]], Any],
        *,
        failhard: bool = False,
        test: bool = False,
        onStateDone: Callable[[str, dict[str, Any], int, int], None] | None = None,
        cancelled: Callable[[], bool] | None = None,
        clock: Callable[[], float] = time.time,
        sleep: Callable[[float], Any] = time.sleep,
        randint: Callable[[int, int], int] = random.randint,
        disabledRequisites: Any = None,
    ) -> None:
        """
        @param disabledRequisites: Salt's C{disabled_requisites} (a kind
            or a list of kinds): those requisites are not checked.
        @param failhard: stop at the first failed state (a chunk's own
            C{failhard} overrides it); never in test mode.
        @param test: the run is a dry run (as the contexts' C{test}).
        @param onStateDone: called C{(tag, ret, done, total)} after each
            state's return is final.
        @param cancelled: checked between chunks; when true the run stops
            as C{failhard} stops it.
        @param clock: the time (L{time.time}), for C{start_time} and
            C{duration}.
        @param sleep: waits between C{retry} attempts (L{time.sleep}).
        @param randint: picks a C{retry} splay (L{random.randint}).
        """
        self.states = states
        self.contextFor = contextFor
        self.failhard = failhard
        self.test = test
        self.onStateDone = onStateDone
        self.cancelled = cancelled or (lambda: False)
        self.clock = clock
        self.caller = StateCall(states, clock, sleep, randint, self.cancelled)
        if disabledRequisites and not isinstance(disabledRequisites, (list, tuple)):
            disabledRequisites = [disabledRequisites]
        self.disabledRequisites = frozenset(disabledRequisites or ())

    def run(self, chunks: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
        """
        Run the chunks.

        @return: Salt's state result: each state's return by its tag, in
            the order they ran, with C{__run_num__} counting up.
        """
        return _Run(self, chunks).execute()


class _Parallel:
    """
    A state running in a thread (C{parallel: True}).
    """

    def __init__(self, work: Callable[[], dict[str, Any]], ended: threading.Condition) -> None:
        """
        @param ended: notified when the state has returned.
        """
        self.ret: dict[str, Any] | None = None
        self.started = False
        self.done = False
        self._work = work
        self._ended = ended
        self.thread = threading.Thread(target=self._run, name="state-parallel", daemon=True)

    def start(self) -> None:
        self.started = True
        self.thread.start()

    def _run(self) -> None:
        try:
            self.ret = self._work()
        finally:
            with self._ended:
                self.done = True
                self._ended.notify_all()


class _Run:
    """
    One run of a list of chunks.
    """

    def __init__(self, runner: StateRunner, chunks: list[dict[str, Any]]) -> None:
        self.runner = runner
        self.chunks = [dict(c) for c in chunks]
        self.total = len(self.chunks)
        self.byTag: dict[str, dict[str, Any]] = {}
        for chunk in self.chunks:
            self.byTag.setdefault(stateTag(chunk), chunk)
        index = ChunkIndex(self.chunks)
        self.deps: dict[str, list[tuple[str, str]]] = {}
        self.lost: dict[str, dict[str, list[dict[str, Any]]]] = {}
        for tag, chunk in self.byTag.items():
            deps, lost = resolve(chunk, index, runner.disabledRequisites)
            if not runner.caller.hasModWatch(chunk["state"]):
                deps = [(_watchAsRequire(kind), dep) for kind, dep in deps]
            self.deps[tag] = deps
            if lost:
                self.lost[tag] = lost
        for tag, deps in list(self.deps.items()):
            for kind, dep in deps:
                if kind == "prereq" and (PREREQUIRED, tag) not in self.deps[dep]:
                    self.deps[dep].append((PREREQUIRED, tag))
        self.running: dict[str, dict[str, Any]] = {}
        self.pre: dict[str, dict[str, Any]] = {}
        self.parallel: dict[str, _Parallel] = {}
        self.queued: list[str] = []
        self.ended = threading.Condition()
        self.cyclic: dict[str, list[str]] = {}
        self.opts: Mapping[str, Any] | None = None
        self.aggregates: AggregateGroups | None = None
        self.modInit = ModInit(runner.states)
        self.runNum = 0
        self.done = 0
        self.stopped = False
        self.cancelled = False

    # -- the whole run

    def execute(self) -> dict[str, dict[str, Any]]:
        for chunk in self.chunks:
            for tag in self.requisitesFirst(stateTag(chunk)):
                if self.stopped:
                    break
                self.startQueued()
                self.callChunk(tag, [])
        self.joinAll()
        if not self.cancelled:
            # Salt runs the listeners after a failhard stop too.
            self.stopped = False
            self.callListen()
            self.joinAll()
        return self.running

    def option(self, name: str) -> Any:
        """
        @return: the run's option C{name} (the options of its first
            chunk's context), or L{None}.
        """
        if self.opts is None:
            try:
                self.opts = self.runner.contextFor(self.chunks[0]).opts if self.chunks else {}
            except Exception:
                log.debug("No state context for the run's options", exc_info=True)
                self.opts = {}
        return self.opts.get(name) if self.opts is not None else None

    def beforeChunk(self, tag: str, chunk: dict[str, Any]) -> None:
        """
        Salt's C{_mod_aggregate} and C{_mod_init} for a chunk about to be
        called (L{salttwist.state.runhooks}).
        """
        if self.aggregates is None:
            agg = self.option("state_aggregate")
            states = self.runner.states
            self.aggregates = AggregateGroups(
                self.byTag,
                [stateTag(c) for c in self.chunks],
                lambda low: aggregateAllowed(low, agg, states),
                self.deps,
            )
        try:
            if self.aggregates.any and not chunk.get("__agg__"):
                group = self.aggregates.chunksFor(tag, self.isReady, self.running.__contains__)
                if group:
                    ctx = self.context(chunk)
                    callAggregate(self.runner.states, ctx, chunk, group, self.running)
            if chunk.get("state") not in self.modInit.done:
                self.modInit.before(chunk, self.context)
        except Exception:
            log.debug("No state context for %s", tag, exc_info=True)

    def isReady(self, tag: str) -> bool:
        """
        @return: whether the chunk C{tag} would run now: not run, its
            requisites run (parallel ones returned) and met.
        """
        if tag in self.running or tag in self.lost or tag in self.cyclic:
            return False
        for kind, dep in self.deps[tag]:
            if dep in self.parallel or self.returnOf(kind, dep) is None:
                return False
        return requisiteStatus(self.deps[tag], self.returnOf) in ("met", "change", "skip_watch")

    def checkCancelled(self) -> bool:
        if not self.stopped and self.runner.cancelled():
            log.info("The state run was cancelled")
            self.stopped = self.cancelled = True
        return self.stopped

    def requisitesFirst(self, root: str) -> list[str]:
        """
        The chunks to call, in order, so that each finds its requisites
        already run: those of C{root} not yet run, depth first, then
        C{root} (so that a long chain needs no deep recursion). A
        C{prereq} target is not listed (its test run comes first), but
        its own requisites are.
        """
        order: list[str] = []
        seen = {root}
        stack = [(root, iter(self.deps.get(root, ())), True)]
        while stack:
            tag, edges, listed = stack[-1]
            for kind, dep in edges:
                if kind == PREREQUIRED and not listed:
                    continue
                if dep in seen or dep in self.running:
                    continue
                seen.add(dep)
                stack.append((dep, iter(self.deps.get(dep, ())), kind != "prereq"))
                break
            else:
                stack.pop()
                if listed:
                    order.append(tag)
        return order

    # -- one chunk

    def callChunk(self, tag: str, stack: list[str]) -> None:
        """
        Run the chunk C{tag} (its unrun requisites first), unless it has
        run; C{stack} holds the chunks waiting for it (a cycle).
        """
        if tag in self.running or self.checkCancelled():
            return
        chunk = self.byTag[tag]
        if tag in self.lost:
            self.notRun(tag, False, lostComment(self.lost[tag]))
            return
        self.beforeChunk(tag, chunk)
        if tag in stack:
            chain = stack[stack.index(tag) :]
            for member in chain:
                self.cyclic[member] = [*chain, tag]
            return
        stack.append(tag)
        for kind, dep in self.deps[tag]:
            if kind == "prereq":
                self.preCheck(dep, stack)
            elif dep not in self.running:
                self.callChunk(dep, stack)
            if self.stopped:
                stack.pop()
                return
        stack.pop()
        if tag in self.running:
            return
        if tag in self.cyclic:
            self.notRun(tag, False, self.recursionComment(tag))
            return
        self.joinDeps(tag)
        if self.stopped:
            return
        status = requisiteStatus(self.deps[tag], self.returnOf)
        self.decide(tag, chunk, status)

    def decide(self, tag: str, chunk: dict[str, Any], status: str) -> None:
        """
        Run the chunk or record why not, as its requisites' C{status}
        says (Salt's C{call_chunk}).
        """
        if status in ("met", "skip_watch"):
            self.runState(tag, chunk, status, None)
        elif status == "change":
            self.runState(tag, chunk, status, self.reqChunks(tag))
        elif status == "fail" and tag in self.pre:
            ret = dict(self.pre[tag])
            ret["changes"] = {}
            self.finish(tag, ret)
        else:
            result, comment = self.notRunReason(tag, status)
            self.notRun(tag, result, comment)

    def notRunReason(self, tag: str, status: str) -> tuple[bool, str]:
        if status == "fail":
            failed: list[str] = []
            for kind, dep in self.deps[tag]:
                ret = self.returnOf(kind, dep)
                if ret is not None and ret.get("result") is False:
                    target = self.byTag[dep]
                    key = f"{target.get('__sls__')}.{target['__id__']}"
                    if key not in failed:
                        failed.append(key)
            return False, f"One or more requisite failed: {', '.join(failed)}"
        if status == "skip_req":
            return True, "State was not run because requisites were skipped by another state"
        if status == "pre":
            return True, "No changes detected"
        if status == "onfail":
            return True, "State was not run because onfail req did not change"
        if status == "onchanges":
            return True, "State was not run because none of the onchanges reqs changed"
        unmet = [dep for kind, dep in self.deps[tag] if self.returnOf(kind, dep) is None]
        return False, f"The requisites of this state did not run: {', '.join(unmet)}"

    def recursionComment(self, tag: str) -> str:
        chain = " -> ".join(
            f"{self.byTag[t].get('__sls__')}.{self.byTag[t]['__id__']}" for t in self.cyclic[tag]
        )
        return f"Recursive requisite found: {chain}"

    def returnOf(self, kind: str, tag: str) -> dict[str, Any] | None:
        if kind == "prereq":
            return self.pre.get(tag, self.running.get(tag))
        return self.running.get(tag)

    def reqChunks(self, tag: str) -> dict[str, list[dict[str, Any]]]:
        reqs: dict[str, list[dict[str, Any]]] = {}
        for kind, dep in self.deps[tag]:
            reqs.setdefault(kind, []).append(self.byTag[dep])
        return reqs

    # -- prereq: the target's test run

    def preCheck(self, tag: str, stack: list[str]) -> None:
        """
        The test run of the C{prereq} target C{tag} (its own requisites
        first), kept in C{self.pre}; when its requisites say it will not
        run, its final return is recorded now, as Salt does.
        """
        if tag in self.pre or self.stopped:
            return
        if tag in self.running:
            self.pre[tag] = self.running[tag]
            return
        if tag in self.lost:
            self.notRun(tag, False, lostComment(self.lost[tag]))
            self.pre[tag] = self.running[tag]
            return
        # Salt's call_chunk aggregates and calls mod_init for the test run
        # too.
        self.beforeChunk(tag, self.byTag[tag])
        if tag in stack:
            chain = stack[stack.index(tag) :]
            for member in chain:
                self.cyclic[member] = [*chain, tag]
            return
        # Salt marks a watched change for the target's test run only when
        # its requisites had to be run first (the path its ordering
        # rarely takes); else a watcher's test run without changes means
        # "No changes detected".
        unmet = any(
            dep not in self.running
            for kind, dep in self.deps[tag]
            if kind not in (PREREQUIRED, "prereq")
        )
        stack.append(tag)
        for kind, dep in self.deps[tag]:
            if kind == PREREQUIRED:
                continue
            if kind == "prereq":
                self.preCheck(dep, stack)
            elif dep not in self.running:
                self.callChunk(dep, stack)
            if self.stopped:
                stack.pop()
                return
        stack.pop()
        if tag in self.running:
            self.pre[tag] = self.running[tag]
            return
        if tag in self.cyclic:
            self.notRun(tag, False, self.recursionComment(tag))
            self.pre[tag] = self.running[tag]
            return
        deps = [(kind, dep) for kind, dep in self.deps[tag] if kind != PREREQUIRED]
        self.joinAll(dep for _, dep in deps)
        chunk = self.byTag[tag]
        status = requisiteStatus(deps, self.returnOf)
        if status in ("met", "change", "skip_watch"):
            low = dict(chunk, __prereq__=True)
            try:
                ret = self.runner.caller.call(low, self.context(low, test=True), refresh=False)
            except Exception:
                log.debug("No state context for %s", tag, exc_info=True)
                ret = exceptionReturn(chunk.get("name"))
            if status == "change" and unmet and not ret.get("changes"):
                ret["changes"] = {"watch": "watch"}
                ret["result"] = None
            self.pre[tag] = ret
        else:
            result, comment = self.notRunReason(tag, status)
            self.notRun(tag, result, comment)
            self.pre[tag] = self.running[tag]

    # -- running a state

    def context(self, chunk: dict[str, Any], test: bool | None = None) -> Any:
        """
        @return: the chunk's context, its C{test} the chunk's own
            C{test:}, C{test} when given, or the run's.
        """
        ctx = self.runner.contextFor(chunk)
        if test is None:
            own = chunk.get("test")
            if isinstance(own, bool):
                test = own
            elif self.runner.test:
                test = True
        if test is not None and getattr(ctx, "test", None) != test:
            ctx = dataclasses.replace(ctx, test=test)
        return ctx

    def runState(
        self,
        tag: str,
        chunk: dict[str, Any],
        status: str,
        reqs: dict[str, list[dict[str, Any]]] | None,
    ) -> None:
        """
        Call the chunk's state function (then, for a watch whose target
        changed, its C{mod_watch}); in a thread for C{parallel: True}.
        """
        running = dict(self.running)

        def work() -> dict[str, Any]:
            try:
                ctx = self.context(chunk)
            except Exception:
                log.debug("No state context for %s", tag, exc_info=True)
                return exceptionReturn(chunk.get("name"))
            ret = self.runner.caller.call(chunk, ctx)
            if status == "skip_watch":
                ret["comment"] = (
                    str(ret.get("comment") or "")
                    + " mod_watch was not run because requisites were skipped by another state"
                )
            elif reqs is not None and not ret.get("changes") and not ret.get("skip_watch"):
                watch = dict(chunk)
                watch["sfun"] = chunk["fun"]
                watch["fun"] = "mod_watch"
                watch["__reqs__"] = reqs
                watch["__running__"] = running
                try:
                    ctx = self.context(watch)
                except Exception:
                    log.debug("No state context for %s", tag, exc_info=True)
                    return exceptionReturn(chunk.get("name"))
                ret = self.runner.caller.call(watch, ctx)
            return ret

        try:
            mask = umaskOf(chunk)
        except ValueError as e:
            # Salt's verify_data: the state is not called.
            self.finish(
                tag,
                {"name": chunk.get("name"), "result": False, "changes": {}, "comment": f"{e}\n"},
            )
            return
        if chunk.get("parallel"):
            # As Salt, a parallel state does not get its umask: the umask
            # is the process's, and threads run together.
            job = _Parallel(work, self.ended)
            self.parallel[tag] = job
            self.queued.append(tag)
            self.startQueued()
            start, _ = _fakeTimes(self.runner.clock)
            self.running[tag] = {
                "name": chunk.get("name"),
                "result": None,
                "changes": {},
                "comment": "Started in a separate process"
                if job.started
                else "Waiting to be started in a separate process, max_parallel hit",
                "start_time": start,
                "duration": 0.0,
                "__run_num__": self.runNum,
                "__sls__": chunk.get("__sls__"),
                "__id__": chunk["__id__"],
                "__parallel__": True,
            }
            self.runNum += 1
            return
        if mask is None:
            ret = work()
        else:
            with underUmask(mask):
                ret = work()
        self.finish(tag, ret)

    def startQueued(self) -> None:
        """
        Start the queued parallel states in order while fewer than
        C{state_max_parallel} run (0: no limit), as Salt's
        C{reconcile_procs}.
        """
        if not self.queued:
            return
        try:
            limit = max(int(self.option("state_max_parallel") or 0), 0)
        except (TypeError, ValueError):
            limit = 0
        while self.queued:
            if limit:
                alive = sum(1 for job in self.parallel.values() if job.started and not job.done)
                if alive >= limit:
                    return
            self.parallel[self.queued.pop(0)].start()

    def waitFor(self, job: _Parallel) -> None:
        """
        Wait until the parallel state C{job} has returned, starting the
        queued ones as others end (C{job} may be one of them).
        """
        while True:
            self.startQueued()
            with self.ended:
                if job.done:
                    break
                self.ended.wait()
        job.thread.join()

    def joinDeps(self, tag: str) -> None:
        self.joinAll(dep for _, dep in self.deps[tag])

    def joinAll(self, tags: Any = None) -> None:
        for tag in list(self.parallel if tags is None else tags):
            job = self.parallel.get(tag)
            if job is None:
                continue
            self.waitFor(job)
            del self.parallel[tag]
            placeholder = self.running[tag]
            ret = job.ret or {
                "name": placeholder["name"],
                "result": False,
                "changes": {},
                "comment": "Parallel state failed to return",
            }
            ret["__parallel__"] = True
            ret["__run_num__"] = placeholder["__run_num__"]
            self.complete(tag, ret)

    def finish(self, tag: str, ret: dict[str, Any]) -> None:
        ret["__run_num__"] = self.runNum
        self.runNum += 1
        self.complete(tag, ret)

    def complete(self, tag: str, ret: dict[str, Any]) -> None:
        chunk = self.byTag[tag]
        ret.setdefault("name", chunk.get("name"))
        ret["__sls__"] = chunk.get("__sls__")
        ret["__id__"] = chunk["__id__"]
        if not ret.get("warnings"):
            ret.pop("warnings", None)
        self.running[tag] = ret
        self.done += 1
        if self.aggregates is not None and self.aggregates.any:
            self.aggregates.ran(tag)
        if chunk.get("fire_event"):
            try:
                fireStateResult(self.context(chunk), chunk, ret)
            except Exception:
                log.warning("fire_event of %s failed", tag, exc_info=True)
        if self.runner.onStateDone is not None:
            try:
                self.runner.onStateDone(tag, ret, self.done, max(self.total, self.done))
            except Exception:
                log.exception("onStateDone failed for %s", tag)
        if self.isFailhard(chunk, ret):
            log.info("failhard: %s failed, stopping the state run", tag)
            self.stopped = True

    def isFailhard(self, chunk: dict[str, Any], ret: dict[str, Any]) -> bool:
        if self.runner.test:
            return False
        if not chunk.get("failhard", self.runner.failhard):
            return False
        return ret.get("result") is False

    def notRun(self, tag: str, result: bool, comment: str) -> None:
        chunk = self.byTag[tag]
        start, duration = _fakeTimes(self.runner.clock)
        self.finish(
            tag,
            {
                "name": chunk.get("name"),
                "changes": {},
                "result": result,
                "comment": comment,
                "start_time": start,
                "duration": duration,
                "__state_ran__": False,
            },
        )

    # -- listen

    def callListen(self) -> None:
        errors: dict[str, dict[str, Any]] = {}
        for chunk in self.chunks:
            items = chunk.get("listen")
            if not items:
                continue
            if not isinstance(items, list):
                items = [items]
            for item in items:
                pair = normalizeItem(item)
                if pair is None:
                    continue
                key, value = pair
                targets = [
                    c
                    for c in self.chunks
                    if (key == "id" or c["state"] == key) and value in (c["__id__"], c["name"])
                ]
                if not targets:
                    if key == "id":
                        continue
                    errors[_listenErrorTag(key, value)] = {
                        "comment": f"Referenced state {key}: {value} does not exist",
                        "name": f"listen_{key}:{value}",
                        "result": False,
                        "changes": {},
                    }
                    continue
                if any(self.running.get(stateTag(t), {}).get("changes") for t in targets):
                    self.callListener(chunk)
        for tag, ret in errors.items():
            ret["__run_num__"] = self.runNum
            self.runNum += 1
            self.running[tag] = ret

    def callListener(self, chunk: dict[str, Any]) -> None:
        low = {k: v for k, v in chunk.items() if k not in _DROPPED_FOR_LISTENER}
        low["sfun"] = chunk["fun"]
        low["fun"] = "mod_watch"
        low["__id__"] = f"listener_{chunk['__id__']}"
        tag = stateTag(low)
        if tag in self.byTag:
            return
        self.byTag[tag] = low
        self.deps[tag] = []
        self.total += 1
        self.callChunk(tag, [])


def _watchAsRequire(kind: str) -> str:
    """
    A C{watch} on a state module without C{mod_watch} is a C{require}
    (Salt's C{_reconcile_watch_req}).
    """
    return {"watch": "require", "watch_any": "require_any"}.get(kind, kind)


def _listenErrorTag(key: str, value: Any) -> str:
    return stateTag(
        {
            "state": "Listen_Error",
            "__id__": f"listen_{value}",
            "name": f"listen_{key}",
            "fun": "Listen_Error",
        }
    )
