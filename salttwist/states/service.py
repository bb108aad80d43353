# -*- test-case-name: tests.test_states_service,tests.test_states_service_flows -*-
"""
Salt's C{service} states: C{service.running}, C{service.dead},
C{service.enabled}, C{service.disabled}, and C{mod_watch} (a watched
state changed: restart, reload or start the service), through the
C{service} execution module, with Salt's comments.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any

from salttwist.modules import CommandExecutionError, SaltInvocationError
from salttwist.states import StateContext, stateReturn

#: Keyword arguments the execution functions take besides the name.
_PASSED = ("no_block",)


def _isTrue(value: Any) -> bool | None:
    if value is None or isinstance(value, bool):
        return value
    return str(value).strip().lower() in ("1", "true", "yes", "on")


def _extra(kwargs: dict[str, Any]) -> dict[str, Any]:
    return {k: kwargs[k] for k in _PASSED if k in kwargs}


def _available(ctx: StateContext, name: str, ret: dict[str, Any]) -> bool:
    """
    Whether the service exists; if not, C{ret} says so (result False).
    """
    if ctx.salt["service.available"](name):
        return True
    ret["result"] = False
    ret["comment"] = f"The named service {name} is not available"
    return False


def _toggle(
    ctx: StateContext, name: str, started: bool | None, enable: bool, result: bool = True
) -> dict[str, Any]:
    """
    Salt's C{_enable} (C{enable=True}) and C{_disable}: bring the boot
    setting to C{enable}; C{started} is what the service now is (L{None}:
    as wanted) for the comment.
    """
    word = "enabled" if enable else "disabled"
    ret: dict[str, Any] = {}
    try:
        if not _available(ctx, name, ret):
            if not enable:
                ret["result"] = True
            return ret
    except CommandExecutionError as e:
        return {"result": False, "comment": str(e)}
    ret["result"] = result
    state = {True: "is running", None: "is in the desired state", False: "is dead"}[started]
    before = ctx.salt[f"service.{word}"](name)
    if before:
        if started is None:
            ret["changes"] = {}
        ret["comment"] = f"Service {name} is already {word}, and {state}"
        return ret
    if ctx.test:
        ret["result"] = None
        ret["comment"] = f"Service {name} set to be {word}"
        return ret
    error = ""
    try:
        done = ctx.salt["service.enable" if enable else "service.disable"](name)
    except CommandExecutionError as e:
        done, error = False, str(e)
    if done:
        ret["changes"] = {}
        if ctx.salt[f"service.{word}"](name) != before:
            ret["changes"][name] = True
        ret["comment"] = f"Service {name} has been {word}, and {state}"
        return ret
    ret["result"] = False
    what = "start" if enable else "not start"
    if started is True:
        tail = "but the service is running" if enable else "and is running"
        ret["comment"] = f"Failed when setting service {name} to {what} at boot, {tail}"
    elif started is None:
        ret["comment"] = (
            f"Failed when setting service {name} to {what} at boot,"
            " but the service was already running"
        )
    else:
        ret["comment"] = (
            f"Failed when setting service {name} to {what} at boot, and the service is dead"
        )
    if error:
        ret["comment"] += f". Additional information follows:\n\n{error}"
    return ret


def _enabledUsed(name: str) -> dict[str, Any]:
    return stateReturn(
        name,
        False,
        f'Service {name} uses non-existent option "enabled".  '
        'Perhaps "enable" option was intended?',
    )


@dataclass(frozen=True)
class _Goal:
    """
    Where C{service.running} or C{service.dead} brings a service, and
    Salt's words for each step of the way there.

    @ivar state: the state function's name, which is what the service is
        once there (C{running}, C{dead}).
    @ivar running: whether the service runs once there.
    @ivar action: the execution function that brings it there.
    @ivar absentWord: what would have been done to a service created in
        this state run (test mode, the service missing).
    @ivar absentResult: the result when the service is missing.
    @ivar planned: the test mode comment, after C{Service <name>}.
    @ivar failed: the comment of a failure, after C{Service <name>}.
    @ivar doneComment: the comment once there, with C{{name}}.
    @ivar sayDelay: whether the comment says how long C{init_delay} waited.
    """

    state: str
    running: bool
    action: str
    absentWord: str
    absentResult: bool
    planned: str
    failed: str
    doneComment: str
    sayDelay: bool


_RUNNING = _Goal(
    state="running",
    running=True,
    action="service.start",
    absentWord="started",
    absentResult=False,
    planned="is set to start",
    failed="failed to start",
    doneComment="Started service {name}",
    sayDelay=True,
)
_DEAD = _Goal(
    state="dead",
    running=False,
    action="service.stop",
    absentWord="stopped",
    absentResult=True,
    planned="is set to be killed",
    failed="failed to die",
    doneComment="Service {name} was killed",
    sayDelay=False,
)


def _reach(
    ctx: StateContext,
    goal: _Goal,
    name: str,
    enable: Any,
    sig: str | None,
    init_delay: float | None,
    kwargs: dict[str, Any],
) -> dict[str, Any]:
    """
    Salt's C{service.running} or C{service.dead}, as C{goal} says: bring
    the service there (unless it is, or in test mode), wait C{init_delay},
    look again, and bring the boot setting to C{enable} if given.
    """
    ctx.context["service.state"] = goal.state
    if "enabled" in kwargs:
        return _enabledUsed(name)
    enable = _isTrue(enable)
    ret = stateReturn(name)
    try:
        if not _available(ctx, name, ret):
            if ctx.test:
                ret["result"] = None
                ret["comment"] = (
                    f"Service {name} not present; if created in this state run, "
                    f"it would have been {goal.absentWord}"
                )
            else:
                ret["result"] = goal.absentResult
            return ret
    except CommandExecutionError as e:
        return stateReturn(name, False, str(e))
    before = ctx.salt["service.status"](name, sig)
    beforeEnabled = ctx.salt["service.enabled"](name)
    if bool(before) == goal.running:
        ret["comment"] = f"The service {name} is already {goal.state}"
        if enable is True and not beforeEnabled:
            ret.update(_toggle(ctx, name, None, True))
        elif enable is False and beforeEnabled:
            ret.update(_toggle(ctx, name, None, False))
        return ret
    if ctx.test:
        return stateReturn(name, None, f"Service {name} {goal.planned}")
    try:
        acted = ctx.salt[goal.action](name, **_extra(kwargs))
    except (CommandExecutionError, SaltInvocationError) as e:
        return stateReturn(name, False, str(e))
    if not acted:
        ret["result"] = False
        ret["comment"] = f"Service {name} {goal.failed}"
        if enable is not None:
            ret.update(_toggle(ctx, name, not goal.running, enable, result=False))
        return ret
    if init_delay:
        time.sleep(float(init_delay))
    after = ctx.salt["service.status"](name, sig)
    afterEnabled = ctx.salt["service.enabled"](name)
    if (beforeEnabled != afterEnabled or before != after) and not ret["changes"]:
        ret["changes"][name] = after
    # Whether it got there: for running the status itself (which Salt
    # passes on as the toggle's result), for dead its negation.
    there = after if goal.running else not after
    if there:
        ret["comment"] = goal.doneComment.format(name=name)
    else:
        ret["result"] = False
        ret["comment"] = f"Service {name} {goal.failed}"
    if enable is not None:
        toggled = _toggle(ctx, name, after, enable, result=there)
        if toggled.get("changes") == {} and ret["changes"]:
            toggled.pop("changes")
        ret.update(toggled)
    if init_delay and goal.sayDelay:
        ret["comment"] = f"{ret['comment']}\nDelayed return for {init_delay} seconds"
    return ret


def running(
    ctx: StateContext,
    name: str,
    enable: Any = None,
    sig: str | None = None,
    init_delay: float | None = None,
    **kwargs: Any,
) -> dict[str, Any]:
    """
    Ensure a service runs (Salt's C{service.running}); C{enable} C{True}
    or C{False} also sets whether it starts at boot; C{init_delay} waits
    that many seconds after starting it. C{reload: True} makes a watch
    reload it rather than restart it (see L{mod_watch}).
    """
    return _reach(ctx, _RUNNING, name, enable, sig, init_delay, kwargs)


def dead(
    ctx: StateContext,
    name: str,
    enable: Any = None,
    sig: str | None = None,
    init_delay: float | None = None,
    **kwargs: Any,
) -> dict[str, Any]:
    """
    Ensure a service does not run (Salt's C{service.dead}); C{enable}
    C{True} or C{False} also sets whether it starts at boot.
    """
    return _reach(ctx, _DEAD, name, enable, sig, init_delay, kwargs)


def enabled(ctx: StateContext, name: str, **kwargs: Any) -> dict[str, Any]:
    """
    Ensure a service starts at boot, whether or not it runs (Salt's
    C{service.enabled}).
    """
    ctx.context["service.state"] = "enabled"
    ret = stateReturn(name)
    ret.update(_toggle(ctx, name, None, True))
    if ctx.test and ret["comment"] == f"The named service {name} is not available":
        ret["result"] = None
        ret["comment"] = (
            f"Service {name} not present; if created in this state run, it would have been enabled"
        )
    return ret


def disabled(ctx: StateContext, name: str, **kwargs: Any) -> dict[str, Any]:
    """
    Ensure a service does not start at boot, whether or not it runs (Salt's
    C{service.disabled}).
    """
    ctx.context["service.state"] = "disabled"
    ret = stateReturn(name)
    ret.update(_toggle(ctx, name, None, False))
    return ret


def mod_watch(
    ctx: StateContext,
    name: str,
    sfun: str | None = None,
    sig: str | None = None,
    reload: Any = False,
    full_restart: Any = False,
    init_delay: float | None = None,
    force: Any = False,
    **kwargs: Any,
) -> dict[str, Any]:
    """
    What a C{watch} runs when a watched state changed (Salt's): for
    C{service.running}, restart the service (reload it with C{reload:
    True}, force-reload with C{force: True} too, stop and start it with
    C{full_restart: True}) or start it if it is not running; for
    C{service.dead}, stop it if it runs.
    """
    ret = stateReturn(name)
    if sfun == "dead":
        verb, done = "stop", "stopped"
        if not ctx.salt["service.status"](name, sig):
            return stateReturn(name, True, f"Service is already {done}")
        function = "service.stop"
    elif sfun == "running":
        if ctx.salt["service.status"](name, sig):
            if _isTrue(reload):
                if _isTrue(force):
                    function, verb = "service.force_reload", "forcefully reload"
                else:
                    function, verb = "service.reload", "reload"
            elif _isTrue(full_restart):
                function, verb = "service.full_restart", "fully restart"
            else:
                function, verb = "service.restart", "restart"
        else:
            function, verb = "service.start", "start"
        done = verb + "ed"
    else:
        return stateReturn(name, False, f"Unable to trigger watch for service.{sfun}")
    if ctx.test:
        return stateReturn(name, None, f"Service is set to be {done}")
    try:
        if verb == "start":
            ctx.salt["service.stop"](name)
        result = bool(ctx.salt[function](name, **_extra(kwargs)))
    except (CommandExecutionError, SaltInvocationError) as e:
        return stateReturn(name, False, str(e))
    if init_delay:
        time.sleep(float(init_delay))
    ret["changes"] = {name: result}
    ret["result"] = result
    ret["comment"] = f"Service {done}" if result else f"Failed to {verb} the service"
    return ret
