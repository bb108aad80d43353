# -*- test-case-name: tests.test_modules_shadow -*-
"""
Salt's C{shadow} module for Linux (Salt's C{linux_shadow}): the password
hashes and ageing fields of C{/etc/shadow}, changed through the shadow
tools (C{usermod -p}, C{passwd}, C{chage}).

Every function takes Salt's C{root} argument (the tools' C{--root}), as the
C{user} module does. The functions block (they run in a job's thread).
"""

from __future__ import annotations

import datetime
from typing import Any

from salttwist.modules import CommandExecutionError
from salttwist.modules.user import _findUser, _readColonFile, _rootArgs, _run

_KEYS = ("name", "passwd", "lstchg", "min", "max", "warn", "inact", "expire")


def default_hash() -> str:
    """
    Return the hash a new user's password has (C{!}: none set), as Salt's.

    CLI Example:

        salttwist '*' shadow.default_hash
    """
    return "!"


def info(name: str, root: str | None = None) -> dict[str, Any]:
    """
    Return a user's shadow line as Salt does: C{{"name", "passwd",
    "lstchg", "min", "max", "warn", "inact", "expire"}} (numbers as
    integers, an empty field as C{""}); every value C{""} when the user has
    none.

    CLI Example:

        salttwist '*' shadow.info root
    """
    for cols in _readColonFile(root, "etc/shadow"):
        if cols[0] != str(name):
            continue
        cols = (cols + [""] * 9)[:8]
        ret: dict[str, Any] = {"name": cols[0], "passwd": cols[1]}
        for key, value in zip(_KEYS[2:], cols[2:], strict=True):
            ret[key] = int(value) if value.lstrip("-").isdigit() else ""
        return ret
    return {key: "" for key in _KEYS}


def _tool(argv: list[str], name: str, root: str | None, rootFlag: str = "-R") -> None:
    if _findUser(str(name), root) is None:
        raise CommandExecutionError(f"User '{name}' does not exist")
    result = _run([*argv, *_rootArgs(root, rootFlag), str(name)])
    if result.returncode != 0:
        raise CommandExecutionError(
            f"{' '.join(argv)} {name} exited with {result.returncode}: {result.stderr.strip()}"
        )


def set_password(
    name: str, password: str, use_usermod: bool = False, root: str | None = None
) -> bool:
    """
    Set a user's password hash (as in C{/etc/shadow}, such as C{$6$...})
    with C{usermod -p}; C{True} when the shadow file holds it.

    CLI Example:

        salttwist '*' shadow.set_password web '$6$salt$hash'
    """
    _tool(["usermod", "-p", str(password)], name, root)
    return info(name, root)["passwd"] == str(password)


def del_password(name: str, root: str | None = None) -> bool:
    """
    Empty a user's password (C{passwd -d}): it logs in without one.
    C{True} when its hash is empty.

    CLI Example:

        salttwist '*' shadow.del_password web
    """
    _tool(["passwd", "-d"], name, root)
    return info(name, root)["passwd"] == ""


def lock_password(name: str, root: str | None = None) -> bool:
    """
    Lock a user's password (C{usermod -L}: a C{!} before its hash). C{True}
    when locked.

    CLI Example:

        salttwist '*' shadow.lock_password web
    """
    if not info(name, root)["passwd"].startswith("!"):
        _tool(["usermod", "-L"], name, root)
    return info(name, root)["passwd"].startswith("!")


def unlock_password(name: str, root: str | None = None) -> bool:
    """
    Unlock a user's password (C{usermod -U}). C{True} when unlocked.

    CLI Example:

        salttwist '*' shadow.unlock_password web
    """
    if info(name, root)["passwd"].startswith("!"):
        _tool(["usermod", "-U"], name, root)
    return not info(name, root)["passwd"].startswith("!")


def _days(value: Any) -> Any:
    """
    @return: a C{YYYY-MM-DD} date as days since 1970-01-01; other values
        as they are.
    """
    if isinstance(value, str) and len(value) == 10 and value[4] == "-" and value[7] == "-":
        try:
            return (datetime.date.fromisoformat(value) - datetime.date(1970, 1, 1)).days
        except ValueError as e:
            raise CommandExecutionError(f"Invalid date {value!r}: {e}") from e
    return value


def _chage(name: str, option: str, key: str, value: Any, root: str | None) -> bool:
    value = _days(value)
    current = info(name, root)
    if str(current[key]) == str(value):
        return True
    _tool(["chage", option, str(value)], name, root)
    after = info(name, root)[key]
    return str(after) == str(value) or (str(value) == "-1" and after == "")


def set_mindays(name: str, mindays: int, root: str | None = None) -> bool:
    """
    Set the days before a user may change its password again (C{chage -m}).

    CLI Example:

        salttwist '*' shadow.set_mindays web 1
    """
    return _chage(name, "-m", "min", mindays, root)


def set_maxdays(name: str, maxdays: int, root: str | None = None) -> bool:
    """
    Set the days a password stays valid (C{chage -M}).

    CLI Example:

        salttwist '*' shadow.set_maxdays web 90
    """
    return _chage(name, "-M", "max", maxdays, root)


def set_warndays(name: str, warndays: int, root: str | None = None) -> bool:
    """
    Set the days of warning before a password expires (C{chage -W}).

    CLI Example:

        salttwist '*' shadow.set_warndays web 7
    """
    return _chage(name, "-W", "warn", warndays, root)


def set_inactdays(name: str, inactdays: int, root: str | None = None) -> bool:
    """
    Set the days after a password expired before the account is locked
    (C{chage -I}).

    CLI Example:

        salttwist '*' shadow.set_inactdays web 30
    """
    return _chage(name, "-I", "inact", inactdays, root)


def set_expire(name: str, expire: Any, root: str | None = None) -> bool:
    """
    Set the day the account expires, in days since 1970-01-01 (or
    C{YYYY-MM-DD}; C{-1}: never) (C{chage -E}).

    CLI Example:

        salttwist '*' shadow.set_expire web 20000
    """
    return _chage(name, "-E", "expire", expire, root)


def set_date(name: str, date: Any, root: str | None = None) -> bool:
    """
    Set the day the password was last changed, in days since 1970-01-01 (or
    C{YYYY-MM-DD}) (C{chage -d}).

    CLI Example:

        salttwist '*' shadow.set_date web 19000
    """
    return _chage(name, "-d", "lstchg", date, root)
