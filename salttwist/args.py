# -*- test-case-name: tests.test_minion_parts -*-
"""
Salt's wire form of function arguments, shared by the minion's executor and
the master's runners.
"""

from __future__ import annotations

from typing import Any


def parseArgs(arg: list[Any]) -> tuple[list[Any], dict[str, Any]]:
    """
    Split Salt's wire argument list: maps carrying C{__kwarg__: True} are
    keyword arguments, everything else is positional.
    """
    args: list[Any] = []
    kwargs: dict[str, Any] = {}
    for item in arg:
        if isinstance(item, dict) and item.get("__kwarg__") is True:
            kwargs.update({k: v for k, v in item.items() if k != "__kwarg__"})
        else:
            args.append(item)
    return args, kwargs
