# -*- test-case-name: tests.test_runners,tests.test_runners_workers -*-
"""
Runner dispatch: the local client's C{runner} (Salt's C{salt-run}) runs a
runner function in the master, or in a worker process for runners marked
L{salttwist.runners.inWorker}.
"""

from __future__ import annotations

from typing import Any

from twisted.internet.defer import Deferred, maybeDeferred
from twisted.logger import Logger
from zope.interface import implementer

from salttwist.args import parseArgs
from salttwist.interfaces import IEventBus, IJobCache
from salttwist.jid import JidGenerator
from salttwist.master.acl import PublisherAcl
from salttwist.master.interfaces import IMinionSession, IRunnerDispatch
from salttwist.master.publishing import FUNCTION_NAME
from salttwist.runners import RunnerContext, WorkerPlacement, workerPlacement

#: The worker tasks that run runners marked L{salttwist.runners.inWorker}.
RUN_RUNNER_TASK = "salttwist.master.runnertasks.runRunner"
RUN_IDEMPOTENT_RUNNER_TASK = "salttwist.master.runnertasks.runIdempotentRunner"
#: Exceptions a runner raises in a worker that the master raises again as
#: themselves, so the client gets the same answer as from the master.
_RUNNER_ERRORS: dict[str, type[Exception]] = {"ValueError": ValueError, "TypeError": TypeError}


@implementer(IRunnerDispatch)
class RunnerDispatch:
    """
    The master's runner dispatch room.

    @ivar workers: the worker pool, or L{None} (runners run in the master).
    @ivar jobCache: the job cache, or L{None}.
    """

    # The master's namespace: log lines read as they always did.
    log = Logger(namespace="salttwist.master.core.Master")

    def __init__(
        self,
        config: dict[str, Any],
        bus: IEventBus,
        runners: dict[str, Any],
        jids: JidGenerator,
        acl: PublisherAcl,
        host: Any,
        jobCache: IJobCache | None = None,
        workers: Any = None,
    ) -> None:
        """
        @param host: what a runner gets as its L{RunnerContext}'s master
            (the L{salttwist.master.core.Master}: its bus, job registry,
            key store, publish path and the rest runners use).
        """
        self.config = config
        self.bus = bus
        self.runners = runners
        self.jids = jids
        self.acl = acl
        self._host = host
        self.jobCache = jobCache
        self.workers = workers

    def clientRunner(
        self, proto: IMinionSession | None, load: dict[str, Any]
    ) -> Deferred[dict[str, Any]]:
        """
        C{runner}: the local client runs a runner function in the master
        (Salt's C{salt-run}). Fires C{salt/run/<jid>/new} and
        C{salt/run/<jid>/ret}.

        @return: C{{"jid": ..., "return": ...}}.
        """
        fun, arg = load.get("fun"), load.get("arg", [])
        if not isinstance(fun, str) or not FUNCTION_NAME.match(fun):
            raise ValueError(f"invalid runner name {fun!r}")
        if not isinstance(arg, list):
            raise ValueError("arg must be a list")
        if getattr(proto, "clientAcl", False):
            refusal = self.acl.refuseRunner(proto.clientUser, fun)
            self.log.warn("runner refused: {why}", why=refusal)
            raise refusal
        function = self.runners.get(fun)
        if function is None:
            raise ValueError(f"'{fun}' is not available.")
        user = load.get("user") if isinstance(load.get("user"), str) else "root"
        jid = self.jids.next()
        self.bus.fire(f"salt/run/{jid}/new", {"fun": fun, "arg": arg, "jid": jid, "user": user})
        args, kwargs = parseArgs(arg)

        def done(value: Any) -> dict[str, Any]:
            self.bus.fire(
                f"salt/run/{jid}/ret",
                {"fun": fun, "jid": jid, "user": user, "return": value, "success": True},
            )
            return {"jid": jid, "return": value}

        def failed(failure: Any) -> Any:
            self.bus.fire(
                f"salt/run/{jid}/ret",
                {
                    "fun": fun,
                    "jid": jid,
                    "user": user,
                    "return": str(failure.value),
                    "success": False,
                },
            )
            if failure.check(TypeError):
                raise ValueError(f"Passed invalid arguments to {fun}: {failure.value}")
            return failure

        placement = workerPlacement(function)
        if placement is not None and self._runnerMayUseWorker(placement, args, kwargs):
            d = Deferred.fromCoroutine(self._runnerInWorker(fun, placement, args, kwargs))
        else:
            d = maybeDeferred(function, RunnerContext(self._host, user), *args, **kwargs)
        return d.addCallbacks(done, failed)

    def _jobCachePath(self) -> str | None:
        """
        @return: the job cache's SQLite file, if it has one a worker can
            read.
        """
        path = getattr(self.jobCache, "path", None)
        return path if isinstance(path, str) else None

    def _runnerMayUseWorker(
        self, placement: WorkerPlacement, args: list[Any], kwargs: dict[str, Any]
    ) -> bool:
        """
        Whether a runner marked L{salttwist.runners.inWorker} runs in a
        worker this time: the master has workers, the job cache is readable
        there if the runner needs it, and its C{accepts} says yes.
        """
        if self.workers is None:
            return False
        if placement.needsJobCache and self._jobCachePath() is None:
            return False
        if placement.accepts is None:
            return True
        try:
            return bool(placement.accepts(*args, **kwargs))
        except Exception:
            # Bad arguments: the runner in the master reports them.
            return False

    async def _runnerInWorker(
        self, fun: str, placement: WorkerPlacement, args: list[Any], kwargs: dict[str, Any]
    ) -> Any:
        """
        Run a runner in a worker process. A worker that dies or hangs fails
        it with a L{ValueError} saying so (after one retry for an
        idempotent runner), which the client sees as the runner's error.
        """
        from salttwist.workers import TaskError, WorkerError

        path = None
        if placement.needsJobCache:
            path = self._jobCachePath()
            flush = getattr(self.jobCache, "flush", None)
            if flush is not None:
                # The worker reads the file: let it see every write so far.
                await flush()
        name = RUN_IDEMPOTENT_RUNNER_TASK if placement.idempotent else RUN_RUNNER_TASK
        try:
            return await self.workers.run(name, fun, args, kwargs, self.config, path)
        except TaskError as e:
            local = _RUNNER_ERRORS.get(e.typeName)
            if local is None:
                raise
            raise local(e.message) from e
        except WorkerError as e:
            raise ValueError(f"runner {fun} did not complete: {e}") from e
