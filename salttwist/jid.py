# -*- test-case-name: tests.test_jid -*-
"""
Job ids in Salt's form: the 20-digit local timestamp C{YYYYmmddHHMMSSffffff}.
"""

from __future__ import annotations

import re
from datetime import datetime

JID_PATTERN = re.compile(r"\A[0-9]{20}\Z")


class JidGenerator:
    """
    Makes unique, increasing job ids even when two are asked for within one
    microsecond (the later one is bumped by one microsecond).
    """

    def __init__(self, now=datetime.now) -> None:
        self._now = now
        self._last = 0

    def next(self) -> str:
        """
        @return: a new jid, larger than every jid this generator made before.
        """
        value = int(self._now().strftime("%Y%m%d%H%M%S%f"))
        if value <= self._last:
            value = self._last + 1
        self._last = value
        return f"{value:020d}"


def isJid(value: object) -> bool:
    """
    @return: whether C{value} is a string of exactly 20 digits.
    """
    return isinstance(value, str) and JID_PATTERN.match(value) is not None
