# -*- test-case-name: tests.test_modules_group -*-
"""
Salt's C{group} module for Linux (Salt's C{groupadd}): local groups through
the shadow tools (C{groupadd}, C{groupmod}, C{groupdel}, C{gpasswd}).

Every function takes Salt's C{root} argument: a directory the tools chroot
into, whose C{etc/group} and C{etc/gshadow} are then the ones read and
changed. The functions block (they run in a job's thread).
"""

from __future__ import annotations

from typing import Any

from salttwist.modules import CommandExecutionError
from salttwist.modules.user import _groupEntries, _groupList, _rootArgs, _run


def _infoOf(entry: tuple[str, str, int, list[str]]) -> dict[str, Any]:
    name, passwd, gid, members = entry
    return {"name": name, "passwd": passwd, "gid": gid, "members": list(members)}


def info(name: str, root: str | None = None) -> dict[str, Any]:
    """
    Return a group's information as Salt does: C{{"name", "passwd", "gid",
    "members"}}; C{{}} when there is no such group.

    CLI Example:

        salttwist '*' group.info adm
    """
    for entry in _groupEntries(root):
        if entry[0] == str(name):
            return _infoOf(entry)
    return {}


def getent(refresh: bool = False, root: str | None = None) -> list[dict[str, Any]]:
    """
    Return every group's information (as C{group.info} gives it).

    CLI Example:

        salttwist '*' group.getent
    """
    return [_infoOf(entry) for entry in _groupEntries(root)]


def _check(argv: list[str], what: str) -> bool:
    result = _run(argv)
    if result.returncode != 0:
        raise CommandExecutionError(
            f"{what}: {argv[0]} exited with {result.returncode}: {result.stderr.strip()}"
        )
    return True


def add(
    name: str,
    gid: int | None = None,
    system: bool = False,
    root: str | None = None,
    non_unique: bool = False,
    local: bool = False,
) -> bool:
    """
    Add a group with C{groupadd}; C{True} when it was added.

    CLI Example:

        salttwist '*' group.add web gid=2000
    """
    argv = ["groupadd"]
    if gid not in (None, ""):
        argv += ["-g", str(gid)]
        if non_unique:
            argv.append("-o")
    if system:
        argv.append("-r")
    argv += _rootArgs(root)
    argv.append(str(name))
    return _check(argv, f"Cannot add group {name}")


def delete(name: str, root: str | None = None, local: bool = False) -> bool:
    """
    Remove a group with C{groupdel}; C{True} when it was removed.

    CLI Example:

        salttwist '*' group.delete web
    """
    result = _run(["groupdel", *_rootArgs(root), str(name)])
    return result.returncode == 0


def chgid(name: str, gid: int, root: str | None = None, non_unique: bool = False) -> bool:
    """
    Change a group's gid; C{True} when it has it.

    CLI Example:

        salttwist '*' group.chgid web 2001
    """
    current = info(name, root)
    if not current:
        raise CommandExecutionError(f"Group '{name}' does not exist")
    if current["gid"] == int(gid):
        return True
    argv = ["groupmod", "-g", str(gid)] + (["-o"] if non_unique else [])
    _check([*argv, *_rootArgs(root), str(name)], f"Cannot change the gid of group {name}")
    return info(name, root).get("gid") == int(gid)


def adduser(name: str, username: str, root: str | None = None) -> bool:
    """
    Add a user to a group (C{gpasswd -a}); C{True} when done.

    CLI Example:

        salttwist '*' group.adduser web alice
    """
    if not info(name, root):
        raise CommandExecutionError(f"Group '{name}' does not exist")
    argv = ["gpasswd", "-a", str(username), *_rootArgs(root, "-Q"), str(name)]
    return _run(argv).returncode == 0


def deluser(name: str, username: str, root: str | None = None) -> bool:
    """
    Remove a user from a group (C{gpasswd -d}); C{True} when it is not (or
    no longer) a member.

    CLI Example:

        salttwist '*' group.deluser web alice
    """
    current = info(name, root)
    if not current:
        raise CommandExecutionError(f"Group '{name}' does not exist")
    if str(username) not in current["members"]:
        return True
    argv = ["gpasswd", "-d", str(username), *_rootArgs(root, "-Q"), str(name)]
    return _run(argv).returncode == 0


def members(name: str, members_list: Any, root: str | None = None) -> bool:
    """
    Replace a group's members with C{members_list} (a list or a
    comma-separated string) (C{gpasswd -M}); C{True} when done.

    CLI Example:

        salttwist '*' group.members web alice,bob
    """
    if not info(name, root):
        raise CommandExecutionError(f"Group '{name}' does not exist")
    wanted = ",".join(_groupList(members_list))
    argv = ["gpasswd", "-M", wanted, *_rootArgs(root, "-Q"), str(name)]
    return _run(argv).returncode == 0
