# -*- test-case-name: tests.test_daemon -*-
"""
Log observers for the daemons, filtered by Salt's C{log_level}.
"""

from __future__ import annotations

import os
import sys
from typing import Any

from twisted.logger import (
    FilteringLogObserver,
    LogLevel,
    LogLevelFilterPredicate,
    textFileLogObserver,
)

SALT_LEVELS = {
    "all": LogLevel.debug,
    "garbage": LogLevel.debug,
    "trace": LogLevel.debug,
    "debug": LogLevel.debug,
    "profile": LogLevel.debug,
    "info": LogLevel.info,
    "warning": LogLevel.warn,
    "error": LogLevel.error,
    "critical": LogLevel.critical,
    "quiet": LogLevel.critical,
}

LEVEL_ENV = "SALTTWIST_LOG_LEVEL"
FILE_ENV = "SALTTWIST_LOG_FILE"


def filteredObserver(stream: Any, level: str) -> FilteringLogObserver:
    """
    @return: an observer writing events of at least Salt level C{level}.
    """
    predicate = LogLevelFilterPredicate(defaultLogLevel=SALT_LEVELS.get(level, LogLevel.warn))
    return FilteringLogObserver(textFileLogObserver(stream), [predicate])


def observerFactory() -> FilteringLogObserver:
    """
    The twistd C{--logger} hook: the level and file come from the
    environment set by C{salttwist-master}/C{salttwist-minion}.
    """
    path = os.environ.get(FILE_ENV, "-")
    stream = sys.stdout if path == "-" else open(path, "a", encoding="utf-8")  # noqa: SIM115
    return filteredObserver(stream, os.environ.get(LEVEL_ENV, "warning"))
