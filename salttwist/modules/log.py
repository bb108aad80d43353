# -*- test-case-name: tests.test_modules_log -*-
"""
Salt's C{log} module: write a message to the minion's log, as formulas do
from their templates (C{{% do salt['log.debug']('x') %}}).

Each function logs through L{twisted.logger} under the namespace
C{salttwist.modules.log} at its level and returns L{None}, as Salt's.
"""

from __future__ import annotations

from typing import Any

from twisted.logger import Logger

_log = Logger(namespace="salttwist.modules.log")


def _format(message: Any, args: tuple[Any, ...]) -> str:
    """
    Salt's C{log.*} take a %-style message and its arguments.
    """
    text = str(message)
    if args:
        try:
            return text % args
        except (TypeError, ValueError):
            return " ".join([text, *(str(a) for a in args)])
    return text


def debug(message: Any, *args: Any, **kwargs: Any) -> None:
    """
    Log C{message} (with %-style C{args}) at the debug level.

    CLI Example:

        salttwist '*' log.debug 'Hello %s' world
    """
    _log.debug("{text}", text=_format(message, args))


def info(message: Any, *args: Any, **kwargs: Any) -> None:
    """
    Log C{message} (with %-style C{args}) at the info level.

    CLI Example:

        salttwist '*' log.info 'Hello %s' world
    """
    _log.info("{text}", text=_format(message, args))


def warning(message: Any, *args: Any, **kwargs: Any) -> None:
    """
    Log C{message} (with %-style C{args}) at the warning level.

    CLI Example:

        salttwist '*' log.warning 'disk %s is full' sda
    """
    _log.warn("{text}", text=_format(message, args))


def error(message: Any, *args: Any, **kwargs: Any) -> None:
    """
    Log C{message} (with %-style C{args}) at the error level.

    CLI Example:

        salttwist '*' log.error 'failed: %s' reason
    """
    _log.error("{text}", text=_format(message, args))


def critical(message: Any, *args: Any, **kwargs: Any) -> None:
    """
    Log C{message} (with %-style C{args}) at the critical level.

    CLI Example:

        salttwist '*' log.critical 'failed: %s' reason
    """
    _log.critical("{text}", text=_format(message, args))


def exception(message: Any, *args: Any, **kwargs: Any) -> None:
    """
    Log C{message} (with %-style C{args}) at the error level, as Salt's
    C{log.exception} does outside an exception handler.

    CLI Example:

        salttwist '*' log.exception 'failed: %s' reason
    """
    _log.error("{text}", text=_format(message, args))
