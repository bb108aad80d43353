# -*- test-case-name: tests.test_logs_json -*-
"""
Tests for the daemons' logging in L{salttwist.logs}: JSON lines
(C{log_fmt_json}), the log file reopened on SIGHUP, the observer twistd
gets, and how L{salttwist.cli.daemons} chooses them.
"""

from __future__ import annotations

import io
import json
import os
import signal
import sys
from datetime import datetime
from typing import Any

from twisted.logger import Logger, LogLevel, LogPublisher
from twisted.python.failure import Failure
from twisted.trial.unittest import SynchronousTestCase

from salttwist import logs
from salttwist.cli import daemons
from salttwist.config import loadMasterConfig, loadMinionConfig
from salttwist.logs import (
    CONSOLE_ENV,
    FILE_ENV,
    FILE_LEVEL_ENV,
    FORMAT_ENV,
    LEVEL_ENV,
    ReopenableFile,
    filteredObserver,
    formatJsonLine,
    infoLogged,
    observerFactory,
    sighupHandler,
)


def jsonLines(text: str) -> list[dict[str, Any]]:
    """
    @return: every line of C{text} parsed as one JSON object.
    """
    return [json.loads(line) for line in text.splitlines()]


class JsonLineTests(SynchronousTestCase):
    """
    L{formatJsonLine} writes one JSON object per line.
    """

    def test_fields(self) -> None:
        """
        A line has the time (local ISO 8601 with its offset), Salt's level
        name, the logger's namespace as C{name}, the formatted message and
        the pid, and ends with a newline.
        """
        line = formatJsonLine(
            {
                "log_level": LogLevel.warn,
                "log_namespace": "salttwist.master.core.Master",
                "log_format": "minion {id} cut off",
                "id": "web1",
                "log_time": 1700000000.25,
            }
        )
        self.assertTrue(line.endswith("}\n"))
        self.assertEqual(line.count("\n"), 1)
        record = json.loads(line)
        self.assertEqual(
            {key: record[key] for key in ("level", "name", "message", "pid")},
            {
                "level": "warning",
                "name": "salttwist.master.core.Master",
                "message": "minion web1 cut off",
                "pid": os.getpid(),
            },
        )
        self.assertEqual(datetime.fromisoformat(record["time"]).timestamp(), 1700000000.25)

    def test_multilineMessage(self) -> None:
        """
        A message with newlines stays on one line (JSON escapes them).
        """
        line = formatJsonLine({"log_level": LogLevel.info, "log_format": "a\nb", "log_time": 0.0})
        self.assertEqual(line.count("\n"), 1)
        self.assertEqual(json.loads(line)["message"], "a\nb")

    def test_failure(self) -> None:
        """
        A logged failure adds its C{traceback}.
        """
        failure = Failure(ZeroDivisionError("division by zero"))
        stream = io.StringIO()
        log = Logger(namespace="t", observer=LogPublisher(filteredObserver(stream, "info", True)))
        log.failure("it broke", failure)
        [record] = jsonLines(stream.getvalue())
        self.assertEqual((record["level"], record["message"]), ("critical", "it broke"))
        self.assertIn("ZeroDivisionError", record["traceback"])

    def test_filteredJson(self) -> None:
        """
        L{filteredObserver} with C{jsonLines} writes only lines of JSON, of
        events at or above the level.
        """
        stream = io.StringIO()
        log = Logger(namespace="ns", observer=LogPublisher(filteredObserver(stream, "info", True)))
        log.debug("hidden")
        log.info("shown {n}", n=1)
        log.error("bad")
        self.assertEqual(
            [(r["level"], r["name"], r["message"]) for r in jsonLines(stream.getvalue())],
            [("info", "ns", "shown 1"), ("error", "ns", "bad")],
        )


class ReopenableFileTests(SynchronousTestCase):
    """
    L{ReopenableFile} follows logrotate: after the file was renamed,
    L{ReopenableFile.reopen} writes to a new file of the same name.
    """

    def setUp(self) -> None:
        """
        A log file in a temporary directory.
        """
        self.dir = os.path.abspath(self.mktemp())
        os.makedirs(self.dir)
        self.path = os.path.join(self.dir, "master")
        self.stream = ReopenableFile(self.path)
        self.addCleanup(self.stream.close)

    def read(self, path: str) -> str:
        """
        @return: the content of C{path}.
        """
        with open(path, encoding="utf-8") as f:
            return f.read()

    def test_appends(self) -> None:
        """
        An existing file is appended to.
        """
        self.stream.close()
        with open(self.path, "w") as f:
            f.write("old\n")
        self.stream = ReopenableFile(self.path)
        self.stream.write("new\n")
        self.stream.flush()
        self.assertEqual(self.read(self.path), "old\nnew\n")

    def test_renameThenReopen(self) -> None:
        """
        After a rename, writes go to the renamed file until L{reopen}; then
        to a new file at the old name.
        """
        self.stream.write("before\n")
        self.stream.flush()
        os.rename(self.path, self.path + ".1")
        self.stream.write("still old\n")
        self.stream.flush()
        self.assertFalse(os.path.exists(self.path))
        self.stream.reopen()
        self.stream.write("after\n")
        self.stream.flush()
        self.assertEqual(self.read(self.path + ".1"), "before\nstill old\n")
        self.assertTrue(self.read(self.path).endswith("after\n"))

    def test_reopenFails(self) -> None:
        """
        If the name cannot be opened again, logging goes on to the old
        file.
        """
        os.rename(self.path, self.path + ".1")
        os.makedirs(self.path)  # a directory now holds the name
        self.stream.reopen()
        self.stream.write("kept\n")
        self.stream.flush()
        self.assertEqual(self.read(self.path + ".1"), "kept\n")

    def test_sighupHandler(self) -> None:
        """
        The SIGHUP handler does not reopen in the signal handler itself: it
        hands L{reopen} to the reactor thread (C{callFromThread}); the log
        then goes to a new file.
        """
        calls: list[Any] = []
        handler = sighupHandler(self.stream, calls.append)
        os.rename(self.path, self.path + ".1")
        handler(signal.SIGHUP, None)
        self.assertEqual(calls, [self.stream.reopen])
        self.assertFalse(os.path.exists(self.path))
        calls[0]()
        self.stream.write("rotated\n")
        self.stream.flush()
        self.assertTrue(self.read(self.path).endswith("rotated\n"))


class ObserverFactoryTests(SynchronousTestCase):
    """
    L{observerFactory}, twistd's C{--logger} hook, reads the environment
    the daemon wrappers set.
    """

    def setUp(self) -> None:
        """
        Capture standard output; keep SIGHUP's handler; a log directory.
        """
        self.stdout = io.StringIO()
        self.patch(logs.sys, "stdout", self.stdout)
        self.addCleanup(signal.signal, signal.SIGHUP, signal.getsignal(signal.SIGHUP))
        self.dir = os.path.abspath(self.mktemp())
        os.makedirs(self.dir)

    def observe(self, **env: str) -> Any:
        """
        @return: L{observerFactory}'s observer with C{env} as the
            environment.
        """
        self.patch(os, "environ", dict(env))
        return observerFactory()

    def emit(self, observer: Any, text: str) -> None:
        """
        Send one warning to C{observer}.
        """
        Logger(namespace="t", observer=observer).warn(text)

    def test_consoleText(self) -> None:
        """
        By default: text on standard output, and SIGHUP left alone.
        """
        before = signal.getsignal(signal.SIGHUP)
        self.emit(self.observe(), "hello")
        self.assertIn("hello", self.stdout.getvalue())
        self.assertIs(signal.getsignal(signal.SIGHUP), before)

    def test_consoleJson(self) -> None:
        """
        With the JSON format, standard output gets JSON lines.
        """
        self.emit(self.observe(**{FORMAT_ENV: "json", LEVEL_ENV: "info"}), "hello")
        [record] = jsonLines(self.stdout.getvalue())
        self.assertEqual(record["message"], "hello")

    def test_fileAndSighup(self) -> None:
        """
        With a file: the file gets the log (not standard output), and a
        SIGHUP handler is installed for it.
        """
        path = os.path.join(self.dir, "log")
        observer = self.observe(**{FILE_ENV: path, CONSOLE_ENV: "0", FORMAT_ENV: "json"})
        self.emit(observer, "to file")
        with open(path) as f:
            self.assertEqual(jsonLines(f.read())[0]["message"], "to file")
        self.assertEqual(self.stdout.getvalue(), "")
        self.assertTrue(callable(signal.getsignal(signal.SIGHUP)))

    def test_fileAndConsole(self) -> None:
        """
        With a file and the console (the foreground with C{--log-file}),
        both get the log.
        """
        path = os.path.join(self.dir, "log")
        self.emit(self.observe(**{FILE_ENV: path, CONSOLE_ENV: "1"}), "to both")
        with open(path) as f:
            self.assertIn("to both", f.read())
        self.assertIn("to both", self.stdout.getvalue())

    def test_fileLevel(self) -> None:
        """
        The log file has a level of its own (C{log_level_logfile}): info
        lines go to the file, not to a console at C{warning}; without it the
        file has the console's level.
        """
        path = os.path.join(self.dir, "log")
        env = {FILE_ENV: path, CONSOLE_ENV: "1", LEVEL_ENV: "warning"}
        observer = self.observe(**env, **{FILE_LEVEL_ENV: "info"})
        Logger(namespace="t", observer=observer).info("detail")
        with open(path) as f:
            self.assertIn("detail", f.read())
        self.assertEqual(self.stdout.getvalue(), "")
        other = os.path.join(self.dir, "other")
        observer = self.observe(**{**env, FILE_ENV: other})
        Logger(namespace="t", observer=observer).info("detail")
        with open(other) as f:
            self.assertEqual(f.read(), "")


class DaemonLogEnvironmentTests(SynchronousTestCase):
    """
    L{daemons._setLogEnvironment} tells the observer where and how to log.
    """

    def setUp(self) -> None:
        """
        A fresh environment and a config under a temporary root with JSON
        logging.
        """
        self.env: dict[str, str] = {}
        self.patch(os, "environ", self.env)
        root = os.path.abspath(self.mktemp())
        self.config = loadMasterConfig(
            root, overrides={"root_dir": root, "log_fmt_json": True, "log_level": "info"}
        )

    def chosen(self, *argv: str) -> dict[str, str]:
        """
        @return: the environment set for C{salttwist-master ARGV}.
        """
        options = daemons._parser("salttwist-master").parse_args(list(argv))
        daemons._setLogEnvironment(options, self.config)
        return dict(self.env)

    def test_foreground(self) -> None:
        """
        In the foreground: the console only, in the config's format and
        level.
        """
        self.assertEqual(
            self.chosen(),
            {
                LEVEL_ENV: "info",
                FILE_LEVEL_ENV: "info",
                FORMAT_ENV: "json",
                FILE_ENV: "-",
                CONSOLE_ENV: "1",
            },
        )

    def test_foregroundLogFile(self) -> None:
        """
        C{--log-file} in the foreground: that file (absolute, its directory
        created) and the console.
        """
        path = os.path.join(os.path.abspath(self.mktemp()), "sub", "m.log")
        env = self.chosen("--log-file", path, "-l", "debug")
        self.assertEqual((env[FILE_ENV], env[CONSOLE_ENV], env[LEVEL_ENV]), (path, "1", "debug"))
        self.assertTrue(os.path.isdir(os.path.dirname(path)))

    def test_fileLevel(self) -> None:
        """
        The file's level is C{--log-file-level}, else the config's
        C{log_level_logfile}, else the console's level (C{-l} or
        C{log_level}), as Salt's.
        """
        self.assertEqual(self.chosen("-l", "error")[FILE_LEVEL_ENV], "error")
        self.config["log_level_logfile"] = "debug"
        self.assertEqual(self.chosen("-l", "error")[FILE_LEVEL_ENV], "debug")
        env = self.chosen("--log-file-level", "critical")
        self.assertEqual((env[LEVEL_ENV], env[FILE_LEVEL_ENV]), ("info", "critical"))

    def test_badFileLevel(self) -> None:
        """
        A C{--log-file-level} that is not one of Salt's levels is a usage
        error naming the valid ones.
        """
        stderr = io.StringIO()
        self.patch(sys, "stderr", stderr)
        parser = daemons._parser("salttwist-master")
        self.assertRaises(SystemExit, parser.parse_args, ["--log-file-level", "loud"])
        self.assertIn("--log-file-level: invalid choice: 'loud'", stderr.getvalue())
        self.assertIn("warning", stderr.getvalue())

    def test_daemon(self) -> None:
        """
        As a daemon: the config's C{log_file} only.
        """
        env = self.chosen("-d")
        self.assertEqual((env[FILE_ENV], env[CONSOLE_ENV]), (self.config["log_file"], "0"))

    def test_textByDefault(self) -> None:
        """
        C{log_fmt_json} is false by default, for the master and the minion.
        """
        root = os.path.abspath(self.mktemp())
        self.assertFalse(loadMasterConfig(root)["log_fmt_json"])
        self.assertFalse(loadMinionConfig(root)["log_fmt_json"])
        self.config["log_fmt_json"] = False
        self.assertEqual(self.chosen()[FORMAT_ENV], "text")


class InfoLoggedTests(SynchronousTestCase):
    """
    L{infoLogged}: the daemon's effective level decides.
    """

    def test_environmentFirst(self) -> None:
        """
        The level the daemon command put in C{SALTTWIST_LOG_LEVEL} wins over
        the config's C{log_level}; without it the config decides; with
        neither, C{warning} (no info lines).
        """
        cases = [
            ({LEVEL_ENV: "info"}, {"log_level": "error"}, True),
            ({LEVEL_ENV: "error"}, {"log_level": "debug"}, False),
            ({}, {"log_level": "debug"}, True),
            ({}, {"log_level": "INFO"}, True),
            ({}, {"log_level": "warning"}, False),
            ({}, {}, False),
            ({}, {"log_level": "nonsense"}, False),
            # A daemon logs to its file only, at the file's level.
            (
                {FILE_ENV: "f", CONSOLE_ENV: "0", LEVEL_ENV: "info", FILE_LEVEL_ENV: "error"},
                {},
                False,
            ),
            (
                {FILE_ENV: "f", CONSOLE_ENV: "0", LEVEL_ENV: "error", FILE_LEVEL_ENV: "info"},
                {},
                True,
            ),
            # In the foreground with a file: either level.
            (
                {FILE_ENV: "f", CONSOLE_ENV: "1", LEVEL_ENV: "info", FILE_LEVEL_ENV: "error"},
                {},
                True,
            ),
        ]
        for environ, config, expected in cases:
            self.patch(os, "environ", environ)
            self.assertEqual(infoLogged(config), expected, (environ, config))
