# -*- test-case-name: tests.test_eauth_config -*-
"""
Salt's C{external_auth} option, checked (L{checkExternalAuthConfig}) and
read (L{ExternalAuth}): which users of which backend may do what::

    external_auth:
      pam:
        fred: [test.*]                      # a user
        'dev*':                             # users matching a pattern
          - 'web*': [test.*, pkg.*]         # only on the minions 'web*' matches
        'admins%': ['.*', '@runner', '@wheel', '@jobs']   # a UNIX group
        '*': [test.ping]                    # anyone the backend accepts
      file:
        ^filename: /etc/salttwist/htpasswd  # options of the backend start with ^
        ^filetype: htpasswd
        dean: [test.*, {'@runner': [jobs.*]}]

What the items mean is the ACL engine's (L{salttwist.eauth.engine}); the
backends are C{pam} and C{file} (an Apache htpasswd file). As in Salt
(C{CkMinions.fill_auth_list}), a user gets the items of every entry whose
pattern matches its name and of every C{group%} entry naming one of its
groups; the C{'*'} entry applies only to users no other name entry matches
(unless C{permissive_acl}).

Only C{re} and the pattern rules of L{salttwist.aclconfig}: the config
loader imports this.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from typing import Any

from salttwist.aclconfig import GROUP_SUFFIX, isRegex, patternMatches

__all__ = [
    "BACKENDS",
    "OPTION_PREFIX",
    "ExternalAuth",
    "checkExternalAuthConfig",
    "checkTokenExpireUserOverride",
]

#: The backends salttwist has, with the options each takes (without the ^).
BACKENDS: dict[str, dict[str, tuple[str, ...]]] = {
    "pam": {},
    "file": {"filename": (), "filetype": ("htpasswd",)},
}
#: Salt's backends salttwist does not have, for a clearer error.
_SALT_ONLY_BACKENDS = ("ldap", "rest", "sharedsecret", "auto", "django", "keystone", "yubico")
#: The mark of a backend option among the user entries.
OPTION_PREFIX = "^"
_SPECIAL = re.compile(r"\A@[A-Za-z_][A-Za-z0-9_]*\Z")
_WILDCARD = "*"


def _checkPattern(pattern: object, what: str) -> str:
    if not isinstance(pattern, str) or not pattern:
        raise ValueError(f"{what} must be a non-empty string, not {pattern!r}")
    if isRegex(pattern):
        try:
            re.compile(pattern)
        except re.error as e:
            raise ValueError(f"{what} {pattern!r} is not a valid regular expression: {e}") from None
    return pattern


def _checkFunction(item: object, where: str) -> str:
    if isinstance(item, dict):
        raise ValueError(
            f"{where}: argument restrictions ({{function: {{args: ...}}}}) are not"
            " supported; list function patterns only"
        )
    return _checkPattern(item, f"{where}: a function pattern")


def _checkFunctions(value: object, where: str) -> list[str]:
    if isinstance(value, str):
        value = [value]
    if not isinstance(value, list) or not value:
        raise ValueError(f"{where} must be a non-empty list of function patterns, not {value!r}")
    return [_checkFunction(item, f"{where}, item {index}") for index, item in enumerate(value, 1)]


def _checkItem(item: object, where: str) -> str | dict[str, list[str]]:
    if isinstance(item, str) and item.startswith("@"):
        if not _SPECIAL.match(item):
            raise ValueError(
                f"{where}: {item!r} is not a special item; they are '@runner', '@wheel',"
                " '@jobs' or '@<module>'"
            )
        return item
    if isinstance(item, dict):
        if len(item) != 1:
            raise ValueError(
                f"{where}: a target restriction (or '@runner'/'@wheel' list) must be a"
                f" mapping with exactly one key, not {item!r}"
            )
        [(key, functions)] = item.items()
        if not isinstance(key, str) or not key.strip():
            raise ValueError(f"{where}: the target must be a non-empty string, not {key!r}")
        if key.startswith("@") and not _SPECIAL.match(key):
            raise ValueError(
                f"{where}: {key!r} is not a special item; they are '@runner', '@wheel',"
                " '@jobs' or '@<module>'"
            )
        what = f"{where}, {'the functions of' if key.startswith('@') else 'target'} {key!r}"
        return {key: _checkFunctions(functions, what)}
    return _checkFunction(item, where)


def _checkEntries(entries: object, where: str) -> list[str | dict[str, list[str]]]:
    if isinstance(entries, str):
        entries = [entries]
    if entries is None:
        entries = []
    if not isinstance(entries, list):
        raise ValueError(f"{where} must be a list, not {entries!r}")
    return [_checkItem(item, f"{where}, item {index}") for index, item in enumerate(entries, 1)]


def _checkBackendOptions(backend: str, options: dict[str, Any]) -> dict[str, Any]:
    known = BACKENDS[backend]
    for name, value in options.items():
        if name not in known:
            allowed = ", ".join(OPTION_PREFIX + o for o in known) or "none"
            raise ValueError(
                f"backend {backend!r}: unknown option {OPTION_PREFIX + name!r} (its options:"
                f" {allowed})"
            )
        choices = known[name]
        if not isinstance(value, str) or not value:
            raise ValueError(
                f"backend {backend!r}: {OPTION_PREFIX + name} must be a non-empty string,"
                f" not {value!r}"
            )
        if choices and value not in choices:
            raise ValueError(
                f"backend {backend!r}: {OPTION_PREFIX + name} {value!r} is not supported"
                f" (supported: {', '.join(choices)})"
            )
    if backend == "file":
        if "filename" not in options:
            raise ValueError("backend 'file' needs ^filename, the htpasswd file")
        if "filetype" not in options:
            # Salt's default is 'text', plain text passwords: refused here.
            raise ValueError(
                "backend 'file' needs '^filetype: htpasswd' (Salt's default, 'text' files of"
                " plain text passwords, is not supported)"
            )
    return options


def checkExternalAuthConfig(value: object) -> dict[str, dict[str, Any]]:
    """
    Check the C{external_auth} option.

    @return: the value, normalized: for each backend, its C{^} options and
        its user entries (a lone string item becomes a list).
    @raise ValueError: saying what is wrong and where.
    """
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise ValueError("it is not a mapping")
    checked: dict[str, dict[str, Any]] = {}
    for backend, entries in value.items():
        if backend not in BACKENDS:
            extra = (
                " (a Salt backend salttwist does not have)"
                if backend in _SALT_ONLY_BACKENDS
                else ""
            )
            raise ValueError(
                f"unknown eauth backend {backend!r}{extra}; the backends are {', '.join(BACKENDS)}"
            )
        if entries is None:
            entries = {}
        if not isinstance(entries, dict):
            raise ValueError(f"backend {backend!r} must be a mapping of users, not {entries!r}")
        options: dict[str, Any] = {}
        users: dict[str, Any] = {}
        for key, items in entries.items():
            if isinstance(key, str) and key.startswith(OPTION_PREFIX):
                options[key[len(OPTION_PREFIX) :]] = items
                continue
            _checkPattern(key, f"backend {backend!r}: a user name")
            if key == GROUP_SUFFIX:
                raise ValueError(f"backend {backend!r}: a group entry needs a name before the '%'")
            users[key] = _checkEntries(items, f"backend {backend!r}, the entry of {key!r}")
        _checkBackendOptions(backend, options)
        checked[backend] = {**{OPTION_PREFIX + k: v for k, v in options.items()}, **users}
    return checked


def checkTokenExpireUserOverride(value: object) -> bool | dict[str, list[str]]:
    """
    Check C{token_expire_user_override}: C{True} (every user may ask for
    its token's lifetime), C{False}, or a mapping of backends to the users
    who may.

    @raise ValueError: saying what is wrong.
    """
    if isinstance(value, bool):
        return value
    if not isinstance(value, dict):
        raise ValueError("it is neither true, false nor a mapping of backends to user lists")
    for backend, users in value.items():
        if not isinstance(users, list) or not all(isinstance(u, str) for u in users):
            raise ValueError(f"the users of {backend!r} must be a list of names, not {users!r}")
    return value


class ExternalAuth:
    """
    A checked C{external_auth} option: backends, their options, and the
    auth list of a user.
    """

    def __init__(
        self,
        config: Mapping[str, Mapping[str, Any]],
        nodegroups: Mapping[str, Any] | None = None,
        permissive: bool = False,
    ) -> None:
        """
        @param config: as L{checkExternalAuthConfig} returns it.
        @param nodegroups: the master's, for C{N@} words in targets.
        @param permissive: Salt's C{permissive_acl}: the C{'*'} entry applies
            to every user, not only to those no other entry names.
        @raise ValueError: a target restriction is not a valid compound
            target (naming the backend, entry and target).
        """
        # Imported here: the config loader imports this module.
        from salttwist.eauth.engine import compileRules

        self.config = {backend: dict(entries) for backend, entries in config.items()}
        self.nodegroups = dict(nodegroups or {})
        self.permissive = permissive
        for backend in self.config:
            for entry, items in self.users(backend).items():
                compileRules(f"{backend}: {entry}", items, self.nodegroups, True, "external_auth")

    @classmethod
    def fromConfig(cls, config: Mapping[str, Any]) -> ExternalAuth:
        """
        @param config: a master config (C{external_auth}, C{nodegroups},
            C{permissive_acl}).
        """
        return cls(
            config.get("external_auth") or {},
            config.get("nodegroups") or {},
            bool(config.get("permissive_acl", False)),
        )

    @property
    def backends(self) -> list[str]:
        """
        The backends configured.
        """
        return list(self.config)

    def options(self, backend: str) -> dict[str, Any]:
        """
        @return: C{backend}'s C{^} options, without the C{^}.
        @raise KeyError: the backend is not configured.
        """
        return {
            k[len(OPTION_PREFIX) :]: v
            for k, v in self.config[backend].items()
            if k.startswith(OPTION_PREFIX)
        }

    def users(self, backend: str) -> dict[str, list[Any]]:
        """
        @return: C{backend}'s user entries.
        @raise KeyError: the backend is not configured.
        """
        return {k: v for k, v in self.config[backend].items() if not k.startswith(OPTION_PREFIX)}

    def needsGroups(self, backend: str) -> bool:
        """
        Does C{backend} have a C{group%} entry (so a user's groups matter)?
        """
        return any(entry.endswith(GROUP_SUFFIX) for entry in self.users(backend))

    def authList(self, backend: str, user: str, groups: Iterable[str] = ()) -> list[Any]:
        """
        The items C{user} (a member of C{groups}) gets from C{backend}'s
        entries: Salt's C{fill_auth_list}. Empty if the backend is not
        configured or no entry names the user.
        """
        if backend not in self.config:
            return []
        groups = list(groups)
        items: list[Any] = []
        nameMatched = False
        entries = self.users(backend)
        for entry, entryItems in entries.items():
            if entry == _WILDCARD and not self.permissive:
                continue
            if entry.endswith(GROUP_SUFFIX):
                pattern = entry[: -len(GROUP_SUFFIX)]
                if any(patternMatches(pattern, group) for group in groups):
                    items.extend(entryItems)
            elif patternMatches(entry, user):
                nameMatched = True
                items.extend(entryItems)
        if not self.permissive and not nameMatched and _WILDCARD in entries:
            items.extend(entries[_WILDCARD])
        return items
