# -*- test-case-name: tests.test_modules_saltutil -*-
"""
Salt's C{saltutil} module: the jobs a minion is running, and its grains.

Jobs run inside the minion process (on the reactor, in threads or as child
processes), so a job's C{pid} is the minion's. Stopping a job sends the
signal to the commands it runs, each with its process group and everything
below it (L{salttwist.modules._jobprocesses}), also those a state run
started in its own thread, and any it starts after; its return says it was
killed, and with which signal. C{SIGKILL} (C{kill_job}) also cancels the
job at once; after C{SIGTERM} (C{term_job}) a job running a command ends
when the command does (it may clean up first, or ignore the signal, as in
Salt), and a job running no command is cancelled at once. Python code
running in a thread cannot be interrupted: a state run stops before its
next state.
"""

from __future__ import annotations

import fnmatch
import signal as signals
from typing import Any

from twisted.internet.defer import Deferred

from salttwist.modules import LoaderContext, SaltInvocationError, extmods, needsContext, onReactor


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
    Send SIGTERM to job C{jid}, as Salt does to the job's process: the
    commands it runs get SIGTERM (with their process groups and everything
    below them), and the job ends when they do (a command may trap the
    signal and clean up first, or ignore it: then use L{kill_job}); a job
    running no command is cancelled at once. Its return says it was killed
    with SIGTERM.

    CLI Example: C{salttwist '*' saltutil.term_job 20261122010203123456}
    """
    return _stop(context, jid, signals.SIGTERM)


@onReactor
@needsContext
def signal_job(context: LoaderContext, jid: Any, sig: Any) -> str:
    """
    Send C{sig} to job C{jid}. Only SIGTERM and SIGKILL (by name or number)
    are supported: they stop the job as L{term_job} and L{kill_job} do.

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
    Gather the core grains again (in a thread), the custom grains of the
    synced C{_grains} modules over them, the grains file and the config on
    top, and report them to the master. Returns C{True}.

    CLI Example: C{salttwist '*' saltutil.refresh_grains}
    """
    return extmods.refreshGrains(context)


@onReactor
@needsContext
def refresh_pillar(
    context: LoaderContext, wait: Any = True, timeout: Any = 30, clean_cache: Any = True
) -> Any:
    """
    Fetch the minion's pillar from its master again and keep it: fires
    C{salt/minion/<id>/refresh} on the minion's bus, then, with C{wait}
    (the default here; Salt's is C{False}), waits up to C{timeout} seconds
    for the new pillar. Returns C{True}, or C{False} when it could not be
    fetched in time (the previous pillar is kept). A refresh always asks
    the master for a fresh compile (C{clean_cache}).

    CLI Example: C{salttwist '*' saltutil.refresh_pillar}
    """
    if context.fireLocal is not None:
        context.fireLocal(f"salt/minion/{context.grains.get('id')}/refresh", {"pillar": True})
    if context.refreshPillar is None:
        return False
    try:
        seconds = float(timeout)
    except (TypeError, ValueError) as e:
        raise SaltInvocationError(f"timeout must be a number of seconds, not {timeout!r}") from e
    d = context.refreshPillar()
    if str(wait).lower() in ("false", "0", "no", "none", ""):
        d.addErrback(lambda _: None)
        return True
    return d.addTimeout(seconds, context.reactor).addCallbacks(lambda _: True, lambda _: False)


# -- custom code through the file server (salttwist.modules.extmods) ---------


def _syncOne(
    context: LoaderContext,
    kind: str,
    saltenv: Any,
    refresh: Any,
    extmod_whitelist: Any,
    extmod_blacklist: Any,
) -> Deferred[list[str]]:
    d = Deferred.fromCoroutine(
        extmods.syncKinds(
            context,
            [kind],
            saltenv,
            _truth(refresh),
            extmod_whitelist,
            extmod_blacklist,
            refreshPillar=kind == "grains",
        )
    )
    return d.addCallback(lambda results: results[kind])


def _truth(value: Any) -> bool:
    """
    A boolean argument as Salt's CLI gives it (C{refresh=False} arrives as
    C{False}, but a string C{"False"} is false too).
    """
    if isinstance(value, str):
        return value.strip().lower() not in ("false", "0", "no", "off", "")
    return bool(value)


@onReactor
@needsContext
def sync_modules(
    context: LoaderContext,
    saltenv: Any = None,
    refresh: Any = True,
    extmod_whitelist: Any = None,
    extmod_blacklist: Any = None,
) -> Deferred[list[str]]:
    """
    Sync the custom execution modules of the file server's C{_modules}
    folder (of C{saltenv}: a name or a comma-separated list; C{base} by
    default) into C{extension_modules/modules}, and with C{refresh} (even
    if nothing was copied, as Salt's) load them again at once. Returns the
    modules copied because they were new or changed
    (C{["modules.mymod"]}); files the file server no longer has are
    removed.

    CLI Example: C{salttwist '*' saltutil.sync_modules saltenv=base,dev}
    """
    return _syncOne(context, "modules", saltenv, refresh, extmod_whitelist, extmod_blacklist)


@onReactor
@needsContext
def sync_grains(
    context: LoaderContext,
    saltenv: Any = None,
    refresh: Any = True,
    extmod_whitelist: Any = None,
    extmod_blacklist: Any = None,
) -> Deferred[list[str]]:
    """
    Sync the custom grain modules of C{_grains} into
    C{extension_modules/grains}; with C{refresh}, gather the grains again
    with them, report them to the master and ask for the pillar again
    (not waiting for it). Returns the modules copied
    (C{["grains.role"]}).

    CLI Example: C{salttwist '*' saltutil.sync_grains}
    """
    return _syncOne(context, "grains", saltenv, refresh, extmod_whitelist, extmod_blacklist)


@onReactor
@needsContext
def sync_states(
    context: LoaderContext,
    saltenv: Any = None,
    refresh: Any = True,
    extmod_whitelist: Any = None,
    extmod_blacklist: Any = None,
) -> Deferred[list[str]]:
    """
    Sync the custom state modules of C{_states} into
    C{extension_modules/states}; state runs load them (a run under way
    from its next state: L{salttwist.state.runafter}). Returns the
    modules copied.

    CLI Example: C{salttwist '*' saltutil.sync_states}
    """
    return _syncOne(context, "states", saltenv, refresh, extmod_whitelist, extmod_blacklist)


@onReactor
@needsContext
def sync_utils(
    context: LoaderContext,
    saltenv: Any = None,
    refresh: Any = True,
    extmod_whitelist: Any = None,
    extmod_blacklist: Any = None,
) -> Deferred[list[str]]:
    """
    Sync the custom utility modules of C{_utils} into
    C{extension_modules/utils} (custom modules reach them as
    C{__utils__["name.function"]}). Returns the modules copied.

    CLI Example: C{salttwist '*' saltutil.sync_utils}
    """
    return _syncOne(context, "utils", saltenv, refresh, extmod_whitelist, extmod_blacklist)


@onReactor
@needsContext
def sync_all(
    context: LoaderContext,
    saltenv: Any = None,
    refresh: Any = True,
    extmod_whitelist: Any = None,
    extmod_blacklist: Any = None,
) -> Deferred[dict[str, list[str]]]:
    """
    Sync every kind of custom module a minion loads (C{_modules},
    C{_states}, C{_grains}, C{_utils}) and with C{refresh} load them once
    at the end and ask for the pillar again (not waiting for it). Returns
    the modules copied by kind:
    C{{"modules": [...], "states": [...], "grains": [...], "utils": [...]}}.
    C{extmod_whitelist} and C{extmod_blacklist} map kinds to module names
    (C{{"modules": ["mymod"]}}). C{_runners} are synced on the master
    (C{salttwist-run saltutil.sync_runners}), as in Salt.

    CLI Example: C{salttwist '*' saltutil.sync_all}
    """
    return Deferred.fromCoroutine(
        extmods.syncKinds(
            context,
            extmods.MINION_KINDS,
            saltenv,
            _truth(refresh),
            extmod_whitelist,
            extmod_blacklist,
            refreshPillar=True,
        )
    )


@onReactor
@needsContext
def refresh_modules(context: LoaderContext, **kwargs: Any) -> Deferred[bool]:
    """
    Load the synced custom modules, utils and grains again now (imported
    in a thread); grains that changed are reported to the master. Returns
    C{True}.

    CLI Example: C{salttwist '*' saltutil.refresh_modules}
    """
    return extmods.reloadExtensions(context)
