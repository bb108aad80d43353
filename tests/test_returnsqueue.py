# -*- test-case-name: tests.test_returnsqueue -*-
"""
Tests for L{salttwist.minion.returnsqueue.ReturnsQueue}.
"""

from __future__ import annotations

import os

from twisted.trial.unittest import SynchronousTestCase

from salttwist.blocking import runSynchronously
from salttwist.minion.returnsqueue import ReturnsQueue


class ReturnsQueueTests(SynchronousTestCase):
    """
    Returns on disk: written 0600, read back in order, removed.
    """

    def setUp(self) -> None:
        """
        A queue over a temporary directory.
        """
        self.directory = os.path.abspath(self.mktemp())
        self.queue = ReturnsQueue(self.directory, runSynchronously)
        self.assertEqual(self.queue.load(), [])

    def test_persistLoadRemove(self) -> None:
        """
        Persisted returns are private files, loaded back oldest first by a
        new queue (a restarted minion), and gone once removed.
        """
        first = self.successResultOf(self.queue.persist({"jid": "1" * 20, "return": 1}))
        second = self.successResultOf(self.queue.persist({"jid": "2" * 20, "return": 2}))
        self.assertEqual(os.stat(os.path.join(self.directory, first)).st_mode & 0o777, 0o600)
        again = ReturnsQueue(self.directory, runSynchronously)
        self.assertEqual(
            [ret["return"] for _, ret in again.load()],
            [1, 2],
        )
        self.successResultOf(again.remove(first))
        self.assertEqual(os.listdir(self.directory), [second])
        third = self.successResultOf(again.persist({"jid": "3" * 20}))
        self.assertGreater(third, second)

    def test_unreadableKept(self) -> None:
        """
        A corrupt file is skipped with a log line and left in place, never
        deleted.
        """
        path = os.path.join(self.directory, "000000000000-x.ret")
        with open(path, "wb") as f:
            f.write(b"\xc1")
        self.assertEqual(ReturnsQueue(self.directory, runSynchronously).load(), [])
        self.assertTrue(os.path.exists(path))
        self.assertEqual(len(self.flushLoggedErrors()), 0)
