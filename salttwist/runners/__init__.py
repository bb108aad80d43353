# -*- test-case-name: tests.test_runners -*-
"""
Runners: functions that execute in the master (Salt's C{salt-run}), named
C{module.function}, called by the local client through the req channel.

Every runner function takes a L{RunnerContext} first. It runs on the
reactor thread and must not block: it returns a value or a L{Deferred}, and
hands blocking work to C{context.master.runBlocking} (the job cache already
works off the reactor).

The modules, by Salt's names: C{jobs} (the job cache and running jobs),
C{manage} (which minions are up) and C{salt} (C{salt.cmd}: an execution module
function run in the master), C{pillar}, C{fileserver}, and C{saltutil}
(C{sync_runners}: custom runners from the file server's C{_runners},
loaded by L{loadRunners} and run by L{customRunner}). C{state.event} is not
a runner here: like Salt's, it runs in the C{salttwist-run} command
(L{salttwist.cli.run}).

Where a runner runs (issue 5): a runner that needs only the config and the
job cache is marked with L{inWorker} and, when the master has worker
processes, runs in one of them (L{salttwist.master.runnertasks}) with a
L{RunnerContext} built there: its C{master} has C{config}, a read-only
C{jobCache} and a synchronous C{runBlocking}, nothing else. The others
(C{manage.*}, which read the master's live sessions, and C{jobs.active},
which publishes a job to the minions) run in the master process, as every
runner does when it has no workers.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from twisted.logger import Logger

if TYPE_CHECKING:
    from salttwist.interfaces import IRunnerMaster

_log = Logger()

RUNNERS: tuple[str, ...] = (
    "jobs",
    "manage",
    "salt",
    "pillar",
    "fileserver",
    "saltutil",
    "state",
    "cache",
)


@dataclass(frozen=True)
class WorkerPlacement:
    """
    How a runner marked with L{inWorker} runs in a worker process.

    @ivar idempotent: running it twice is harmless, so it is retried once
        when its worker dies or hangs.
    @ivar needsJobCache: it reads the job cache, so it runs in a worker only
        when the master's job cache is an SQLite file the worker can open,
        after the writes called before it have been committed.
    @ivar accepts: called with the runner's arguments (not the context);
        the call runs in the master when it returns false. L{None}: always
        in a worker.
    """

    idempotent: bool
    needsJobCache: bool
    accepts: Callable[..., bool] | None


def inWorker(
    idempotent: bool = False,
    needsJobCache: bool = False,
    accepts: Callable[..., bool] | None = None,
) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    """
    Mark a runner as able to run in a worker process: it uses nothing of
    C{context.master} but C{config}, C{jobCache} (reads) and C{runBlocking},
    and it completes without a reactor (its L{Deferred}s fire at once
    there). See L{WorkerPlacement} for the arguments.
    """

    def mark(f: Callable[..., Any]) -> Callable[..., Any]:
        f.workerPlacement = WorkerPlacement(idempotent, needsJobCache, accepts)  # type: ignore[attr-defined]
        return f

    return mark


def workerPlacement(function: Callable[..., Any] | None) -> WorkerPlacement | None:
    """
    @return: how C{function} runs in a worker, or L{None} if it runs in the
        master process only.
    """
    placement = getattr(function, "workerPlacement", None)
    return placement if isinstance(placement, WorkerPlacement) else None


@dataclass
class RunnerContext:
    """
    What a runner may use: the running master as an L{IRunnerMaster
    <salttwist.interfaces.IRunnerMaster>} (its config, clock, event bus,
    key store, job cache, job registry, grains cache, subscribers, worker
    pool, C{runBlocking} and C{clientPublish}), never the master's own class.

    @ivar user: who runs the runner; the jobs it publishes are that user's.
    """

    master: IRunnerMaster
    user: str = "root"


def loadRunners(
    modules: tuple[str, ...] | None = None, config: dict[str, Any] | None = None
) -> dict[str, Callable[..., Any]]:
    """
    The runner functions, by C{module.function}: every public function of
    the built-in runner modules and, given the master's C{config}, of the
    custom runners synced into its C{extension_modules/runners}
    (C{salttwist-run saltutil.sync_runners}; blocking then: they are
    imported). A custom runner module named as a built-in one replaces it
    whole, as Salt lets it (logged); each custom runner is wrapped by
    L{customRunner}.
    """
    from salttwist.modules import publicFunctions

    functions = publicFunctions("salttwist.runners", RUNNERS if modules is None else modules)
    if config is None:
        return functions
    from salttwist.modules.extmods import loadCustomRunners

    builtins = {name.partition(".")[0] for name in functions}
    for module in loadCustomRunners(config):
        if module.name in builtins:
            _log.warn(
                "custom runner module {path} replaces the built-in runner module {name}",
                path=module.path,
                name=module.name,
            )
            for name in [n for n in functions if n.partition(".")[0] == module.name]:
                del functions[name]
            builtins.discard(module.name)
        for name, function in module.functions.items():
            functions[name] = customRunner(function)
    return functions


def customRunner(function: Callable[..., Any]) -> Callable[..., Any]:
    """
    Wrap a custom runner function (Salt's form: plain arguments, blocking
    code) as a salttwist runner: it takes the L{RunnerContext} first and
    runs the function in a thread (C{context.master.runBlocking}), in the
    master process (a custom runner is the master's own trusted code, from
    its own file roots).
    """

    def run(context: RunnerContext, *args: Any, **kwargs: Any) -> Any:
        return context.master.runBlocking(function, *args, **kwargs)

    run.__name__ = function.__name__
    run.__doc__ = function.__doc__
    run.customRunner = function  # type: ignore[attr-defined]
    return run
