# -*- test-case-name: tests.test_state_runner -*-
"""
Calling one state function for one low chunk (Salt's C{State.call}): the
arguments it accepts, its run conditions, its exceptions, its timing, and
C{retry}.
"""

from __future__ import annotations

import datetime
import functools
import inspect
import logging
import traceback
from collections.abc import Callable, Mapping
from typing import Any

from salttwist.state.requisites import REQUISITE_KEYS
from salttwist.state.runafter import refreshAfter
from salttwist.state.runchecks import checkCmd, retrySettings, runChecks

log = logging.getLogger(__name__)

#: Chunk keys the runner reads that are never passed to a state function
#: through its C{**kwargs} (a function naming one as a parameter gets it).
RUNTIME_KEYS = frozenset(
    [
        "fun",
        "state",
        "check_cmd",
        "cmd_opts_exclude",
        "failhard",
        "onlyif",
        "unless",
        "creates",
        "retry",
        "order",
        "parallel",
        "reload_modules",
        "reload_grains",
        "reload_pillar",
        "force_reload_modules",
        "runas",
        "runas_password",
        "no_log",
        "fire_event",
        "saltenv",
        "umask",
        "test",
        "aggregate",
        "name_order",
    ]
)

#: Keys never passed through C{**kwargs}: runner keys and requisites.
NOT_ARGUMENTS = RUNTIME_KEYS | REQUISITE_KEYS


def missingState(full: str, low: Mapping[str, Any]) -> str:
    """
    @return: Salt's comment for a state function that does not exist.
    """
    if low.get("__sls__") is not None:
        return (
            f"State '{full}' was not found in SLS '{low['__sls__']}'\n"
            f"Reason: '{full}' is not available.\n"
        )
    return f"Specified state '{full}' was not found\n"


@functools.lru_cache(maxsize=4096)
def _parameters(function: Callable[..., Any]) -> tuple[tuple[tuple[str, bool], ...], bool]:
    """
    @return: C{((name, required), ...)} of the parameters C{function}
        names after its first (the context), and whether it takes
        C{**kwargs} (its signature read once: a run calls the same few
        functions hundreds of times).
    """
    named: list[tuple[str, bool]] = []
    takesAll = False
    for p in list(inspect.signature(function).parameters.values())[1:]:
        if p.kind is inspect.Parameter.VAR_KEYWORD:
            takesAll = True
        elif p.kind is not inspect.Parameter.VAR_POSITIONAL:
            named.append((p.name, p.default is inspect.Parameter.empty))
    return tuple(named), takesAll


def stateArguments(
    function: Callable[..., Any], low: Mapping[str, Any]
) -> tuple[dict[str, Any], list[str]]:
    """
    The keyword arguments to call a state function with: the chunk's
    values of the parameters it names (after the context), and, when it
    takes C{**kwargs}, every other chunk key but the runner's own ones,
    requisites and C{__dunder__} keys.

    @return: C{(kwargs, missing, unused)}: C{missing} the required
        parameters the chunk does not give, C{unused} the chunk's
        arguments the function does not take (none when it takes
        C{**kwargs}).
    """
    try:
        named, takesAll = _parameters(function)
    except TypeError:  # an unhashable callable
        named, takesAll = _parameters.__wrapped__(function)
    kwargs: dict[str, Any] = {}
    missing: list[str] = []
    for pname, required in named:
        if pname in low:
            kwargs[pname] = low[pname]
        elif required:
            missing.append(pname)
    unused: list[str] = []
    for key, value in low.items():
        if key in kwargs or key in NOT_ARGUMENTS or key == "name":
            continue
        if isinstance(key, str) and key.startswith("__"):
            continue
        if takesAll:
            kwargs[key] = value
        elif key != "sfun":
            unused.append(str(key))
    if takesAll and "name" in low:
        kwargs.setdefault("name", low["name"])
    return kwargs, missing, unused


def unusedWarning(full: str, unused: list[str]) -> str:
    """
    @return: Salt's words for arguments a state function does not take
        (Salt refuses the call; the runner calls it without them and
        warns).
    """
    if len(unused) == 1:
        return f"'{unused[0]}' is an invalid keyword argument for '{full}'"
    listed = ", ".join(f"'{u}'" for u in unused[:-1])
    return f"{listed} and '{unused[-1]}' are invalid keyword arguments for '{full}'"


def _startTime(when: float) -> str:
    return datetime.datetime.fromtimestamp(when).time().isoformat(timespec="microseconds")


def exceptionReturn(name: Any) -> dict[str, Any]:
    """
    @return: Salt's return for a state that raised (call it in the
        C{except} block): C{result: False}, the traceback in the comment.
    """
    return {
        "name": name,
        "result": False,
        "changes": {},
        "comment": f"An exception occurred in this state: {traceback.format_exc()}",
    }


class StateCall:
    """
    Calls state functions as Salt's C{State.call} does.

    @ivar states: state functions by C{module.function}.
    @ivar clock: the time, as L{time.time}.
    @ivar sleep: waits between C{retry} attempts, as L{time.sleep}.
    @ivar randint: picks the C{splay}, as L{random.randint}.
    @ivar cancelled: true when the run is cancelled: no more C{retry}
        attempts.
    """

    def __init__(
        self,
        states: Mapping[str, Callable[..., Any]],
        clock: Callable[[], float],
        sleep: Callable[[float], Any],
        randint: Callable[[int, int], int],
        cancelled: Callable[[], bool] = lambda: False,
    ) -> None:
        self.states = states
        self.clock = clock
        self.sleep = sleep
        self.randint = randint
        self.cancelled = cancelled

    def _has(self, full: str) -> bool:
        try:
            return full in self.states
        except Exception:
            log.exception("Loading state function %s failed", full)
            return False

    def hasModWatch(self, state: str) -> bool:
        """
        @return: whether state module C{state} has a C{mod_watch}.
        """
        return self._has(f"{state}.mod_watch")

    def call(self, low: Mapping[str, Any], ctx: Any, refresh: bool = True) -> dict[str, Any]:
        """
        Run the chunk's state function once with C{ctx}, its conditions
        first, C{retry} after, then the refreshes it asks for
        (L{refreshAfter}).

        @param ctx: the chunk's L{StateContext} (its C{test} already the
            one to use).
        @param refresh: whether to do the refreshes (not for a C{prereq}
            target's test run, as Salt).
        @return: the state return with C{start_time} and C{duration}.
        """
        start = self.clock()
        ret = self._callOnce(low, ctx)
        ret["start_time"] = _startTime(start)
        ret["duration"] = round((self.clock() - start) * 1000.0, 3)
        if "retry" in low:
            ret = self._retry(low, ctx, ret)
        if refresh:
            refreshAfter(ctx, low, ret)
        return ret

    def _retry(self, low: Mapping[str, Any], ctx: Any, ret: dict[str, Any]) -> dict[str, Any]:
        settings = retrySettings(low["retry"])
        if ctx.test:
            note = (
                "The state would be retried every {interval} seconds "
                "(with a splay of up to {splay} seconds) a maximum of "
                "{attempts} times or until a result of {until} "
                "is returned".format(**settings)
            )
            ret["comment"] = "  ".join(["" if not ret["comment"] else str(ret["comment"]), note])
            return ret
        attempt = 1
        notes: list[str] = []
        first = ret
        total = ret["duration"]
        while settings["until"] != ret["result"] and settings["attempts"] > attempt:
            interval = settings["interval"]
            if settings["splay"]:
                interval += self.randint(0, settings["splay"])
            log.info(
                "State result does not match retry until value, state will be re-run in %s seconds",
                interval,
            )
            if self.cancelled():
                break
            self.sleep(interval)
            if self.cancelled():
                break
            notes.append(
                f'Attempt {attempt}: Returned a result of "{ret["result"]}", '
                f'with the following comment: "{ret["comment"]}"'
            )
            start = self.clock()
            ret = self._callOnce(low, ctx)
            duration = round((self.clock() - start) * 1000.0, 3)
            total += duration + interval * 1000
            attempt += 1
        if attempt > 1:
            ret["comment"] = "\n".join([*notes, "" if not ret["comment"] else str(ret["comment"])])
            ret["start_time"] = first["start_time"]
            ret["duration"] = total
        return ret

    def _callOnce(self, low: Mapping[str, Any], ctx: Any) -> dict[str, Any]:
        full = f"{low['state']}.{low['fun']}"
        name = low.get("name")
        if not self._has(full):
            return {
                "result": False,
                "name": name,
                "changes": {},
                "comment": missingState(full, low),
            }
        function = self.states[full]
        try:
            kwargs, missing, unused = stateArguments(function, low)
        except (TypeError, ValueError) as e:
            return {
                "result": False,
                "name": name,
                "changes": {},
                "comment": f"State '{full}' cannot be called: {e}",
            }
        if missing:
            comment = "".join(f"Missing parameter {m} for state {full}\n" for m in missing)
            return {"result": False, "name": name, "changes": {}, "comment": comment}
        try:
            if any(k in low for k in ("unless", "onlyif", "creates")) and not self._has(
                f"{low['state']}.mod_run_check"
            ):
                check = runChecks(ctx.salt, low)
                if check["result"] is not False:
                    check.update({"name": name, "changes": {}, "result": True})
                    return check
            ret = function(ctx, **kwargs)
            if not isinstance(ret, dict):
                return {
                    "result": False,
                    "name": name,
                    "changes": {},
                    "comment": (
                        f"State '{full}' returned a {type(ret).__name__}, not a dict: {ret!r}"
                    ),
                }
            if unused and low.get("fun") != "mod_watch":
                ret.setdefault("warnings", []).append(unusedWarning(full, unused))
            if isinstance(ret.get("comment"), list):
                ret["comment"] = "\n".join(str(c) for c in ret["comment"])
            if "check_cmd" in low and (
                not self._has(f"{low['state']}.mod_run_check_cmd")
                or "check_cmd" not in inspect.signature(function).parameters
            ):
                ret.update(checkCmd(ctx.salt, low))
        except Exception:
            log.debug("An exception occurred in state %s", full, exc_info=True)
            return exceptionReturn(name)
        ret.setdefault("name", name)
        ret.setdefault("changes", {})
        ret.setdefault("comment", "")
        ret.setdefault("result", False)
        return ret
