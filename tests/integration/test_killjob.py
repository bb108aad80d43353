# -*- test-case-name: tests.integration.test_killjob -*-
"""
Integration tests of C{saltutil.kill_job} on a running state job: a real
master and minion from the installed wheel; the command the state runs
now dies with everything it started, as Salt kills the job's whole process
tree.
"""

from __future__ import annotations

import json
import os
from typing import Any

from twisted.trial.unittest import TestCase

from tests.integration.harness import Cluster, waitFor

#: A C{cmd.run} state whose shell starts a second shell, which starts a
#: C{sleep 300}; each writes its pid (one a line) to C{pids}; a state after
#: it must not run.
SLEEPER = """\
sleeper:
  cmd.run:
    - name: >-
        sh -c 'sleep 300 & echo $! >> {{ pillar['out'] }}/pids; wait' &
        echo $! >> {{ pillar['out'] }}/pids; echo $$ >> {{ pillar['out'] }}/pids; wait

after_sleeper:
  cmd.run:
    - name: touch {{ pillar['out'] }}/after-sleeper
"""


def running(pid: int) -> bool:
    """
    @return: whether process C{pid} still runs (a zombie does not).
    """
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            return f.read().rpartition(b")")[2].split()[0] not in (b"Z", b"X")
    except OSError:
        return False


class KillStateJobTests(TestCase):
    """
    C{saltutil.kill_job} on a state job kills the command it runs.
    """

    async def setUp(self) -> None:
        self.cluster = Cluster(self)
        roots = os.path.join(self.cluster.baseDir, "srv", "salt")
        self.out = os.path.join(self.cluster.baseDir, "out")
        os.makedirs(self.out)
        os.makedirs(roots)
        with open(os.path.join(roots, "sleeper.sls"), "w") as f:
            f.write(SLEEPER)
        pillarRoot = os.path.join(self.cluster.baseDir, "srv", "pillar")
        os.makedirs(pillarRoot)
        with open(os.path.join(pillarRoot, "top.sls"), "w") as f:
            f.write("base:\n  '*':\n    - common\n")
        with open(os.path.join(pillarRoot, "common.sls"), "w") as f:
            f.write(f"out: {self.out}\n")
        self.cluster.writeMasterConfig(
            file_roots={"base": [roots]}, pillar_roots={"base": [pillarRoot]}
        )
        self.pids: list[int] = []
        await self.cluster.startReady(("minion1",))

    async def tearDown(self) -> None:
        # Whatever a failed test left running (the pids are ours).
        for pid in self.pids:
            if running(pid):
                os.kill(pid, 9)
        await self.cluster.stopAll()

    async def salt(self, target: str, *args: str) -> dict[str, Any]:
        result = await self.cluster.salt(target, *args, "--out", "json", "--static")
        self.assertEqual(result.code, 0, self.cluster.explain(result))
        return json.loads(result.out)

    def written(self) -> list[int]:
        try:
            with open(os.path.join(self.out, "pids")) as f:
                return [int(line) for line in f.read().split()]
        except (OSError, ValueError):
            return []

    async def test_killStateJob(self) -> None:
        """
        A state job killed while its C{cmd.run} state runs C{sleep 300}
        (below a shell, below the state's shell): the three processes are
        gone within seconds, the next state does not run, and the job
        returns that it was killed.
        """
        started = await self.cluster.salt("minion1", "state.sls", "sleeper", "--async")
        self.assertEqual(started.code, 0, self.cluster.explain(started))
        jid = started.out.strip().rsplit(" ", 1)[-1]
        self.pids = await waitFor(
            lambda: len(self.written()) == 3 and self.written(),
            "the state's command to start",
            context=self.cluster.logs,
        )
        self.assertTrue(all(running(pid) for pid in self.pids), self.pids)
        killed = await self.salt("minion1", "saltutil.kill_job", jid)
        self.assertTrue(killed["minion1"], killed)
        await waitFor(
            lambda: not any(running(pid) for pid in self.pids),
            f"the command's processes {self.pids} to end",
            timeout=10,
            context=self.cluster.logs,
        )
        await waitFor(self.idle, "the state run to end", context=self.cluster.logs)
        self.assertFalse(os.path.exists(os.path.join(self.out, "after-sleeper")))

    async def idle(self) -> bool:
        """
        @return: whether minion1 runs no state job.
        """
        return (await self.salt("minion1", "state.running"))["minion1"] == []
