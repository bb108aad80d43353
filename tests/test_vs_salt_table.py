# -*- test-case-name: tests.test_vs_salt_table -*-
"""
Tests for the table C{benchmarks/vs_salt/run.py} prints.
"""

from __future__ import annotations

import json
import os

from twisted.trial.unittest import SynchronousTestCase

from tests._scripts import ROOT, loadScript

SALT_ALONE = os.path.join(ROOT, "benchmarks", "results", "2026-11-22-vs-salt-session5-salt.json")


class TableTests(SynchronousTestCase):
    """
    L{table} shows what was measured.
    """

    def test_saltAlone(self) -> None:
        """
        Salt measured alone (C{--systems salt}) still gets its jobs per
        second row, with salttwist's side empty.
        """
        with open(SALT_ALONE) as f:
            results = json.load(f)
        run = loadScript("benchmarks", "vs_salt", "run.py")
        lines = run.table(results).splitlines()
        jobs = [line for line in lines if line.lstrip().startswith("jobs/s")]
        self.assertEqual(len(jobs), 2)
        self.assertIn("5.018", jobs[0])
        self.assertIn("0.407", jobs[1])
