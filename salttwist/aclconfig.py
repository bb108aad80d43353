# -*- test-case-name: tests.test_acl,tests.test_config -*-
"""
The rules of Salt's C{publisher_acl} and C{publisher_acl_blacklist}
options, shared by the config loader (which checks them) and the master
(which enforces them, L{salttwist.master.acl}): the pattern syntax (shell
globs, or regular expressions when they use syntax no glob has; see
L{isRegex}) and the shape of both options.

Only C{fnmatch} and C{re}: every command loads a config, and this module
stays as cheap to import as that.
"""

from __future__ import annotations

import fnmatch
import re

__all__ = [
    "GROUP_SUFFIX",
    "checkBlacklistConfig",
    "checkPublisherAclConfig",
    "isRegex",
    "patternMatches",
]

#: The suffix that makes a C{publisher_acl} name a UNIX group.
GROUP_SUFFIX = "%"
#: Characters only a regular expression uses.
_REGEX_ONLY = frozenset("|()+^$\\{}")
_BLACKLIST_KEYS = ("users", "modules")


# -- patterns -----------------------------------------------------------------


def isRegex(pattern: str) -> bool:
    """
    Is C{pattern} a regular expression rather than a shell glob?

    It is when it uses syntax a glob does not have (C{| ( ) + ^ $ \\ { }})
    or starts with C{.}, which no user or function name does (C{.*}).
    Otherwise it is a glob, so C{test.*} means the C{test} module only; read
    as Salt reads it (a regex too), it would also allow C{testinfra.run}.
    """
    return pattern.startswith(".") or any(c in _REGEX_ONLY for c in pattern)


def patternMatches(pattern: str, value: str) -> bool:
    """
    Does C{value} match C{pattern}: a glob (case-sensitive) or, see
    L{isRegex}, a regular expression that must match the whole value?
    """
    if isRegex(pattern):
        try:
            return re.fullmatch(pattern, value) is not None
        except re.error:
            return False
    return fnmatch.fnmatchcase(value, pattern)


# -- config -------------------------------------------------------------------


def _checkPattern(pattern: object, what: str) -> str:
    if not isinstance(pattern, str) or not pattern:
        raise ValueError(f"{what} must be a non-empty string, not {pattern!r}")
    if isRegex(pattern):
        try:
            re.compile(pattern)
        except re.error as e:
            raise ValueError(f"{what} {pattern!r} is not a valid regular expression: {e}") from None
    return pattern


def _checkFunctions(value: object, where: str) -> list[str]:
    if isinstance(value, str):
        value = [value]
    if not isinstance(value, list):
        raise ValueError(f"{where} must be a list of function patterns, not {value!r}")
    functions = []
    for index, item in enumerate(value, 1):
        if isinstance(item, dict):
            raise ValueError(
                f"{where}, item {index}: argument restrictions ({{function: {{args: ...}}}})"
                " are not supported; list function patterns only"
            )
        functions.append(_checkPattern(item, f"{where}, item {index}: a function pattern"))
    return functions


def checkPublisherAclConfig(value: object) -> dict[str, list[str | dict[str, list[str]]]]:
    """
    Check the C{publisher_acl} option: a mapping of user patterns (C{name%}
    for a group) to lists whose items are function patterns, or one-key
    mappings C{{target: [function patterns]}}.

    @return: the value, with a lone function string normalized to a list.
    @raise ValueError: saying what is wrong and where.
    """
    if not isinstance(value, dict):
        raise ValueError("it is not a mapping")
    checked: dict[str, list[str | dict[str, list[str]]]] = {}
    for user, entries in value.items():
        _checkPattern(user, "a user name")
        if user == GROUP_SUFFIX:
            raise ValueError("a group entry needs a name before the '%'")
        where = f"the entry of {user!r}"
        if isinstance(entries, str):
            entries = [entries]
        if not isinstance(entries, list):
            raise ValueError(f"{where} must be a list, not {entries!r}")
        items: list[str | dict[str, list[str]]] = []
        for index, item in enumerate(entries, 1):
            if isinstance(item, dict):
                if len(item) != 1:
                    raise ValueError(
                        f"{where}, item {index}: a target restriction must be a mapping with"
                        f" exactly one target, not {item!r}"
                    )
                [(target, functions)] = item.items()
                if not isinstance(target, str) or not target.strip():
                    raise ValueError(
                        f"{where}, item {index}: the target must be a non-empty string,"
                        f" not {target!r}"
                    )
                items.append({target: _checkFunctions(functions, f"{where}, target {target!r}")})
            else:
                items.append(_checkPattern(item, f"{where}, item {index}: a function pattern"))
        checked[user] = items
    return checked


def checkBlacklistConfig(value: object) -> dict[str, list[str]]:
    """
    Check the C{publisher_acl_blacklist} option: a mapping with C{users}
    and/or C{modules}, each a list of patterns.

    @raise ValueError: saying what is wrong.
    """
    if not isinstance(value, dict):
        raise ValueError("it is not a mapping")
    checked: dict[str, list[str]] = {}
    for key, patterns in value.items():
        if key not in _BLACKLIST_KEYS:
            raise ValueError(f"unknown key {key!r}; the keys are 'users' and 'modules'")
        if patterns is None:
            patterns = []
        if not isinstance(patterns, list):
            raise ValueError(f"{key!r} must be a list of patterns, not {patterns!r}")
        checked[key] = [_checkPattern(p, f"a {key!r} pattern") for p in patterns]
    return checked
