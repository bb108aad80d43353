# -*- test-case-name: tests.test_client_api -*-
"""
The L{Deferred} core of Salt's C{Caller}: a minion's execution modules run
on this machine, with the minion's configuration and grains, loaded as
C{salttwist-call --local} loads them, and no master.

Twisted programs use L{LocalCaller} directly; blocking code uses the
synchronous L{salttwist.client.Caller}, which runs it on the bridge's
reactor thread.
"""

from __future__ import annotations

from typing import Any

from twisted.internet.defer import Deferred, maybeDeferred

from salttwist.blocking import RunBlocking, threadRunner
from salttwist.grains import coreGrains, grainsFilePath
from salttwist.modules import LoaderContext, Retcode, loadFunctions
from salttwist.modules.executor import Executor
from salttwist.pki.ids import configuredMinionId


class LocalCaller:
    """
    The execution modules of the minion configured by C{config}, loaded
    once, as the minion loads them.

    @ivar executor: the L{Executor} that shapes returns as a job's.
    @ivar context: what module functions are given (C{__opts__},
        C{__grains__}, the reactor).
    """

    def __init__(
        self, config: dict[str, Any], reactor: Any, runBlocking: RunBlocking | None = None
    ) -> None:
        """
        Gather the grains (blocking, as the minion does once at start) and
        load the modules.

        @param config: a minion configuration (L{salttwist.config.loadMinionConfig}).
        @param runBlocking: runs the functions that may block; the
            reactor's thread pool by default.
        """
        self.config = config
        self.reactor = reactor
        minionId = configuredMinionId(config)
        grains = coreGrains(minionId, config["grains"], grainsFilePath(config))
        self.context = LoaderContext(config, grains, reactor)
        self._runBlocking = runBlocking if runBlocking is not None else threadRunner(reactor)
        self.executor = Executor(loadFunctions(), self.context, self._runBlocking)
        self.context.functions = self.executor.functions
        if config.get("autoload_dynamic_modules", True):
            from salttwist.modules.extmods import autoloadExtensions

            # The custom modules and grains the minion synced (blocking).
            autoloadExtensions(self.context)

    def run(self, fun: str, arg: list[Any]) -> Deferred[dict[str, Any]]:
        """
        Run C{fun} with C{arg} (Salt's wire form) as a minion runs a job.

        @return: a L{Deferred} firing with C{{"return", "retcode",
            "success"}}; a failure is a return, as in a job.
        """
        return self.executor.run(fun, arg)

    def call(self, fun: str, /, *args: Any, **kwargs: Any) -> Deferred[Any]:
        """
        Call C{fun(*args, **kwargs)} (Salt's C{Caller.cmd}): a function that
        may block runs through C{runBlocking}, one marked to run on the
        reactor runs here.

        @return: a L{Deferred} firing with what the function returned (the
            value of a L{Retcode}), or failing with what it raised; with
            L{KeyError} if there is no function C{fun}, as Salt's loader.
        """
        function = self.executor.functions.get(fun)
        if function is None:
            return maybeDeferred(_unavailable, fun)
        if getattr(function, "needsContext", False):
            args = (self.context, *args)
        if getattr(function, "runsOnReactor", False):
            d = maybeDeferred(function, *args, **kwargs)
        else:
            d = self._runBlocking(function, *args, **kwargs)
        return d.addCallback(lambda value: value.value if isinstance(value, Retcode) else value)


def _unavailable(fun: str) -> None:
    raise KeyError(f"'{fun}' is not available.")
