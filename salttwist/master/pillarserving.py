# -*- test-case-name: tests.test_master_pillarserving -*-
"""
Pillar's room on the master: C{_pillar} inside a minion's session
(SKELETON: the pillar-delivery slice of issue 20 fills it).

Wire: C{_pillar} C{{"saltenv", "pillarenv", "pillar_override"}} ->
C{{"ret": {pillar}}}, compiled for the session's own minion id only.
"""

from __future__ import annotations

from typing import Any


class PillarRequests:
    """
    Pillar requests from minion sessions.
    """

    #: The worker pool pillar is compiled in, or L{None} (a thread).
    workers: Any = None

    def __init__(
        self,
        config: dict[str, Any],
        clock: Any,
        runBlocking: Any,
        grainsCache: Any,
        pillarCache: Any,
    ) -> None:
        self.config = config
        self.clock = clock
        self.runBlocking = runBlocking
        self.grainsCache = grainsCache
        self.pillarCache = pillarCache

    def minionPillar(self, proto: Any, load: dict[str, Any]) -> dict[str, Any]:
        raise ValueError("pillar is not available on this master yet")
