# -*- test-case-name: tests.integration.test_orchestrate -*-
"""
Integration tests of orchestration (issue 21): a real master serving an
orchestration SLS and a state tree from C{file_roots}, two real minions,
driven with the installed C{salttwist-run state.orchestrate}, and the
master's reactor starting an orchestration.
"""

from __future__ import annotations

import json
import os
from typing import Any

from twisted.trial.unittest import TestCase

from tests.integration.harness import Cluster, runCommand, waitFor

MINIONS = ("minion1", "minion2")


def writeFile(root: str, relative: str, data: str) -> str:
    path = os.path.join(root, *relative.split("/"))
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "w") as f:
        f.write(data)
    return path


DEPLOY = """\
prepare:
  salt.function:
    - name: cmd.run
    - tgt: '*'
    - arg:
      - touch {{ pillar['out'] }}/prepared

deploy:
  salt.state:
    - tgt: 'minion*'
    - sls: app
    - pillar:
        out: {{ pillar['out'] }}
    - require:
      - salt: prepare
"""

APP = """\
app_marker:
  cmd.run:
    - name: echo deployed > {{ pillar['out'] }}/app-{{ grains['id'] }}
    - creates: {{ pillar['out'] }}/app-{{ grains['id'] }}
"""

FAILING = """\
broken:
  salt.function:
    - name: test.retcode
    - tgt: minion1
    - arg:
      - 3

never:
  salt.function:
    - name: test.ping
    - tgt: '*'
    - require:
      - salt: broken
"""

REACTION = """\
orchestrate_it:
  runner.state.orchestrate:
    - args:
      - mods: orch.reacted
      - pillar:
          minion: {{ data['id'] }}
          out: {{ data['data']['out'] }}
"""

REACTED = """\
touch_it:
  salt.function:
    - name: cmd.run
    - tgt: {{ pillar['minion'] }}
    - arg:
      - touch {{ pillar['out'] }}/reacted-{{ pillar['minion'] }}
"""


class OrchestrateTests(TestCase):
    """
    A master with an orchestration tree and two minions.
    """

    timeout = 240

    async def setUp(self) -> None:
        self.cluster = Cluster(self)
        self.roots = os.path.join(self.cluster.baseDir, "srv", "salt")
        self.out = os.path.join(self.cluster.baseDir, "out")
        os.makedirs(self.out)
        writeFile(self.roots, "orch/deploy.sls", DEPLOY)
        writeFile(self.roots, "orch/failing.sls", FAILING)
        writeFile(self.roots, "orch/reacted.sls", REACTED)
        writeFile(self.roots, "app.sls", APP)
        reaction = writeFile(self.cluster.masterDir, "reactor/orch.sls", REACTION)
        self.cluster.writeMasterConfig(
            file_roots={"base": [self.roots]},
            reactor=[{"myco/orchestrate": [reaction]}],
        )
        await self.cluster.startReady(MINIONS)

    async def tearDown(self) -> None:
        await self.cluster.stopAll()

    async def run_(self, *args: str, code: int = 0) -> Any:
        """
        Run C{salttwist-run ARGS --out json}, which must exit with C{code}.

        @return: the printed return.
        """
        result = await runCommand(
            ["salttwist-run", "-c", self.cluster.masterDir, *args, "--out", "json"],
            cwd=self.cluster.baseDir,
        )
        self.assertEqual(result.code, code, self.cluster.explain(result))
        return json.loads(result.out)

    async def test_orchestrate(self) -> None:
        """
        C{salttwist-run state.orchestrate}: the master runs the SLS; its
        salt.function runs a command on both minions, then its salt.state
        (requiring it) has both minions apply an SLS with the pillar it
        passes; Salt's return shape.
        """
        ret = await self.run_("state.orchestrate", "orch.deploy", f"pillar={{out: {self.out}}}")
        self.assertEqual((ret["outputter"], ret["retcode"]), ("highstate", 0), ret)
        ((masterId, data),) = ret["data"].items()
        self.assertTrue(masterId.endswith("_master"), masterId)
        prepare = data["salt_|-prepare_|-cmd.run_|-function"]
        deploy = data["salt_|-deploy_|-deploy_|-state"]
        self.assertEqual(prepare["result"], True, prepare)
        self.assertEqual(sorted(prepare["changes"]["ret"]), list(MINIONS))
        self.assertEqual(deploy["result"], True, deploy)
        self.assertEqual((prepare["__run_num__"], deploy["__run_num__"]), (0, 1))
        self.assertEqual(deploy["comment"], "States ran successfully. Updating minion1, minion2.")
        self.assertEqual(sorted(deploy["changes"]["ret"]), list(MINIONS))
        for minionId in MINIONS:
            with open(os.path.join(self.out, f"app-{minionId}")) as f:
                self.assertEqual(f.read(), "deployed\n")
        self.assertTrue(os.path.exists(os.path.join(self.out, "prepared")))

        again = await self.run_("state.orch", "orch.deploy", f"pillar={{out: {self.out}}}")
        deploy = again["data"][masterId]["salt_|-deploy_|-deploy_|-state"]
        self.assertEqual(
            deploy["comment"], "States ran successfully. No changes made to minion1, minion2."
        )

    async def test_testMode(self) -> None:
        """
        C{test=True}: nothing runs on the minions.
        """
        ret = await self.run_(
            "state.orchestrate", "orch.deploy", "test=True", f"pillar={{out: {self.out}}}"
        )
        data = next(iter(ret["data"].values()))
        self.assertIsNone(data["salt_|-prepare_|-cmd.run_|-function"]["result"])
        self.assertEqual(os.listdir(self.out), [])

    async def test_failure(self) -> None:
        """
        A failed function stops the state requiring it; retcode 1 in the
        return, which is C{salttwist-run}'s exit code, as Salt's.
        """
        ret = await self.run_("state.orchestrate", "orch.failing", code=1)
        self.assertEqual(ret["retcode"], 1, ret)
        data = next(iter(ret["data"].values()))
        broken = data["salt_|-broken_|-test.retcode_|-function"]
        self.assertEqual(broken["result"], False)
        self.assertIn("failed on minions: minion1", broken["comment"])
        never = data["salt_|-never_|-test.ping_|-function"]
        self.assertIn("One or more requisite failed", never["comment"])

    async def test_reactorOrchestrates(self) -> None:
        """
        An event from a minion makes the master's reactor orchestrate
        (C{runner.state.orchestrate}), which runs a command on that minion.
        """
        result = await self.cluster.salt(
            "minion2", "event.send", "myco/orchestrate", f"data={{out: {self.out}}}", "--static"
        )
        self.assertEqual(result.code, 0, self.cluster.explain(result))
        marker = os.path.join(self.out, "reacted-minion2")
        await waitFor(
            lambda: os.path.exists(marker), "the orchestrated command", context=self.cluster.logs
        )
        self.assertFalse(os.path.exists(os.path.join(self.out, "reacted-minion1")))
