# -*- test-case-name: tests.test_acl -*-
"""
Salt's C{publisher_acl}: local users other than the master's own may publish
the functions the master's config grants them, and nothing else.

The master config names users (or C{group%} for the members of a UNIX
group) and, for each, the functions they may publish, either on every
minion or only on the minions a target expression matches::

    publisher_acl:
      fred: [test.ping, network.*]
      'dev*':
        - 'web*': [test.*, pkg.*]
      'admins%': ['.*']
    publisher_acl_blacklist:
      users: [guest]
      modules: [cmd.*]

How it is enforced:
  - At start the master writes C{cachedir/.<user>_key} (32 random bytes,
    hex, mode 0400, owned by that user) for every system user the ACL names,
    directly, by a pattern, or through a group (L{keyAccounts},
    L{writeUserKeys}), and removes the key files of users no longer named.
    The master's own user and uid 0 use C{.root_key} instead.
  - The local client proves which key it read with a MAC over the
    connection's challenge; the session's user is the one whose key it
    is, never a name the client claims (L{salttwist.master.core}).
  - Each publish of such a user is checked by L{PublisherAcl.authorize}
    after the master has worked out which minions the target reaches:
    the function must be allowed, and every one of those minions must be
    covered by an entry that allows it.

Patterns (user names, group names, function names, blacklist entries) are
shell globs, or regular expressions when they use syntax no glob has; see
L{isRegex}.
"""

from __future__ import annotations

import grp
import os
import pwd
import re
import stat
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from twisted.logger import Logger

from salttwist.aclconfig import (
    GROUP_SUFFIX,
    checkBlacklistConfig,
    checkPublisherAclConfig,
    isRegex,
    patternMatches,
)
from salttwist.eauth.engine import (
    AclRefused,
    Decision,
    Rule,
    compileRules,
    decideByRules,
)
from salttwist.files import atomicWrite
from salttwist.rootkey import USER_NAME, readUserKey, userKeyFile

__all__ = [
    "AclRefused",
    "Account",
    "Decision",
    "Group",
    "InMemoryUserDatabase",
    "PublisherAcl",
    "SystemUserDatabase",
    "checkBlacklistConfig",
    "checkPublisherAclConfig",
    "groupIdsOf",
    "isRegex",
    "keyAccounts",
    "patternMatches",
    "readUserKey",
    "removeStaleKeys",
    "setUpUserKeys",
    "unreachableDirectory",
    "userKeyFile",
    "writeUserKeys",
]

_log = Logger()

#: The function every user may publish about its own jobs (Salt whitelists it).
FIND_JOB = "saltutil.find_job"
_GLOB_CHARS = frozenset("*?[")
_KEY_FILE = re.compile(r"\A\.(?P<user>.+)_key\Z")
_ROOT_KEY_USER = "root"


# -- patterns -----------------------------------------------------------------


def _isConcreteName(pattern: str) -> bool:
    """
    Does C{pattern} name exactly one user (no glob or regex syntax)?
    """
    return not isRegex(pattern) and not any(c in _GLOB_CHARS for c in pattern)


# -- the system's users -------------------------------------------------------


@dataclass(frozen=True)
class Account:
    """
    One system user: its name, uid and primary gid.
    """

    name: str
    uid: int
    gid: int


@dataclass(frozen=True)
class Group:
    """
    One system group: its name, gid and the users listed as its members
    (users whose primary group it is are not listed, as in C{/etc/group}).
    """

    name: str
    gid: int
    members: tuple[str, ...]


class UserDatabase(Protocol):
    """
    Where the ACL looks users and groups up: L{SystemUserDatabase} in the
    master, L{InMemoryUserDatabase} in tests. Lookups may block (NSS, LDAP):
    call them off the reactor thread.
    """

    def user(self, name: str) -> Account | None:
        """
        @return: the user C{name}, or L{None} if there is none.
        """

    def users(self) -> Iterable[Account]:
        """
        @return: every user.
        """

    def groups(self) -> Iterable[Group]:
        """
        @return: every group.
        """


class SystemUserDatabase:
    """
    The users and groups of this host, through C{pwd} and C{grp}.
    """

    def user(self, name: str) -> Account | None:
        try:
            entry = pwd.getpwnam(name)
        except (KeyError, ValueError):
            return None
        return Account(entry.pw_name, entry.pw_uid, entry.pw_gid)

    def users(self) -> Iterable[Account]:
        return [Account(e.pw_name, e.pw_uid, e.pw_gid) for e in pwd.getpwall()]

    def groups(self) -> Iterable[Group]:
        return [Group(e.gr_name, e.gr_gid, tuple(e.gr_mem)) for e in grp.getgrall()]


class InMemoryUserDatabase:
    """
    A fixed set of users and groups.
    """

    def __init__(self, accounts: Iterable[Account] = (), groups: Iterable[Group] = ()) -> None:
        self._accounts = {account.name: account for account in accounts}
        self._groups = list(groups)

    def user(self, name: str) -> Account | None:
        return self._accounts.get(name)

    def users(self) -> Iterable[Account]:
        return list(self._accounts.values())

    def groups(self) -> Iterable[Group]:
        return list(self._groups)


def _groupsOf(users: UserDatabase, name: str) -> list[Group]:
    """
    The groups C{name} belongs to: listed as a member, or as its primary group.
    """
    account = users.user(name)
    primary = account.gid if account is not None else None
    return [g for g in users.groups() if name in g.members or g.gid == primary]


def _membersOf(users: UserDatabase, groupPattern: str) -> dict[str, Account]:
    """
    The existing users in the groups whose name matches C{groupPattern}.
    """
    groups = [g for g in users.groups() if patternMatches(groupPattern, g.name)]
    found: dict[str, Account] = {}
    gids = {g.gid for g in groups}
    for group in groups:
        for name in group.members:
            account = users.user(name)
            if account is not None:
                found[account.name] = account
    if gids:
        for account in users.users():
            if account.gid in gids:
                found[account.name] = account
    return found


# -- the ACL ------------------------------------------------------------------


class PublisherAcl:
    """
    The C{publisher_acl} and C{publisher_acl_blacklist} of one master.

    @ivar acl: the checked C{publisher_acl} option.
    @ivar blacklist: the checked C{publisher_acl_blacklist} option.
    """

    def __init__(
        self,
        acl: Mapping[str, Any],
        blacklist: Mapping[str, Sequence[str]] | None,
        users: UserDatabase,
        nodegroups: Mapping[str, Any] | None = None,
    ) -> None:
        """
        @param acl: as L{checkPublisherAclConfig} returns it.
        @param blacklist: as L{checkBlacklistConfig} returns it.
        @param users: where users and groups are looked up.
        @param nodegroups: the master's nodegroups, for C{N@} words in
            target restrictions.
        @raise ValueError: a target restriction is not a valid compound
            target (the message names it).
        """
        self.acl = dict(acl)
        self.blacklist = {k: list(v or []) for k, v in (blacklist or {}).items()}
        self.users = users
        self._rules: list[tuple[str, list[Rule]]] = []
        for entry, items in self.acl.items():
            # publisher_acl has no special '@' items: every rule is a Rule.
            rules = compileRules(entry, items, nodegroups, special=False)
            self._rules.append((entry, [rule for rule in rules if isinstance(rule, Rule)]))

    @classmethod
    def fromConfig(cls, config: Mapping[str, Any], users: UserDatabase) -> PublisherAcl:
        """
        @param config: a master config (C{publisher_acl},
            C{publisher_acl_blacklist}, C{nodegroups}).
        """
        return cls(
            config.get("publisher_acl") or {},
            config.get("publisher_acl_blacklist") or {},
            users,
            config.get("nodegroups") or {},
        )

    @property
    def enabled(self) -> bool:
        """
        Is either option set? If not, only the master's own user publishes
        and nothing here is consulted.
        """
        return bool(self.acl) or any(self.blacklist.values())

    # -- whom the ACL names

    def _entryMatches(self, entry: str, user: str, groups: list[Group] | None) -> bool:
        if entry.endswith(GROUP_SUFFIX):
            pattern = entry[: -len(GROUP_SUFFIX)]
            return any(patternMatches(pattern, g.name) for g in groups or [])
        return patternMatches(entry, user)

    def rulesFor(self, user: str) -> list[Rule]:
        """
        Everything the ACL grants C{user}: the items of every entry whose
        user pattern matches it or names a group it belongs to. Blocking
        (group lookups).
        """
        needGroups = any(entry.endswith(GROUP_SUFFIX) for entry, _ in self._rules)
        groups = _groupsOf(self.users, user) if needGroups else None
        rules: list[Rule] = []
        for entry, entryRules in self._rules:
            if self._entryMatches(entry, user, groups):
                rules.extend(entryRules)
        return rules

    def blacklistedUser(self, user: str) -> str | None:
        """
        @return: the C{publisher_acl_blacklist} C{users} pattern C{user}
            matches, or L{None}.
        """
        for pattern in self.blacklist.get("users", []):
            if patternMatches(pattern, user):
                return pattern
        return None

    def blacklistedFunction(self, fun: str) -> str | None:
        """
        @return: the C{publisher_acl_blacklist} C{modules} pattern C{fun}
            matches, or L{None}.
        """
        for pattern in self.blacklist.get("modules", []):
            if patternMatches(pattern, fun):
                return pattern
        return None

    # -- decisions

    def checkBlacklist(self, user: str, fun: str) -> None:
        """
        Refuse C{fun} if the user or the function is blacklisted. This
        applies to every publisher, the master's own user included, as in
        Salt.

        @raise AclRefused: saying which pattern refused it.
        """
        pattern = self.blacklistedUser(user)
        if pattern is not None:
            raise AclRefused(
                f"Authorization error occurred: user {user} may not publish anything:"
                f" the name matches {pattern!r} in publisher_acl_blacklist users"
            )
        pattern = self.blacklistedFunction(fun)
        if pattern is not None:
            raise AclRefused(
                f"Authorization error occurred: user {user} may not run {fun}:"
                f" it matches {pattern!r} in publisher_acl_blacklist modules"
            )

    def authorize(
        self,
        user: str,
        fun: str,
        minions: Sequence[str],
        grainsById: Mapping[str, Any] | None = None,
        ownFindJob: bool = False,
    ) -> Decision:
        """
        May C{user}, a publisher_acl user, publish C{fun} to C{minions}?

        The blacklist is checked first. Then C{fun} must be allowed by one
        of the user's items, and each of C{minions} must be covered by an
        item that allows C{fun}: one without a target, or one whose target
        surely matches the minion (with the master's cached grains; a
        minion whose grains are unknown is not covered by a grain word).
        Salt requires one item to cover all the minions; here each minion
        may be covered by a different item, which grants nothing that
        publishing to each separately would not.

        @param minions: the minions the target reaches (the master's
            expected minions), possibly none.
        @param grainsById: the master's grains cache.
        @param ownFindJob: the call is C{saltutil.find_job} about a job of
            this user on minions that job targeted: always allowed after
            the blacklist (Salt whitelists C{saltutil.find_job}; we only
            for one's own jobs, since its answer shows the job's arguments).
        @return: how it was allowed.
        @raise AclRefused: why not, naming the user, the function and the
            minions refused.
        """
        self.checkBlacklist(user, fun)
        if ownFindJob:
            return Decision(restricted=False)
        rules = self.rulesFor(user)
        if not rules:
            raise AclRefused(
                f"Authorization error occurred: user {user} is not permitted to publish:"
                " no publisher_acl entry names this user or one of its groups"
            )
        return decideByRules(rules, fun, minions, grainsById, f"user {user}", user, "publisher_acl")

    def refuseRunner(self, user: str, fun: object) -> AclRefused:
        """
        @return: the refusal of a runner call by a publisher_acl user.
        """
        return AclRefused(
            f"Authorization error occurred: user {user} may not run the runner {fun}:"
            " publisher_acl only lets users publish jobs to minions; runners need the"
            " master's own user (Salt requires external_auth for them, which salttwist"
            " does not have)"
        )


# -- key files ----------------------------------------------------------------


def keyAccounts(
    acl: PublisherAcl, excludeUids: Iterable[int] = (0,)
) -> tuple[dict[str, Account], list[str]]:
    """
    The system users that get a key: named in C{publisher_acl} directly,
    through a pattern matched against every user (as Salt does), or as
    members of a C{group%}. Blocking (user and group lookups).

    @param excludeUids: users that use C{.root_key} instead (uid 0 and the
        master's own uid) get no key of their own.
    @return: the accounts by name, and a note for each entry or user that
        gets no key (no such user, an invalid name), for the log.
    """
    excluded = set(excludeUids)
    found: dict[str, Account] = {}
    notes: list[str] = []
    allUsers: list[Account] | None = None
    for entry in acl.acl:
        if entry.endswith(GROUP_SUFFIX):
            members = _membersOf(acl.users, entry[: -len(GROUP_SUFFIX)])
            if not members:
                notes.append(f"publisher_acl entry {entry!r}: no such group, or it has no members")
            found.update(members)
        elif _isConcreteName(entry):
            account = acl.users.user(entry)
            if account is None:
                notes.append(f"publisher_acl entry {entry!r}: no such user")
            else:
                found[account.name] = account
        else:
            if allUsers is None:
                allUsers = list(acl.users.users())
            found.update((a.name, a) for a in allUsers if patternMatches(entry, a.name))
    accounts: dict[str, Account] = {}
    for name, account in sorted(found.items()):
        if account.uid in excluded:
            continue
        if not USER_NAME.match(name):
            notes.append(f"user {name!r} gets no key: the name is not valid in a file name")
            continue
        accounts[name] = account
    return accounts, notes


def writeUserKeys(
    cachedir: str,
    accounts: Mapping[str, Account],
    chown: Callable[[str, int], None] | None = None,
) -> dict[str, bytes]:
    """
    Write a fresh key for each of C{accounts} as C{cachedir/.<user>_key}:
    32 random bytes in hex, mode 0400, replaced atomically (a symlink at the
    path is replaced, never followed), then given to the user. Blocking.

    @param chown: gives a file to a uid; by default C{os.chown} without
        following symlinks. If it fails (the master does not run as root)
        the key stays the master's and a warning says the user cannot
        publish.
    @return: the keys by user name.
    """
    if chown is None:

        def chown(path: str, uid: int) -> None:
            os.chown(path, uid, -1, follow_symlinks=False)

    keys: dict[str, bytes] = {}
    for name, account in accounts.items():
        path = userKeyFile(cachedir, name)
        key = os.urandom(32)
        atomicWrite(path, key.hex().encode("ascii"), 0o400)
        try:
            chown(path, account.uid)
        except OSError as e:
            _log.warn(
                "cannot give {path} to {user} ({error}): the master is not root,"
                " so {user} cannot read its key and cannot publish",
                path=path,
                user=name,
                error=e.strerror or e,
            )
        keys[name] = key
    return keys


def removeStaleKeys(cachedir: str, keep: Iterable[str]) -> list[str]:
    """
    Remove the C{.<user>_key} files of users not in C{keep} (no longer in
    C{publisher_acl}); C{.root_key} stays. Blocking.

    @return: the user names whose keys were removed.
    """
    keepers = set(keep) | {_ROOT_KEY_USER}
    removed = []
    try:
        names = os.listdir(cachedir)
    except FileNotFoundError:
        return []
    for name in sorted(names):
        match = _KEY_FILE.match(name)
        if match is None or match["user"] in keepers:
            continue
        try:
            os.unlink(os.path.join(cachedir, name))
        except FileNotFoundError:
            continue
        removed.append(match["user"])
    return removed


def unreachableDirectory(
    path: str,
    account: Account,
    gids: Iterable[int],
    statPath: Callable[[str], os.stat_result] = os.stat,
) -> str | None:
    """
    The first directory on the way to C{path} (C{path} included) that
    C{account} may not search, so cannot reach a file in: checked by the
    owner, group and other execute bits (not ACLs).

    @param gids: the account's groups (its primary group included).
    @return: that directory, or L{None} if every one is searchable (or the
        account is uid 0).
    """
    if account.uid == 0:
        return None
    groupIds = set(gids) | {account.gid}
    current = os.path.abspath(path)
    chain = []
    while True:
        chain.append(current)
        parent = os.path.dirname(current)
        if parent == current:
            break
        current = parent
    for directory in reversed(chain):
        try:
            info = statPath(directory)
        except OSError:
            return directory
        if info.st_uid == account.uid:
            bit = stat.S_IXUSR
        elif info.st_gid in groupIds:
            bit = stat.S_IXGRP
        else:
            bit = stat.S_IXOTH
        if not info.st_mode & bit:
            return directory
    return None


def groupIdsOf(users: UserDatabase, account: Account) -> set[int]:
    """
    @return: the gids of every group C{account} belongs to.
    """
    return {g.gid for g in _groupsOf(users, account.name)} | {account.gid}


def setUpUserKeys(
    config: Mapping[str, Any],
    acl: PublisherAcl,
    excludeUids: Iterable[int],
    chown: Callable[[str, int], None] | None = None,
    statPath: Callable[[str], os.stat_result] = os.stat,
) -> dict[str, bytes]:
    """
    What the master does at start: work out who gets a key
    (L{keyAccounts}), remove the keys of users no longer named
    (L{removeStaleKeys}), write fresh ones (L{writeUserKeys}), and warn
    about every user who cannot reach its key or the event bus because a
    directory on the way is not searchable by it. Blocking.

    @param config: the master config (C{cachedir}, C{sock_dir}).
    @param excludeUids: uid 0 and the master's own uid.
    @return: the keys by user name.
    """
    cachedir = config["cachedir"]
    accounts, notes = keyAccounts(acl, excludeUids)
    for note in notes:
        _log.warn("{note}", note=note)
    for name in removeStaleKeys(cachedir, accounts):
        _log.info("publisher_acl: removed the key of {user}, no longer named", user=name)
    keys = writeUserKeys(cachedir, accounts, chown)
    for name, account in accounts.items():
        gids = groupIdsOf(acl.users, account)
        for what, directory in (("its key", cachedir), ("the event bus", config["sock_dir"])):
            blocked = unreachableDirectory(directory, account, gids, statPath)
            if blocked is not None:
                _log.warn(
                    "publisher_acl: {user} cannot reach {what}: {directory} is not searchable"
                    " by it (make it so, e.g. chmod o+x {directory}, or chgrp a group of"
                    " {user} and chmod g+x; see the README)",
                    user=name,
                    what=what,
                    directory=blocked,
                )
    if accounts:
        _log.info("publisher_acl: keys written for {users}", users=", ".join(accounts))
    return keys
