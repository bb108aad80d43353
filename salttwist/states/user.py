# -*- test-case-name: tests.test_states_user -*-
"""
Salt's C{user} states: C{user.present} and C{user.absent}, through the
C{user} execution module (the shadow tools).

Beyond Salt, both take C{root}: a directory holding the users' C{etc/}
files (the tools' C{--root}), so a system image can be managed too.
"""

from __future__ import annotations

import os
import warnings
from typing import Any

from salttwist.modules import CommandExecutionError, SaltInvocationError
from salttwist.states import StateContext, stateReturn

_REDACTED = "XXX-REDACTED-XXX"


def _gidOf(ctx: StateContext, group: Any, root: str | None) -> int | None:
    """
    @return: the gid of a group given by name or id, L{None} when unknown.
    """
    for entry in ctx.salt["group.getent"](root=root):
        if entry["name"] == str(group) or str(entry["gid"]) == str(group):
            return entry["gid"]
    return None


def _groupOf(ctx: StateContext, gid: Any, root: str | None) -> str | None:
    for entry in ctx.salt["group.getent"](root=root):
        if str(entry["gid"]) == str(gid) or entry["name"] == str(gid):
            return entry["name"]
    return None


def _changes(
    ctx: StateContext,
    name: str,
    *,
    uid: Any,
    gid: Any,
    groups: list[str] | None,
    optionalGroups: list[str] | None,
    removeGroups: bool,
    home: str | None,
    createhome: bool,
    password: str | None,
    enforcePassword: bool,
    shell: str | None,
    gecos: dict[str, Any],
    shadowFields: dict[str, Any],
    root: str | None,
    allowUidChange: bool = True,
    allowGidChange: bool = True,
) -> dict[str, Any] | None:
    """
    @return: what must change for the user to be as wanted (Salt's
        C{_changes}), or L{None} when there is no such user.
    """
    current = ctx.salt["user.info"](name, root=root)
    if not current:
        return None
    change: dict[str, Any] = {}
    currentGroups = list(current["groups"])
    wanted = sorted(set((groups or []) + (optionalGroups or [])))
    if not removeGroups or (groups is None and not optionalGroups):
        wanted = sorted(set(wanted + currentGroups))
    if uid not in (None, "") and current["uid"] != int(uid):
        change["uid"] = int(uid)
    if gid not in (None, "") and current["gid"] != _gidOf(ctx, gid, root):
        change["gid"] = gid
    primary = _groupOf(ctx, gid if gid not in (None, "") else current["gid"], root)
    oldPrimary = _groupOf(ctx, current["gid"], root)
    for group in {primary, oldPrimary}:
        if group in currentGroups:
            currentGroups.remove(group)
        if group == primary and group in wanted:
            wanted.remove(group)
    if name in currentGroups and name not in wanted:
        currentGroups.remove(name)
    if set(currentGroups) != set(wanted) and (
        removeGroups or not set(wanted) <= set(currentGroups)
    ):
        change["groups"] = wanted
    if home and current["home"] != home:
        change["home"] = home
    if createhome:
        newHome = home or current["home"]
        if newHome and not os.path.isdir(_under(root, newHome)):
            change["homeDoesNotExist"] = newHome
    if shell and current["shell"] != shell:
        change["shell"] = shell
    change.update(_shadowChanges(ctx, name, password, enforcePassword, shadowFields, root))
    for key, value in gecos.items():
        if value is not None and current[key] != str(value):
            change[key] = str(value)
    errors = []
    if not allowUidChange and "uid" in change:
        errors.append(
            f"Changing uid ({current['uid']} -> {uid}) not permitted, set allow_uid_change to "
            "True to force this change. Note that this will not change file ownership."
        )
    if not allowGidChange and "gid" in change:
        errors.append(
            f"Changing gid ({current['gid']} -> {gid}) not permitted, set allow_gid_change to "
            "True to force this change. Note that this will not change file ownership."
        )
    if errors:
        raise _ChangeRefused(errors)
    return change


class _ChangeRefused(Exception):
    """
    A change C{user.present} may not make (Salt's C{allow_uid_change}).
    """

    def __init__(self, errors: list[str]) -> None:
        super().__init__(
            "Encountered error checking for needed changes. Additional info follows:\n\n"
            + "\n".join(f"- {e}" for e in errors)
        )


def _shadow(ctx: StateContext, function: str) -> Any:
    """
    @return: the C{shadow} execution function C{function} (from the
        loader, or the module itself where the loader has none).
    """
    key = f"shadow.{function}"
    if key in ctx.salt:
        return ctx.salt[key]
    from salttwist.modules import shadow

    return getattr(shadow, function)


def _shadowChanges(
    ctx: StateContext,
    name: str,
    password: str | None,
    enforcePassword: bool,
    fields: dict[str, Any],
    root: str | None,
) -> dict[str, Any]:
    """
    @return: the shadow file's changes (Salt's): C{passwd},
        C{empty_password}, C{date}, C{mindays}, ..., C{password_lock}.
    """
    current = _shadow(ctx, "info")(name, root=root)
    change: dict[str, Any] = {}
    emptyPassword = fields["empty_password"]
    if password and not emptyPassword:
        default = _shadow(ctx, "default_hash")()
        if (current["passwd"] == default or enforcePassword) and current["passwd"] != password:
            change["passwd"] = password
    if emptyPassword and current["passwd"] != "":
        change["empty_password"] = True
    if fields["date"] is not None and str(current["lstchg"]) != str(fields["date"]):
        change["date"] = fields["date"]
    for key, shadowKey in _AGEING.items():
        value = fields[key]
        if value is not None and str(current[shadowKey]) != str(value):
            change[key] = value
    if fields["expire"] and str(current["expire"]) != str(fields["expire"]):
        change["expire"] = fields["expire"]
    lock = fields["password_lock"]
    locked = str(current["passwd"]).startswith("!")
    if (lock and not locked) or (lock is False and locked):
        change["password_lock"] = lock
    return change


#: The ageing arguments of C{user.present}, and their C{shadow.info} keys.
_AGEING = {"mindays": "min", "maxdays": "max", "inactdays": "inact", "warndays": "warn"}


def _under(root: str | None, path: str) -> str:
    if not root or root == "/":
        return path
    return os.path.join(root, path.lstrip("/"))


def present(
    ctx: StateContext,
    name: str,
    uid: Any = None,
    gid: Any = None,
    usergroup: bool | None = None,
    groups: Any = None,
    optional_groups: Any = None,
    remove_groups: bool = True,
    home: str | None = None,
    createhome: bool = True,
    persist_home: bool = False,
    password: str | None = None,
    hash_password: bool = False,
    enforce_password: bool = True,
    empty_password: bool = False,
    shell: str | None = None,
    unique: bool = True,
    system: bool = False,
    fullname: str | None = None,
    roomnumber: str | None = None,
    workphone: str | None = None,
    homephone: str | None = None,
    other: str | None = None,
    date: Any = None,
    mindays: Any = None,
    maxdays: Any = None,
    inactdays: Any = None,
    warndays: Any = None,
    expire: Any = None,
    nologinit: bool = False,
    allow_uid_change: bool = False,
    allow_gid_change: bool = False,
    password_lock: bool | None = None,
    root: str | None = None,
    **kwargs: Any,
) -> dict[str, Any]:
    """
    Ensure a user is present with these properties (Salt's C{user.present}):
    uid, primary group C{gid} (a name or id), C{groups} (which must exist;
    others are removed unless C{remove_groups=False}), C{optional_groups}
    (those that exist), C{home} (created with C{createhome}), C{shell},
    C{password} (a hash as in C{/etc/shadow}; with C{hash_password: True}
    a clear text hashed here), C{empty_password}, C{password_lock}, the
    ageing fields (C{date}, C{mindays}, C{maxdays}, C{inactdays},
    C{warndays}, C{expire}), C{fullname} and the other GECOS fields,
    C{system}. An existing user's uid or gid changes only
    with C{allow_uid_change} or C{allow_gid_change}, as in Salt.
    """
    if hash_password and password:
        try:
            password = _hashPassword(ctx, name, str(password), root)
        except CommandExecutionError as e:
            return stateReturn(name, False, str(e))
    groups = _list(groups)
    optionalGroups = _list(optional_groups)
    for field in (fullname, roomnumber, workphone):
        if isinstance(field, str) and "," in field:
            return stateReturn(name, False, f"Unsupported char ',' in {field}")
    missing: list[str] = []
    if groups:
        missing = [g for g in groups if not ctx.salt["group.info"](g, root=root)]
        if missing:
            if not ctx.test:
                return stateReturn(
                    name,
                    False,
                    f"The following group(s) are not present: {','.join(missing)}",
                )
            groups = [g for g in groups if g not in missing]
    presentOptional = (
        [g for g in optionalGroups if ctx.salt["group.info"](g, root=root)]
        if optionalGroups
        else None
    )
    changesGid = gid
    if usergroup and _gidOf(ctx, name, root) is not None:
        changesGid = name
    args = {
        "uid": uid,
        "gid": changesGid,
        "groups": groups,
        "optionalGroups": presentOptional,
        "removeGroups": remove_groups,
        "home": home,
        "createhome": createhome,
        "password": password,
        "enforcePassword": enforce_password,
        "shell": shell,
        "gecos": {
            "fullname": fullname,
            "roomnumber": roomnumber,
            "workphone": workphone,
            "homephone": homephone,
            "other": other,
        },
        "shadowFields": {
            "empty_password": empty_password,
            "date": date,
            "mindays": mindays,
            "maxdays": maxdays,
            "inactdays": inactdays,
            "warndays": warndays,
            "expire": expire,
            "password_lock": password_lock,
        },
        "root": root,
    }
    try:
        changes = _changes(
            ctx, name, allowUidChange=allow_uid_change, allowGidChange=allow_gid_change, **args
        )
    except _ChangeRefused as e:
        return stateReturn(name, False, str(e))
    if changes is None:
        return _create(ctx, name, groups, presentOptional, missing, locals())
    if not changes:
        return stateReturn(name, True, f"User {name} is present and up to date")
    if ctx.test:
        comment = "The following user attributes are set to be changed:\n"
        for key, value in changes.items():
            if key == "passwd":
                value = _REDACTED
            comment += f"{key}: {value}\n"
        if missing:
            comment += f"groups (pending creation): {','.join(missing)}\n"
        return stateReturn(name, None, comment)
    pre = ctx.salt["user.info"](name, root=root)
    preShadow = _shadow(ctx, "info")(name, root=root)
    try:
        _apply(ctx, name, changes, remove_groups, persist_home, root)
    except (CommandExecutionError, SaltInvocationError, OSError) as e:
        return stateReturn(name, False, f"Failed to update user {name}: {e}")
    post = ctx.salt["user.info"](name, root=root)
    result: dict[str, Any] = {}
    for key, value in post.items():
        if pre.get(key) != value:
            result[key] = value
    postShadow = _shadow(ctx, "info")(name, root=root)
    for key, value in postShadow.items():
        if preShadow.get(key) != value:
            result[key] = _REDACTED if key == "passwd" else value
    comment = f"Updated user {name}" if result else f"User {name} is present and up to date"
    left = _changes(ctx, name, **args)
    if left:
        shown = {k: (_REDACTED if k == "passwd" else v) for k, v in left.items()}
        return stateReturn(name, False, f"These values could not be changed: {shown}", result)
    return stateReturn(name, True, comment, result)


def _apply(
    ctx: StateContext,
    name: str,
    changes: dict[str, Any],
    removeGroups: bool,
    persistHome: bool,
    root: str | None,
) -> None:
    """
    Make the L{_changes} of an existing user, as Salt's C{user.present}
    does (the home directory made last, owned by the user as it is then).
    """
    if "passwd" in changes:
        _shadow(ctx, "set_password")(name, changes.pop("passwd"), root=root)
    if changes.pop("empty_password", False):
        _shadow(ctx, "del_password")(name, root=root)
    if "password_lock" in changes:
        lock = changes.pop("password_lock")
        _shadow(ctx, "lock_password" if lock else "unlock_password")(name, root=root)
    if "date" in changes:
        _shadow(ctx, "set_date")(name, changes.pop("date"), root=root)
    if "home" in changes:
        ctx.salt["user.chhome"](name, changes.pop("home"), persist=persistHome, root=root)
    for key in (*_AGEING, "expire"):
        if key in changes:
            _shadow(ctx, f"set_{key}")(name, changes.pop(key), root=root)
    for key in ("uid", "gid", "shell", "fullname", "roomnumber", "workphone", "homephone", "other"):
        if key in changes:
            ctx.salt[f"user.ch{key}"](name, changes.pop(key), root=root)
    if "groups" in changes:
        ctx.salt["user.chgroups"](name, changes.pop("groups"), not removeGroups, root=root)
    if "homeDoesNotExist" in changes:
        newHome = _under(root, changes.pop("homeDoesNotExist"))
        if not os.path.isdir(newHome):
            current = ctx.salt["user.info"](name, root=root)
            os.makedirs(newHome, mode=0o755)
            os.chown(newHome, current["uid"], current["gid"])


def _hashPassword(ctx: StateContext, name: str, password: str, root: str | None) -> str:
    """
    Salt's C{hash_password}: the user's present hash when C{password}
    matches it, else a new SHA-512 crypt hash of it.
    """
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", DeprecationWarning)
            import crypt
    except ImportError as e:
        raise CommandExecutionError(
            "hash_password needs Python's crypt module, which this Python lacks:"
            " give password as a hash (such as $6$...)"
        ) from e
    current = str(_shadow(ctx, "info")(name, root=root)["passwd"])
    if current.startswith("$") and crypt.crypt(password, current) == current:
        return current
    return crypt.crypt(password, crypt.mksalt(crypt.METHOD_SHA512))


def _list(value: Any) -> list[str] | None:
    if value is None:
        return None
    if isinstance(value, str):
        return [v.strip() for v in value.split(",") if v.strip()]
    return [str(v) for v in value]


def _create(
    ctx: StateContext,
    name: str,
    groups: list[str] | None,
    presentOptional: list[str] | None,
    missing: list[str],
    args: dict[str, Any],
) -> dict[str, Any]:
    """
    Add the missing user C{name} (C{args}: L{present}'s arguments).
    """
    if ctx.test:
        comment = f"User {name} set to be added"
        if missing:
            comment += f" (pending groups: {','.join(missing)})"
        return stateReturn(name, None, comment)
    allGroups = (groups or []) + (presentOptional or [])
    root = args["root"]
    try:
        added = ctx.salt["user.add"](
            name,
            uid=args["uid"],
            gid=args["gid"],
            groups=allGroups or None,
            home=args["home"],
            shell=args["shell"],
            unique=args["unique"],
            system=args["system"],
            fullname=args["fullname"] or "",
            roomnumber=args["roomnumber"] or "",
            workphone=args["workphone"] or "",
            homephone=args["homephone"] or "",
            other=args["other"] or "",
            createhome=args["createhome"],
            nologinit=args["nologinit"],
            root=root,
            usergroup=args["usergroup"],
        )
    except Exception as e:
        return stateReturn(name, False, f"Failed to create new user {name}: {e}")
    if added is not True:
        return stateReturn(name, False, f"Failed to create new user {name}")
    changes = ctx.salt["user.info"](name, root=root)
    if not args["createhome"]:
        changes["home"] = ""
    password = args["password"]
    try:
        if password and not args["empty_password"]:
            _shadow(ctx, "set_password")(name, password, root=root)
            changes["password"] = _REDACTED
            if _shadow(ctx, "info")(name, root=root)["passwd"] != password:
                return stateReturn(
                    name,
                    False,
                    f"User {name} created but failed to set password to {_REDACTED}",
                    changes,
                )
        if args["empty_password"] and not password:
            _shadow(ctx, "del_password")(name, root=root)
            changes["password"] = ""
        for key in ("date", *_AGEING, "expire"):
            if args[key] is not None:
                _shadow(ctx, f"set_{key}")(name, args[key], root=root)
        if args["password_lock"] is not None:
            lock = "lock_password" if args["password_lock"] else "unlock_password"
            _shadow(ctx, lock)(name, root=root)
    except (CommandExecutionError, SaltInvocationError) as e:
        return stateReturn(name, False, f"User {name} created but: {e}", changes)
    return stateReturn(name, True, f"New user {name} created", changes)


def absent(
    ctx: StateContext,
    name: str,
    purge: bool = False,
    force: bool = False,
    root: str | None = None,
    **kwargs: Any,
) -> dict[str, Any]:
    """
    Ensure a user is absent (Salt's C{user.absent}); C{purge=True} removes
    its home directory and mail spool, C{force=True} even while logged in.
    """
    if not ctx.salt["user.info"](name, root=root):
        return stateReturn(name, True, f"User {name} is not present")
    if ctx.test:
        return stateReturn(name, None, f"User {name} set for removal")
    beforeGroups = set(ctx.salt["user.list_groups"](name, root=root))
    if ctx.salt["user.delete"](name, remove=purge, force=force, root=root):
        changes: dict[str, Any] = {name: "removed"}
        groupsAfter = {g["name"] for g in ctx.salt["group.getent"](root=root)}
        for group in sorted(beforeGroups - groupsAfter):
            changes[f"{group} group"] = "removed"
        return stateReturn(name, True, f"Removed user {name}", changes)
    return stateReturn(name, False, f"Failed to remove user {name}")
