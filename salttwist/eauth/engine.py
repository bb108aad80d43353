# -*- test-case-name: tests.test_eauth_engine,tests.test_acl -*-
"""
The one ACL engine of salttwist, shared by C{publisher_acl}
(L{salttwist.master.acl}) and C{external_auth} (L{salttwist.eauth.config}):
what an auth list (Salt's C{auth_list}, the items a user's entries grant)
allows.

An auth list is a list of items::

    - test.ping                  # a function on every minion
    - 'web*': [test.*, pkg.*]    # functions on the minions a target matches
    - '@runner'                  # every runner function
    - '@wheel'                   # every wheel function
    - '@jobs'                    # every function of the runner module jobs
    - '@runner': [manage.up]     # these runner functions
    - '@key': [list_all]         # these functions of the (runner or wheel) module key

The special C{@} items are Salt's (C{salt/utils/minions.py},
C{CkMinions.spec_check}); publisher_acl does not use them. Function
patterns are matched as publisher_acl matches them (L{patternMatches}): a
shell glob, or a regular expression that must match the whole name when it
uses syntax no glob has. Salt reads every pattern as a regular expression
matched at the start of the name, so C{test.*} also allows
C{testinfra.run} there and not here.

A C{local} call (a job published to minions) is allowed when the function
is allowed by an item without a target, or when every targeted minion is
covered by an item that allows the function and whose target surely
matches it (with the master's cached grains). Salt wants one item to cover
all the minions; here each minion may be covered by a different item,
which grants nothing that publishing to each separately would not.

Only C{fnmatch}, C{re} and the target compiler: the master imports this.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from salttwist.aclconfig import patternMatches
from salttwist.targeting import TargetError, TargetMatcher, compileTarget

__all__ = [
    "KINDS",
    "SPECIAL_PREFIX",
    "AclRefused",
    "Decision",
    "Permissions",
    "Rule",
    "SpecialRule",
    "authorize",
    "compileRules",
    "uncoveredMinions",
]

#: What a call is: a job for minions, a runner or wheel function, or a look
#: at the job cache (the C{jobs} runner module, as Salt's API does it).
KINDS = ("local", "runner", "wheel", "jobs")
#: The mark of Salt's special items (C{@runner}, C{@wheel}, C{@<module>}).
SPECIAL_PREFIX = "@"
#: How many refused minions a message names before "and N more".
_MESSAGE_MINIONS = 10


class AclRefused(ValueError):
    """
    A call the ACL does not allow. The message says which user, which
    function and, where it applies, which minions, and which rule refused
    it; the master sends it to the client as it is.
    """


@dataclass(frozen=True)
class Rule:
    """
    One item of an auth list granting functions to minions: on every minion
    (C{target} is L{None}) or on the minions C{target} (a compound target)
    matches.

    @ivar entry: the config entry (user pattern) the item came from.
    """

    entry: str
    functions: tuple[str, ...]
    target: str | None
    matcher: TargetMatcher | None = field(default=None, compare=False, repr=False)

    def allows(self, fun: str) -> bool:
        """
        Does one of the function patterns match C{fun}?
        """
        return any(patternMatches(pattern, fun) for pattern in self.functions)

    def covers(self, minion: str, grains: Any) -> bool:
        """
        Does the item reach C{minion} surely (with its cached C{grains}, or
        L{None} if unknown: a grain word then is not sure)?
        """
        if self.matcher is None:
            return True
        return self.matcher.evaluate(minion, grains) is True


@dataclass(frozen=True)
class SpecialRule:
    """
    One C{@} item: C{@runner}, C{@wheel} (C{@runners} and C{@wheels} too)
    allow functions of that kind; C{@<module>} allows the functions of the
    runner or wheel module of that name.

    @ivar scope: the word after the C{@}.
    @ivar functions: the patterns the function must match (the whole
        C{module.function} name for C{@runner}/C{@wheel}, the function's
        name within the module for C{@<module>}), or L{None} for all.
    """

    entry: str
    scope: str
    functions: tuple[str, ...] | None

    def allows(self, kind: str, fun: str) -> bool:
        """
        Does this item allow the C{kind} (C{runner} or C{wheel}) function
        C{fun} (C{module.function})?
        """
        module, _, name = fun.partition(".")
        if self.scope in (kind, kind + "s"):
            subject = fun
        elif self.scope == module:
            subject = name
        else:
            return False
        if self.functions is None:
            return True
        return any(patternMatches(pattern, subject) for pattern in self.functions)


@dataclass(frozen=True)
class Decision:
    """
    A call the ACL allows.

    @ivar restricted: whether it relied on target restrictions: the master
        then publishes to the checked minions by name, so that no minion
        whose real grains differ from the master's cache runs it too.
    """

    restricted: bool


def compileRules(
    entry: str,
    items: Iterable[Any],
    nodegroups: Mapping[str, Any] | None = None,
    special: bool = True,
    what: str = "publisher_acl",
) -> list[Rule | SpecialRule]:
    """
    Compile checked auth list items (see L{salttwist.eauth.config} and
    L{salttwist.aclconfig}) into rules.

    @param entry: the user pattern the items belong to, for messages.
    @param special: read C{@} items as Salt's special items (external_auth);
        publisher_acl reads them as function patterns, which match nothing.
    @param what: the option's name, for messages.
    @raise ValueError: a target restriction is not a valid compound target
        (the message names the option, the entry and the target).
    """
    rules: list[Rule | SpecialRule] = []
    for item in items:
        if isinstance(item, dict):
            [(key, functions)] = item.items()
            if isinstance(functions, str):
                functions = [functions]
            if special and key.startswith(SPECIAL_PREFIX):
                rules.append(SpecialRule(entry, key[1:], tuple(functions)))
                continue
            try:
                matcher = compileTarget(key, "compound", nodegroups)
            except TargetError as e:
                raise ValueError(f"{what} entry {entry!r}: invalid target {key!r}: {e}") from None
            rules.append(Rule(entry, tuple(functions), key, matcher))
        elif special and item.startswith(SPECIAL_PREFIX):
            rules.append(SpecialRule(entry, item[1:], None))
        else:
            rules.append(Rule(entry, (item,), None))
    return rules


def uncoveredMinions(
    allowing: Iterable[Rule], minions: Iterable[str], grainsById: Mapping[str, Any] | None = None
) -> list[str]:
    """
    @param allowing: the rules that allow the function.
    @return: the minions none of C{allowing} surely reaches, sorted.
    """
    wanted = set(minions)
    grains = grainsById or {}
    for rule in allowing:
        if not wanted:
            break
        wanted = {m for m in wanted if not rule.covers(m, grains.get(m))}
    return sorted(wanted)


def describeMinions(minions: Sequence[str]) -> str:
    """
    @return: the first few of C{minions}, then "and N more".
    """
    shown = ", ".join(minions[:_MESSAGE_MINIONS])
    if len(minions) > _MESSAGE_MINIONS:
        shown += f" and {len(minions) - _MESSAGE_MINIONS} more"
    return shown


class Permissions:
    """
    A compiled auth list: what one user (or one token) may do.

    @ivar items: the auth list as given (kept in tokens).
    @ivar rules: its rules.
    """

    def __init__(self, rules: Sequence[Rule | SpecialRule], items: Sequence[Any] = ()) -> None:
        self.rules = list(rules)
        self.items = list(items)

    @classmethod
    def fromItems(
        cls,
        items: Sequence[Any],
        nodegroups: Mapping[str, Any] | None = None,
        entry: str = "external_auth",
    ) -> Permissions:
        """
        Compile an auth list of checked items (L{salttwist.eauth.config}).

        @raise ValueError: a target is invalid.
        """
        return cls(compileRules(entry, items, nodegroups, True, "external_auth"), items)

    def __bool__(self) -> bool:
        return bool(self.rules)

    def authorize(
        self,
        fun: str | Sequence[str],
        minions: Iterable[str] = (),
        kind: str = "local",
        grainsById: Mapping[str, Any] | None = None,
        user: str = "the user",
    ) -> Decision:
        """
        May these permissions call C{fun}? A list of functions (Salt's
        compound commands) must be allowed whole, every function on every
        minion (Salt allows it when one function is allowed).

        @param minions: for a C{local} call, the minions the target reaches
            (the master's expected minions), possibly none.
        @param kind: one of L{KINDS}. A C{jobs} call is a call of the runner
            module C{jobs}: C{fun} is C{jobs.<function>} or C{<function>}.
        @param grainsById: the master's grains cache, for target restrictions.
        @param user: who asks, for messages.
        @return: how it was allowed.
        @raise AclRefused: why not.
        @raise ValueError: C{kind} is unknown, or a runner or wheel
            function name is not C{module.function}.
        """
        if kind not in KINDS:
            raise ValueError(f"unknown kind of call {kind!r}; the kinds are {', '.join(KINDS)}")
        if isinstance(fun, (list, tuple)):
            if not fun:
                raise ValueError("the list of functions is empty")
            minions = list(minions)
            decisions = [self.authorize(f, minions, kind, grainsById, user) for f in fun]
            return Decision(restricted=any(d.restricted for d in decisions))
        if not isinstance(fun, str) or not fun:
            raise ValueError(f"the function must be a non-empty string, not {fun!r}")
        if kind == "local":
            return self._authorizeLocal(fun, minions, grainsById, user)
        if kind == "jobs":
            kind, fun = "runner", fun if fun.startswith("jobs.") else f"jobs.{fun}"
        if fun.count(".") != 1 or fun.startswith(".") or fun.endswith("."):
            raise ValueError(
                f"A command invocation error occurred: Check syntax: the {kind} function"
                f" must be 'module.function', not {fun!r}"
            )
        for rule in self.rules:
            if isinstance(rule, SpecialRule) and rule.allows(kind, fun):
                return Decision(restricted=False)
        raise AclRefused(
            f"Authorization error occurred: {user} is not permitted to run the {kind}"
            f" function {fun}: it needs '@{kind}', '@{fun.partition('.')[0]}' or"
            f" {{'@{kind}': [patterns]}} in external_auth"
        )

    def _authorizeLocal(
        self,
        fun: str,
        minions: Iterable[str],
        grainsById: Mapping[str, Any] | None,
        user: str,
    ) -> Decision:
        rules = [rule for rule in self.rules if isinstance(rule, Rule)]
        return decideByRules(rules, fun, minions, grainsById, user, user, "external_auth")


def decideByRules(
    rules: Sequence[Rule],
    fun: str,
    minions: Iterable[str],
    grainsById: Mapping[str, Any] | None,
    who: str,
    user: str,
    aclName: str,
) -> Decision:
    """
    The one decision of C{publisher_acl} and C{external_auth} for a job:
    some rule must allow C{fun}, and the allowing rules' targets must
    cover every minion reached (unless one of them has no target).

    @param who: how refusals name the caller (C{user fred}, C{fred}).
    @param user: the user's name, in the refusals' reason.
    @param aclName: the option that granted, in the refusals' reason.
    @raise AclRefused: with Salt's "Authorization error occurred" words.
    """
    allowing = [rule for rule in rules if rule.allows(fun)]
    if not allowing:
        raise AclRefused(
            f"Authorization error occurred: {who} is not permitted to run {fun}:"
            f" {aclName} allows {user} {summarize(rules)}"
        )
    if any(rule.target is None for rule in allowing):
        return Decision(restricted=False)
    refused = uncoveredMinions(allowing, minions, grainsById)
    if refused:
        targets = ", ".join(sorted({repr(rule.target) for rule in allowing}))
        raise AclRefused(
            f"Authorization error occurred: {who} is not permitted to run {fun}"
            f" on {describeMinions(refused)}: {aclName} allows {fun} for {user}"
            f" only on minions matching {targets}"
        )
    return Decision(restricted=True)


def summarize(rules: Sequence[Rule]) -> str:
    """
    What C{rules} allow, for a refusal message: "only test.ping, network.*
    on every minion; test.* on minions matching 'web*'", or "nothing".
    """
    byTarget: dict[str | None, list[str]] = {}
    for rule in rules:
        byTarget.setdefault(rule.target, []).extend(rule.functions)
    if not byTarget:
        return "no function on minions"
    parts = []
    for target, functions in byTarget.items():
        where = "on every minion" if target is None else f"on minions matching {target!r}"
        parts.append(f"{', '.join(dict.fromkeys(functions))} {where}")
    return "only " + "; ".join(parts)


def authorize(
    perms: Permissions | Sequence[Any],
    fun: str | Sequence[str],
    minions: Iterable[str] = (),
    kind: str = "local",
    grainsById: Mapping[str, Any] | None = None,
    nodegroups: Mapping[str, Any] | None = None,
    user: str = "the user",
) -> Decision:
    """
    May C{perms} (a L{Permissions}, or an auth list as a token keeps it)
    call C{fun}? See L{Permissions.authorize}.

    @param nodegroups: for C{N@} words when C{perms} is an auth list.
    """
    if not isinstance(perms, Permissions):
        perms = Permissions.fromItems(list(perms), nodegroups)
    return perms.authorize(fun, minions, kind, grainsById, user)
