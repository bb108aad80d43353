# -*- test-case-name: tests.test_modules -*-
"""
Salt's C{grains} module: read the minion's grains.
"""

from __future__ import annotations

from typing import Any

from salttwist.modules import LoaderContext, needsContext, onReactor


@onReactor
@needsContext
def items(context: LoaderContext) -> dict[str, Any]:
    """
    Return every grain.

    CLI Example: C{salttwist '*' grains.items}
    """
    return dict(context.grains)


@onReactor
@needsContext
def item(context: LoaderContext, *keys: str) -> dict[str, Any]:
    """
    Return the named grains as a map.

    CLI Example: C{salttwist '*' grains.item os kernel}
    """
    return {key: context.grains.get(key, "") for key in keys}


@onReactor
@needsContext
def get(context: LoaderContext, key: str, default: Any = "") -> Any:
    """
    Return one grain; C{a:b} looks into nested maps.

    CLI Example: C{salttwist '*' grains.get os}
    """
    value: Any = context.grains
    for part in str(key).split(":"):
        if not isinstance(value, dict) or part not in value:
            return default
        value = value[part]
    return value
