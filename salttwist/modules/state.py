# -*- test-case-name: tests.test_modules_state,tests.test_modules_state_options -*-
"""
Salt's C{state} execution module: apply SLS files to this minion
(C{state.apply}, C{state.sls}, C{state.highstate}, C{state.single},
C{state.sls_id}, C{state.test}), show what would be applied
(C{state.show_top}, C{state.show_sls}, C{state.show_highstate},
C{state.show_lowstate}, C{state.show_low_sls}) and which state run is
going on (C{state.running}).

The minion reads its state tree through its own file client (from the
master over its session, or from local C{file_roots} with C{file_client:
local} and C{salttwist-call --local}), renders the SLS files itself and
runs the states in the job's thread (L{salttwist.state.apply}).

As Salt's, each run compiles the pillar afresh (the master does, with the
run's C{saltenv}, C{pillarenv} and C{pillar=} override; a masterless
minion from its C{pillar_roots}); C{salttwist-call} uses the pillar it
fetched as it started. A highstate first syncs the custom modules of the
saltenvs it applies (C{autoload_dynamic_modules}, on by default); the
synced C{_states} run beside the built-in state modules
(L{salttwist.state.extstates}).

Returns and retcodes are Salt's: a run gives C{{tag: state return}}, with
retcode 2 when a state failed (and no C{onfail} state handled it); errors
in the top file or the SLS give the list of error strings, retcode 1, and
nothing runs; a pillar with render errors gives Salt's C{"Pillar failed to
render with the following messages:"} and the errors, retcode 5.

One state run at a time on a minion: every C{state.*} function but
C{state.running} takes the minion's state slot; another one started
meanwhile is refused with Salt's words (C{The function "state.apply" is
running as PID ... and was started at ... with jid ...}), retcode 1, or
waits for the slot with C{queue=True} (C{queue=<n>}: waits unless C{n}
runs are already waiting, as Salt's C{max_queue}). C{concurrent=True}
skips the check, as Salt's does. Unlike Salt's C{queue=True} of 3008,
which stores the job in a queue directory and returns at once, a queued
run here waits in its job and returns its own result; and at most
L{MAX_QUEUED} runs wait (each holds a thread of the minion's pool, which
the running one needs too): one more is refused as without C{queue}.

C{state_events=True} (or the C{state_events} option) sends Salt's
progress events to the master's bus as each state finishes:
C{salt/job/<jid>/prog/<minion id>/<run number>} with data
C{{"ret": <the state's return>, "len": <states in the run>}}.

C{saltutil.kill_job <jid>} stops a state run between two states: the
states still to run are not run.
"""

from __future__ import annotations

import dataclasses
import functools
import inspect
import os
import threading
from collections.abc import Callable, Mapping
from datetime import datetime
from typing import Any

from twisted.internet.defer import maybeDeferred
from twisted.internet.threads import blockingCallFromThread
from twisted.logger import Logger

from salttwist.jid import JidGenerator
from salttwist.modules import LoaderContext, Retcode, SaltInvocationError, needsJid
from salttwist.state import apply as stateapply
from salttwist.state.clientview import ClientFiles, FileClientUnavailable
from salttwist.state.runfiles import RunFileClient, prefetchSources

_log = Logger()

#: Salt's retcodes for a state run.
EX_STATE_COMPILER_ERROR = 1
EX_STATE_FAILURE = 2
EX_PILLAR_FAILURE = 5

_PILLAR_NOT_DICT = "Pillar data must be formatted as a dictionary, unless pillar_enc is specified."

#: The most state runs of one minion waiting for its slot: each waits in a
#: thread of the minion's pool, which the running one needs too (its file
#: fetches), so they must never take the whole pool.
MAX_QUEUED = 4

#: How often a queued run looks again whether the slot is free (seconds).
_QUEUE_POLL = 0.05


# -- one state run at a time -------------------------------------------------------


@dataclasses.dataclass(frozen=True)
class _Active:
    fun: str
    jid: str
    pid: int


class _Slots:
    """
    The state runs each minion is running, by minion (keyed on the
    identity of its C{LoaderContext.running}, which every job of one minion
    shares and which the entry holds, so the key cannot be reused while
    the entry lives).
    """

    def __init__(self) -> None:
        self.condition = threading.Condition()
        self._minions: dict[int, tuple[dict[str, Any], dict[str, _Active]]] = {}
        self._waiting: dict[int, int] = {}

    def _active(self, running: dict[str, Any]) -> dict[str, _Active]:
        entry = self._minions.get(id(running))
        return entry[1] if entry is not None else {}

    def others(self, running: dict[str, Any], jid: str) -> list[_Active]:
        """
        @return: the other state runs of this minion.
        """
        with self.condition:
            return [active for key, active in self._active(running).items() if key != jid]

    def take(
        self,
        running: dict[str, Any],
        active: _Active,
        queue: Any,
        concurrent: bool,
        cancelled: Callable[[], bool] = lambda: False,
    ) -> list[_Active]:
        """
        Take the slot for C{active}, waiting for it with C{queue} (unless
        C{cancelled} becomes true meanwhile: the job was killed).

        @return: the runs that keep it from being taken (then it is not
            taken); C{[]} once taken.
        """
        key = id(running)
        with self.condition:
            if not concurrent:
                others = [a for j, a in self._active(running).items() if j != active.jid]
                if others and queue is not None and queue is not False:
                    maxQueue = MAX_QUEUED if queue is True else min(_queueSize(queue), MAX_QUEUED)
                    if self._waiting.get(key, 0) < maxQueue:
                        self._waiting[key] = self._waiting.get(key, 0) + 1
                        try:
                            while others and not cancelled():
                                self.condition.wait(_QUEUE_POLL)
                                others = [
                                    a for j, a in self._active(running).items() if j != active.jid
                                ]
                        finally:
                            self._waiting[key] -= 1
                            if not self._waiting[key]:
                                del self._waiting[key]
                if others:
                    return others
            entry = self._minions.setdefault(key, (running, {}))
            entry[1][active.jid] = active
            return []

    def give(self, running: dict[str, Any], jid: str) -> None:
        """
        Give back the slot of run C{jid}.
        """
        key = id(running)
        with self.condition:
            entry = self._minions.get(key)
            if entry is not None:
                entry[1].pop(jid, None)
                if not entry[1]:
                    del self._minions[key]
            self.condition.notify_all()


def _queueSize(queue: Any) -> int:
    """
    @return: C{queue=<n>}'s C{n}.
    @raise SaltInvocationError: if it is neither a boolean nor a number.
    """
    try:
        return int(queue)
    except (TypeError, ValueError):
        raise SaltInvocationError(
            f"queue must be True, False or a number of runs, not {queue!r}"
        ) from None


_SLOTS = _Slots()

_LOCAL_JIDS = JidGenerator()


def _jidTime(jid: str) -> str:
    """
    A jid's time as Salt's C{jid_to_time} writes it
    (C{2026, Nov 26 19:30:28.123456}); the jid itself when it is not one.
    """
    try:
        when = datetime.strptime(str(jid)[:20], "%Y%m%d%H%M%S%f")
    except ValueError:
        return str(jid)
    return when.strftime("%Y, %b %d %H:%M:%S.%f")


def _conflictWords(active: _Active) -> str:
    return (
        f'The function "{active.fun}" is running as PID {active.pid} and was started at '
        f"{_jidTime(active.jid)} with jid {active.jid}"
    )


def _jobJid(context: LoaderContext) -> str:
    """
    The job's jid; a made-up one (in the jid's form) outside a job
    (C{salttwist-call}).
    """
    if context.jid:
        return str(context.jid)
    return _LOCAL_JIDS.next()


# -- building a run ---------------------------------------------------------------


def _minionId(context: LoaderContext) -> str:
    minionId = context.grains.get("id") or context.opts.get("id")
    if minionId:
        return str(minionId)
    from salttwist.pki.ids import configuredMinionId

    return configuredMinionId(context.opts)


def _testValue(context: LoaderContext, test: Any) -> bool:
    """
    Salt's C{_get_test_value}: the argument when given, else the C{test}
    option.
    """
    if test is None:
        return bool(context.opts.get("test", False))
    if isinstance(test, str):
        return test.strip().lower() in ("true", "1", "yes", "on")
    return bool(test)


class _PillarFailed(Exception):
    """
    The run's pillar could not be had; the message says why.
    """


def _pillarFor(
    context: LoaderContext, pillar: Any, saltenv: str | None, pillarenv: str | None
) -> Mapping[str, Any]:
    """
    The run's pillar. As Salt's state runs, a minion's job compiles it
    afresh (its master does, or the minion from local C{pillar_roots}),
    with C{saltenv}, C{pillarenv} and the C{pillar=} override given to the
    compiler: pillar files changed since the minion's last refresh are
    seen. C{salttwist-call} (no jid) fetched the pillar just before the
    function ran and uses that, unless another C{pillarenv} is asked for,
    as Salt's C{salt-call} uses its initial pillar. Without a way to fetch
    (a bare context), the minion's pillar with the override merged over it.

    @raise SaltInvocationError: if the override is not a mapping.
    @raise _PillarFailed: if the pillar could not be fetched.
    """
    if pillar is not None and not isinstance(pillar, Mapping):
        raise SaltInvocationError(_PILLAR_NOT_DICT)
    override = dict(pillar or {})
    if context.fetchPillar is not None and (pillarenv or context.jid is not None):
        try:
            fetched = blockingCallFromThread(
                context.reactor,
                context.fetchPillar,
                saltenv=saltenv,
                pillarenv=pillarenv,
                override=override or None,
            )
        except Exception as e:
            raise _PillarFailed(f"{type(e).__name__}: {e}") from e
        return dict(fetched or {})
    if not override:
        return context.pillar
    from salttwist.pillar.merge import mergeRecurse

    return mergeRecurse(
        context.pillar, override, bool(context.opts.get("pillar_merge_lists", False))
    )


def _progress(
    context: LoaderContext, jid: str, minionId: str
) -> Callable[[str, dict, int, int], None] | None:
    """
    @return: what sends Salt's progress event of each finished state to
        the master (C{None} without a master to send it to).
    """
    fireMaster = context.fireMaster
    if fireMaster is None:
        return None
    reactor = context.reactor
    warned: list[bool] = []

    def failed(failure: Any, tag: str) -> None:
        if not warned:
            warned.append(True)
            _log.warn(
                "state run {jid}: the progress event {tag} was not sent: {error}",
                jid=jid,
                tag=tag,
                error=failure.value,
            )

    def send(tag: str, data: dict[str, Any]) -> None:
        maybeDeferred(fireMaster, tag, data).addErrback(failed, tag)

    def done(stateTag: str, ret: dict, finished: int, total: int) -> None:
        runNum = ret.get("__run_num__", finished - 1)
        tag = f"salt/job/{jid}/prog/{minionId}/{runNum}"
        reactor.callFromThread(send, tag, {"ret": dict(ret), "len": total})

    return done


def _cancelled(context: LoaderContext, jid: str) -> Callable[[], bool]:
    """
    @return: whether C{saltutil.kill_job} (or the minion stopping) killed
        job C{jid}.
    """
    running, killed = context.running, context.killed
    seen: list[Any] = []

    def cancelled() -> bool:
        if jid in killed:
            # Killed before this run first looked (it was still starting).
            return True
        job = running.get(jid)
        if job is None:
            # A killed job leaves the running jobs at once, while its thread
            # (this run) goes on: gone once seen means killed.
            return bool(seen)
        if not seen:
            seen.append(job)
        return getattr(job, "killedBy", None) is not None

    return cancelled


def _buildRun(
    context: LoaderContext,
    jid: str,
    *,
    test: Any,
    pillar: Any,
    saltenv: str | None,
    pillarenv: str | None,
    stateEvents: Any,
    defaultSaltenv: str | None,
) -> stateapply.StateRun | Retcode:
    from salttwist.modules.extmods import SaltFunctions
    from salttwist.state.masteropts import withMasterOptions

    opts = withMasterOptions(context.opts, context.fileClient, context.reactor)
    if saltenv:
        opts["saltenv"] = str(saltenv)
    if pillarenv:
        opts["pillarenv"] = str(pillarenv)
    runSaltenv = opts.get("saltenv") or defaultSaltenv
    try:
        runPillar = _pillarFor(context, pillar, runSaltenv, opts.get("pillarenv"))
    except _PillarFailed as e:
        return Retcode(
            ["Pillar failed to render with the following messages:", str(e)], EX_PILLAR_FAILURE
        )
    errors = runPillar.get("_errors") if isinstance(runPillar, Mapping) else None
    if errors:
        return Retcode(
            ["Pillar failed to render with the following messages:", *map(str, errors)],
            EX_PILLAR_FAILURE,
        )
    jobContext = context
    if runPillar is not context.pillar:
        jobContext = dataclasses.replace(context, pillar=dict(runPillar))
    prefetch = runFiles = None
    if context.fileClient is not None:
        runFiles = RunFileClient(context.fileClient)
        jobContext = dataclasses.replace(jobContext, fileClient=runFiles)
        prefetch = _prefetch(context, runFiles, runSaltenv)
    minionId = _minionId(context)
    events = stateEvents if stateEvents is not None else opts.get("state_events", False)
    from salttwist.state.extstates import stateFunctions

    return stateapply.StateRun(
        files=ClientFiles(context.fileClient, context.reactor),
        opts=opts,
        minionId=minionId,
        grains=context.grains,
        pillar=jobContext.pillar,
        salt=SaltFunctions(jobContext),
        test=_testValue(context, test),
        saltenv=str(runSaltenv) if runSaltenv else None,
        reactor=context.reactor,
        jid=jid,
        onStateDone=_progress(context, jid, minionId) if events else None,
        cancelled=_cancelled(context, jid),
        states=stateFunctions(opts),
        loadDynamic=_loadDynamic(context),
        prefetch=prefetch,
        sources=runFiles,
    )


def _prefetch(
    context: LoaderContext, runFiles: RunFileClient, saltenv: str | None
) -> Callable[[list[dict]], None]:
    """
    @return: the run's C{prefetch}: its C{file.managed} sources fetched
        through C{runFiles} in a few requests, from the run's thread.
    """

    def prefetch(chunks: list[dict]) -> None:
        sources = prefetchSources(chunks, saltenv)
        if sources and runFiles.canPrefetch:
            blockingCallFromThread(context.reactor, runFiles.prefetch, sources)

    return prefetch


def _loadDynamic(context: LoaderContext) -> Callable[..., None] | None:
    """
    Salt's C{load_dynamic} for a highstate, with C{autoload_dynamic_modules}
    (on by default): sync every kind of custom module of the saltenvs the
    top matched, load them again if any changed, and take the run's state
    functions again (new C{_states}). A sync that fails is logged; the
    run goes on with what is there.
    """
    if not context.opts.get("autoload_dynamic_modules", True) or context.fileClient is None:
        return None

    def load(run: stateapply.StateRun, matches: dict[str, list[str]]) -> None:
        from salttwist.state.extstates import stateFunctions

        try:
            synced = run.salt["saltutil.sync_all"](saltenv=list(matches), refresh=False)
            if isinstance(synced, Mapping) and any(
                synced.get(kind) for kind in ("modules", "grains", "utils")
            ):
                run.salt["saltutil.refresh_modules"]()
        except Exception as e:
            _log.warn(
                "state run {jid}: custom modules were not synced: {error}", jid=run.jid, error=e
            )
        run.states = stateFunctions(run.opts)

    return load


def _syncMods(run: stateapply.StateRun, syncMods: Any) -> None:
    """
    C{sync_mods}: sync those kinds of custom modules before the run.
    """
    if not syncMods:
        return
    if syncMods is True:
        kinds = ["all"]
    elif isinstance(syncMods, str):
        kinds = [kind.strip() for kind in syncMods.split(",") if kind.strip()]
    else:
        kinds = [str(kind) for kind in syncMods]
    if "all" in kinds:
        kinds = ["all"]
    for kind in kinds:
        try:
            function = run.salt[f"saltutil.sync_{kind}"]
        except KeyError:
            _log.warn("Invalid custom module type {kind!r}, ignoring", kind=kind)
            continue
        function(saltenv=run.saltenv or "base")
    from salttwist.state.extstates import stateFunctions

    run.states = stateFunctions(run.opts)


@dataclasses.dataclass(frozen=True)
class _RunOptions:
    """
    The options a state function passes on to its run and to the minion's
    state slot, as Salt names them (each function takes those its
    signature names; the others keep these defaults).
    """

    test: Any = None
    pillar: Any = None
    saltenv: str | None = None
    pillarenv: str | None = None
    queue: Any = False
    concurrent: Any = False
    state_events: Any = None


#: The names of L{_RunOptions}.
_RUN_OPTIONS = tuple(field.name for field in dataclasses.fields(_RunOptions))


@dataclasses.dataclass(frozen=True)
class _Job:
    """
    What a state function does with its run.

    @ivar body: called with the run once built.
    @ivar defaultSaltenv: the run's saltenv when neither the call nor the
        C{saltenv} option names one.
    @ivar isRun: C{body} returns a run's returns (retcode 2 for a failed
        state) or a list of errors; else it returns C{(data to show,
        errors)}.
    @ivar syncMods: C{sync_mods}: the kinds of custom modules to sync
        before C{body} runs.
    """

    body: Callable[[stateapply.StateRun], Any]
    defaultSaltenv: str | None = None
    isRun: bool = True
    syncMods: Any = None


def _stateJob(context: LoaderContext, fun: str, job: _Job, options: _RunOptions) -> Any:
    """
    The frame of every state function: take the slot, build the run, call
    the job's body with it, give the retcode.
    """
    jid = _jobJid(context)
    active = _Active(fun=fun, jid=jid, pid=os.getpid())
    conflict = _SLOTS.take(
        context.running,
        active,
        options.queue,
        bool(options.concurrent),
        _cancelled(context, jid),
    )
    if conflict:
        return Retcode([_conflictWords(other) for other in conflict], EX_STATE_COMPILER_ERROR)
    try:
        run = _buildRun(
            context,
            jid,
            test=options.test,
            pillar=options.pillar,
            saltenv=options.saltenv,
            pillarenv=options.pillarenv,
            stateEvents=options.state_events,
            defaultSaltenv=job.defaultSaltenv,
        )
        if isinstance(run, Retcode):
            return run
        _syncMods(run, job.syncMods)
        value = job.body(run)
    except FileClientUnavailable as e:
        return Retcode([str(e)], EX_STATE_COMPILER_ERROR)
    finally:
        _SLOTS.give(context.running, jid)
    if not job.isRun:
        shown, errors = value
        return Retcode(errors, EX_STATE_COMPILER_ERROR) if errors else shown
    if isinstance(value, list):
        return Retcode(value, EX_STATE_COMPILER_ERROR)
    if not stateapply.checkResult(value, run.chunks):
        return Retcode(value, EX_STATE_FAILURE)
    return value


def _stateFunction(describe: Callable[..., Any]) -> Callable[..., Any]:
    """
    Make a state function of C{describe}, which has the function's name,
    Salt's signature and docstring, and returns the L{_Job} to run (or the
    function's return, such as an error, to run nothing). The arguments its
    signature names among L{_RunOptions} are passed on to the run; the
    function is C{state.<name>} (a trailing C{_} dropped) in its slot.
    """
    signature = inspect.signature(describe)
    taken = [name for name in _RUN_OPTIONS if name in signature.parameters]
    fun = f"state.{describe.__name__.rstrip('_')}"

    @functools.wraps(describe)
    def stateFunction(context: LoaderContext, *args: Any, **kwargs: Any) -> Any:
        # Called first, so that arguments that do not fit its signature
        # get Python's own words about it.
        job = describe(context, *args, **kwargs)
        if not isinstance(job, _Job):
            return job
        bound = signature.bind(context, *args, **kwargs)
        bound.apply_defaults()
        options = _RunOptions(**{name: bound.arguments[name] for name in taken})
        return _stateJob(context, fun, job, options)

    return stateFunction


def _highstateJob(exclude: Any) -> _Job:
    return _Job(lambda run: stateapply.highstate(run, exclude))


def _slsJob(mods: Any, exclude: Any, syncMods: Any) -> _Job:
    return _Job(
        lambda run: stateapply.sls(run, mods, exclude), defaultSaltenv="base", syncMods=syncMods
    )


# -- the functions -----------------------------------------------------------------


@needsJid
@_stateFunction
def apply_(
    context: LoaderContext,
    mods: Any = None,
    test: Any = None,
    exclude: Any = None,
    queue: Any = False,
    pillar: Any = None,
    saltenv: str | None = None,
    pillarenv: str | None = None,
    state_events: Any = None,
    concurrent: Any = False,
    sync_mods: Any = None,
    **kwargs: Any,
) -> Any:
    """
    Apply states: with no SLS names, the highstate (what the top file
    gives this minion, as C{state.highstate}); with names, those SLS (as
    C{state.sls}). C{test=True}: say what would change, change nothing.
    C{pillar='{"key": "value"}'}: pillar data merged over the minion's for
    this run. C{exclude}: SLS names or C{[{"id": ...}, {"sls": ...}]} left
    out. C{queue=True}: wait for another state run to finish instead of
    failing. C{state_events=True}: a progress event per state.

    CLI Example:

        salttwist '*' state.apply
        salttwist '*' state.apply web,db test=True
        salttwist '*' state.apply web pillar='{"port": 8080}'
    """
    if mods:
        return _slsJob(mods, exclude, sync_mods)
    return _highstateJob(exclude)


@needsJid
def test(context: LoaderContext, mods: Any = None, *, pillar: Any = None, **kwargs: Any) -> Any:
    """
    C{state.apply} with C{test=True} forced: what would change, nothing
    changed. Takes C{state.apply}'s keyword arguments.

    CLI Example:

        salttwist '*' state.test
        salttwist '*' state.test web
        salttwist '*' state.test web pillar='{"port": 8080}'
    """
    # pillar is named so that it reaches the run (the executor would merge
    # it into the minion's pillar, which a job's fresh pillar replaces).
    kwargs["test"] = True
    if pillar is not None:
        kwargs["pillar"] = pillar
    exclude = kwargs.get("exclude")
    job = _slsJob(mods, exclude, kwargs.get("sync_mods")) if mods else _highstateJob(exclude)
    options = _RunOptions(**{key: kwargs[key] for key in _RUN_OPTIONS if key in kwargs})
    return _stateJob(context, "state.test", job, options)


@needsJid
@_stateFunction
def highstate(
    context: LoaderContext,
    test: Any = None,
    queue: Any = False,
    state_events: Any = None,
    exclude: Any = None,
    pillar: Any = None,
    saltenv: str | None = None,
    pillarenv: str | None = None,
    concurrent: Any = False,
    **kwargs: Any,
) -> Any:
    """
    Apply every SLS the top file gives this minion (Salt's highstate).
    Accepts C{test}, C{pillar}, C{exclude}, C{saltenv} (only that
    saltenv's top file), C{pillarenv}, C{queue}, C{concurrent} and
    C{state_events} as C{state.apply}.

    CLI Example:

        salttwist '*' state.highstate
        salttwist '*' state.highstate test=True
    """
    return _highstateJob(exclude)


@needsJid
@_stateFunction
def sls(
    context: LoaderContext,
    mods: Any,
    test: Any = None,
    exclude: Any = None,
    queue: Any = False,
    pillar: Any = None,
    saltenv: str | None = None,
    pillarenv: str | None = None,
    state_events: Any = None,
    concurrent: Any = False,
    sync_mods: Any = None,
    **kwargs: Any,
) -> Any:
    """
    Apply the SLS C{mods} (C{"web,db"} or a list) of C{saltenv} (C{base}
    by default), with what they include. Accepts C{test}, C{pillar},
    C{exclude}, C{pillarenv}, C{queue}, C{concurrent}, C{state_events}
    and C{sync_mods} (custom module kinds to sync first, or C{all}) as
    C{state.apply}.

    CLI Example:

        salttwist '*' state.sls web
        salttwist '*' state.sls web,db saltenv=dev test=True
    """
    return _slsJob(mods, exclude, sync_mods)


@needsJid
@_stateFunction
def sls_id(
    context: LoaderContext,
    id_: Any,
    mods: Any,
    test: Any = None,
    queue: Any = False,
    pillar: Any = None,
    saltenv: str | None = None,
    pillarenv: str | None = None,
    state_events: Any = None,
    concurrent: Any = False,
    **kwargs: Any,
) -> Any:
    """
    Apply only the state(s) with ID C{id_} of the SLS C{mods} (and the
    states they require).

    CLI Example:

        salttwist '*' state.sls_id nginx_conf web
    """

    def body(run: stateapply.StateRun) -> Any:
        ret = stateapply.slsId(run, str(id_), mods)
        if isinstance(ret, dict) and not ret:
            raise SaltInvocationError(
                f"No matches for ID '{id_}' found in SLS '{mods}' within saltenv "
                f"'{run.saltenv or 'base'}'"
            )
        return ret

    return _Job(body, defaultSaltenv="base")


@needsJid
@_stateFunction
def single(
    context: LoaderContext,
    fun: Any,
    name: Any,
    test: Any = None,
    queue: Any = False,
    pillar: Any = None,
    saltenv: str | None = None,
    concurrent: Any = False,
    state_events: Any = None,
    **kwargs: Any,
) -> Any:
    """
    Run one state function, C{fun} (C{module.function}), on C{name}, with
    the other keyword arguments as the state's.

    CLI Example:

        salttwist '*' state.single file.managed /tmp/motd contents='hello'
        salttwist '*' state.single test.succeed_with_changes x test=True
    """
    module, dot, function = str(fun).partition(".")
    if not (module and dot and function):
        return Retcode("Invalid function passed", EX_STATE_COMPILER_ERROR)
    return _Job(
        lambda run: stateapply.single(run, str(fun), str(name), **kwargs), defaultSaltenv="base"
    )


@needsJid
@_stateFunction
def show_top(
    context: LoaderContext,
    queue: Any = False,
    saltenv: str | None = None,
    concurrent: Any = False,
    **kwargs: Any,
) -> Any:
    """
    Return the SLS names of each saltenv the top file gives this minion.

    CLI Example:

        salttwist '*' state.show_top
    """
    return _Job(stateapply.showTop, isRun=False)


@needsJid
@_stateFunction
def show_highstate(
    context: LoaderContext,
    queue: Any = False,
    pillar: Any = None,
    saltenv: str | None = None,
    pillarenv: str | None = None,
    concurrent: Any = False,
    **kwargs: Any,
) -> Any:
    """
    Return the high data of the highstate (the SLS the top file gives this
    minion, rendered), without running anything.

    CLI Example:

        salttwist '*' state.show_highstate
    """
    return _Job(stateapply.showHighstate, isRun=False)


@needsJid
@_stateFunction
def show_lowstate(
    context: LoaderContext,
    queue: Any = False,
    pillar: Any = None,
    saltenv: str | None = None,
    pillarenv: str | None = None,
    concurrent: Any = False,
    **kwargs: Any,
) -> Any:
    """
    Return the highstate's low chunks, in the order they would run.

    CLI Example:

        salttwist '*' state.show_lowstate
    """
    return _Job(stateapply.showLowstate, isRun=False)


@needsJid
@_stateFunction
def show_sls(
    context: LoaderContext,
    mods: Any,
    test: Any = None,
    queue: Any = False,
    pillar: Any = None,
    saltenv: str | None = None,
    pillarenv: str | None = None,
    concurrent: Any = False,
    **kwargs: Any,
) -> Any:
    """
    Return the high data of the SLS C{mods} (C{"web,db"} or a list) of
    C{saltenv} (C{base} by default), without running anything.

    CLI Example:

        salttwist '*' state.show_sls web
    """
    return _Job(lambda run: stateapply.showSls(run, mods), defaultSaltenv="base", isRun=False)


@needsJid
@_stateFunction
def show_low_sls(
    context: LoaderContext,
    mods: Any,
    test: Any = None,
    queue: Any = False,
    pillar: Any = None,
    saltenv: str | None = None,
    pillarenv: str | None = None,
    concurrent: Any = False,
    **kwargs: Any,
) -> Any:
    """
    Return the low chunks of the SLS C{mods}, in the order they would run.

    CLI Example:

        salttwist '*' state.show_low_sls web
    """
    return _Job(lambda run: stateapply.showLowSls(run, mods), defaultSaltenv="base", isRun=False)


@needsJid
def running(context: LoaderContext, concurrent: Any = False) -> list[str]:
    """
    Return Salt's words for each state run going on on this minion (other
    than this job); C{[]} with C{concurrent=True}.

    CLI Example:

        salttwist '*' state.running
    """
    if concurrent:
        return []
    jid = str(context.jid or "")
    return [_conflictWords(active) for active in _SLOTS.others(context.running, jid)]
