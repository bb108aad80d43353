# -*- test-case-name: tests.test_states_saltmod,tests.test_states_saltmod_batch -*-
"""
Salt's orchestration states (C{salt.state}, C{salt.function},
C{salt.runner}, C{salt.wait_for_event}), run by C{salttwist-run
state.orchestrate} on the master: they publish jobs to minions and wait for
their returns, run runners, and wait for events, with Salt's arguments,
results and comments.

They need the master (C{ctx.master}, an L{IRunnerMaster
<salttwist.interfaces.IRunnerMaster>}): in a minion's state run they fail,
saying so. They run in the state run's thread: a publish goes through
C{ctx.master.clientPublish(None, load)} on the reactor
(C{blockingCallFromThread}), and the returns are gathered from the
master's bus (C{salt/job/<jid>/ret/<id>}), subscribed to in the same
reactor turn as the publish, so no return can be missed.

Waiting for returns: with C{timeout}, at most that many seconds; without,
until every targeted minion that was connected has returned, or has
disconnected. A targeted minion that is not connected, or does not
return, is reported as Salt does (C{"Minion did not return. [Not
connected]"}).
"""

from __future__ import annotations

import fnmatch
import random
import time
from collections.abc import Callable
from typing import Any

from twisted.internet.defer import Deferred, maybeDeferred
from twisted.internet.task import LoopingCall
from twisted.internet.threads import blockingCallFromThread
from twisted.python.failure import Failure

from salttwist.batching import BatchSpec, SlidingWindow, batchSize, parseBatch
from salttwist.modules._process import offReactorThread
from salttwist.states import StateContext, stateReturn
from salttwist.states._keywords import stateArguments

__virtualname__ = "salt"

#: How often (seconds) a wait without timeout checks that the minions it
#: waits for are still connected.
PRESENCE_CHECK_INTERVAL = 1.0

#: Salt's return for a targeted minion that never answered.
NOT_CONNECTED = "Minion did not return. [Not connected]"
NO_RESPONSE = "Minion did not return. [No response]"


def _noMaster(name: str, fun: str) -> dict[str, Any]:
    return stateReturn(
        name,
        False,
        f"salt.{fun} runs only in an orchestration on the master "
        "(salttwist-run state.orchestrate): this state run has no master to publish through",
    )


def _noSsh(name: str, fun: str) -> dict[str, Any]:
    return stateReturn(
        name,
        False,
        f"salt.{fun}: ssh: True is not supported: salttwist has no salt-ssh (no roster, no "
        "agentless runs); it reaches only minions connected to the master, so leave ssh out "
        "and run salttwist-minion on the targets",
    )


def _onReactor(ctx: StateContext, f: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
    """
    Call C{f} on the reactor from the state run's thread and wait for its
    result (a L{Deferred}'s result when it returns one). Called on the
    reactor's own thread (a test's synchronous run), the L{Deferred} must
    have fired already.

    @raise RuntimeError: on the reactor's thread, with a result still to
        come (waiting there would stop the reactor).
    """
    if offReactorThread(ctx.reactor):
        return blockingCallFromThread(ctx.reactor, maybeDeferred, f, *args, **kwargs)
    results: list[Any] = []
    maybeDeferred(f, *args, **kwargs).addBoth(results.append)
    if not results:
        raise RuntimeError("an orchestration state cannot wait on the reactor's thread")
    if isinstance(results[0], Failure):
        results[0].raiseException()
    return results[0]


def _fireArgs(ctx: StateContext, data: dict[str, Any]) -> None:
    """
    Fire Salt's C{salt/run/<orchestration jid>/args} event (what a
    C{salt.state} or C{salt.function} is about to publish) on the master's
    bus, from the state run's thread.
    """
    if not ctx.jid:
        return
    fire = ctx.master.bus.fire
    callFromThread = getattr(ctx.reactor, "callFromThread", None)
    if callFromThread is not None and offReactorThread(ctx.reactor):
        callFromThread(fire, f"salt/run/{ctx.jid}/args", data)
    else:
        fire(f"salt/run/{ctx.jid}/args", data)


def _publishAndGather(
    master: Any,
    load: dict[str, Any],
    timeout: float | None,
    expectMinions: bool,
    onReturn: Callable[[str, dict[str, Any]], None] | None = None,
) -> Deferred[dict[str, dict[str, Any]]]:
    """
    On the reactor: publish C{load} as the master itself and gather the
    minions' returns from the bus.

    @return: a L{Deferred} firing with C{{minion id: {"ret", "retcode",
        "jid", "out"}}} (Salt's C{saltutil.cmd} shape); with
        C{expectMinions}, a targeted minion that did not return gets
        C{{"ret": "Minion did not return. [...]", "out": "no_return",
        "failed": True}}.
    @param onReturn: called with each targeted minion's id and return
        event as it arrives.
    """
    done: Deferred[dict[str, dict[str, Any]]] = Deferred()

    def published(reply: dict[str, Any]) -> None:
        jid = reply.get("jid")
        targeted = list(reply.get("minions") or [])
        connected = set(reply.get("connected") or targeted)
        results: dict[str, dict[str, Any]] = {}
        waiting = {m for m in targeted if m in connected}
        gone: set[str] = set()

        def finish(_: Any = None) -> None:
            if done.called:
                return
            subscription.stop()
            if checker.running:
                checker.stop()
            if timer is not None and timer.active():
                timer.cancel()
            if expectMinions:
                for minion in targeted:
                    if minion not in results:
                        missing = (
                            NOT_CONNECTED
                            if minion not in connected or minion in gone
                            else NO_RESPONSE
                        )
                        results[minion] = {
                            "ret": missing,
                            "out": "no_return",
                            "failed": True,
                            "jid": jid,
                        }
            # In the order the master targeted them, not the order they
            # returned in, so comments and changes read the same every run.
            done.callback({m: results[m] for m in sorted(targeted) if m in results})

        def returned(tag: str, data: dict[str, Any]) -> None:
            minion = data.get("id")
            if minion not in targeted or minion in results:
                return
            results[minion] = {
                "ret": data.get("return"),
                "retcode": data.get("retcode", 0),
                "jid": jid,
                "out": "highstate" if str(data.get("fun", "")).startswith("state.") else "nested",
            }
            if onReturn is not None:
                onReturn(minion, data)
            waiting.discard(minion)
            if not waiting:
                finish()

        def checkPresence() -> None:
            subscribers = getattr(master, "subscribers", None)
            if subscribers is None:
                return
            for minion in list(waiting):
                if minion not in subscribers:
                    waiting.discard(minion)
                    gone.add(minion)
            if not waiting:
                finish()

        # The publish was only written to the minions' connections: no
        # return can have come before this subscription.
        subscription = master.bus.subscribe([f"salt/job/{jid}/ret/"], returned)
        checker = LoopingCall(checkPresence)
        checker.clock = master.clock
        timer = None
        if not jid or not waiting:
            finish()
            return
        checker.start(PRESENCE_CHECK_INTERVAL, now=False)
        if timeout is not None:
            timer = master.clock.callLater(float(timeout), finish)

    d = maybeDeferred(master.clientPublish, None, load)
    d.addCallback(published)
    d.addErrback(lambda failure: None if done.called else done.errback(failure))
    return done


class _Gathered:
    """
    One job's returns as L{salttwist.batching.SlidingWindow} reads them.

    @ivar returns: the return events by minion id.
    @ivar missing: the targeted minions that did not return.
    @ivar notConnected: those the master knew were not connected.
    """

    def __init__(self) -> None:
        self.returns: dict[str, dict[str, Any]] = {}
        self.missing: list[str] = []
        self.notConnected: list[str] = []


def _gather(
    master: Any,
    load: dict[str, Any],
    timeout: float | None,
    onReturn: Callable[[str, dict[str, Any]], None] | None = None,
) -> Deferred[_Gathered]:
    """
    L{_publishAndGather}, giving the return events themselves.
    """
    job = _Gathered()

    def returned(minion: str, event: dict[str, Any]) -> None:
        job.returns[minion] = event
        if onReturn is not None:
            onReturn(minion, event)

    def shaped(gathered: dict[str, dict[str, Any]]) -> _Gathered:
        for minion, entry in gathered.items():
            if minion not in job.returns:
                if entry.get("ret") == NOT_CONNECTED:
                    job.notConnected.append(minion)
                else:
                    job.missing.append(minion)
        return job

    return _publishAndGather(master, load, timeout, True, onReturn=returned).addCallback(shaped)


def _asCmdReturns(job: _Gathered, expectMinions: bool) -> dict[str, dict[str, Any]]:
    """
    A L{_Gathered} in L{_publishAndGather}'s shape (Salt's C{saltutil.cmd}),
    by minion id in sorted order.
    """
    results: dict[str, dict[str, Any]] = {}
    for minion, event in job.returns.items():
        results[minion] = {
            "ret": event.get("return"),
            "retcode": event.get("retcode", 0),
            "jid": event.get("jid"),
            "out": "highstate" if str(event.get("fun", "")).startswith("state.") else "nested",
        }
    if expectMinions:
        for minion in job.notConnected + job.missing:
            results.setdefault(
                minion,
                {
                    "ret": NOT_CONNECTED if minion in job.notConnected else NO_RESPONSE,
                    "out": "no_return",
                    "failed": True,
                },
            )
    return {m: results[m] for m in sorted(results)}


async def _batchAndGather(
    master: Any,
    reactor: Any,
    load: dict[str, Any],
    timeout: float | None,
    spec: BatchSpec,
    expectMinions: bool,
    batchWait: float = 0.0,
    failhard: bool = False,
    skipped: list[str] | None = None,
) -> dict[str, dict[str, Any]]:
    """
    On the reactor: Salt's batch mode (C{salttwist -b}'s sliding window,
    L{SlidingWindow}) through the master itself: the minions of the
    target that answer C{test.ping} run the job a batch at a time, each
    returning minion's place going to the next, in sorted order.

    @param batchWait: seconds a returned minion's place stays empty
        before the next minion takes it (Salt's C{batch_wait}).
    @param failhard: once a minion returns a non-zero retcode (or does
        not return), no other minion starts (Salt's batch C{failhard});
        those running finish.
    @param skipped: filled with the minions C{failhard} kept from running.
    """
    ping = await _gather(master, {**load, "fun": "test.ping", "arg": []}, timeout)
    combined = _Gathered()
    combined.missing = list(ping.missing)
    combined.notConnected = list(ping.notConnected)
    up = sorted(ping.returns)
    window = SlidingWindow(
        reactor,
        up,
        batchSize(spec, len(up)),
        batchWait,
        failhard,
        lambda chunk, returned: _gather(
            master, {**load, "tgt": chunk, "tgt_type": "list"}, timeout, returned
        ),
        combined,
        None,
        None,
        None,
    )
    stopped = await window.run()
    if stopped and skipped is not None:
        skipped.extend(window.queue)
    return _asCmdReturns(combined, expectMinions)


def _batchWait(value: Any, opts: Any) -> float:
    """
    @param value: the state's C{batch_wait}, or L{None} for the master
        config's (as Salt's batch reads it from the client's options).
    @return: Salt's C{batch_wait}, seconds.
    @raise ValueError: it is not a number of seconds >= 0.
    """
    if value is None:
        value = (opts or {}).get("batch_wait") or 0
    try:
        if isinstance(value, bool):
            raise ValueError
        seconds = float(value)
    except (TypeError, ValueError):
        seconds = -1.0
    if not seconds >= 0 or seconds == float("inf"):
        raise ValueError(f"batch_wait must be a number of seconds >= 0, not {value!r}")
    return seconds


def _failhard(value: Any, opts: Any) -> bool:
    """
    @return: whether a batch stops at its first failed minion: the
        state's C{failhard: True} or the C{failhard} option, as Salt's
        C{salt.state} decides.
    """
    return value is True or bool((opts or {}).get("failhard"))


def _stoppedComment(skipped: list[str]) -> str:
    """
    @return: what the state's comment adds when C{failhard} stopped its
        batch run before C{skipped} ran.
    """
    return f"failhard stopped the batch run; not run on: {', '.join(sorted(skipped))}"


async def _subsetAndGather(
    master: Any, load: dict[str, Any], timeout: float | None, count: int, expectMinions: bool
) -> dict[str, dict[str, Any]]:
    """
    On the reactor: Salt's C{cmd_subset}: ask the target's minions for
    their functions (C{sys.list_functions}), then run the job on C{count}
    of those having it, picked at random.
    """
    listing = await _gather(master, {**load, "fun": "sys.list_functions", "arg": []}, timeout)
    minions = list(listing.returns)
    _shuffle(minions)
    chosen = [
        minion for minion in minions if load["fun"] in (listing.returns[minion].get("return") or ())
    ][:count]
    if not chosen:
        return {}
    return await _publishAndGather(
        master, {**load, "tgt": chosen, "tgt_type": "list"}, timeout, expectMinions
    )


#: Shuffles the minions a subset is picked from (a test's seeded one).
_shuffle = random.SystemRandom().shuffle


def _subsetCount(subset: Any) -> int:
    """
    @raise ValueError: C{subset} is not a whole number >= 1.
    """
    if isinstance(subset, bool) or not str(subset).isdigit() or int(subset) < 1:
        raise ValueError(f"subset must be a whole number >= 1, not {subset!r}")
    return int(subset)


def _failMinions(value: Any, ret: dict[str, Any]) -> list[str] | tuple[()]:
    """
    @return: Salt's C{fail_minions} as a list (a warning for a bad type).
    """
    if value is None:
        return ()
    if isinstance(value, str):
        return [m.strip() for m in value.split(",")]
    if isinstance(value, list):
        return value
    ret.setdefault("warnings", []).append(
        "'fail_minions' needs to be a list or a comma separated string. Ignored."
    )
    return ()


def _checkResult(value: Any) -> bool:
    """
    Salt's C{state.check_result} with C{recurse=True}: a non-empty dict of
    state returns none of which failed.
    """
    if not isinstance(value, dict) or not value:
        return False
    for entry in value.values():
        if not isinstance(entry, dict):
            return False
        if "result" in entry:
            if entry["result"] is False:
                return False
        elif not _checkResult(entry):
            return False
    return True


def _failureDetail(minion: str, mRet: Any, noReturn: bool) -> str:
    """
    Salt's C{_format_failure_detail}: one line on why a minion failed.
    """
    if noReturn:
        return f"Minion {minion} did not return a state result."
    if isinstance(mRet, list | tuple):
        parts = [str(item) for item in mRet if item]
        if not parts:
            return f"Minion {minion} returned an empty error list."
        return f"Minion {minion} returned errors: {'; '.join(parts)}"
    if isinstance(mRet, dict):
        return ""
    return f"Minion {minion} returned {mRet!r} instead of a state result."


def _publish(
    ctx: StateContext,
    tgt: Any,
    fun: str,
    arg: list[Any],
    kwarg: dict[str, Any],
    tgt_type: str,
    timeout: Any,
    expectMinions: bool,
    batch: Any = None,
    subset: Any = None,
    batchWait: Any = None,
    failhard: Any = None,
    skipped: list[str] | None = None,
) -> dict[str, dict[str, Any]]:
    """
    Publish C{fun} to C{tgt} and wait for the returns (from the state
    run's thread): in batches of C{batch} minions (C{10}, C{25%}), or on
    C{subset} minions picked at random (C{batch} wins when both are
    given, as in Salt). A batch run takes C{batchWait} (L{_batchWait})
    and C{failhard} (L{_failhard}), filling C{skipped} with the minions
    C{failhard} kept from running.

    @raise ValueError: a malformed C{batch}, C{subset} or C{batchWait}.
    """
    spec = None if batch is None else parseBatch(batch)
    wait = 0.0 if spec is None else _batchWait(batchWait, ctx.opts)
    stopOnFailure = spec is not None and _failhard(failhard, ctx.opts)
    count = None if subset is None or spec is not None else _subsetCount(subset)
    wire = list(arg)
    if kwarg:
        wire.append({**kwarg, "__kwarg__": True})
    load = {
        "fun": fun,
        "arg": wire,
        "tgt": tgt,
        "tgt_type": tgt_type,
        "user": ctx.user,
    }
    seconds = None if timeout is None else float(timeout)
    _fireArgs(
        ctx,
        {
            "type": "state" if fun.startswith("state.") else "function",
            "tgt": tgt,
            "name": ctx.low.get("name", fun) if ctx.low else fun,
            "args": {
                "arg": list(arg),
                "kwarg": dict(kwarg),
                "tgt_type": tgt_type,
                "timeout": timeout,
            },
        },
    )
    if spec is not None:
        return _onReactor(
            ctx,
            lambda: Deferred.fromCoroutine(
                _batchAndGather(
                    ctx.master,
                    ctx.reactor,
                    load,
                    seconds,
                    spec,
                    expectMinions,
                    wait,
                    stopOnFailure,
                    skipped,
                )
            ),
        )
    if count is not None:
        return _onReactor(
            ctx,
            lambda: Deferred.fromCoroutine(
                _subsetAndGather(ctx.master, load, seconds, count, expectMinions)
            ),
        )
    return _onReactor(ctx, _publishAndGather, ctx.master, load, seconds, expectMinions)


def state(
    ctx: StateContext,
    name: str,
    tgt: Any,
    ssh: bool = False,
    tgt_type: str = "glob",
    ret: str = "",
    ret_config: Any = None,
    ret_kwargs: Any = None,
    highstate: Any = None,
    sls: Any = None,
    top: Any = None,
    saltenv: Any = None,
    test: Any = None,
    pillar: Any = None,
    pillarenv: Any = None,
    expect_minions: bool = True,
    exclude: Any = None,
    fail_minions: Any = None,
    allow_fail: Any = 0,
    concurrent: Any = False,
    timeout: Any = None,
    batch: Any = None,
    queue: bool = False,
    subset: Any = None,
    orchestration_jid: Any = None,
    failhard: Any = None,
    batch_wait: Any = None,
    **kwargs: Any,
) -> dict[str, Any]:
    """
    Run C{state.sls} (C{sls}: a name, a list, or comma-separated) or
    C{state.highstate} (C{highstate=True}) on the minions C{tgt}
    (C{tgt_type}), as Salt's C{salt.state}. C{test}, C{pillar},
    C{saltenv}, C{pillarenv}, C{exclude}, C{queue}, C{concurrent} go to
    the minions' run; C{fail_minions} are minions whose failure does not
    count; C{allow_fail} how many may fail; C{expect_minions} (default)
    fails when no minion returned; C{timeout}: seconds to wait;
    C{batch} (C{10}, C{25%}): the minions answering C{test.ping} run it
    that many at a time (C{salttwist -b}'s sliding window), a returned
    minion's place kept empty C{batch_wait} seconds (default: the
    C{batch_wait} option), no minion starting after one failed with
    C{failhard: True} (or the C{failhard} option); C{subset}: only that
    many of the target's minions, picked at random among those having
    the function.

    Changes: C{{"out": "highstate", "ret": {minion: its run's returns}}}
    for each minion that changed something or failed.
    """
    stateRet = stateReturn(name, True, "", {})
    if ssh:
        return _noSsh(name, "state")
    if ctx.master is None:
        return _noMaster(name, "state")
    try:
        allow_fail = int(allow_fail)
    except (TypeError, ValueError):
        stateRet["result"] = False
        stateRet["comment"] = "Passed invalid value for 'allow_fail', must be an int"
        return stateRet
    if top:
        stateRet["result"] = False
        stateRet["comment"] = (
            "salt.state: top is not supported by salttwist (Salt's state.top); "
            "name the SLS with sls, or run the minions' own top with highstate: True"
        )
        return stateRet
    arg: list[Any] = []
    if highstate:
        fun = "state.highstate"
    elif sls:
        fun = "state.sls"
        arg.append(",".join(str(s) for s in sls) if isinstance(sls, list) else str(sls))
    else:
        stateRet["comment"] = "No highstate or sls specified, no execution made"
        stateRet["result"] = False
        return stateRet
    if not isinstance(concurrent, bool):
        stateRet["comment"] = "Must pass in boolean for value of 'concurrent'"
        stateRet["result"] = False
        return stateRet
    testing = test if test is not None else (True if ctx.test else None)
    kwarg: dict[str, Any] = {}
    if testing is not None:
        kwarg["test"] = testing
    if pillar:
        kwarg["pillar"] = pillar
    if pillarenv is not None:
        kwarg["pillarenv"] = pillarenv
    if saltenv is not None:
        kwarg["saltenv"] = saltenv
    if exclude is not None:
        kwarg["exclude"] = exclude
    kwarg["queue"] = queue
    kwarg["concurrent"] = concurrent
    skipped: list[str] = []
    try:
        cmdRet = _publish(
            ctx,
            tgt,
            fun,
            arg,
            kwarg,
            tgt_type,
            timeout,
            bool(expect_minions),
            batch,
            subset,
            batch_wait,
            failhard,
            skipped,
        )
    except Exception as e:
        stateRet["result"] = False
        stateRet["comment"] = str(e)
        return stateRet
    for mdata in cmdRet.values():
        stateRet["__jid__"] = mdata.get("jid")
        break
    failMinions = _failMinions(fail_minions, stateRet)
    if not cmdRet and expect_minions:
        stateRet["result"] = False
        stateRet["comment"] = "No minions returned"
        return stateRet
    changes: dict[str, Any] = {}
    fail: list[str] = []
    failDetail: dict[str, str] = {}
    noChange: list[str] = []
    for minion, mdata in cmdRet.items():
        mRet: Any = False
        noReturn = False
        mState = True
        raw = mdata.get("ret")
        if mdata.get("failed", False):
            mState = False
            noReturn = "ret" not in mdata
        else:
            mRet = mdata.get("ret")
            mState = _checkResult(mRet)
        if not mState:
            if minion not in failMinions:
                fail.append(minion)
                failDetail[minion] = _failureDetail(
                    minion, raw if raw is not None else mRet, noReturn
                )
            changes[minion] = mRet
            continue
        if any(isinstance(s, dict) and s.get("changes") for s in mRet.values()):
            changes[minion] = mRet
        else:
            noChange.append(minion)
    if changes:
        stateRet["changes"] = {"out": "highstate", "ret": changes}
    if len(fail) > allow_fail:
        stateRet["result"] = False
        stateRet["comment"] = f"Run failed on minions: {', '.join(fail)}"
        details = [failDetail[m] for m in sorted(fail) if failDetail.get(m)]
        if details:
            stateRet["comment"] += "\n" + "\n".join(details)
        if skipped:
            stateRet["comment"] += "\n" + _stoppedComment(skipped)
    else:
        stateRet["comment"] = "States ran successfully."
        if changes:
            stateRet["comment"] += f" Updating {', '.join(changes)}."
        if noChange:
            stateRet["comment"] += f" No changes made to {', '.join(noChange)}."
    if testing and stateRet["changes"] and stateRet["result"] is True:
        stateRet["result"] = None
    return stateRet


def function(
    ctx: StateContext,
    name: str,
    tgt: Any,
    ssh: bool = False,
    tgt_type: str = "glob",
    ret: str = "",
    ret_config: Any = None,
    ret_kwargs: Any = None,
    expect_minions: bool = False,
    fail_minions: Any = None,
    fail_function: Any = None,
    arg: Any = None,
    kwarg: Any = None,
    timeout: Any = None,
    batch: Any = None,
    subset: Any = None,
    failhard: Any = None,
    batch_wait: Any = None,
    **kwargs: Any,
) -> dict[str, Any]:
    """
    Run the execution function C{name} on the minions C{tgt} with C{arg}
    (a list) and C{kwarg} (a dict), as Salt's C{salt.function}.
    C{fail_function}: an execution function (run on the master) given
    each minion's return, false meaning that minion failed;
    C{fail_minions}: minions whose failure does not count; C{timeout}:
    seconds to wait; C{batch} (with C{batch_wait} and C{failhard}) and
    C{subset} as for L{state}. A minion
    whose job's retcode is not 0 failed.

    Changes: C{{"ret": {minion: its return}}}.
    """
    funcRet = stateReturn(name, True, "", {})
    if ssh:
        return _noSsh(name, "function")
    if ctx.master is None:
        return _noMaster(name, "function")
    if kwarg is None:
        kwarg = {}
    if isinstance(arg, str):
        funcRet["warnings"] = ["Please specify 'arg' as a list of arguments."]
        arg = arg.split()
    if ctx.test:
        funcRet["comment"] = f"Function {name} would be executed on target {tgt}"
        funcRet["result"] = None
        return funcRet
    skipped: list[str] = []
    try:
        cmdRet = _publish(
            ctx,
            tgt,
            name,
            list(arg or []),
            dict(kwarg),
            tgt_type,
            timeout,
            bool(expect_minions),
            batch,
            subset,
            batch_wait,
            failhard,
            skipped,
        )
    except Exception as e:
        funcRet["result"] = False
        funcRet["comment"] = str(e)
        return funcRet
    for mdata in cmdRet.values():
        funcRet["__jid__"] = mdata.get("jid")
        break
    changes: dict[str, Any] = {}
    fail: list[str] = []
    failMinions = _failMinions(fail_minions, funcRet)
    for minion, mdata in cmdRet.items():
        mRet: Any = False
        if mdata.get("retcode"):
            funcRet["result"] = False
            if minion not in fail:
                fail.append(minion)
        if mdata.get("failed", False):
            mFunc = False
        else:
            mRet = mdata.get("ret")
            mFunc = True if not fail_function else bool(ctx.salt[fail_function](mRet))
            if mRet is False:
                mFunc = False
        if not mFunc and minion not in failMinions and minion not in fail:
            fail.append(minion)
        changes[minion] = mRet
    if not cmdRet:
        funcRet["result"] = False
        funcRet["comment"] = "No minions responded"
        return funcRet
    if changes:
        funcRet["changes"] = {"ret": changes}
    if fail:
        funcRet["result"] = False
        funcRet["comment"] = f"Running function {name} failed on minions: {', '.join(fail)}"
        if skipped:
            funcRet["comment"] += "\n" + _stoppedComment(skipped)
    else:
        funcRet["comment"] = "Function ran successfully."
    if changes:
        funcRet["comment"] += f" Function {name} ran on {', '.join(changes)}."
    return funcRet


def runner(ctx: StateContext, name: str, **kwargs: Any) -> dict[str, Any]:
    """
    Run the runner function C{name} on the master, as Salt's
    C{salt.runner}: its keyword arguments are the state's other arguments
    (and C{arg}, a list, and C{kwarg}, a dict, when given).

    Changes: C{{"return": what it returned}}; the result is whether it
    succeeded (a return with an C{Error} key is a failure, as in Salt).
    """
    if ctx.master is None:
        return _noMaster(name, "runner")
    if ctx.test:
        return stateReturn(name, None, f"Runner function '{name}' would be executed.")
    from salttwist.runners import RunnerContext, loadRunners

    kwargs = stateArguments(kwargs)
    kwargs.pop("saltenv", None)
    args = list(kwargs.pop("arg", None) or [])
    kwargs.update(kwargs.pop("kwarg", None) or {})
    runners = loadRunners(config=dict(ctx.master.config))
    fn = runners.get(name)
    if fn is None:
        return stateReturn(
            name,
            False,
            f"Runner function '{name}' failed.",
            {"return": f"'{name}' is not available."},
        )
    success = True
    try:
        value = _onReactor(ctx, fn, RunnerContext(ctx.master, ctx.user), *args, **kwargs)
    except Exception as e:
        value, success = f"{type(e).__name__}: {e}", False
    if isinstance(value, dict) and "Error" in value:
        success = False
    return stateReturn(
        name,
        success,
        f"Runner function '{name}' {'executed' if success else 'failed'}.",
        {"return": value},
    )


def _waitForEvents(
    master: Any, name: str, idList: list[Any], eventId: str, timeout: float
) -> Deferred[tuple[list[Any], bool]]:
    """
    On the reactor: wait for events whose tag matches the glob C{name}
    carrying (in their data, or their data's C{data}) C{eventId} with each
    value of C{idList}.

    @return: a L{Deferred} firing with C{(values seen, all seen)}.
    """
    remaining = list(idList)
    seen: list[Any] = []
    done: Deferred[tuple[list[Any], bool]] = Deferred()

    def finish(allSeen: bool) -> None:
        if done.called:
            return
        subscription.stop()
        if timer.active():
            timer.cancel()
        done.callback((seen, allSeen))

    def received(tag: str, data: dict[str, Any]) -> None:
        if not fnmatch.fnmatch(tag, name):
            return
        value = data.get(eventId)
        if value is None and isinstance(data.get("data"), dict):
            value = data["data"].get(eventId)
        if value is None:
            return
        for one in value if isinstance(value, list) else [value]:
            if one in remaining:
                remaining.remove(one)
                seen.append(one)
        if not remaining:
            finish(True)

    subscription = master.bus.subscribe([], received, globs=[name])
    timer = master.clock.callLater(float(timeout), finish, False)
    if not remaining:
        finish(True)
    return done


def wait_for_event(
    ctx: StateContext,
    name: str,
    id_list: list[Any],
    event_id: str = "id",
    timeout: Any = 300,
    node: str = "master",
) -> dict[str, Any]:
    """
    Wait until events with the tag C{name} (a glob) have been seen on the
    master's bus for every value of C{id_list} (the C{event_id} key of the
    event's data, by default the minion's C{id}), at most C{timeout}
    seconds, as Salt's C{salt.wait_for_event}.

    Changes: C{{"minions_seen": [...]}}.
    """
    ret = stateReturn(name, False, "", {})
    if ctx.master is None:
        return _noMaster(name, "wait_for_event")
    if ctx.test:
        ret["comment"] = f"Orchestration would wait for event '{name}'"
        ret["result"] = None
        return ret
    start = time.monotonic()
    ids = list(id_list) if isinstance(id_list, list) else [id_list]
    seen, allSeen = _onReactor(ctx, _waitForEvents, ctx.master, name, ids, event_id, float(timeout))
    if seen:
        ret["changes"]["minions_seen"] = seen
    if allSeen:
        ret["result"] = True
        ret["comment"] = f"All events seen in {time.monotonic() - start} seconds."
    else:
        ret["comment"] = "Timeout value reached."
    return ret
