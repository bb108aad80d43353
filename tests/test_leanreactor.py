# -*- test-case-name: tests.test_leanreactor -*-
"""
Tests for L{salttwist.leanreactor}: the daemons' epoll reactor dispatches
I/O events as Twisted's does, without a logging context per event.
"""

from __future__ import annotations

import os
import subprocess
import sys
from typing import Any

from twisted.logger import globalLogPublisher
from twisted.python.failure import Failure
from twisted.trial.unittest import SynchronousTestCase

from salttwist.leanreactor import LeanEPollReactor
from tests._scripts import ROOT


class _Reader:
    """
    A readable end of a pipe, as the reactor sees a selectable, that runs
    C{onRead} when it is read.
    """

    def __init__(self, fd: int, name: str, onRead: Any = None) -> None:
        self.fd = fd
        self.name = name
        self.onRead = onRead
        self.reads = 0
        self.lost: list[Failure] = []

    def fileno(self) -> int:
        return self.fd

    def logPrefix(self) -> str:
        return self.name

    def doRead(self) -> None:
        self.reads += 1
        os.read(self.fd, 100)
        if self.onRead is not None:
            self.onRead()

    def connectionLost(self, reason: Failure) -> None:
        self.lost.append(reason)


class LeanEPollReactorTests(SynchronousTestCase):
    """
    L{LeanEPollReactor.doPoll} runs the handler of every ready file
    descriptor, as Twisted's epoll reactor does.
    """

    def setUp(self) -> None:
        self.reactor = LeanEPollReactor()
        self.addCleanup(self.closeReactor)

    def closeReactor(self) -> None:
        self.reactor.waker.connectionLost(None)
        self.reactor._poller.close()

    def readyReader(self, name: str, onRead: Any = None) -> _Reader:
        r, w = os.pipe()
        self.addCleanup(os.close, r)
        self.addCleanup(os.close, w)
        os.write(w, b"x")
        reader = _Reader(r, name, onRead)
        self.reactor.addReader(reader)
        self.addCleanup(self.reactor.removeReader, reader)
        return reader

    def test_dispatchesEveryReadyReader(self) -> None:
        """
        Each ready reader's C{doRead} runs once per poll.
        """
        one, two = self.readyReader("one"), self.readyReader("two")
        self.reactor.doIteration(0)
        self.assertEqual((one.reads, two.reads), (1, 1))
        self.reactor.doIteration(0)
        self.assertEqual((one.reads, two.reads), (1, 1))

    def test_handlerErrorDisconnects(self) -> None:
        """
        An exception from a handler is logged and loses that selectable's
        connection, as in Twisted's reactor; the others are still handled.
        """

        def fail() -> None:
            raise ZeroDivisionError()

        bad, good = self.readyReader("bad", fail), self.readyReader("good")
        self.reactor.doIteration(0)
        self.assertEqual(len(self.flushLoggedErrors(ZeroDivisionError)), 1)
        self.assertEqual(len(bad.lost), 1)
        self.assertEqual(good.reads, 1)
        self.assertNotIn(bad, self.reactor.getReaders())

    def test_escapingErrorLoggedWithPrefix(self) -> None:
        """
        An exception that escapes Twisted's handling (here from
        C{connectionLost}) is logged with the selectable's log prefix, and
        the loop goes on.
        """
        events: list[dict[str, Any]] = []
        globalLogPublisher.addObserver(events.append)
        self.addCleanup(globalLogPublisher.removeObserver, events.append)

        def fail() -> None:
            raise ZeroDivisionError()

        bad = self.readyReader("bad-reader", fail)

        def lostBadly(reason: Failure) -> None:
            raise KeyError("in connectionLost")

        bad.connectionLost = lostBadly  # type: ignore[method-assign]
        good = self.readyReader("good")
        self.reactor.doIteration(0)
        self.assertEqual(len(self.flushLoggedErrors(ZeroDivisionError)), 1)
        self.assertEqual(len(self.flushLoggedErrors(KeyError)), 1)
        self.assertEqual(good.reads, 1)
        systems = [e.get("log_system") for e in events if e.get("isError")]
        # Twisted's own "Unhandled Error" from the handler has no prefix
        # (see the module's docstring); the escaping one has it.
        self.assertEqual(systems, ["-", "bad-reader"])

    def test_removedByEarlierHandler(self) -> None:
        """
        A selectable that an earlier handler of the same poll removed is
        not handled.
        """
        later: list[_Reader] = []
        first = self.readyReader("first", lambda: self.reactor.removeReader(later[0]))
        later.append(self.readyReader("second", lambda: self.reactor.removeReader(first)))
        self.reactor.doIteration(0)
        self.assertEqual(sorted([first.reads, later[0].reads]), [0, 1])


class InstallTests(SynchronousTestCase):
    """
    L{salttwist.leanreactor.installLeanReactor} in a fresh interpreter.
    """

    def test_installsOnce(self) -> None:
        """
        It installs the lean reactor as the global one; with a reactor
        installed already, it does nothing.
        """
        code = (
            "from salttwist.leanreactor import installLeanReactor\n"
            "first = installLeanReactor()\n"
            "from twisted.internet import reactor\n"
            "print(first, installLeanReactor(), type(reactor).__name__)\n"
        )
        out = subprocess.run(
            [sys.executable, "-c", code], capture_output=True, text=True, check=True
        ).stdout
        self.assertEqual(out.split(), ["True", "False", "LeanEPollReactor"])

    def test_swarmShardInstalls(self) -> None:
        """
        The swarm's processes install it before importing the reactor.
        """
        code = (
            "import sys\nimport benchmarks.swarmlib\n"
            "print('twisted.internet.reactor' in sys.modules)\n"
        )
        out = subprocess.run(
            [sys.executable, "-c", code], capture_output=True, text=True, check=True, cwd=ROOT
        ).stdout
        self.assertEqual(out.split(), ["False"])
