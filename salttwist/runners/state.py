# -*- test-case-name: tests.test_runners_state -*-
"""
The C{state} runners (Salt's C{salt/runners/state.py}): orchestration, a
state run on the master itself.

C{state.orchestrate} (aliases C{state.orch}, C{state.sls}) renders the SLS
from the master's own file server, compiles it and runs it in a thread of
its own (L{salttwist.state.apply}), as the master's minion (id C{<fqdn>_master},
Salt's). Its states are usually the orchestration states
(L{salttwist.states.saltmod}: C{salt.state}, C{salt.function},
C{salt.runner}, C{salt.wait_for_event}), which publish jobs through the
master and wait for the minions' returns; any other state runs on the
master's host.

The return is Salt's: C{{"data": {<master id>: {tag: state return}},
"outputter": "highstate", "retcode": 0}} (C{retcode} 1 when a state
failed, or the SLS did not compile: then C{data} holds the error strings).
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from twisted.internet.defer import Deferred
from twisted.python.failure import Failure

from salttwist.jid import JidGenerator

if TYPE_CHECKING:
    from salttwist.runners import RunnerContext

_jids = JidGenerator()


def _inOwnThread(context: RunnerContext, f: Callable[..., Any], *args: Any) -> Deferred[Any]:
    """
    Run the blocking C{f(*args)} (a whole state run) in a thread of its
    own, not the master's thread pool: an orchestration waits for minions
    for as long as they take, and minions need that pool (file and pillar
    serving) to finish what it waits for; ten orchestrations started at
    once (by the reactor) would otherwise hold every pool thread. A clock
    that is no reactor (a test's) runs it with C{runBlocking}.

    @return: a L{Deferred} firing with its result.
    """
    master = context.master
    callFromThread = getattr(master.clock, "callFromThread", None)
    if callFromThread is None:
        return master.runBlocking(f, *args)
    done: Deferred[Any] = Deferred()

    def work() -> None:
        try:
            result = f(*args)
        except BaseException:
            callFromThread(done.errback, Failure())
        else:
            callFromThread(done.callback, result)

    threading.Thread(target=work, name="salttwist-orchestrate", daemon=True).start()
    return done


def _prepare(
    context: RunnerContext, saltenv: Any, test: Any, pillar: Any, pillarenv: Any = None
) -> Any:
    """
    Build the L{salttwist.state.apply.StateRun} of an orchestration
    (blocking: the master's grains, and its own pillar compiled from its
    C{pillar_roots} and C{ext_pillar} for its id, with C{pillar} merged
    last, as Salt's master minion has).
    """
    from salttwist.modules import LoaderContext, loadFunctions
    from salttwist.modules.extmods import SaltFunctions
    from salttwist.pillar.compiler import compilePillar
    from salttwist.runners.salt import _masterGrains
    from salttwist.state.apply import StateRun

    master = context.master
    grains = _masterGrains(master.config)
    opts = dict(master.config, id=grains["id"])
    if saltenv is not None:
        opts["saltenv"] = saltenv
    if pillarenv is None:
        pillarenv = opts.get("pillarenv")
    compiled = compilePillar(
        opts,
        grains["id"],
        grains,
        saltenv=saltenv,
        pillarenv=pillarenv,
        override=dict(pillar or {}),
    )
    loader = LoaderContext(opts, grains, master.clock, loadFunctions())
    loader.pillar = compiled
    testing = bool(opts.get("test")) if test is None else bool(test)
    return StateRun(
        files=master.fileServer,
        opts=opts,
        minionId=grains["id"],
        grains=grains,
        pillar=compiled,
        salt=SaltFunctions(loader),
        test=testing,
        saltenv=saltenv or "base",
        reactor=master.clock,
        jid=_jids.next(),
        master=master,
        user=context.user,
    )


def _checkPillar(pillar: Any) -> None:
    if pillar is not None and not isinstance(pillar, dict):
        raise ValueError("Pillar data must be formatted as a dictionary")


def _result(run: Any, returned: Any) -> dict[str, Any]:
    """
    @return: Salt's orchestrate return for a run's C{returned}.
    """
    from salttwist.state.apply import checkResult

    ok = isinstance(returned, dict) and checkResult(returned, run.chunks)
    return {
        "data": {run.minionId: returned},
        "outputter": "highstate",
        "retcode": 0 if ok else 1,
    }


def _pillarErrors(run: Any) -> list[str] | None:
    """
    @return: Salt's errors for a master pillar that failed to compile, or
        L{None}.
    """
    errors = run.pillar.get("_errors") if isinstance(run.pillar, dict) else None
    if not errors:
        return None
    return ["Pillar failed to render with the following messages:", *map(str, errors)]


def _orchestrate(run: Any, mods: Any, exclude: Any) -> dict[str, Any]:
    from salttwist.state.apply import sls

    errors = _pillarErrors(run)
    if errors:
        return _result(run, errors)
    return _result(run, sls(run, mods, exclude))


async def orchestrate(
    context: RunnerContext,
    mods: Any,
    saltenv: str = "base",
    test: Any = None,
    exclude: Any = None,
    pillar: Any = None,
    pillarenv: Any = None,
    pillar_enc: Any = None,
    orchestration_jid: Any = None,
) -> dict[str, Any]:
    """
    Run the orchestration SLS C{mods} (a name, a list, or comma-separated)
    from the master's file server, on the master. C{saltenv}: where the SLS
    are; C{test=True}: report what would be done; C{pillar}: a dictionary,
    merged over the master's own pillar (its C{pillar_roots} and
    C{ext_pillar} for the master's id) and the SLS see the result;
    C{pillarenv}; C{exclude}: SLS or ids left out.

    Returns C{{"data": {<master id>: {tag: state return}}, "outputter":
    "highstate", "retcode": 0 or 1}}, as Salt does.

    CLI Example:

        salttwist-run state.orchestrate webserver
        salttwist-run state.orchestrate webserver saltenv=dev test=True
        salttwist-run state.orchestrate webserver pillar='{"foo": "bar"}'
    """
    _checkPillar(pillar)
    master = context.master
    run = await master.runBlocking(_prepare, context, saltenv, test, pillar, pillarenv)
    if orchestration_jid is not None:
        run.jid = str(orchestration_jid)
    return await _inOwnThread(context, _orchestrate, run, mods, exclude)


#: Salt's aliases.
orch = orchestrate
sls = orchestrate


def _single(run: Any, fun: str, name: str, kwargs: dict[str, Any]) -> dict[str, Any]:
    from salttwist.state.apply import single

    errors = _pillarErrors(run)
    if errors:
        return _result(run, errors)
    return _result(run, single(run, fun, name, **kwargs))


async def orchestrate_single(
    context: RunnerContext,
    fun: str,
    name: str,
    test: Any = None,
    queue: bool = False,
    pillar: Any = None,
    **kwargs: Any,
) -> dict[str, Any]:
    """
    Run one orchestration state, C{fun} (C{salt.function},
    C{salt.state}, ...) with C{name} and the other keyword arguments, on
    the master; the return is as C{state.orchestrate}'s.

    CLI Example:

        salttwist-run state.orchestrate_single fun=salt.wheel name=key.list_all
        salttwist-run state.orchestrate_single fun=salt.function name=test.ping tgt='*'
    """
    _checkPillar(pillar)
    kwargs = {k: v for k, v in kwargs.items() if not k.startswith("__")}
    master = context.master
    run = await master.runBlocking(_prepare, context, kwargs.pop("saltenv", None), test, pillar)
    return await _inOwnThread(context, _single, run, fun, name, kwargs)
