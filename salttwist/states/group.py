# -*- test-case-name: tests.test_states_group -*-
"""
Salt's C{group} states: C{group.present} and C{group.absent}, through the
C{group} execution module (the shadow tools).

Beyond Salt, both take C{root}: a directory holding the groups' C{etc/}
files (the tools' C{--root}).
"""

from __future__ import annotations

from typing import Any

from salttwist.modules import CommandExecutionError
from salttwist.states import StateContext, stateReturn


def _list(value: Any) -> list[str] | None:
    if value is None:
        return None
    if isinstance(value, str):
        return [v.strip() for v in value.split(",") if v.strip()]
    return [str(v) for v in value]


def _changes(
    ctx: StateContext,
    name: str,
    gid: Any,
    addusers: list[str] | None,
    delusers: list[str] | None,
    members: list[str] | None,
    root: str | None,
) -> dict[str, Any] | None:
    """
    @return: what must change (Salt's C{_changes}), L{None} when the group
        is absent.
    @raise ValueError: when C{gid} is not a number.
    """
    current = ctx.salt["group.info"](name, root=root)
    if not current:
        return None
    change: dict[str, Any] = {}
    if gid not in (None, ""):
        if current["gid"] != int(gid):
            change["gid"] = int(gid)
    if members is not None and not members:
        if current["members"]:
            change["delusers"] = set(current["members"])
    elif members:
        if set(current["members"]).symmetric_difference(members):
            change["members"] = members
    if addusers:
        toAdd = [u for u in addusers if u not in current["members"]]
        if toAdd:
            change["addusers"] = toAdd
    if delusers:
        toDel = [u for u in delusers if u in current["members"]]
        if toDel:
            change["delusers"] = toDel
    return change


def present(
    ctx: StateContext,
    name: str,
    gid: Any = None,
    system: bool = False,
    addusers: Any = None,
    delusers: Any = None,
    members: Any = None,
    non_unique: bool = False,
    local: bool = False,
    root: str | None = None,
    **kwargs: Any,
) -> dict[str, Any]:
    """
    Ensure a group is present (Salt's C{group.present}), with C{gid}, and
    either exactly C{members} or C{addusers} added and C{delusers} removed.
    """
    addusers, delusers, members = _list(addusers), _list(delusers), _list(members)
    if members is not None and (addusers is not None or delusers is not None):
        return stateReturn(
            name,
            None,
            'Error: Conflicting options "members" with "addusers" and/or'
            ' "delusers" can not be used together. ',
        )
    if addusers and delusers and not set(addusers).isdisjoint(delusers):
        return stateReturn(
            name, None, "Error. Same user(s) can not be added and deleted simultaneously"
        )
    try:
        changes = _changes(ctx, name, gid, addusers, delusers, members, root)
    except (TypeError, ValueError):
        return stateReturn(name, False, "Invalid gid")
    if changes:
        comment = "The following group attributes are set to be changed:\n"
        for key, value in changes.items():
            comment += f"{key}: {value}\n"
        if ctx.test:
            return stateReturn(name, None, comment)
        try:
            for key, value in changes.items():
                if key == "gid":
                    ctx.salt["group.chgid"](name, value, root=root, non_unique=non_unique)
                elif key == "addusers":
                    for user in value:
                        ctx.salt["group.adduser"](name, user, root=root)
                elif key == "delusers":
                    for user in sorted(value):
                        ctx.salt["group.deluser"](name, user, root=root)
                elif key == "members":
                    ctx.salt["group.members"](name, ",".join(members or []), root=root)
        except CommandExecutionError as e:
            return stateReturn(name, False, f"{comment}Failed: {e}")
        left = _changes(ctx, name, gid, addusers, delusers, members, root)
        if left:
            return stateReturn(
                name, False, comment + "Some changes could not be applied", {"Failed": left}
            )
        return stateReturn(name, True, comment, {"Final": "All changes applied successfully"})
    if changes is not None:
        return stateReturn(name, True, f"Group {name} is present and up to date")
    if ctx.test:
        return stateReturn(name, None, f"Group {name} set to be added")
    if gid not in (None, "") and not non_unique:
        for entry in ctx.salt["group.getent"](root=root):
            if str(entry["gid"]) == str(gid):
                return stateReturn(
                    name,
                    False,
                    f"Group {name} is not present but gid {gid} is already taken by"
                    f" group {entry['name']}",
                )
    try:
        added = ctx.salt["group.add"](
            name, gid=gid, system=system, non_unique=non_unique, root=root
        )
    except Exception as e:
        return stateReturn(name, False, f"Failed to create new group {name}: {e}")
    if not added:
        return stateReturn(name, False, f"Failed to create new group {name}")
    wantedMembers = addusers or members
    if wantedMembers:
        ctx.salt["group.members"](name, ",".join(wantedMembers), root=root)
    info = ctx.salt["group.info"](name, root=root)
    left = _changes(ctx, name, gid, addusers, delusers, members, root)
    if left:
        return stateReturn(
            name,
            False,
            f"Group {name} has been created but, some changes could not be applied",
            {"Failed": left},
        )
    return stateReturn(name, True, f"New group {name} created", info)


def absent(
    ctx: StateContext, name: str, local: bool = False, root: str | None = None, **kwargs: Any
) -> dict[str, Any]:
    """
    Ensure a group is absent (Salt's C{group.absent}).
    """
    if not ctx.salt["group.info"](name, root=root):
        return stateReturn(name, True, "Group not present")
    if ctx.test:
        return stateReturn(name, None, f"Group {name} is set for removal")
    if ctx.salt["group.delete"](name, root=root):
        return stateReturn(name, True, f"Removed group {name}", {name: ""})
    return stateReturn(name, False, f"Failed to remove group {name}")
