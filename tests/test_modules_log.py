"""
Tests for L{salttwist.modules.log}.
"""

from __future__ import annotations

from twisted.logger import LogLevel, globalLogPublisher
from twisted.trial.unittest import SynchronousTestCase

from salttwist.modules import loadFunctions
from salttwist.modules import log as logmod


class LogModuleTests(SynchronousTestCase):
    """
    C{log.*} writes the message to the log at its level.
    """

    def setUp(self) -> None:
        self.events: list[dict] = []
        globalLogPublisher.addObserver(self.events.append)
        self.addCleanup(globalLogPublisher.removeObserver, self.events.append)

    def logged(self) -> list[tuple[LogLevel, str]]:
        return [
            (e["log_level"], e["text"])
            for e in self.events
            if e.get("log_namespace") == "salttwist.modules.log"
        ]

    def test_levels(self) -> None:
        """
        Each function logs at its own level and returns L{None}.
        """
        self.assertIsNone(logmod.debug("d"))
        logmod.info("i")
        logmod.warning("w")
        logmod.error("e")
        logmod.critical("c")
        logmod.exception("x")
        self.assertEqual(
            self.logged(),
            [
                (LogLevel.debug, "d"),
                (LogLevel.info, "i"),
                (LogLevel.warn, "w"),
                (LogLevel.error, "e"),
                (LogLevel.critical, "c"),
                (LogLevel.error, "x"),
            ],
        )

    def test_percentArguments(self) -> None:
        """
        The message is %-formatted with the arguments, as Salt's; arguments
        that do not fit are appended.
        """
        logmod.info("Hello %s of %d", "world", 3)
        logmod.info("no placeholder", "extra")
        self.assertEqual(
            self.logged(),
            [(LogLevel.info, "Hello world of 3"), (LogLevel.info, "no placeholder extra")],
        )

    def test_loaded(self) -> None:
        """
        The loader offers the functions as C{log.*}.
        """
        functions = loadFunctions()
        for name in ("debug", "info", "warning", "error", "critical", "exception"):
            self.assertIn(f"log.{name}", functions)
