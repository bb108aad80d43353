# -*- test-case-name: tests.test_states_file_tidy -*-
"""
What C{file.tidied} removes (Salt's C{file.tidied} criteria): the entries
of a directory tree, deepest first, whose age (in calendar days, by
C{atime}, C{mtime} or C{ctime}) and size reach the limits, whose name (or
full path) matches one of C{matches} and none of C{exclude}, directories
only with C{rmdirs} and symlinks only with C{rmlinks}.

Blocking: called from a state function's thread.
"""

from __future__ import annotations

import datetime
import os
import re
import stat
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

#: The times C{time_comparison} may name.
TIME_FIELDS = ("atime", "mtime", "ctime")

_UNITS = "bkmgtpezy"


class TidyError(ValueError):
    """
    An argument of C{file.tidied} is unusable; the message names it.
    """


def humanToBytes(size: Any) -> int:
    """
    Salt's C{human_to_bytes} with metric units: C{1024}, C{"2K"} or
    C{"2KiB"} (powers of 1024), C{"2KB"} (powers of 1000).

    @raise TidyError: for what is not a size (Salt reads it as 0, which
        would remove every file).
    """
    if isinstance(size, bool):
        raise TidyError(f"Invalid size: {size!r}")
    if isinstance(size, (int, float)):
        if size < 0:
            raise TidyError(f"Invalid size: {size!r}")
        return int(size)
    match = re.fullmatch(r"\s*([0-9]*\.?[0-9]+)\s*([A-Za-z]*)\s*", str(size))
    if match is None:
        raise TidyError(f"Invalid size: {size!r}")
    value = float(match.group(1))
    unit = match.group(2).lower() or "b"
    if re.fullmatch(r"[kmgtpezy]b", unit):
        return int(value * 10 ** (_UNITS.index(unit[0]) * 3))
    if re.fullmatch(r"b|[kmgtpezy](ib)?", unit):
        return int(value * 2 ** (_UNITS.index(unit[0]) * 10))
    raise TidyError(f"Invalid size: {size!r}")


def _patterns(what: str, given: Any, default: list[str] | None) -> list[re.Pattern[str]]:
    if given is None:
        given = default or []
    if isinstance(given, str):
        given = [given]
    if not isinstance(given, list):
        raise TidyError(f"{what} must be a list of regular expressions")
    try:
        return [re.compile(str(one)) for one in given]
    except re.error as e:
        raise TidyError(f"Invalid regular expression in {what}: {e}") from e


@dataclass
class TidyRules:
    """
    The criteria of one C{file.tidied}, checked and compiled.

    @ivar age: days (an entry this old or older qualifies).
    @ivar size: bytes (a regular file this big or bigger qualifies).
    @ivar combine: how age and size combine: C{"OR"}, C{"AND"}, or
        C{"age"}/C{"size"} for that one alone.
    """

    age: int
    size: int
    combine: str
    matches: list[re.Pattern[str]]
    exclude: list[re.Pattern[str]]
    fullPathMatch: bool
    rmdirs: bool
    rmlinks: bool
    timeField: str

    @classmethod
    def fromArguments(
        cls,
        age: Any = 0,
        matches: Any = None,
        rmdirs: Any = False,
        size: Any = 0,
        exclude: Any = None,
        full_path_match: Any = False,
        time_comparison: Any = "atime",
        age_size_logical_operator: Any = "OR",
        age_size_only: Any = None,
        rmlinks: Any = True,
    ) -> TidyRules:
        """
        Salt's argument handling: an unknown C{time_comparison} means
        C{atime}, an unknown operator C{OR}, an unknown C{age_size_only}
        neither.

        @raise TidyError: for an age, size or regular expression that
            cannot be used.
        """
        try:
            days = int(age)
        except (TypeError, ValueError):
            raise TidyError(f"Invalid age: {age!r} (a number of days)") from None
        combine = str(age_size_logical_operator or "OR").upper()
        if combine not in ("AND", "OR"):
            combine = "OR"
        only = str(age_size_only).lower() if age_size_only else ""
        if only in ("age", "size"):
            combine = only
        field = str(time_comparison).lower() if isinstance(time_comparison, str) else ""
        return cls(
            age=days,
            size=humanToBytes(size),
            combine=combine,
            matches=_patterns("matches", matches, [".*"]),
            exclude=_patterns("exclude", exclude, None),
            fullPathMatch=bool(full_path_match),
            rmdirs=bool(rmdirs),
            rmlinks=bool(rmlinks),
            timeField=field if field in TIME_FIELDS else "atime",
        )

    def nameMatches(self, name: str) -> bool:
        """
        @return: whether C{name} matches (from its start) one of the
            C{matches} and none of the C{exclude} expressions.
        """
        if not any(p.match(name) for p in self.matches):
            return False
        return not any(p.match(name) for p in self.exclude)

    def oldOrBig(self, days: int, size: int) -> bool:
        """
        @return: whether an entry C{days} old of C{size} bytes qualifies.
        """
        old = days >= self.age
        big = size >= self.size
        if self.combine == "age":
            return old
        if self.combine == "size":
            return big
        if self.combine == "AND":
            return old and big
        return old or big


def toTidy(
    top: str,
    rules: TidyRules,
    followlinks: bool = False,
    today: Callable[[], datetime.date] = datetime.date.today,
) -> list[str]:
    """
    @return: the paths under C{top} that C{rules} would remove, deepest
        directories first (each directory's files, then its
        subdirectories, in name order), as Salt walks them.
    """
    day = today()
    chosen: list[str] = []
    for root, dirs, files in os.walk(top, topdown=False, followlinks=followlinks):
        for entry in sorted(files) + sorted(dirs):
            path = os.path.join(root, entry)
            try:
                if os.path.islink(path):
                    allowed = rules.rmlinks
                    st = os.lstat(path)
                    size = 0
                else:
                    st = os.stat(path)
                    isDir = stat.S_ISDIR(st.st_mode)
                    allowed = rules.rmdirs if isDir else True
                    size = 0 if isDir else st.st_size
            except OSError:
                # Gone since the walk listed it, or unreadable: Salt skips it.
                continue
            stamp = getattr(st, f"st_{rules.timeField}")
            days = abs((day - datetime.date.fromtimestamp(stamp)).days)
            name = path if rules.fullPathMatch else entry
            if allowed and rules.oldOrBig(days, size) and rules.nameMatches(name):
                chosen.append(path)
    return chosen
