# -*- test-case-name: tests.test_minion_pillar -*-
"""
The minion's pillar: fetched from its master over its own session
(C{_pillar}, with its grains) after it subscribed, kept in memory in
C{LoaderContext.pillar} (the dict replaced whole, never changed in place, so
a job reading it sees one pillar), and fetched again on demand
(C{saltutil.refresh_pillar}, C{LoaderContext.refreshPillar}).

One refresh runs at a time: a refresh asked for while one runs waits for a
new one, started once the running one is over (the running one may have
been compiled before whatever change the caller wants to see). Callers that
ask meanwhile share that next fetch. A failed fetch keeps the pillar the
minion had and logs why; nothing of the pillar is logged.

With C{file_client: local} (Salt's masterless minion) the minion compiles
its pillar itself from its own C{pillar_roots}, in a thread
(L{localCompiler}), at start and at each refresh.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from twisted.internet.defer import Deferred, fail
from twisted.logger import Logger
from twisted.python.failure import Failure

from salttwist.modules import LoaderContext

#: Seconds the minion waits for its master to compile and send its pillar.
PILLAR_TIMEOUT = 60.0
#: The tag the minion fires on its own bus when a refresh is over (Salt's
#: C{MINION_PILLAR_REFRESH_COMPLETE}); its data carries no pillar.
PILLAR_REFRESH_COMPLETE = "/salt/minion/minion_pillar_refresh_complete"


class PillarUnavailable(Exception):
    """
    The pillar could not be fetched (no session, no answer, a refusal);
    the message says why.
    """


def pillarRequest(
    minionId: str,
    grains: dict[str, Any],
    opts: dict[str, Any],
    saltenv: str | None = None,
    pillarenv: str | None = None,
    override: dict[str, Any] | None = None,
    cleanCache: bool = False,
) -> dict[str, Any]:
    """
    @return: the C{_pillar} load Salt's minion sends: its id and grains,
        the saltenv and pillarenv (its config's unless given), the override.
    """
    return {
        "cmd": "_pillar",
        "id": minionId,
        "grains": grains,
        "saltenv": saltenv if saltenv is not None else opts.get("saltenv"),
        "pillarenv": pillarenv if pillarenv is not None else opts.get("pillarenv"),
        "pillar_override": override or {},
        "clean_cache": cleanCache,
    }


def pillarFromReply(reply: dict[str, Any]) -> dict[str, Any]:
    """
    @return: the pillar in a C{_pillar} reply.
    @raise PillarUnavailable: if the reply holds none.
    """
    pillar = reply.get("ret")
    if not isinstance(pillar, dict):
        raise PillarUnavailable(f"the master's answer holds no pillar ({type(pillar).__name__})")
    return pillar


class MinionPillar:
    """
    Fetches and keeps one minion's pillar.

    @ivar fetches: how many fetches were sent (tests and figures).
    """

    log = Logger()

    def __init__(
        self,
        minionId: str,
        context: LoaderContext,
        session: Callable[[], Any],
        clock: Any,
        timeout: float = PILLAR_TIMEOUT,
    ) -> None:
        """
        @param session: returns the minion's authenticated req session (its
            C{request(payload)} returns a L{Deferred} of the reply), or
            L{None} while it has none.
        """
        self.id = minionId
        self.context = context
        self._session = session
        self._clock = clock
        self._timeout = timeout
        self.fetches = 0
        #: With C{file_client: local}: compiles the pillar here instead
        #: (C{(saltenv, pillarenv, override) -> Deferred[pillar]}, see
        #: L{localCompiler}); L{None}: the master compiles it.
        self.localCompile: Callable[..., Deferred[dict[str, Any]]] | None = None
        #: The waiters of the running refresh, or L{None} when none runs.
        self._running: list[Deferred[dict[str, Any]]] | None = None
        #: The waiters of the refresh to start when the running one is over.
        self._next: list[Deferred[dict[str, Any]]] = []
        self._nextClean = False
        self._nextAnnounce = False
        #: Whether the running refresh fires L{PILLAR_REFRESH_COMPLETE}.
        self._announce = False

    def fetch(
        self,
        saltenv: str | None = None,
        pillarenv: str | None = None,
        override: dict[str, Any] | None = None,
        cleanCache: bool = False,
    ) -> Deferred[dict[str, Any]]:
        """
        Ask the master for this minion's pillar, without keeping it (for
        C{pillar.items(pillarenv=...)} and the like).

        @return: a L{Deferred} firing with the pillar, or failing with
            L{PillarUnavailable}.
        """
        if self.localCompile is not None:
            self.fetches += 1

            def compileFailed(failure: Failure) -> Failure:
                return Failure(
                    PillarUnavailable(
                        f"the local pillar could not be compiled: "
                        f"{type(failure.value).__name__}: {failure.value}"
                    )
                )

            return self.localCompile(saltenv, pillarenv, override).addErrback(compileFailed)
        req = self._session()
        if req is None:
            return fail(PillarUnavailable(f"minion {self.id} is not connected to its master"))
        load = pillarRequest(
            self.id,
            self.context.grains,
            self.context.opts,
            saltenv,
            pillarenv,
            override,
            cleanCache,
        )
        self.fetches += 1
        try:
            d = req.request(load)
        except Exception as e:
            return fail(PillarUnavailable(f"the pillar request could not be sent: {e}"))
        d.addTimeout(self._timeout, self._clock)

        def failed(failure: Failure) -> Failure:
            if failure.check(PillarUnavailable):
                return failure
            return Failure(PillarUnavailable(f"{type(failure.value).__name__}: {failure.value}"))

        return d.addCallback(pillarFromReply).addErrback(failed)

    def refresh(self, cleanCache: bool = True, announce: bool = True) -> Deferred[dict[str, Any]]:
        """
        Fetch the pillar and keep it in C{context.pillar} (replaced whole).
        While a refresh runs, wait for the next one instead.

        @param cleanCache: ask the master not to answer from its
            C{pillar_cache} (Salt's C{clean_cache}, true by default as
            C{saltutil.refresh_pillar}'s; the fetch after each
            subscription passes false).
        @param announce: fire L{PILLAR_REFRESH_COMPLETE} on the minion's
            bus when it succeeded, as Salt's minion does after a refresh it
            was asked for (the fetch after each subscription passes false).
        @return: a L{Deferred} of its own (cancelling it stops no fetch),
            firing with the new pillar, or failing with L{PillarUnavailable}
            (the previous pillar is kept).
        """
        waiter: Deferred[dict[str, Any]] = Deferred()
        if self._running is not None:
            self._next.append(waiter)
            self._nextClean = self._nextClean or cleanCache
            self._nextAnnounce = self._nextAnnounce or announce
            return waiter
        self._start([waiter], cleanCache, announce)
        return waiter

    def _start(
        self, waiters: list[Deferred[dict[str, Any]]], cleanCache: bool, announce: bool
    ) -> None:
        self._running = waiters
        self._announce = announce
        self.fetch(cleanCache=cleanCache).addBoth(self._done)

    def _done(self, result: dict[str, Any] | Failure) -> None:
        waiters, self._running = self._running or [], None
        if isinstance(result, Failure):
            self.log.warn(
                "minion {id}: the pillar could not be refreshed, keeping the previous one: {error}",
                id=self.id,
                error=result.value,
            )
        else:
            self.context.pillar = result
            self.log.info("minion {id}: pillar refreshed", id=self.id)
            fireLocal = self.context.fireLocal
            if fireLocal is not None and self._announce:
                fireLocal(PILLAR_REFRESH_COMPLETE, {"complete": True})
        if self._next:
            nextWaiters, self._next = self._next, []
            clean, self._nextClean = self._nextClean, False
            announce, self._nextAnnounce = self._nextAnnounce, False
            self._start(nextWaiters, clean, announce)
        for waiter in waiters:
            if isinstance(result, Failure):
                waiter.errback(result.value)
            else:
                waiter.callback(result)


def localCompiler(
    context: LoaderContext, minionId: str, runBlocking: Callable[..., Deferred[Any]]
) -> Callable[..., Deferred[dict[str, Any]]]:
    """
    The pillar compiled by the minion itself from its own C{pillar_roots}
    (C{file_client: local}, Salt's masterless minion), in a thread through
    C{runBlocking} (a render is blocking work). The full texts of render
    errors go to the minion's log at error level; the pillar carries
    Salt's C{_errors}.

    @return: C{compile(saltenv, pillarenv, override)}, a L{Deferred} of the
        pillar.
    """
    log = Logger(namespace=__name__)

    def compileHere(
        grains: dict[str, Any],
        saltenv: str | None,
        pillarenv: str | None,
        override: dict[str, Any] | None,
    ) -> tuple[dict[str, Any], list[str]]:
        from salttwist.pillar import compilePillarWithErrors

        return compilePillarWithErrors(
            context.opts,
            minionId,
            grains,
            saltenv=saltenv if saltenv is not None else context.opts.get("saltenv"),
            pillarenv=pillarenv if pillarenv is not None else context.opts.get("pillarenv"),
            override=override,
        )

    def compiled(result: tuple[dict[str, Any], list[str]]) -> dict[str, Any]:
        pillar, errors = result
        for text in errors:
            log.error("minion {id}: local pillar: {error}", id=minionId, error=text)
        return pillar

    def compile(
        saltenv: str | None = None,
        pillarenv: str | None = None,
        override: dict[str, Any] | None = None,
    ) -> Deferred[dict[str, Any]]:
        # The grains are copied here, on the reactor thread that changes them.
        grains = dict(context.grains)
        return runBlocking(compileHere, grains, saltenv, pillarenv, override).addCallback(compiled)

    return compile
