# -*- test-case-name: tests.test_modules_user -*-
"""
Salt's C{user} module for Linux (Salt's C{useradd}): local users through
the shadow tools (C{useradd}, C{usermod}, C{userdel}).

Every function takes Salt's C{root} argument: a directory the tools chroot
into (their C{-R}), whose C{etc/passwd}, C{etc/group} and C{etc/shadow} are
then the ones read and changed. Without it, the machine's own users are
read through the name service (C{pwd}, C{grp}).

The functions block (they run in a job's thread).
"""

from __future__ import annotations

import grp
import os
import pwd
import subprocess
from collections.abc import Iterable
from typing import Any

from salttwist.modules import CommandExecutionError, SaltInvocationError

#: The GECOS fields, in their order in the passwd file's fifth column.
GECOS_FIELDS = ("fullname", "roomnumber", "workphone", "homephone", "other")


def _run(argv: list[str]) -> subprocess.CompletedProcess[str]:
    """
    Run a shadow tool, its output captured.

    @raise CommandExecutionError: when it cannot start.
    """
    try:
        return subprocess.run(argv, capture_output=True, text=True, check=False)
    except OSError as e:
        raise CommandExecutionError(f"Cannot run {argv[0]}: {e.strerror}") from e


def _rootArgs(root: str | None, flag: str = "-R") -> list[str]:
    """
    @return: the chroot option of a shadow tool for C{root}, if any.
    """
    if root is None or root in ("", "/"):
        return []
    if not os.path.isdir(root):
        raise CommandExecutionError(f"The root directory {root} does not exist")
    return [flag, root]


def _useFiles(root: str | None) -> bool:
    return root is not None and root not in ("", "/")


def _readColonFile(root: str | None, relative: str) -> list[list[str]]:
    """
    @return: the colon-separated lines of C{<root>/<relative>} (every line
        split), an empty list when the file does not exist.
    """
    path = os.path.join(root or "/", relative)
    try:
        with open(path, encoding="utf-8", errors="replace") as f:
            lines = f.read().splitlines()
    except FileNotFoundError:
        return []
    return [line.split(":") for line in lines if line and not line.startswith("#")]


def _passwdEntries(root: str | None = None) -> list[tuple[str, str, int, int, str, str, str]]:
    """
    @return: the users, as C{(name, passwd, uid, gid, gecos, home, shell)};
        from C{<root>/etc/passwd} when C{root} is given, else the name
        service.
    """
    if not _useFiles(root):
        return [
            (p.pw_name, p.pw_passwd, p.pw_uid, p.pw_gid, p.pw_gecos, p.pw_dir, p.pw_shell)
            for p in pwd.getpwall()
        ]
    entries = []
    for cols in _readColonFile(root, "etc/passwd"):
        if len(cols) < 7:
            continue
        try:
            entries.append(
                (cols[0], cols[1], int(cols[2]), int(cols[3]), cols[4], cols[5], cols[6])
            )
        except ValueError:
            continue
    return entries


def _groupEntries(root: str | None = None) -> list[tuple[str, str, int, list[str]]]:
    """
    @return: the groups, as C{(name, passwd, gid, members)}; from
        C{<root>/etc/group} when C{root} is given, else the name service.
    """
    if not _useFiles(root):
        return [(g.gr_name, g.gr_passwd, g.gr_gid, list(g.gr_mem)) for g in grp.getgrall()]
    entries = []
    for cols in _readColonFile(root, "etc/group"):
        if len(cols) < 4:
            continue
        try:
            members = [m for m in cols[3].split(",") if m]
            entries.append((cols[0], cols[1], int(cols[2]), members))
        except ValueError:
            continue
    return entries


def _gecos(text: str) -> dict[str, str]:
    parts = (text.split(",") + [""] * 5)[:5]
    if text.count(",") > 4:
        parts[4] = ",".join(text.split(",")[4:])
    return dict(zip(GECOS_FIELDS, parts, strict=True))


def _gecosText(fields: dict[str, str]) -> str:
    return ",".join(str(fields.get(key) or "") for key in GECOS_FIELDS).rstrip(",")


def _findUser(name: str, root: str | None) -> tuple[str, str, int, int, str, str, str] | None:
    if not _useFiles(root):
        try:
            p = pwd.getpwnam(name)
        except KeyError:
            return None
        return (p.pw_name, p.pw_passwd, p.pw_uid, p.pw_gid, p.pw_gecos, p.pw_dir, p.pw_shell)
    for entry in _passwdEntries(root):
        if entry[0] == name:
            return entry
    return None


def _groupsOf(name: str, gid: int, root: str | None) -> list[str]:
    groups = set()
    for gname, _passwd, ggid, members in _groupEntries(root):
        if name in members or ggid == gid:
            groups.add(gname)
    return sorted(groups)


def _infoOf(entry: tuple[str, str, int, int, str, str, str], root: str | None) -> dict[str, Any]:
    name, passwd, uid, gid, gecos, home, shell = entry
    info: dict[str, Any] = {
        "name": name,
        "passwd": passwd,
        "uid": uid,
        "gid": gid,
        "home": home,
        "shell": shell,
    }
    info.update(_gecos(gecos))
    info["groups"] = _groupsOf(name, gid, root)
    return info


def info(name: str, root: str | None = None) -> dict[str, Any]:
    """
    Return a user's information, as Salt does: C{{"name", "passwd", "uid",
    "gid", "home", "shell", "fullname", "roomnumber", "workphone",
    "homephone", "other", "groups"}}; C{{}} when there is no such user.

    CLI Example:

        salttwist '*' user.info root
        salttwist '*' user.info web root=/srv/chroot
    """
    entry = _findUser(str(name), root)
    return _infoOf(entry, root) if entry else {}


def getent(refresh: bool = False, root: str | None = None) -> list[dict[str, Any]]:
    """
    Return every user's information (as C{user.info} gives it).

    CLI Example:

        salttwist '*' user.getent
    """
    return [_infoOf(entry, root) for entry in _passwdEntries(root)]


def list_users(root: str | None = None) -> list[str]:
    """
    Return the names of every user, sorted.

    CLI Example:

        salttwist '*' user.list_users
    """
    return sorted({entry[0] for entry in _passwdEntries(root)})


def list_groups(name: str, root: str | None = None) -> list[str]:
    """
    Return the groups a user belongs to (its primary group too), sorted.

    CLI Example:

        salttwist '*' user.list_groups web
    """
    entry = _findUser(str(name), root)
    if entry is None:
        return []
    return _groupsOf(entry[0], entry[3], root)


def _groupList(groups: Any) -> list[str]:
    if groups is None:
        return []
    if isinstance(groups, str):
        return [g.strip() for g in groups.split(",") if g.strip()]
    if isinstance(groups, Iterable):
        return [str(g) for g in groups]
    raise SaltInvocationError("groups must be a list or a comma-separated string")


def add(
    name: str,
    uid: int | None = None,
    gid: Any = None,
    groups: Any = None,
    home: str | None = None,
    shell: str | None = None,
    unique: bool = True,
    system: bool = False,
    fullname: str = "",
    roomnumber: str = "",
    workphone: str = "",
    homephone: str = "",
    other: str = "",
    createhome: bool = True,
    loginclass: str | None = None,
    nologinit: bool = False,
    root: str | None = None,
    usergroup: bool | None = None,
    local: bool = False,
) -> bool:
    """
    Add a user with C{useradd}; C{True} when it was added.

    C{gid} is a group's id or name; C{groups} the other groups (a list or
    a comma-separated string); C{usergroup} C{True} makes a group of the
    user's name (C{-U}), C{False} does not (C{-N}), L{None} does what the
    system's C{login.defs} says.

    CLI Example:

        salttwist '*' user.add web uid=2000 shell=/bin/bash
    """
    argv = ["useradd"]
    if shell:
        argv += ["-s", str(shell)]
    if uid not in (None, ""):
        argv += ["-u", str(uid)]
    if gid not in (None, ""):
        argv += ["-g", str(gid)]
    elif usergroup is True:
        argv.append("-U")
    elif usergroup is False:
        argv.append("-N")
    groupList = _groupList(groups)
    if groupList:
        argv += ["-G", ",".join(groupList)]
    if home:
        argv += ["-d", str(home)]
    if createhome:
        argv.append("-m")
    else:
        argv.append("-M")
    if nologinit:
        argv.append("-l")
    if not unique:
        argv.append("-o")
    if system:
        argv.append("-r")
    gecos = _gecosText(
        {
            "fullname": fullname,
            "roomnumber": roomnumber,
            "workphone": workphone,
            "homephone": homephone,
            "other": other,
        }
    )
    if gecos:
        argv += ["-c", gecos]
    argv += _rootArgs(root)
    argv.append(str(name))
    result = _run(argv)
    if result.returncode != 0:
        raise CommandExecutionError(
            f"Cannot add user {name}: useradd exited with {result.returncode}: "
            f"{result.stderr.strip()}"
        )
    return True


def delete(name: str, remove: bool = False, force: bool = False, root: str | None = None) -> bool:
    """
    Remove a user with C{userdel}; C{remove=True} removes its home and mail
    spool too, C{force=True} even while it is logged in.

    CLI Example:

        salttwist '*' user.delete web remove=True
    """
    argv = ["userdel"]
    if remove:
        argv.append("-r")
    if force:
        argv.append("-f")
    argv += _rootArgs(root)
    argv.append(str(name))
    result = _run(argv)
    # userdel -r exits 12 when the home directory or mail spool was absent:
    # the user is gone all the same.
    if result.returncode == 12 and _findUser(str(name), root) is None:
        return True
    return result.returncode == 0


def _usermod(name: str, options: list[str], root: str | None) -> None:
    if _findUser(str(name), root) is None:
        raise CommandExecutionError(f"User '{name}' does not exist")
    result = _run(["usermod", *options, *_rootArgs(root), str(name)])
    if result.returncode != 0:
        raise CommandExecutionError(
            f"usermod {' '.join(options)} {name} exited with {result.returncode}: "
            f"{result.stderr.strip()}"
        )


def _change(name: str, key: str, value: Any, option: str, root: str | None) -> bool:
    current = info(name, root)
    if not current:
        raise CommandExecutionError(f"User '{name}' does not exist")
    if key == "gid":
        wanted = _groupGid(value, root)
        if current["gid"] == wanted:
            return True
        _usermod(name, [option, str(value)], root)
        return info(name, root).get("gid") == wanted
    if str(current.get(key)) == str(value):
        return True
    _usermod(name, [option, str(value)], root)
    return str(info(name, root).get(key)) == str(value)


def _groupGid(value: Any, root: str | None) -> int | None:
    for gname, _passwd, ggid, _members in _groupEntries(root):
        if gname == str(value) or str(ggid) == str(value):
            return ggid
    try:
        return int(value)
    except (TypeError, ValueError):
        return None


def chuid(name: str, uid: int, root: str | None = None) -> bool:
    """
    Change a user's uid; C{True} when it has it.

    CLI Example:

        salttwist '*' user.chuid web 2001
    """
    return _change(name, "uid", uid, "-u", root)


def chgid(name: str, gid: Any, root: str | None = None) -> bool:
    """
    Change a user's primary group (an id or a name); C{True} when it has it.

    CLI Example:

        salttwist '*' user.chgid web 2001
    """
    return _change(name, "gid", gid, "-g", root)


def chshell(name: str, shell: str, root: str | None = None) -> bool:
    """
    Change a user's login shell; C{True} when it has it.

    CLI Example:

        salttwist '*' user.chshell web /bin/zsh
    """
    return _change(name, "shell", shell, "-s", root)


def chhome(name: str, home: str, persist: bool = False, root: str | None = None) -> bool:
    """
    Change a user's home directory; with C{persist=True} the old home's
    content moves there (C{usermod -m}). C{True} when it has it.

    CLI Example:

        salttwist '*' user.chhome web /srv/web persist=True
    """
    current = info(name, root)
    if not current:
        raise CommandExecutionError(f"User '{name}' does not exist")
    if current["home"] == home:
        return True
    _usermod(name, ["-d", str(home)] + (["-m"] if persist else []), root)
    return info(name, root).get("home") == home


def _chgecos(name: str, key: str, value: Any, root: str | None) -> bool:
    current = info(name, root)
    if not current:
        raise CommandExecutionError(f"User '{name}' does not exist")
    value = str(value or "")
    if "," in value or ":" in value:
        raise SaltInvocationError(f"Unsupported char ',' or ':' in {value}")
    if current[key] == value:
        return True
    fields = {field: current[field] for field in GECOS_FIELDS}
    fields[key] = value
    _usermod(name, ["-c", _gecosText(fields)], root)
    return info(name, root).get(key) == value


def chfullname(name: str, fullname: str, root: str | None = None) -> bool:
    """
    Change a user's full name (the first GECOS field); C{True} when it has
    it.

    CLI Example:

        salttwist '*' user.chfullname web "Web Server"
    """
    return _chgecos(name, "fullname", fullname, root)


def chroomnumber(name: str, roomnumber: str, root: str | None = None) -> bool:
    """
    Change a user's room number (the second GECOS field); C{True} when it
    has it.

    CLI Example:

        salttwist '*' user.chroomnumber web 42
    """
    return _chgecos(name, "roomnumber", roomnumber, root)


def chworkphone(name: str, workphone: str, root: str | None = None) -> bool:
    """
    Change a user's work phone (the third GECOS field); C{True} when it has
    it.

    CLI Example:

        salttwist '*' user.chworkphone web 555-0100
    """
    return _chgecos(name, "workphone", workphone, root)


def chhomephone(name: str, homephone: str, root: str | None = None) -> bool:
    """
    Change a user's home phone (the fourth GECOS field); C{True} when it
    has it.

    CLI Example:

        salttwist '*' user.chhomephone web 555-0199
    """
    return _chgecos(name, "homephone", homephone, root)


def chother(name: str, other: str, root: str | None = None) -> bool:
    """
    Change the rest of a user's GECOS field; C{True} when it has it.

    CLI Example:

        salttwist '*' user.chother web "on call"
    """
    return _chgecos(name, "other", other, root)


def chgroups(name: str, groups: Any, append: bool = False, root: str | None = None) -> bool:
    """
    Set a user's other groups (a list or a comma-separated string); with
    C{append=True} add them to those it has. C{True} when done.

    CLI Example:

        salttwist '*' user.chgroups web www-data,adm append=True
    """
    wanted = _groupList(groups)
    current = list_groups(name, root)
    if set(current) == set(wanted) or (append and set(wanted) <= set(current)):
        return True
    _usermod(name, (["-a"] if append else []) + ["-G", ",".join(wanted)], root)
    return True
