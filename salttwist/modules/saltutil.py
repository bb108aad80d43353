# -*- test-case-name: tests.test_modules_saltutil -*-
"""
Salt's C{saltutil} module: the jobs a minion is running, and its grains.

Jobs run inside the minion process (on the reactor, in threads or as child
processes), so a job's C{pid} is the minion's. Killing a job cancels it:
the processes it spawned are killed with their children, its return says it
was killed; a job running in a thread cannot be interrupted and only loses
its return.
"""

from __future__ import annotations

import fnmatch
import signal as signals
from typing import Any

from salttwist.grains import coreGrains, grainsFilePath
from salttwist.modules import LoaderContext, SaltInvocationError, needsContext, onReactor
from salttwist.modules._process import inThread


@onReactor
@needsContext
def running(context: LoaderContext) -> list[dict[str, Any]]:
    """
    Return the data of every job the minion is running.

    CLI Example: C{salttwist '*' saltutil.running}
    """
    return [job.info() for job in context.running.values()]


@onReactor
@needsContext
def find_job(context: LoaderContext, jid: Any) -> dict[str, Any]:
    """
    Return the data of job C{jid} if the minion is running it, else C{{}}.
    The master's client asks this before it gives up on a minion.

    CLI Example: C{salttwist '*' saltutil.find_job 20261122010203123456}
    """
    job = context.running.get(str(jid))
    return job.info() if job is not None else {}


@onReactor
@needsContext
def is_running(context: LoaderContext, fun: str) -> list[dict[str, Any]]:
    """
    Return the running jobs whose function matches the glob C{fun}.

    CLI Example: C{salttwist '*' saltutil.is_running cmd.*}
    """
    return [job.info() for job in context.running.values() if fnmatch.fnmatch(job.fun, str(fun))]


def _stop(context: LoaderContext, jid: Any, signum: int) -> str:
    job = context.running.get(str(jid))
    if job is None:
        return f"Job {jid} was not found"
    job.cancel(signals.Signals(signum).name)
    return f"Signal {signum} sent to job {jid} at pid {job.info()['pid']}"


@onReactor
@needsContext
def kill_job(context: LoaderContext, jid: Any) -> str:
    """
    Kill job C{jid}: its processes get SIGKILL and it returns that it was
    killed.

    CLI Example: C{salttwist '*' saltutil.kill_job 20261122010203123456}
    """
    return _stop(context, jid, signals.SIGKILL)


@onReactor
@needsContext
def term_job(context: LoaderContext, jid: Any) -> str:
    """
    Stop job C{jid} as L{kill_job} does (its processes are killed, not
    asked to stop; Salt sends SIGTERM to the job's process).

    CLI Example: C{salttwist '*' saltutil.term_job 20261122010203123456}
    """
    return _stop(context, jid, signals.SIGTERM)


@onReactor
@needsContext
def signal_job(context: LoaderContext, jid: Any, sig: Any) -> str:
    """
    Send C{sig} to job C{jid}. Only SIGTERM and SIGKILL (by name or number)
    are supported: both stop the job as L{kill_job} does.

    CLI Example: C{salttwist '*' saltutil.signal_job 20261122010203123456 15}
    """
    try:
        signum = int(sig) if str(sig).isdigit() else int(signals.Signals[str(sig).upper()])
    except (KeyError, ValueError) as e:
        raise SaltInvocationError(f"unknown signal {sig!r}") from e
    if signum not in (signals.SIGTERM, signals.SIGKILL):
        raise SaltInvocationError(
            f"signal {sig} is not supported: jobs run inside the minion, only SIGTERM and "
            "SIGKILL (which stop the job) are"
        )
    return _stop(context, jid, signum)


@onReactor
@needsContext
def refresh_grains(context: LoaderContext) -> Any:
    """
    Gather the core grains again (in a thread), apply the config and grains
    file on top, and report them to the master. Returns C{True}.

    CLI Example: C{salttwist '*' saltutil.refresh_grains}
    """
    opts = context.opts

    def gather() -> dict[str, Any]:
        return coreGrains(context.grains["id"], opts.get("grains", {}), grainsFilePath(opts))

    def apply(grains: dict[str, Any]) -> bool:
        context.grains.clear()
        context.grains.update(grains)
        if context.onGrainsChanged is not None:
            context.onGrainsChanged()
        return True

    return inThread(context.reactor, gather).addCallback(apply)
