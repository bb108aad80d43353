# -*- test-case-name: tests.test_tapoptions -*-
"""
Tests for L{salttwist.tapoptions} and L{salttwist.daemon.exitCleanlyOnSignals}:
plain twistd runs the daemons as their commands do.
"""

from __future__ import annotations

import os
import signal

import yaml
from twisted.internet.error import ReactorNotRunning
from twisted.scripts.twistd import ServerOptions
from twisted.trial.unittest import SynchronousTestCase

from salttwist.daemon import exitCleanlyOnSignals
from salttwist.logs import CONSOLE_ENV, FILE_ENV, FILE_LEVEL_ENV, FORMAT_ENV, LEVEL_ENV
from salttwist.tapoptions import OBSERVER_FACTORY


class TwistdLoggingTests(SynchronousTestCase):
    """
    Parsed by twistd's own L{ServerOptions}, the daemons' plugin options
    choose salttwist's log observer with the config's settings, unless the
    command line chose a logger.
    """

    def setUp(self) -> None:
        """
        A master config dir with C{log_level: warning}, JSON lines and a
        C{log_file}, and an environment of our own.
        """
        self.env: dict[str, str] = {}
        self.patch(os, "environ", self.env)
        self.dir = os.path.abspath(self.mktemp())
        os.makedirs(self.dir)
        self.logFile = os.path.join(self.dir, "log", "master")
        with open(os.path.join(self.dir, "master"), "w") as f:
            yaml.safe_dump(
                {
                    "root_dir": self.dir,
                    "log_level": "warning",
                    "log_level_logfile": "debug",
                    "log_fmt_json": True,
                    "log_file": self.logFile,
                },
                f,
            )

    def parse(self, *argv: str) -> ServerOptions:
        """
        @return: twistd's options for C{twistd ARGV salttwist-master -c DIR}.
        """
        options = ServerOptions()
        options.parseOptions([*argv, "salttwist-master", "-c", self.dir])
        return options

    def test_foreground(self) -> None:
        """
        C{twistd -n}: salttwist's observer, on the console only, at the
        config's level and format.
        """
        options = self.parse("-n")
        self.assertEqual(options["logger"].__module__, "salttwist.logs")
        self.assertEqual(options["logger"].__name__, OBSERVER_FACTORY.rsplit(".", 1)[1])
        self.assertEqual(
            self.env,
            {
                LEVEL_ENV: "warning",
                FILE_LEVEL_ENV: "debug",
                FORMAT_ENV: "json",
                FILE_ENV: "-",
                CONSOLE_ENV: "1",
            },
        )

    def test_daemonized(self) -> None:
        """
        Daemonized by twistd: to the config's C{log_file} (its directory
        made), not to the console.
        """
        self.parse()
        self.assertEqual((self.env[FILE_ENV], self.env[CONSOLE_ENV]), (self.logFile, "0"))
        self.assertTrue(os.path.isdir(os.path.dirname(self.logFile)))

    def test_logfileOption(self) -> None:
        """
        twistd's C{--logfile} wins over the config's C{log_file}.
        """
        other = os.path.join(self.dir, "other.log")
        self.parse("--logfile", other)
        self.assertEqual(self.env[FILE_ENV], other)

    def test_chosenLoggerKept(self) -> None:
        """
        A logger on the command line (as the salttwist commands pass one)
        is left as it is, and so is C{--syslog}.
        """
        options = self.parse("-n", "--logger", "twisted.logger.textFileLogObserver")
        self.assertEqual(options["logger"].__name__, "textFileLogObserver")
        options = self.parse("--syslog")
        self.assertIsNone(options["logger"])
        self.assertEqual(self.env, {})


class FakeReactor:
    """
    What L{exitCleanlyOnSignals} uses of a reactor: it records the calls.
    """

    def __init__(self) -> None:
        self.stops = 0

    def callFromThread(self, f: object, *args: object) -> None:
        assert callable(f)
        f(*args)

    def stop(self) -> None:
        self.stops += 1
        if self.stops > 1:
            raise ReactorNotRunning("Can't stop reactor that isn't running.")


class ExitCleanlyTests(SynchronousTestCase):
    """
    L{exitCleanlyOnSignals} stops the reactor on SIGTERM and SIGINT without
    recording an exit signal, so twistd exits with status 0.
    """

    def setUp(self) -> None:
        """
        Restore this process's handlers after the test.
        """
        for number in (signal.SIGTERM, signal.SIGINT):
            self.addCleanup(signal.signal, number, signal.getsignal(number))

    def test_stops(self) -> None:
        """
        Each signal stops the reactor; a second one while it stops is not an
        error.
        """
        reactor = FakeReactor()
        exitCleanlyOnSignals(reactor)
        signal.getsignal(signal.SIGTERM)(signal.SIGTERM, None)
        self.assertEqual(reactor.stops, 1)
        signal.getsignal(signal.SIGINT)(signal.SIGINT, None)
        self.assertEqual(reactor.stops, 2)
        self.assertFalse(hasattr(reactor, "_exitSignal"))
