# -*- test-case-name: tests.test_minion_path_bench -*-
"""
Tests for C{benchmarks/minion_path_bench.py}: it measures a real minion
that ran every job it was fed.
"""

from __future__ import annotations

import argparse
import importlib.util
import os
from types import ModuleType

from twisted.trial.unittest import SynchronousTestCase

BENCH = os.path.join(
    os.path.dirname(os.path.dirname(os.path.abspath(__file__))),
    "benchmarks",
    "minion_path_bench.py",
)


def loadBench() -> ModuleType:
    """
    @return: the benchmark script, imported as a module.
    """
    spec = importlib.util.spec_from_file_location("minion_path_bench", BENCH)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


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
        bench = loadBench()
        out = bench.run(argparse.Namespace(jobs=40, profile=True, top=40))
        self.assertEqual(out["jobs"], 40)
        self.assertEqual(out["returns_sent"], 40)
        self.assertGreater(out["cpu_us_per_job"], 0)
        self.assertIn("_publicationReceived", out["profile"])
