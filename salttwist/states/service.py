# -*- test-case-name: tests.test_states_service -*-
"""
Salt's C{service} states: C{service.running}, C{service.dead},
C{service.enabled}, C{service.disabled}, and C{mod_watch} (a watched
state changed: restart, reload or start the service), through the
C{service} execution module, with Salt's comments.
"""

from __future__ import annotations

import time
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
    ctx.context["service.state"] = "running"
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
                    "it would have been started"
                )
            return ret
    except CommandExecutionError as e:
        return stateReturn(name, False, str(e))
    before = ctx.salt["service.status"](name, sig)
    beforeEnabled = ctx.salt["service.enabled"](name)
    if before:
        ret["comment"] = f"The service {name} is already running"
        if enable is True and not beforeEnabled:
            ret.update(_toggle(ctx, name, None, True))
        elif enable is False and beforeEnabled:
            ret.update(_toggle(ctx, name, None, False))
        return ret
    if ctx.test:
        return stateReturn(name, None, f"Service {name} is set to start")
    try:
        started = ctx.salt["service.start"](name, **_extra(kwargs))
    except (CommandExecutionError, SaltInvocationError) as e:
        return stateReturn(name, False, str(e))
    if not started:
        ret["result"] = False
        ret["comment"] = f"Service {name} failed to start"
        if enable is not None:
            ret.update(_toggle(ctx, name, False, enable, result=False))
        return ret
    if init_delay:
        time.sleep(float(init_delay))
    after = ctx.salt["service.status"](name, sig)
    afterEnabled = ctx.salt["service.enabled"](name)
    if (beforeEnabled != afterEnabled or before != after) and not ret["changes"]:
        ret["changes"][name] = after
    if after:
        ret["comment"] = f"Started service {name}"
    else:
        ret["result"] = False
        ret["comment"] = f"Service {name} failed to start"
    if enable is not None:
        toggled = _toggle(ctx, name, after, enable, result=after)
        if toggled.get("changes") == {} and ret["changes"]:
            toggled.pop("changes")
        ret.update(toggled)
    if init_delay:
        ret["comment"] = f"{ret['comment']}\nDelayed return for {init_delay} seconds"
    return ret


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
    ctx.context["service.state"] = "dead"
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
                    "it would have been stopped"
                )
            else:
                ret["result"] = True
            return ret
    except CommandExecutionError as e:
        return stateReturn(name, False, str(e))
    before = ctx.salt["service.status"](name, sig)
    beforeEnabled = ctx.salt["service.enabled"](name)
    if not before:
        ret["comment"] = f"The service {name} is already dead"
        if enable is True and not beforeEnabled:
            ret.update(_toggle(ctx, name, None, True))
        elif enable is False and beforeEnabled:
            ret.update(_toggle(ctx, name, None, False))
        return ret
    if ctx.test:
        return stateReturn(name, None, f"Service {name} is set to be killed")
    try:
        stopped = ctx.salt["service.stop"](name, **_extra(kwargs))
    except (CommandExecutionError, SaltInvocationError) as e:
        return stateReturn(name, False, str(e))
    if not stopped:
        ret["result"] = False
        ret["comment"] = f"Service {name} failed to die"
        if enable is not None:
            ret.update(_toggle(ctx, name, True, enable, result=False))
        return ret
    if init_delay:
        time.sleep(float(init_delay))
    after = ctx.salt["service.status"](name, sig)
    afterEnabled = ctx.salt["service.enabled"](name)
    if (beforeEnabled != afterEnabled or before != after) and not ret["changes"]:
        ret["changes"][name] = after
    if after:
        ret["result"] = False
        ret["comment"] = f"Service {name} failed to die"
    else:
        ret["comment"] = f"Service {name} was killed"
    if enable is not None:
        toggled = _toggle(ctx, name, after, enable, result=not after)
        if toggled.get("changes") == {} and ret["changes"]:
            toggled.pop("changes")
        ret.update(toggled)
    return ret


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
