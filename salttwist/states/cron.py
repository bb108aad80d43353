# -*- test-case-name: tests.test_states_cron -*-
"""
Salt's C{cron} states: C{cron.present}, C{cron.absent},
C{cron.env_present} and C{cron.env_absent}, through the C{cron} execution
module, with Salt's comments. A job is known by its identifier (the
state's name unless C{identifier} is given), kept in the crontab as a
C{SALT_CRON_IDENTIFIER} comment.
"""

from __future__ import annotations

from typing import Any

from salttwist.modules.cron import _matched, _needsChange
from salttwist.states import StateContext, stateReturn


def _check(
    ctx: StateContext,
    user: str,
    cmd: str,
    identifier: Any = None,
    special: str | None = None,
    **wanted: Any,
) -> str:
    """
    Salt's C{_check_cron}: C{"absent"}, C{"present"} or C{"update"}.
    """
    wanted = {
        k: (str(v).lower() if k in _TIMES and v is not None else v) for k, v in wanted.items()
    }
    if wanted.get("commented") is not None:
        wanted["commented"] = wanted["commented"] is True
    identifier = None if identifier is None else str(identifier)
    tab = ctx.salt["cron.list_tab"](user)
    jobs = tab["crons"] if special is None else tab["special"]
    for job in jobs:
        if not _matched(job, cmd, identifier):
            continue
        pairs = [(job.get(k), v) for k, v in wanted.items()]
        pairs += [(job["identifier"], identifier), (job["cmd"], cmd)]
        if special is not None:
            pairs.append((job["spec"], special))
        return "update" if any(_needsChange(old, new) for old, new in pairs) else "present"
    return "absent"


_TIMES = ("minute", "hour", "daymonth", "month", "dayweek")


def present(
    ctx: StateContext,
    name: str,
    user: str = "root",
    minute: Any = "*",
    hour: Any = "*",
    daymonth: Any = "*",
    month: Any = "*",
    dayweek: Any = "*",
    comment: str | None = None,
    commented: bool = False,
    identifier: Any = False,
    special: str | None = None,
    **kwargs: Any,
) -> dict[str, Any]:
    """
    Ensure a job is in a user's crontab (Salt's C{cron.present}): the
    command C{name} at the given times (or at C{special}, such as
    C{@reboot}), with C{comment}, switched off with C{commented: True}.
    """
    name = name.strip()
    if identifier is False:
        identifier = name
    if ctx.test:
        times = (
            {}
            if special is not None
            else {
                "minute": minute,
                "hour": hour,
                "daymonth": daymonth,
                "month": month,
                "dayweek": dayweek,
            }
        )
        status = _check(
            ctx, user, name, identifier, special, comment=comment, commented=commented, **times
        )
        if status == "present":
            return stateReturn(name, True, f"Cron {name} already present")
        word = "added" if status == "absent" else "updated"
        return stateReturn(name, None, f"Cron {name} is set to be {word}")
    if special is None:
        data = ctx.salt["cron.set_job"](
            user=user,
            minute=minute,
            hour=hour,
            daymonth=daymonth,
            month=month,
            dayweek=dayweek,
            cmd=name,
            comment=comment,
            commented=commented,
            identifier=identifier,
        )
    else:
        data = ctx.salt["cron.set_special"](
            user=user,
            special=special,
            cmd=name,
            comment=comment,
            commented=commented,
            identifier=identifier,
        )
    if data == "present":
        return stateReturn(name, True, f"Cron {name} already present")
    if data == "new":
        return stateReturn(name, True, f"Cron {name} added to {user}'s crontab", {user: name})
    if data == "updated":
        return stateReturn(name, True, f"Cron {name} updated", {user: name})
    return stateReturn(
        name, False, f"Cron {name} for user {user} failed to commit with error \n{data}"
    )


def absent(
    ctx: StateContext,
    name: str,
    user: str = "root",
    identifier: Any = False,
    special: str | None = None,
    **kwargs: Any,
) -> dict[str, Any]:
    """
    Ensure a job is not in a user's crontab (Salt's C{cron.absent}).
    """
    name = name.strip()
    if identifier is False:
        identifier = name
    if ctx.test:
        status = _check(ctx, user, name, identifier, special)
        if status == "absent":
            return stateReturn(name, True, f"Cron {name} is absent")
        return stateReturn(name, None, f"Cron {name} is set to be removed")
    if special is None:
        data = ctx.salt["cron.rm_job"](user, name, identifier=identifier)
    else:
        data = ctx.salt["cron.rm_special"](user, name, special=special, identifier=identifier)
    if data == "absent":
        return stateReturn(name, True, f"Cron {name} already absent")
    if data == "removed":
        return stateReturn(name, True, f"Cron {name} removed from {user}'s crontab", {user: name})
    return stateReturn(
        name, False, f"Cron {name} for user {user} failed to commit with error {data}"
    )


def _envStatus(ctx: StateContext, user: str, name: str, value: Any = None) -> str:
    value = "" if value is None else str(value)
    for env in ctx.salt["cron.list_tab"](user)["env"]:
        if env["name"] == name:
            same = env["value"] == value or (value == "" and env["value"] == '""')
            return "present" if same else "update"
    return "absent"


def env_present(
    ctx: StateContext, name: str, value: Any = None, user: str = "root", **kwargs: Any
) -> dict[str, Any]:
    """
    Ensure an environment variable is set in a user's crontab (Salt's
    C{cron.env_present}).
    """
    if ctx.test:
        status = _envStatus(ctx, user, name, value)
        if status == "present":
            return stateReturn(name, True, f"Cron env {name} already present")
        word = "added" if status == "absent" else "updated"
        return stateReturn(name, None, f"Cron env {name} is set to be {word}")
    data = ctx.salt["cron.set_env"](user, name, value=value)
    if data == "present":
        return stateReturn(name, True, f"Cron env {name} already present")
    if data == "new":
        return stateReturn(name, True, f"Cron env {name} added to {user}'s crontab", {user: name})
    if data == "updated":
        return stateReturn(name, True, f"Cron env {name} updated", {user: name})
    return stateReturn(
        name, False, f"Cron env {name} for user {user} failed to commit with error \n{data}"
    )


def env_absent(ctx: StateContext, name: str, user: str = "root", **kwargs: Any) -> dict[str, Any]:
    """
    Ensure an environment variable is not in a user's crontab (Salt's
    C{cron.env_absent}).
    """
    name = name.strip()
    if ctx.test:
        if _envStatus(ctx, user, name) == "absent":
            return stateReturn(name, True, f"Cron env {name} is absent")
        return stateReturn(name, None, f"Cron env {name} is set to be removed")
    data = ctx.salt["cron.rm_env"](user, name)
    if data == "absent":
        return stateReturn(name, True, f"Cron env {name} already absent")
    if data == "removed":
        return stateReturn(
            name, True, f"Cron env {name} removed from {user}'s crontab", {user: name}
        )
    return stateReturn(
        name, False, f"Cron env {name} for user {user} failed to commit with error {data}"
    )
