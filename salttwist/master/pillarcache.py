# -*- test-case-name: tests.test_master_pillarserving -*-
"""
Each minion's pillar as last compiled, kept by the master for pillar
targeting (C{-I}, C{I@}, C{J@}) and, with C{pillar_cache}, to answer
C{_pillar} without compiling again.

Held in memory only (pillar is secret: it is not written to the master's
disk unless C{pillar_cache} says so).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any


class PillarCache:
    """
    Minion id -> its last compiled pillar.

    @ivar pillars: the cached pillar by minion id; read-only to others.
    """

    def __init__(self) -> None:
        self.pillars: dict[str, dict[str, Any]] = {}

    def get(self, minionId: str) -> dict[str, Any] | None:
        """
        @return: C{minionId}'s last compiled pillar, or L{None}.
        """
        return self.pillars.get(minionId)

    def store(self, minionId: str, pillar: dict[str, Any]) -> None:
        """
        Keep C{pillar} as C{minionId}'s.
        """
        self.pillars[minionId] = pillar

    def forget(self, minionId: str) -> None:
        """
        Drop C{minionId}'s pillar (its key was deleted or rejected).
        """
        self.pillars.pop(minionId, None)

    def byId(self) -> Mapping[str, dict[str, Any]]:
        """
        @return: every cached pillar by minion id (a live view: do not
            change it).
        """
        return self.pillars
