# -*- test-case-name: tests.test_daemon,tests.test_logs_json -*-
"""
Log observers for the daemons, filtered by Salt's C{log_level}.

The daemon wrappers (L{salttwist.cli.daemons}) pass their choices to twistd's
C{--logger} hook, L{observerFactory}, in the environment: the level, the log
file (or C{-} for standard output), whether to log to the console as well,
and the format. The format is Twisted's classic text, or with
C{log_fmt_json: True} one JSON object per line (L{formatJsonLine}), for log
shippers.

A log file is opened by name (L{ReopenableFile}) and SIGHUP makes the daemon
open that name again: after C{logrotate} renamed the file, the daemon writes
to a new one instead of the renamed one (C{postrotate: kill -HUP <pid>}, no
C{copytruncate} needed).
"""

from __future__ import annotations

import json
import os
import signal
import sys
import threading
from collections.abc import Callable
from datetime import datetime
from typing import Any, TextIO

from twisted.logger import (
    FileLogObserver,
    FilteringLogObserver,
    ILogObserver,
    Logger,
    LogLevel,
    LogLevelFilterPredicate,
    LogPublisher,
    formatEvent,
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

#: Salt's (and Python's) names of Twisted's levels, for JSON lines.
_LEVEL_NAMES = {
    LogLevel.debug: "debug",
    LogLevel.info: "info",
    LogLevel.warn: "warning",
    LogLevel.error: "error",
    LogLevel.critical: "critical",
}

LEVEL_ENV = "SALTTWIST_LOG_LEVEL"
#: The log file's level (Salt's C{log_level_logfile}); L{LEVEL_ENV} if unset.
FILE_LEVEL_ENV = "SALTTWIST_LOG_FILE_LEVEL"
FILE_ENV = "SALTTWIST_LOG_FILE"
#: C{"1"}: log to standard output as well as to the file of L{FILE_ENV}.
CONSOLE_ENV = "SALTTWIST_LOG_CONSOLE"
#: C{"json"} for JSON lines, anything else for text.
FORMAT_ENV = "SALTTWIST_LOG_FORMAT"

_log = Logger()


def saltLevel(name: object) -> LogLevel:
    """
    @return: Twisted's level for Salt's level C{name} (C{warning} for an
        unknown one).
    """
    return SALT_LEVELS.get(str(name).lower(), LogLevel.warn)


def infoLogged(config: dict[str, Any]) -> bool:
    """
    @return: whether this process logs info lines anywhere: on the console
        at the level C{salttwist-master}/C{salttwist-minion} put in
        L{LEVEL_ENV} (from C{-l} or C{log_level}), else C{config}'s
        C{log_level}; in the log file of L{FILE_ENV}, if any, at
        L{FILE_LEVEL_ENV}'s level (see L{observerFactory}).
    """
    level = os.environ.get(LEVEL_ENV) or config.get("log_level") or "warning"
    path = os.environ.get(FILE_ENV, "-")
    levels = []
    if path == "-" or os.environ.get(CONSOLE_ENV) == "1":
        levels.append(level)
    if path != "-":
        levels.append(os.environ.get(FILE_LEVEL_ENV) or level)
    return any(saltLevel(name) <= LogLevel.info for name in levels)


def formatJsonLine(event: dict[str, Any]) -> str:
    """
    One log event as one line of JSON: C{time} (local, ISO 8601 with the
    offset), C{level} (C{debug}, C{info}, C{warning}, C{error},
    C{critical}), C{name} (the logger's namespace, Salt's logger name),
    C{message}, C{pid}, and C{traceback} when a failure was logged.
    """
    logTime = event.get("log_time")
    when = datetime.fromtimestamp(logTime if isinstance(logTime, (int, float)) else 0)
    record: dict[str, Any] = {
        "time": when.astimezone().isoformat(timespec="milliseconds"),
        "level": _LEVEL_NAMES.get(event.get("log_level"), "info"),  # type: ignore[arg-type]
        "name": event.get("log_namespace", "-"),
        "message": formatEvent(event),
        "pid": os.getpid(),
    }
    failure = event.get("log_failure")
    if failure is not None:
        try:
            record["traceback"] = failure.getTraceback()
        except Exception:
            record["traceback"] = repr(failure)
    return json.dumps(record, default=str, ensure_ascii=False) + "\n"


def jsonLinesObserver(stream: Any) -> FileLogObserver:
    """
    @return: an observer writing L{formatJsonLine} lines to C{stream}.
    """
    return FileLogObserver(stream, formatJsonLine)


def filteredObserver(stream: Any, level: str, jsonLines: bool = False) -> FilteringLogObserver:
    """
    @param jsonLines: write L{formatJsonLine} lines instead of text.
    @return: an observer writing events of at least Salt level C{level}.
    """
    predicate = LogLevelFilterPredicate(defaultLogLevel=saltLevel(level))
    writer = jsonLinesObserver(stream) if jsonLines else textFileLogObserver(stream)
    return FilteringLogObserver(writer, [predicate])


class ReopenableFile:
    """
    A log file written by name, in append mode, that L{reopen} opens again:
    the way to follow C{logrotate}, which renames the file the daemon holds.
    Writes may come from any thread; one lock orders them with L{reopen}.

    @ivar path: the file's name.
    """

    def __init__(self, path: str) -> None:
        self.path = path
        self._lock = threading.Lock()
        self._file: TextIO = self._open()

    def _open(self) -> TextIO:
        return open(self.path, "a", encoding="utf-8")  # noqa: SIM115

    def write(self, text: str) -> None:
        """
        Append C{text}.
        """
        with self._lock:
            self._file.write(text)

    def flush(self) -> None:
        """
        Flush what was written to the file.
        """
        with self._lock:
            self._file.flush()

    def reopen(self) -> None:
        """
        Close the file and open C{path} again (a new file if it was renamed
        or removed). If it cannot be opened, logging goes on to the old
        file and the reason is logged.
        """
        with self._lock:
            try:
                new = self._open()
            except OSError as e:
                error: OSError | None = e
            else:
                error = None
                old, self._file = self._file, new
                old.close()
        if error is not None:
            _log.error("cannot reopen log file {path}: {error}", path=self.path, error=error)
        else:
            _log.info("log file {path} reopened", path=self.path)

    def close(self) -> None:
        """
        Close the file.
        """
        with self._lock:
            self._file.close()


def sighupHandler(
    stream: ReopenableFile, callFromThread: Callable[..., Any] | None = None
) -> Callable[[int, Any], None]:
    """
    @param callFromThread: how to get to the reactor thread (the reactor's
        C{callFromThread} by default, looked up when the signal comes). A
        signal handler interrupts whatever the main thread was doing, maybe
        a write holding the file's lock: the file is reopened from the
        reactor loop instead, never inside the handler.
    @return: a C{signal.signal} handler that has C{stream} reopened.
    """

    def handler(signum: int, frame: Any) -> None:
        call = callFromThread
        if call is None:
            from twisted.internet import reactor

            call = reactor.callFromThread  # type: ignore[attr-defined]
        call(stream.reopen)

    return handler


def logEnvironment(
    config: dict[str, Any],
    level: str | None = None,
    fileLevel: str | None = None,
    logFile: str | None = None,
    daemon: bool = False,
) -> dict[str, str]:
    """
    The environment that tells L{observerFactory} where and how a daemon
    logs; what is not given comes from C{config}.

    @param level: the console level (default: C{log_level}).
    @param fileLevel: the log file's level (default: C{log_level_logfile},
        else the console level).
    @param logFile: the log file, C{-} (or L{None}) for standard output
        alone; a log file's directory is created.
    @param daemon: whether the daemon runs in the background (then it logs
        to no console).
    """
    level = level or config["log_level"]
    env = {
        LEVEL_ENV: level,
        FILE_LEVEL_ENV: fileLevel or config["log_level_logfile"] or level,
        FORMAT_ENV: "json" if config["log_fmt_json"] else "text",
        FILE_ENV: "-",
        CONSOLE_ENV: "0" if daemon else "1",
    }
    if logFile and logFile != "-":
        # Absolute: SIGHUP reopens it by name, whatever the directory then.
        logFile = os.path.abspath(logFile)
        os.makedirs(os.path.dirname(logFile), mode=0o755, exist_ok=True)
        env[FILE_ENV] = logFile
    return env


def observerFactory() -> ILogObserver:
    """
    The twistd C{--logger} hook: the levels (console and file), file,
    console and format come from the environment set by
    C{salttwist-master}/C{salttwist-minion}. With a log file, SIGHUP
    reopens it.
    """
    path = os.environ.get(FILE_ENV, "-")
    level = os.environ.get(LEVEL_ENV, "warning")
    jsonLines = os.environ.get(FORMAT_ENV) == "json"
    if path == "-":
        return filteredObserver(sys.stdout, level, jsonLines)
    stream = ReopenableFile(path)
    signal.signal(signal.SIGHUP, sighupHandler(stream))
    fileLevel = os.environ.get(FILE_LEVEL_ENV) or level
    observers = [filteredObserver(stream, fileLevel, jsonLines)]
    if os.environ.get(CONSOLE_ENV) == "1":
        observers.append(filteredObserver(sys.stdout, level, jsonLines))
    return LogPublisher(*observers) if len(observers) > 1 else observers[0]
