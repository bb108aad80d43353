# -*- test-case-name: tests.test_runners_cache -*-
"""
The C{cache} runners (Salt's C{salt/runners/cache.py}): what the master
keeps of its minions. Only C{cache.grains} so far, which salttwist-api
uses for C{GET /minions} and to check target-restricted C{external_auth}
rules.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from salttwist.runners.manage import _targeted

if TYPE_CHECKING:
    from salttwist.runners import RunnerContext


async def grains(
    context: RunnerContext, tgt: Any = "*", tgt_type: str = "glob", **kwargs: Any
) -> dict[str, dict[str, Any]]:
    """
    The cached grains of the accepted minions C{tgt} targets, as the master
    works out a job's minions: C{{minion: grains}}. Unlike Salt's, a
    targeted minion whose grains the master has not cached yet is listed,
    with C{{}}.

    CLI Example:

    .. code-block:: bash

        salttwist-run cache.grains
        salttwist-run cache.grains tgt='web*'
    """
    if "expr_form" in kwargs:
        tgt_type = kwargs.pop("expr_form")
    targeted = await _targeted(context, tgt, tgt_type)
    cached = context.master.grainsCache.grains
    return {minion: dict(cached.get(minion) or {}) for minion in targeted}
