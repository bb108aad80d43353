# -*- test-case-name: tests.test_vs_salt_table -*-
"""
Tests for the table C{benchmarks/vs_salt/run.py} prints.
"""

from __future__ import annotations

import importlib.util
import json
import os
import sys
from types import ModuleType

from twisted.trial.unittest import SynchronousTestCase

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
VS_SALT = os.path.join(ROOT, "benchmarks", "vs_salt")
SALT_ALONE = os.path.join(ROOT, "benchmarks", "results", "2026-11-22-vs-salt-session5-salt.json")


def loadRun() -> ModuleType:
    """
    @return: C{benchmarks/vs_salt/run.py}, imported as a module (with its
        folder on C{sys.path}, as when it runs).
    """
    if VS_SALT not in sys.path:
        sys.path.insert(0, VS_SALT)
    spec = importlib.util.spec_from_file_location("vs_salt_run", os.path.join(VS_SALT, "run.py"))
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


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
        lines = loadRun().table(results).splitlines()
        jobs = [line for line in lines if line.lstrip().startswith("jobs/s")]
        self.assertEqual(len(jobs), 2)
        self.assertIn("5.018", jobs[0])
        self.assertIn("0.407", jobs[1])
