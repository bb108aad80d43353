# -*- test-case-name: tests.test_api_resources -*-
"""
What C{GET /stats} shows when C{collect_stats} is on: requests counted by
path and status, and their times (Salt's shows CherryPy's own figures;
the keys differ, the idea is the same).
"""

from __future__ import annotations

from typing import Any

__all__ = ["ApiStats"]


class ApiStats:
    """
    Counters of the API's requests.
    """

    def __init__(self) -> None:
        self.started: float | None = None
        self.requests = 0
        self.byStatus: dict[int, int] = {}
        self.byPath: dict[str, dict[str, float]] = {}

    def record(self, path: str, status: int, seconds: float) -> None:
        """
        Count one answered request to C{path} (its first segment).
        """
        self.requests += 1
        self.byStatus[status] = self.byStatus.get(status, 0) + 1
        entry = self.byPath.setdefault(path, {"count": 0, "total_seconds": 0.0, "max_seconds": 0.0})
        entry["count"] += 1
        entry["total_seconds"] += seconds
        entry["max_seconds"] = max(entry["max_seconds"], seconds)

    def asDict(self, now: float) -> dict[str, Any]:
        """
        @return: the figures, for C{GET /stats}.
        """
        return {
            "salttwist-api": {
                "Uptime": now - self.started if self.started is not None else 0.0,
                "Requests": self.requests,
                "Requests by status": {str(k): v for k, v in sorted(self.byStatus.items())},
                "Requests by path": self.byPath,
            }
        }
