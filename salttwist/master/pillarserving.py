# -*- test-case-name: tests.test_master_pillarserving -*-
"""
Pillar's room on the master: C{_pillar} inside a minion's session.

Wire: C{_pillar} C{{"id", "grains", "saltenv", "pillarenv",
"pillar_override", "clean_cache"}} -> C{{"ret": {pillar}}}, compiled for the
session's own minion id only: a load naming another id is refused (and the
attempt logged, without any pillar).

The compile is blocking (files, Jinja, YAML, ext_pillar commands): it runs
in one of the master's worker processes (L{salttwist.master.pillartasks}),
or in a thread through C{runBlocking} while there are none. Compiles that
wait for a worker (a refresh of every minion) go up to L{COMPILE_BATCH} to
one task call (L{TaskBatcher}), the config sent once per call. Requests for the
same minion with the same inputs that arrive while a compile runs share it;
a minion has at most L{MAX_COMPILES_PER_MINION} compiles with different
inputs running at once.
The result is kept in the L{PillarCache} (pillar targeting reads it) and,
with C{pillar_cache}, answers later requests for C{pillar_cache_ttl}
seconds unless the minion asks for a clean one (C{clean_cache}, as
C{saltutil.refresh_pillar} does).

A worker answers each pillar as its msgpack bytes; the master keeps them
in the cache and puts them in the reply as they are (L{serial.Packed}),
sealed with the session's key like any reply: the pillar is never decoded
nor encoded again on the master's reactor.

Render errors: their full texts (file, line, cause) are logged here at
error level; the minion gets Salt's C{_errors}. Pillar values are never
logged nor fired on the event bus.
"""

from __future__ import annotations

import json
from typing import Any

from twisted.internet.defer import Deferred, succeed
from twisted.logger import Logger
from twisted.python.failure import Failure

from salttwist import serial
from salttwist.master.pillarcache import PillarCache, PillarEnv
from salttwist.master.pillartasks import COMPILE_MANY_TASK
from salttwist.workers.batch import TaskBatcher

#: Compiles with different inputs one minion may have running at once:
#: past that its requests are refused until one is over, so a minion
#: sending many requests with varied grains cannot keep the workers busy.
MAX_COMPILES_PER_MINION = 4


#: The most compiles one task call carries (when they wait for a worker).
COMPILE_BATCH = 16


class PillarRequests:
    """
    Pillar requests from minion sessions.

    @ivar workers: the worker pool pillar is compiled in, or L{None} (a
        thread through C{runBlocking}).
    """

    log = Logger(namespace="salttwist.master.core.Master")

    #: The worker pool pillar is compiled in, or L{None} (a thread).
    workers: Any = None

    def __init__(
        self,
        config: dict[str, Any],
        clock: Any,
        runBlocking: Any,
        grainsCache: Any,
        pillarCache: PillarCache,
    ) -> None:
        self.config = config
        self.clock = clock
        self.runBlocking = runBlocking
        self.grainsCache = grainsCache
        self.pillarCache = pillarCache
        #: The compiles running, by minion id: each one's inputs and the
        #: L{Deferred}s waiting for it.
        self._inFlight: dict[str, list[_Compile]] = {}
        #: Sends compiles to the workers (L{TaskBatcher}), made on first use.
        self._batcher: TaskBatcher | None = None
        #: How many compiles run for each minion.
        self._running: dict[str, int] = {}
        #: Compiles started, for tests and figures.
        self.compiles = 0

    # -- the session command ---------------------------------------------------

    def minionPillar(self, proto: Any, load: dict[str, Any]) -> Deferred[dict[str, Any]]:
        """
        C{_pillar}: the pillar of the session's own minion.

        @return: a L{Deferred} firing with C{{"ret": pillar}}.
        @raise ValueError: a load naming another minion, or malformed.
        """
        minionId = proto.minionId
        claimed = load.get("id")
        if claimed is not None and claimed != minionId:
            # Escaped and bounded: the claimed id is whatever the peer sent.
            other = repr(claimed)
            if len(other) > 100:
                other = other[:100] + "..."
            self.log.warn(
                "minion {id!r} asked for the pillar of {other}: refused",
                id=minionId,
                other=other,
            )
            raise ValueError(
                f"minion {minionId!r} may only ask for its own pillar, not for {other}'s"
            )
        saltenv = _optionalString(load, "saltenv")
        pillarenv = _optionalString(load, "pillarenv")
        override = load.get("pillar_override")
        if override is None:
            override = {}
        if not isinstance(override, dict):
            raise ValueError(f"pillar_override must be a mapping, not {type(override).__name__}")
        grains = load.get("grains")
        if not isinstance(grains, dict):
            grains = self.grainsCache.grains.get(minionId) or {}
        if grains.get("id") != minionId:
            # The session's id is the minion's, whatever its grains claim:
            # a template reading grains['id'] sees that one.
            grains = {**grains, "id": minionId}
        d = self.packedPillarFor(
            minionId,
            grains,
            saltenv=saltenv,
            pillarenv=pillarenv,
            override=override,
            cleanCache=bool(load.get("clean_cache")),
        )
        return d.addCallback(lambda packed: {"ret": serial.Packed(packed)})

    # -- compiling ---------------------------------------------------------------

    def pillarFor(
        self,
        minionId: str,
        grains: dict[str, Any],
        saltenv: str | None = None,
        pillarenv: str | None = None,
        override: dict[str, Any] | None = None,
        cleanCache: bool = False,
    ) -> Deferred[dict[str, Any]]:
        """
        Compile C{minionId}'s pillar (or, with C{pillar_cache}, take it from
        the cache while fresh), keeping it in the L{PillarCache} unless an
        override shaped it.

        @return: a L{Deferred} firing with the pillar (with C{_errors} if
            a source failed), or failing with L{ValueError} if the compile
            itself could not run.
        """
        d = self.packedPillarFor(minionId, grains, saltenv, pillarenv, override, cleanCache)
        return d.addCallback(serial.loads)

    def packedPillarFor(
        self,
        minionId: str,
        grains: dict[str, Any],
        saltenv: str | None = None,
        pillarenv: str | None = None,
        override: dict[str, Any] | None = None,
        cleanCache: bool = False,
    ) -> Deferred[bytes]:
        """
        L{pillarFor}, the pillar as its msgpack bytes (as a worker answers
        it and the L{PillarCache} keeps it).
        """
        env: PillarEnv = (saltenv, pillarenv)
        if not override and not cleanCache and self.config.get("pillar_cache"):
            cached = self.pillarCache.freshPacked(
                minionId, env, self.clock.seconds(), float(self.config["pillar_cache_ttl"])
            )
            if cached is not None:
                return succeed(cached)
        waiter: Deferred[bytes] = Deferred()
        compiles = self._inFlight.get(minionId)
        if compiles:
            # Another compile of this minion runs: the same inputs share it
            # (the inputs are compared only then, most requests find none).
            same = _Compile(grains, env, override)
            for running in compiles:
                if running.key() == same.key():
                    running.waiters.append(waiter)
                    return waiter
        running = self._running.get(minionId, 0)
        if running >= MAX_COMPILES_PER_MINION:
            raise ValueError(
                f"minion {minionId!r} has {running} pillar compiles running already; "
                "ask again when they are over"
            )
        self._running[minionId] = running + 1
        compile = _Compile(grains, env, override)
        compile.waiters.append(waiter)
        self._inFlight.setdefault(minionId, []).append(compile)
        self.compiles += 1
        generation = self.pillarCache.generation(minionId)
        d = self._compile(minionId, grains, saltenv, pillarenv, override or {})
        d.addCallbacks(
            self._compiled,
            self._compileFailed,
            callbackArgs=(compile, minionId, env, bool(override), generation),
            errbackArgs=(compile, minionId),
        )
        return waiter

    def _compile(
        self,
        minionId: str,
        grains: dict[str, Any],
        saltenv: str | None,
        pillarenv: str | None,
        override: dict[str, Any],
    ) -> Deferred[list[Any]]:
        """
        Run the compile in a worker, or in a thread when the master has no
        workers (or they cannot take it: stopped, dead, queue full).

        @return: a L{Deferred} of C{[pillar, errors]}: the pillar as its
            msgpack bytes from a worker, as a mapping from a thread.
        """
        workers = self.workers
        args = (self.config, minionId, grains, saltenv, pillarenv, override)
        # Through a batcher: compiles that wait for a worker (a refresh of
        # every minion) go several to one task call, the config once.
        if workers is None:
            return self._inThread(*args)

        def notInWorker(failure: Failure) -> Any:
            from salttwist.workers import TaskError

            if failure.check(TaskError):
                return failure
            self.log.warn(
                "pillar for minion {id}: no worker could compile it ({error}); "
                "compiling in a thread",
                id=minionId,
                error=failure.value,
            )
            return self._inThread(*args)

        batcher = self._batcher
        if batcher is None or batcher.pool is not workers:
            batcher = self._batcher = TaskBatcher(
                workers, COMPILE_MANY_TASK, lambda: (self.config,), maxBatch=COMPILE_BATCH
            )
        d = batcher.run(minionId, grains, saltenv, pillarenv, override)
        return d.addErrback(notInWorker)

    def _inThread(
        self,
        config: dict[str, Any],
        minionId: str,
        grains: dict[str, Any],
        saltenv: str | None,
        pillarenv: str | None,
        override: dict[str, Any],
    ) -> Deferred[list[Any]]:
        """
        Compile in a thread (C{runBlocking}). The grains and the override
        are copied here, on the reactor thread, which may change them.
        """
        import copy

        from salttwist.master.pillartasks import compileMinionPillar

        return self.runBlocking(
            compileMinionPillar,
            config,
            minionId,
            copy.deepcopy(grains),
            saltenv,
            pillarenv,
            copy.deepcopy(override),
        )

    def _over(self, minionId: str) -> None:
        """
        One of C{minionId}'s compiles is over.
        """
        running = self._running.pop(minionId, 1) - 1
        if running > 0:
            self._running[minionId] = running

    def _compiled(
        self,
        result: list[Any],
        compile: _Compile,
        minionId: str,
        env: PillarEnv,
        overridden: bool,
        generation: int,
    ) -> None:
        self._over(minionId)
        pillar, errors = result
        if isinstance(pillar, dict):
            # Compiled in a thread.
            try:
                pillar = serial.dumps(pillar)
            except serial.SerialError:
                self._failed(Failure(), compile, minionId)
                return
        size = _mapSize(pillar) if isinstance(pillar, bytes) else None
        self.log.debug(
            "pillar for minion {id} compiled: {keys} top-level keys, {errors} errors",
            id=minionId,
            keys=size or 0,
            errors=len(errors),
        )
        for text in errors:
            self.log.error("pillar for minion {id}: {error}", id=minionId, error=text)
        if size is None:
            self._failed(Failure(TypeError("the compiler returned no mapping")), compile, minionId)
            return
        if not overridden and self.pillarCache.generation(minionId) == generation:
            self.pillarCache.storePacked(minionId, pillar, self.clock.seconds(), env)
        for waiter in self._finished(compile, minionId):
            waiter.callback(pillar)

    def _finished(self, compile: _Compile, minionId: str) -> list[Deferred[bytes]]:
        """
        C{compile} is over: no later request joins it.

        @return: the L{Deferred}s waiting for it.
        """
        compiles = self._inFlight.get(minionId, [])
        if compile in compiles:
            compiles.remove(compile)
            if not compiles:
                del self._inFlight[minionId]
        waiters, compile.waiters = compile.waiters, []
        return waiters

    def _compileFailed(self, failure: Failure, compile: _Compile, minionId: str) -> None:
        self._over(minionId)
        self._failed(failure, compile, minionId)

    def _failed(self, failure: Failure, compile: _Compile, minionId: str) -> None:
        value = failure.value
        self.log.error(
            "pillar for minion {id} could not be compiled: {type}: {error}",
            id=minionId,
            type=getattr(value, "typeName", type(value).__name__),
            error=getattr(value, "message", value),
        )
        for waiter in self._finished(compile, minionId):
            waiter.errback(
                ValueError(
                    f"the master could not compile the pillar of {minionId!r}; see the master's log"
                )
            )

    # -- keys --------------------------------------------------------------------

    def keyEvent(self, tag: str, data: dict[str, Any]) -> None:
        """
        A C{salt/key} event: a minion whose key was deleted or rejected has
        no pillar on this master any more.
        """
        minionId = data.get("id")
        if data.get("act") in ("delete", "reject") and isinstance(minionId, str):
            self.pillarCache.forget(minionId)


def _optionalString(load: dict[str, Any], name: str) -> str | None:
    """
    @return: C{load[name]}: a string, or L{None} when absent or empty.
    @raise ValueError: if it is something else.
    """
    value = load.get(name)
    if value is None or value == "":
        return None
    if not isinstance(value, str):
        raise ValueError(f"{name} must be a string, not {type(value).__name__}")
    return value


def _mapSize(packed: bytes) -> int | None:
    """
    @return: how many entries the msgpack map C{packed} declares, or
        L{None} if it does not start with a map's header.
    """
    if not packed:
        return None
    first = packed[0]
    if 0x80 <= first <= 0x8F:
        return first & 0x0F
    if first == 0xDE and len(packed) >= 3:
        return int.from_bytes(packed[1:3], "big")
    if first == 0xDF and len(packed) >= 5:
        return int.from_bytes(packed[1:5], "big")
    return None


class _Compile:
    """
    One running compile of a minion's pillar: its inputs and the
    L{Deferred}s waiting for it.
    """

    def __init__(
        self, grains: dict[str, Any], env: PillarEnv, override: dict[str, Any] | None
    ) -> None:
        self.grains = grains
        self.env = env
        self.override = override
        self.waiters: list[Deferred[bytes]] = []
        self._key: str | None = None

    def key(self) -> str:
        """
        @return: what makes two compiles of one minion the same: its
            grains, the environments and the override, as one string
            (made when first asked: only when two requests of the minion
            meet).
        """
        if self._key is None:
            self._key = json.dumps(
                [self.grains, list(self.env), self.override or {}], sort_keys=True, default=repr
            )
        return self._key
