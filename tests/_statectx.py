"""
Run state functions in tests as a state run does: in a thread, with a
L{StateContext} whose C{salt} calls the real execution functions (those
that run on the reactor are waited for from the thread).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from twisted.internet.defer import Deferred
from twisted.internet.threads import deferToThread

from salttwist.config import MINION_DEFAULTS
from salttwist.modules import LoaderContext, loadFunctions
from salttwist.modules.extmods import SaltFunctions
from salttwist.states import StateContext, loadStates


def _reactor() -> Any:
    from twisted.internet import reactor

    return reactor


def makeLoaderContext(
    opts: Mapping[str, Any] | None = None,
    grains: Mapping[str, Any] | None = None,
    pillar: Mapping[str, Any] | None = None,
) -> LoaderContext:
    """
    @return: a minion's loader context with every built-in execution
        function and the global reactor.
    """
    allOpts = dict(MINION_DEFAULTS)
    allOpts.update({"id": "statetest"})
    allOpts.update(opts or {})
    context = LoaderContext(
        opts=allOpts,
        grains=dict(grains or {"id": allOpts["id"], "os_family": "Debian"}),
        reactor=_reactor(),
        pillar=dict(pillar or {}),
    )
    context.functions = loadFunctions()
    return context


def makeStateContext(
    *,
    test: bool = False,
    opts: Mapping[str, Any] | None = None,
    grains: Mapping[str, Any] | None = None,
    pillar: Mapping[str, Any] | None = None,
    low: Mapping[str, Any] | None = None,
    saltenv: str = "base",
) -> StateContext:
    """
    @return: a L{StateContext} over L{makeLoaderContext}'s context.
    """
    loader = makeLoaderContext(opts, grains, pillar)
    return StateContext(
        salt=SaltFunctions(loader),
        opts=loader.opts,
        grains=loader.grains,
        pillar=loader.pillar,
        test=test,
        saltenv=saltenv,
        low=dict(low or {}),
        states=loadStates(),
        reactor=loader.reactor,
    )


def runState(
    function: Callable[..., Any] | str,
    *args: Any,
    ctx: StateContext | None = None,
    test: bool = False,
    **kwargs: Any,
) -> Deferred[dict[str, Any]]:
    """
    Call a state function (or C{"file.managed"}) in a thread, as a state
    run does.

    @return: a L{Deferred} firing with its state return.
    """
    if ctx is None:
        ctx = makeStateContext(test=test)
    if isinstance(function, str):
        function = loadStates()[function]
    return deferToThread(function, ctx, *args, **kwargs)
