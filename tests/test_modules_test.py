# -*- test-case-name: tests.test_modules_test -*-
"""
Tests for L{salttwist.modules.test}, Salt's C{test} module.
"""

from __future__ import annotations

from typing import Any

from twisted.internet.task import Clock
from twisted.trial.unittest import SynchronousTestCase

import salttwist
from salttwist.master.core import runSynchronously
from salttwist.modules import LoaderContext, Retcode, loadFunctions
from salttwist.modules import test as testmod
from salttwist.modules.executor import Executor


class TestModuleTests(SynchronousTestCase):
    """
    The C{test} module's functions, called directly and through the
    L{Executor} (with a L{Clock} as the reactor).
    """

    def setUp(self) -> None:
        """
        An executor over the real modules, with a clock.
        """
        self.clock = Clock()
        self.context = LoaderContext(opts={"id": "m1"}, grains={}, reactor=self.clock)
        self.executor = Executor(loadFunctions(), self.context, runSynchronously)

    def run_(self, fun: str, arg: list[Any]) -> dict[str, Any]:
        """
        @return: the job return of C{fun}, which must be immediate.
        """
        return self.successResultOf(self.executor.run(fun, arg))

    def test_ping(self) -> None:
        """
        C{test.ping} returns C{True}.
        """
        self.assertIs(testmod.ping(), True)

    def test_echo(self) -> None:
        """
        C{test.echo} returns its argument unchanged, whatever its type.
        """
        self.assertEqual(testmod.echo("foo bar"), "foo bar")
        self.assertEqual(testmod.echo({"a": [1]}), {"a": [1]})

    def test_version(self) -> None:
        """
        C{test.version} is salttwist's version.
        """
        self.assertEqual(testmod.version(), salttwist.__version__)

    def test_versionsReport(self) -> None:
        """
        C{test.versions_report} is text with Salt's sections, naming
        salttwist's version, Python's and Twisted's.
        """
        report = testmod.versions_report()
        for heading in (
            "Salttwist Version:",
            "Python Version:",
            "Dependency Versions:",
            "System Versions:",
        ):
            self.assertIn(heading, report)
        self.assertIn(f"Salttwist: {salttwist.__version__}", report)
        self.assertRegex(report, r"Twisted: \d+")

    def test_versionsReportRunsInThread(self) -> None:
        """
        C{test.versions_report} reads package metadata, so it is not marked
        to run on the reactor.
        """
        self.assertFalse(getattr(testmod.versions_report, "runsOnReactor", False))

    def test_arg(self) -> None:
        """
        C{test.arg} returns the positional and keyword arguments it got.
        """
        self.assertEqual(
            self.run_("test.arg", [1, "two", {"__kwarg__": True, "txt": "hello"}])["return"],
            {"args": [1, "two"], "kwargs": {"txt": "hello"}},
        )

    def test_kwarg(self) -> None:
        """
        C{test.kwarg} returns its keyword arguments.
        """
        self.assertEqual(
            self.run_("test.kwarg", [{"__kwarg__": True, "num": 1, "env": {"a": 1}}])["return"],
            {"num": 1, "env": {"a": 1}},
        )

    def test_retcode(self) -> None:
        """
        C{test.retcode} returns C{True} with the given retcode (42 by
        default), and the job fails with it.
        """
        self.assertEqual(testmod.retcode(), Retcode(True, 42))
        self.assertEqual(
            self.run_("test.retcode", [3]), {"return": True, "retcode": 3, "success": False}
        )
        self.assertEqual(
            self.run_("test.retcode", [0]), {"return": True, "retcode": 0, "success": True}
        )

    def test_exception(self) -> None:
        """
        C{test.exception} raises; the job says the minion function caused an
        exception, with the message, and fails with retcode 1.
        """
        result = self.run_("test.exception", ["Oh noes!"])
        self.assertEqual(
            result,
            {
                "return": "The minion function caused an exception: Exception: Oh noes!",
                "retcode": 1,
                "success": False,
            },
        )
        self.assertEqual(len(self.flushLoggedErrors(Exception)), 1)

    def test_exceptionDefaultMessage(self) -> None:
        """
        C{test.exception} without a message raises Salt's C{Test Exception}.
        """
        self.assertRaisesRegex(Exception, "^Test Exception$", testmod.exception)

    def test_sleep(self) -> None:
        """
        C{test.sleep} answers C{True} only once the reactor's clock has
        advanced by the length.
        """
        d = self.executor.run("test.sleep", [3])
        self.clock.advance(2.9)
        self.assertNoResult(d)
        self.clock.advance(0.1)
        self.assertEqual(self.successResultOf(d)["return"], True)

    def test_randSleep(self) -> None:
        """
        C{test.rand_sleep} waits a whole number of seconds no longer than
        C{max}, then returns C{True}.
        """
        d = self.executor.run("test.rand_sleep", [{"__kwarg__": True, "max": 5}])
        self.clock.advance(5)
        self.assertEqual(self.successResultOf(d)["return"], True)

    def test_randSleepZero(self) -> None:
        """
        C{test.rand_sleep max=0} returns after no time at all.
        """
        d = self.executor.run("test.rand_sleep", [0])
        self.clock.advance(0)
        self.assertEqual(self.successResultOf(d)["return"], True)

    def test_fib(self) -> None:
        """
        C{test.fib} returns the n-th Fibonacci number and the time taken.
        """
        for n, expected in [(0, 0), (1, 1), (2, 1), (3, 2), (10, 55), (30, 832040)]:
            value, seconds = testmod.fib(n)
            self.assertEqual(value, expected)
            self.assertGreaterEqual(seconds, 0)
        self.assertRaises(ValueError, testmod.fib, -1)

    def test_fibInThread(self) -> None:
        """
        C{test.fib} is CPU work: it is not marked to run on the reactor.
        """
        self.assertFalse(getattr(testmod.fib, "runsOnReactor", False))

    def test_allListed(self) -> None:
        """
        Every function the issue names is loaded under C{test.}.
        """
        functions = loadFunctions()
        for name in (
            "ping",
            "echo",
            "version",
            "versions_report",
            "sleep",
            "arg",
            "kwarg",
            "retcode",
            "exception",
            "rand_sleep",
            "fib",
        ):
            self.assertIn(f"test.{name}", functions)
