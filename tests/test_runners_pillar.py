# -*- test-case-name: tests.test_runners_pillar -*-
"""
Tests for L{salttwist.runners.pillar}: C{pillar.show_pillar} and
C{pillar.show_top} run through a real master's C{runner} command over real
C{pillar_roots}, compiled in a thread (synchronously here) or in the
master's workers (an L{InlineWorkerPool}).
"""

from __future__ import annotations

import os
from typing import Any

from twisted.trial.unittest import SynchronousTestCase

from salttwist.workers.pool import InlineWorkerPool
from tests.test_master_pillarserving import FILES, SECRET, writeTree
from tests.test_runners_jobs import makeMaster, wireArgs


class PillarRunnerTests(SynchronousTestCase):
    """
    The runners, with the master's cached grains.
    """

    def setUp(self) -> None:
        self.pillarRoot = writeTree(os.path.abspath(self.mktemp()), FILES)
        self.master = makeMaster(self, pillar_roots={"base": [self.pillarRoot]})
        self.master.grainsCache.grains["web1"] = {"os": "Gentoo"}

    def run_(self, fun: str, *args: Any, **kwargs: Any) -> Any:
        reply = self.successResultOf(
            self.master.clientRunner(None, {"fun": fun, "arg": wireArgs(args, kwargs)})
        )
        return reply["return"]

    def test_registered(self) -> None:
        """
        The master has both runners.
        """
        self.assertIn("pillar.show_pillar", self.master.runners)
        self.assertIn("pillar.show_top", self.master.runners)

    def test_showPillar(self) -> None:
        """
        C{show_pillar} compiles a minion's pillar with its cached grains;
        keyword arguments are grains over them.
        """
        self.assertEqual(
            self.run_("pillar.show_pillar", "web1"),
            {"motd": "hello Gentoo", "port0": 8000, "port1": 8001, "port2": 8002},
        )
        self.assertEqual(self.run_("pillar.show_pillar", "web1", os="Arch")["motd"], "hello Arch")
        self.assertEqual(self.run_("pillar.show_pillar", "db1")["db_password"], SECRET)

    def test_showPillarGlobal(self) -> None:
        """
        Without a minion, the pillar every minion gets.
        """
        self.assertEqual(self.run_("pillar.show_pillar"), {"motd": "hello unknown"})

    def test_showPillarNotCached(self) -> None:
        """
        A runner's compile does not change the master's pillar cache.
        """
        self.run_("pillar.show_pillar", "db1")
        self.assertIsNone(self.master.pillarCache.get("db1"))

    def test_showPillarErrors(self) -> None:
        """
        Render errors are in C{_errors}, as Salt's.
        """
        pillar = self.run_("pillar.show_pillar", "x1", role="broken")
        self.assertIn("_errors", pillar)

    def test_showTop(self) -> None:
        """
        C{show_top} lists the SLS a minion's pillar is compiled from.
        """
        self.assertEqual(self.run_("pillar.show_top", "web1"), {"base": ["common", "web"]})
        self.assertEqual(self.run_("pillar.show_top"), {"base": ["common"]})

    def test_showTopErrors(self) -> None:
        """
        A top file that cannot be read gives the list of errors instead.
        """
        writeTree(self.pillarRoot, {"top.sls": "base: [oops\n"})
        errors = self.run_("pillar.show_top", "web1")
        self.assertIsInstance(errors, list)
        self.assertTrue(errors and all(isinstance(e, str) for e in errors), errors)

    def test_badMinion(self) -> None:
        """
        A minion that is not an id is refused.
        """
        d = self.master.clientRunner(None, {"fun": "pillar.show_pillar", "arg": [""]})
        self.assertIn("minion must be a minion id", str(self.failureResultOf(d, ValueError).value))

    def test_inWorkers(self) -> None:
        """
        With workers, the compile runs as the master's pillar task.
        """
        pool = InlineWorkerPool()
        self.successResultOf(pool.start())
        self.master.workers = pool
        self.assertEqual(self.run_("pillar.show_pillar", "web1")["motd"], "hello Gentoo")
        self.assertEqual(self.run_("pillar.show_top", "db1"), {"base": ["common", "db"]})
        self.assertEqual(pool.stats()["completed"], 2)
