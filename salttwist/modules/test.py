# -*- test-case-name: tests.test_modules -*-
"""
Salt's C{test} module: functions to check that minions answer.
"""

from __future__ import annotations

from typing import Any

from twisted.internet.task import deferLater

import salttwist
from salttwist.modules import LoaderContext, needsContext, onReactor


@onReactor
def ping() -> bool:
    """
    Return C{True}: the minion is up and answering.

    CLI Example: C{salttwist '*' test.ping}
    """
    return True


@onReactor
def echo(text: Any) -> Any:
    """
    Return C{text} unchanged.

    CLI Example: C{salttwist '*' test.echo 'hello'}
    """
    return text


@onReactor
def version() -> str:
    """
    Return the salttwist version of the minion.
    """
    return salttwist.__version__


@onReactor
def arg(*args: Any, **kwargs: Any) -> dict[str, Any]:
    """
    Return the positional and keyword arguments received.
    """
    return {"args": list(args), "kwargs": kwargs}


@onReactor
@needsContext
def sleep(context: LoaderContext, length: float) -> Any:
    """
    Wait C{length} seconds without blocking the minion, then return C{True}.
    """
    return deferLater(context.reactor, float(length), lambda: True)
