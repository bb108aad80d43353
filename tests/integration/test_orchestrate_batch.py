# -*- test-case-name: tests.integration.test_orchestrate_batch -*-
"""
Integration tests of the orchestration's C{salt.state} and
C{salt.function} with C{batch} and C{subset}: a real master and two real
minions, driven with the installed C{salttwist-run state.orchestrate}.
"""

from __future__ import annotations

import json
import os
from typing import Any

from twisted.trial.unittest import TestCase

from tests.integration.harness import Cluster, runCommand

MINIONS = ("minion1", "minion2")

BATCHED = """\
deploy:
  salt.state:
    - tgt: 'minion*'
    - sls: app
    - batch: 1
    - pillar:
        out: {{ pillar['out'] }}

pinged:
  salt.function:
    - name: test.ping
    - tgt: 'minion*'
    - batch: '50%'
"""

SUBSET = """\
one:
  salt.state:
    - tgt: 'minion*'
    - sls: app
    - subset: 1
    - pillar:
        out: {{ pillar['out'] }}
"""

STOPPED = """\
deploy:
  salt.state:
    - tgt: 'minion*'
    - sls: broken
    - batch: 1
    - batch_wait: 0.2
    - failhard: True
    - pillar:
        out: {{ pillar['out'] }}
"""

BROKEN = """\
marker:
  cmd.run:
    - name: echo ran > {{ pillar['out'] }}/ran-{{ grains['id'] }}

fails:
  test.fail_without_changes: []
"""

APP = """\
app_marker:
  cmd.run:
    - name: echo deployed > {{ pillar['out'] }}/app-{{ grains['id'] }}
    - creates: {{ pillar['out'] }}/app-{{ grains['id'] }}
"""


def writeFile(root: str, relative: str, data: str) -> None:
    path = os.path.join(root, *relative.split("/"))
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "w") as f:
        f.write(data)


class OrchestrateBatchTests(TestCase):
    """
    A master with an orchestration tree and two minions.
    """

    timeout = 240

    async def setUp(self) -> None:
        self.cluster = Cluster(self)
        self.roots = os.path.join(self.cluster.baseDir, "srv", "salt")
        self.out = os.path.join(self.cluster.baseDir, "out")
        os.makedirs(self.out)
        writeFile(self.roots, "orch/batched.sls", BATCHED)
        writeFile(self.roots, "orch/subset.sls", SUBSET)
        writeFile(self.roots, "app.sls", APP)
        writeFile(self.roots, "orch/stopped.sls", STOPPED)
        writeFile(self.roots, "broken.sls", BROKEN)
        self.cluster.writeMasterConfig(file_roots={"base": [self.roots]})
        await self.cluster.startReady(MINIONS)

    async def tearDown(self) -> None:
        await self.cluster.stopAll()

    async def orchestrate(self, mods: str, code: int = 0) -> Any:
        result = await runCommand(
            [
                "salttwist-run",
                "-c",
                self.cluster.masterDir,
                "state.orchestrate",
                mods,
                f"pillar={{out: {self.out}}}",
                "--out",
                "json",
            ],
            cwd=self.cluster.baseDir,
        )
        self.assertEqual(result.code, code, self.cluster.explain(result))
        return next(iter(json.loads(result.out)["data"].values()))

    async def test_batch(self) -> None:
        """
        C{batch: 1} runs the SLS on both minions, one job each; a
        C{salt.function} with C{batch: '50%'} reaches both too.
        """
        data = await self.orchestrate("orch.batched")
        deploy = data["salt_|-deploy_|-deploy_|-state"]
        self.assertEqual(deploy["result"], True, deploy)
        self.assertEqual(deploy["comment"], "States ran successfully. Updating minion1, minion2.")
        self.assertEqual(sorted(os.listdir(self.out)), ["app-minion1", "app-minion2"])
        pinged = data["salt_|-pinged_|-test.ping_|-function"]
        self.assertEqual(pinged["changes"], {"ret": {"minion1": True, "minion2": True}}, pinged)

    async def test_subset(self) -> None:
        """
        C{subset: 1} runs the SLS on one of the two minions only.
        """
        data = await self.orchestrate("orch.subset")
        one = data["salt_|-one_|-one_|-state"]
        self.assertEqual(one["result"], True, one)
        self.assertEqual(len(one["changes"]["ret"]), 1, one)
        (minionId,) = one["changes"]["ret"]
        self.assertEqual(os.listdir(self.out), [f"app-{minionId}"])

    async def test_batchFailhard(self) -> None:
        """
        C{batch: 1} with C{failhard: True} (and a C{batch_wait}): minion1's
        run fails, so minion2 never runs the SLS; the comment says so.
        """
        data = await self.orchestrate("orch.stopped", code=1)
        deploy = data["salt_|-deploy_|-deploy_|-state"]
        self.assertIs(deploy["result"], False, deploy)
        self.assertTrue(deploy["comment"].startswith("Run failed on minions: minion1"), deploy)
        self.assertIn("failhard stopped the batch run; not run on: minion2", deploy["comment"])
        self.assertEqual(os.listdir(self.out), ["ran-minion1"])
