# -*- test-case-name: tests.test_targeting -*-
"""
Target matching, shared by the master (which minions to expect) and the minion
(whether a publication is for it). The walking skeleton knows C{glob} and
C{list}; the other Salt forms raise L{TargetError} until they land.
"""

from __future__ import annotations

import fnmatch
from collections.abc import Iterable

TARGET_TYPES = ("glob", "list")


class TargetError(ValueError):
    """
    Raised for a target expression or type that cannot be matched.
    """


def _asList(tgt: object) -> list[str]:
    if isinstance(tgt, str):
        items = [item.strip() for item in tgt.split(",")]
    elif isinstance(tgt, list) and all(isinstance(item, str) for item in tgt):
        items = [item.strip() for item in tgt]
    else:
        raise TargetError("a list target is a comma-separated string or a list of strings")
    return [item for item in items if item]


def validateTarget(tgt: object, tgtType: str) -> None:
    """
    @raise TargetError: naming the problem, if C{tgt} is not a valid target of
        type C{tgtType}.
    """
    if tgtType not in TARGET_TYPES:
        raise TargetError(f"unknown target type {tgtType!r}; supported: {', '.join(TARGET_TYPES)}")
    if tgtType == "glob":
        if not isinstance(tgt, str) or not tgt:
            raise TargetError("a glob target must be a non-empty string")
    else:
        if not _asList(tgt):
            raise TargetError("a list target must name at least one minion")


def matchMinion(minionId: str, tgt: object, tgtType: str = "glob") -> bool:
    """
    @return: whether the minion C{minionId} is targeted by C{tgt}.
    @raise TargetError: if the target is invalid.
    """
    validateTarget(tgt, tgtType)
    if tgtType == "glob":
        assert isinstance(tgt, str)
        return fnmatch.fnmatchcase(minionId, tgt)
    return minionId in _asList(tgt)


def checkMinions(minionIds: Iterable[str], tgt: object, tgtType: str = "glob") -> list[str]:
    """
    @return: the sorted ids among C{minionIds} that C{tgt} targets.
    @raise TargetError: if the target is invalid.
    """
    validateTarget(tgt, tgtType)
    return sorted(m for m in minionIds if matchMinion(m, tgt, tgtType))
