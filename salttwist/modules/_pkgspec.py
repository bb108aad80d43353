# -*- test-case-name: tests.test_pkgspec -*-
"""
Debian package versions: dpkg's ordering, and Salt's version
specifications (C{1.2-1}, C{>=1.2}, C{>=1.0,<2.0}, C{!=1.3}, C{1.2*}).

Versions are compared in-process by a port of dpkg's C{verrevcmp} (epoch,
then upstream version, then revision; C{~} sorts before anything, letters
before other characters), rather than by running C{dpkg --compare-versions}
as Salt's C{aptpkg.version_cmp} does (up to three processes per
comparison; a state over many packages compares many versions) or through
python-apt (a system package, not installable in a virtualenv from PyPI).
L{tests.test_pkgspec} checks the port against the real C{dpkg
--compare-versions} over a set of awkward versions.

A specification is Salt's (C{salt.states.pkg._parse_version_string}):
conditions separated by commas, each an operator (C{==}, C{=} or none
meaning C{==}; C{!=}, C{<}, C{<=}, C{>}, C{>=}) and a version; a version
with C{==} may be a glob (C{1.2*}). All conditions must hold.
"""

from __future__ import annotations

import fnmatch
import re
from collections.abc import Iterable

#: One condition (Salt's C{salt.utils.pkg.split_comparison}).
_CONDITION = re.compile(r"^(<=>|!=|>=|<=|>>|<<|<>|>|<|==|=)?\s*([^<>=!,\s][^<>=,\s]*)$")

#: The operators a condition may use, with the comparison results that
#: satisfy each.
_OPERATORS = {
    "==": (0,),
    "!=": (-1, 1),
    "<": (-1,),
    "<=": (-1, 0),
    ">": (1,),
    ">=": (0, 1),
}


def _order(c: str) -> int:
    if c.isdigit():
        return 0
    if c.isalpha():
        return ord(c)
    if c == "~":
        return -1
    return ord(c) + 256 if c else 0


def _compareFragment(a: str, b: str) -> int:
    """
    dpkg's C{verrevcmp}: compare upstream versions or revisions.
    """
    i = j = 0
    while i < len(a) or j < len(b):
        while (i < len(a) and not a[i].isdigit()) or (j < len(b) and not b[j].isdigit()):
            ac = _order(a[i]) if i < len(a) else 0
            bc = _order(b[j]) if j < len(b) else 0
            if ac != bc:
                return ac - bc
            i += 1
            j += 1
        while i < len(a) and a[i] == "0":
            i += 1
        while j < len(b) and b[j] == "0":
            j += 1
        first = 0
        while i < len(a) and a[i].isdigit() and j < len(b) and b[j].isdigit():
            if not first:
                first = ord(a[i]) - ord(b[j])
            i += 1
            j += 1
        if i < len(a) and a[i].isdigit():
            return 1
        if j < len(b) and b[j].isdigit():
            return -1
        if first:
            return first
    return 0


def _split(version: str) -> tuple[int, str, str]:
    epoch = 0
    if ":" in version:
        head, version = version.split(":", 1)
        epoch = int(head) if head.isdigit() else 0
    upstream, _, revision = version.rpartition("-")
    if not upstream:
        upstream, revision = revision, ""
    return epoch, upstream, revision


def compareVersions(v1: str, v2: str, ignoreEpoch: bool = False) -> int:
    """
    Compare two Debian versions as dpkg does.

    @param ignoreEpoch: compare without the epochs (C{1:2.0} equals C{2.0}).
    @return: C{-1}, C{0} or C{1}.
    """
    e1, u1, r1 = _split(str(v1))
    e2, u2, r2 = _split(str(v2))
    if ignoreEpoch:
        e1 = e2 = 0
    for diff in (e1 - e2, _compareFragment(u1, u2), _compareFragment(r1, r2)):
        if diff:
            return 1 if diff > 0 else -1
    return 0


def parseSpec(spec: str) -> list[tuple[str, str]]:
    """
    Split a version specification into C{(operator, version)} conditions
    (C{=} and no operator are C{==}).

    @raise ValueError: an empty condition, or an operator other than
        C{==}, C{!=}, C{<}, C{<=}, C{>} and C{>=} (dpkg's C{<<}/C{>>} are
        refused rather than misread), naming it.
    """
    conditions = []
    for part in str(spec).split(","):
        text = part.strip()
        match = _CONDITION.match(text)
        if match is None:
            raise ValueError(
                f"invalid version specification {spec!r}: cannot read the condition {text!r} "
                "(an operator ==, !=, <, <=, > or >= and a version, conditions separated by "
                "commas)"
            )
        operator = match.group(1) or "=="
        if operator == "=":
            operator = "=="
        if operator not in _OPERATORS:
            raise ValueError(
                f"invalid version specification {spec!r}: the operator {operator!r} is not "
                "one of ==, !=, <, <=, > and >="
            )
        conditions.append((operator, match.group(2).strip()))
    return conditions


def isExact(spec: str) -> bool:
    """
    @return: whether C{spec} names one version (or glob) for apt to
        install (C{1.2-1}, C{=1.2-1}), not a range to resolve first.
    """
    conditions = parseSpec(spec)
    return len(conditions) == 1 and conditions[0][0] == "=="


def pinnable(spec: str) -> str:
    """
    @return: the version of an exact C{spec} as apt takes it
        (C{name=<this>}).
    """
    return parseSpec(spec)[0][1]


def _holds(version: str, operator: str, wanted: str, ignoreEpoch: bool | None) -> bool:
    if operator == "==" and fnmatch.fnmatch(version, wanted):
        return True
    if ignoreEpoch is None:
        # Salt's _check_ignore_epoch: an equality with a version without
        # an epoch ignores the installed one's epoch.
        ignoreEpoch = "<" not in operator and ">" not in operator and ":" not in wanted
    return compareVersions(version, wanted, ignoreEpoch) in _OPERATORS[operator]


def satisfies(version: str, spec: str, ignoreEpoch: bool | None = None) -> bool:
    """
    @return: whether C{version} meets every condition of C{spec}.

    @param ignoreEpoch: compare without epochs (L{None}: as Salt, only for
        C{==}/C{!=} conditions whose version has no epoch).
    @raise ValueError: a malformed C{spec}.
    """
    return all(
        _holds(str(version), operator, wanted, ignoreEpoch) for operator, wanted in parseSpec(spec)
    )


def anySatisfies(versions: Iterable[str], spec: str, ignoreEpoch: bool | None = None) -> bool:
    """
    Salt's C{_fulfills_version_string}: whether one of the installed
    C{versions} meets C{spec}.
    """
    return any(satisfies(v, spec, ignoreEpoch) for v in versions)


def newestSatisfying(
    versions: Iterable[str], spec: str, ignoreEpoch: bool | None = None
) -> str | None:
    """
    @return: the newest of C{versions} (those a repository offers) that
        meets C{spec}, or L{None}.
    """
    best: str | None = None
    for candidate in versions:
        if satisfies(candidate, spec, ignoreEpoch) and (
            best is None or compareVersions(candidate, best) > 0
        ):
            best = candidate
    return best


def described(name: str, spec: str | None) -> str:
    """
    Salt's C{_get_desired_pkg}: C{name=1.2}, C{name>=1.2}, or C{name}.
    """
    if not spec:
        return name
    joiner = "" if spec.startswith(("<", ">", "=", "!")) else "="
    return f"{name}{joiner}{spec}"
