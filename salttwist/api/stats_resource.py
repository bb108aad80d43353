# -*- test-case-name: tests.test_api_resources -*-
"""
C{GET /stats} (with C{collect_stats: True}): the API's request figures
(L{salttwist.api.stats.ApiStats}); it needs a token unless
C{stats_disable_auth} is set, as in Salt.
"""

from __future__ import annotations

from typing import Any

from salttwist.api.resource import ApiCall, ApiResource

__all__ = ["Stats"]


class Stats(ApiResource):
    """
    C{/stats}.
    """

    name = "stats"

    def __init__(self, context: Any) -> None:
        super().__init__(context)
        self.requiresToken = not context.options.statsDisableAuth  # type: ignore[misc]

    async def GET(self, call: ApiCall) -> dict[str, Any]:
        context = call.context
        return context.stats.asDict(context.clock.seconds())
