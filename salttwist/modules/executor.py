# -*- test-case-name: tests.test_minion_parts,tests.test_cli_call -*-
"""
Runs one job's function and shapes its return as Salt does: the minion's
jobs, and C{salttwist-call}'s local calls, go through it.

Not an execution module: L{salttwist.modules.MODULES} does not list it.
"""

from __future__ import annotations

import copy
import dataclasses
import inspect
from collections.abc import Callable
from types import CoroutineType
from typing import Any

from twisted.internet.defer import CancelledError, Deferred, succeed
from twisted.logger import Logger
from twisted.python.failure import Failure

__all__ = ["EX_UNAVAILABLE", "Executor"]

from salttwist.args import parseArgs
from salttwist.modules import (
    CommandExecutionError,
    LoaderContext,
    Retcode,
    SaltInvocationError,
)

#: Salt's retcode for a function the minion does not have.
EX_UNAVAILABLE = 254


#: The types of most return values (C{test.ping}'s C{True} above all): no
#: L{Deferred}, L{Failure}, coroutine or L{Retcode} is one of them, so such a
#: value is shaped at once, without testing it for each of those.
_PLAIN_VALUES = frozenset((bool, int, float, str, bytes, dict, list, type(None)))


def _shape(value: Any) -> dict[str, Any]:
    if isinstance(value, Retcode):
        return {"return": value.value, "retcode": value.retcode, "success": value.retcode == 0}
    return {"return": value, "retcode": 0, "success": True}


def _takesPillar(function: Callable[..., Any]) -> bool:
    """
    @return: whether C{function} has an argument named C{pillar}.
    """
    try:
        return "pillar" in inspect.signature(function).parameters
    except (TypeError, ValueError):
        return False


def _mergePillar(base: dict[str, Any], override: dict[str, Any]) -> dict[str, Any]:
    """
    @return: a new pillar: C{override} merged over C{base}, recursively for
        dictionaries (neither is changed).
    """
    merged = dict(base)
    for key, value in override.items():
        current = merged.get(key)
        if isinstance(current, dict) and isinstance(value, dict):
            merged[key] = _mergePillar(current, value)
        else:
            merged[key] = copy.deepcopy(value)
    return merged


def _pillarOverride(
    function: Callable[..., Any], context: LoaderContext, kwargs: dict[str, Any]
) -> LoaderContext:
    """
    A job's C{pillar=} (a dict) for a function that takes no C{pillar}
    argument: taken out of C{kwargs}, and the function runs with a copy of
    the context whose pillar has it merged in, for this job only (the
    shared context, which other jobs read at the same time, is untouched).

    @return: the context the function gets.
    """
    if _takesPillar(function):
        return context
    override = kwargs.pop("pillar")
    return dataclasses.replace(context, pillar=_mergePillar(context.pillar, override))


class Executor:
    """
    Calls execution-module functions: on the reactor for those marked
    C{onReactor}, otherwise in a thread through C{runInThread}.
    """

    log = Logger()

    def __init__(
        self,
        functions: dict[str, Callable[..., Any]],
        context: LoaderContext,
        runInThread: Callable[..., Deferred],
    ) -> None:
        self.functions = functions
        self.context = context
        self._runInThread = runInThread

    def run(self, fun: str, arg: list[Any], jid: str | None = None) -> Deferred[dict[str, Any]]:
        """
        @param jid: the job's id, given to a function marked L{needsJid
            <salttwist.modules.needsJid>} as C{context.jid} (its own copy of
            the context).
        @return: a L{Deferred} firing with C{{"return", "retcode", "success"}};
            it never fails.
        """
        result = self.call(fun, arg, jid)
        return result if isinstance(result, Deferred) else succeed(result)

    def call(
        self, fun: str, arg: list[Any], jid: str | None = None
    ) -> dict[str, Any] | Deferred[dict[str, Any]]:
        """
        Like L{run}, but a function that runs on the reactor and returns a
        plain value (C{test.ping}) gives its shaped result itself, without a
        L{Deferred} and its callbacks on the job's path.

        @return: C{{"return", "retcode", "success"}}, or a L{Deferred} firing
            with it; never a failure.
        """
        function = self.functions.get(fun)
        if function is None:
            return {
                "return": f"'{fun}' is not available.",
                "retcode": EX_UNAVAILABLE,
                "success": False,
            }
        if isinstance(arg, list):
            args, kwargs = parseArgs(arg) if arg else ([], {})
        else:
            args, kwargs = parseArgs([arg])
        context = self.context
        if "pillar" in kwargs and isinstance(kwargs["pillar"], dict):
            context = _pillarOverride(function, context, kwargs)
        if getattr(function, "needsContext", False):
            if jid is not None and getattr(function, "needsJid", False):
                context = dataclasses.replace(context, jid=jid)
            args = [context, *args]
        if not getattr(function, "runsOnReactor", False):
            d = self._runInThread(function, *args, **kwargs)
            return d.addCallbacks(_shape, self._failed, errbackArgs=(fun,))
        try:
            value = function(*args, **kwargs)
        except BaseException:
            return self._failed(Failure(), fun)
        if type(value) in _PLAIN_VALUES:
            return {"return": value, "retcode": 0, "success": True}
        if isinstance(value, Deferred):
            return value.addCallbacks(_shape, self._failed, errbackArgs=(fun,))
        if isinstance(value, Failure):
            return self._failed(value, fun)
        if isinstance(value, CoroutineType):
            d = Deferred.fromCoroutine(value)
            return d.addCallbacks(_shape, self._failed, errbackArgs=(fun,))
        return _shape(value)

    def _failed(self, failure: Failure, fun: str) -> dict[str, Any]:
        if failure.check(CancelledError):
            # saltutil.kill_job stopped it; the minion words the return.
            return {"return": f"{fun} was cancelled", "retcode": 1, "success": False}
        if failure.check(CommandExecutionError):
            self.log.error(
                "A command in {fun!r} had a problem: {error}", fun=fun, error=failure.value
            )
            message = f"ERROR: {failure.value}"
        elif failure.check(SaltInvocationError):
            self.log.error("Problem executing {fun!r}: {error}", fun=fun, error=failure.value)
            message = f"ERROR executing '{fun}': {failure.value}"
        elif failure.check(TypeError):
            message = f"Passed invalid arguments to {fun}: {failure.value}"
        else:
            self.log.failure("{fun} raised", failure, fun=fun)
            message = (
                f"The minion function caused an exception: "
                f"{type(failure.value).__name__}: {failure.value}"
            )
        return {"return": message, "retcode": 1, "success": False}
