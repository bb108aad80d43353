# -*- test-case-name: tests.test_minion_path_bench -*-
"""
Tests for C{benchmarks/minion_path_bench.py}: it measures a real minion
that ran every job it was fed.
"""

from __future__ import annotations

import argparse

from twisted.trial.unittest import SynchronousTestCase

from tests._scripts import loadScript


class MinionPathBenchTests(SynchronousTestCase):
    """
    The benchmark feeds the master's publications to a ready minion.
    """

    def test_everyJobReturned(self) -> None:
        """
        Each publication the master wrote for the minion's subscription is
        run and its return sealed and sent: the figures cover C{--jobs}
        real jobs, and the profile names the minion's publication handler.
        """
        bench = loadScript("benchmarks", "minion_path_bench.py")
        out = bench.run(argparse.Namespace(jobs=40, profile=True, top=40))
        self.assertEqual(out["jobs"], 40)
        self.assertEqual(out["returns_sent"], 40)
        self.assertGreater(out["cpu_us_per_job"], 0)
        self.assertIn("publicationReceived", out["profile"])
