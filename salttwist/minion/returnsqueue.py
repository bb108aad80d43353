# -*- test-case-name: tests.test_returnsqueue -*-
"""
Returns kept on disk until the master has them: a job's return that the
master has not acknowledged soon after it was sent (L{Minion.persistAfter
<salttwist.minion.core.Minion.persistAfter>}), or that cannot be sent (the
master is away, the minion stops), is written (0600, atomically, fsynced,
in a thread) to C{cachedir/returns/}, and removed once the master
acknowledged or refused it and the write finished. A minion that restarts,
or a master that was away, loses nothing; the master refuses a duplicate,
so each return is stored exactly once.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Callable
from typing import Any

from twisted.internet.defer import Deferred
from twisted.logger import Logger

from salttwist import serial
from salttwist.crypt import writePrivateFile


class ReturnsQueue:
    """
    The on-disk part of the minion's returns queue.
    """

    log = Logger()

    def __init__(self, directory: str, runBlocking: Callable[..., Deferred]) -> None:
        self._directory = directory
        self._runBlocking = runBlocking
        self._sequence = 0

    def load(self) -> list[tuple[str, dict[str, Any]]]:
        """
        Read the returns left by an earlier run, oldest first (blocking: at
        start, before the reactor runs). Unreadable files are kept aside
        with a log line, never deleted.
        """
        os.makedirs(self._directory, mode=0o700, exist_ok=True)
        found = []
        for name in sorted(os.listdir(self._directory)):
            if not name.endswith(".ret"):
                continue
            path = os.path.join(self._directory, name)
            try:
                with open(path, "rb") as f:
                    ret = serial.loads(f.read())
            except (OSError, serial.SerialError) as e:
                self.log.error("cannot read queued return {path}: {e}", path=path, e=e)
                continue
            if isinstance(ret, dict):
                found.append((name, ret))
            self._sequence = max(self._sequence, _sequenceOf(name) + 1)
        return found

    def persist(self, ret: dict[str, Any]) -> Deferred[str]:
        """
        Write C{ret} to disk (in a thread).

        @return: a L{Deferred} firing with its name, for L{remove}.
        """
        name = f"{self._sequence:012d}-{ret.get('jid', 'nojid')}.ret"
        self._sequence += 1
        data = serial.dumps(ret)
        path = os.path.join(self._directory, name)
        return self._runBlocking(writePrivateFile, path, data).addCallback(lambda _: name)

    def read(self, name: str) -> Deferred[tuple[Any, int]]:
        """
        Read back a return kept on disk only (in a thread), when it is its
        turn to be sent.

        @return: a L{Deferred} firing with the return and its size in bytes
            on disk, or failing (C{OSError}, L{serial.SerialError}).
        """
        path = os.path.join(self._directory, name)

        def readFile() -> tuple[Any, int]:
            with open(path, "rb") as f:
                data = f.read()
            return serial.loads(data), len(data)

        return self._runBlocking(readFile)

    def remove(self, name: str) -> Deferred[None]:
        """
        Forget a return the master has.
        """
        path = os.path.join(self._directory, name)

        def unlink() -> None:
            with contextlib.suppress(FileNotFoundError):
                os.unlink(path)

        return self._runBlocking(unlink)


def _sequenceOf(name: str) -> int:
    head = name.split("-", 1)[0]
    return int(head) if head.isdigit() else 0
