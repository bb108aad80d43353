# -*- test-case-name: tests.integration.test_state_masteropts -*-
"""
Integration tests of the master's state options in a minion's state run
(Salt's C{_master_opts}, L{salttwist.state.masteropts}), on real daemons
driven by the installed C{salttwist} command: the master's C{nodegroups}
match in the minion's top file, its C{failhard} stops the minion's run,
and its C{state_events} makes the minion fire progress events.
"""

from __future__ import annotations

import json
import os
from typing import Any

from twisted.trial.unittest import TestCase

from tests.integration.harness import Cluster, waitFor

TOP = """\
base:
  webs:
    - match: nodegroup
    - chain
"""

CHAIN = """\
first:
  test.fail_without_changes: []

second:
  test.succeed_without_changes: []
"""


def writeFile(root: str, relative: str, data: str) -> None:
    path = os.path.join(root, *relative.split("/"))
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "w") as f:
        f.write(data)


class MasterStateOptionsTests(TestCase):
    """
    A master whose config sets C{nodegroups}, C{failhard} and
    C{state_events}, and a minion whose config sets none of them.
    """

    timeout = 240

    async def setUp(self) -> None:
        self.cluster = Cluster(self)
        roots = os.path.join(self.cluster.baseDir, "srv", "salt")
        writeFile(roots, "top.sls", TOP)
        writeFile(roots, "chain.sls", CHAIN)
        self.cluster.writeMasterConfig(
            file_roots={"base": [roots]},
            nodegroups={"webs": "L@minion1"},
            failhard=True,
            state_events=True,
        )
        await self.cluster.startReady(["minion1"])

    async def tearDown(self) -> None:
        await self.cluster.stopAll()

    async def test_masterOptionsInMinionRun(self) -> None:
        """
        C{state.apply} on minion1: the top's nodegroup (the master's)
        matches it; the first state fails and, the master's C{failhard}
        on, the second does not run (nor is listed); the run fired a progress event per
        state (the master's C{state_events}) though the command did not
        ask for them.
        """
        watcher = await self.cluster.watchEvents()
        result = await self.cluster.salt("minion1", "state.apply", "--out", "json")
        self.assertEqual(result.code, 1, self.cluster.explain(result))
        returns: dict[str, Any] = json.loads(result.out)["minion1"]
        byId = {entry["__id__"]: entry for entry in returns.values()}
        self.assertIs(byId["first"]["result"], False, returns)
        self.assertNotIn("second", byId, returns)
        await waitFor(
            lambda: any("/prog/minion1/" in tag for tag in watcher.tags),
            "a progress event of minion1's run",
            context=self.cluster.logs,
        )
