# -*- test-case-name: tests.integration.test_autosign_hygiene -*-
"""
Autosign file hygiene and policy process groups with a real master and
minion (L{tests.integration.harness}).
"""

from __future__ import annotations

import os

from twisted.trial.unittest import TestCase

from salttwist.pki.keystore import ACCEPTED, PENDING, FilesystemKeyStore
from tests.integration.harness import Cluster, sleep, waitFor


def _alive(pid: int) -> bool:
    """
    Is C{pid} a live process (not gone, not a zombie)?
    """
    try:
        with open(f"/proc/{pid}/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
    except FileNotFoundError:
        return False
    return fields[0] != "Z"


class WorldWritableWhitelistTests(TestCase):
    """
    A world-writable C{autosign_file} holding C{*} accepts no one: the
    master logs an error naming the file and the fix, at start and at each
    use, and the key stays pending; once fixed, the next retry is accepted.
    """

    timeout = 120

    async def test_refusedUntilFixed(self) -> None:
        cluster = Cluster(self)
        os.makedirs(cluster.masterDir, exist_ok=True)
        whitelist = os.path.join(cluster.masterDir, "autosign.conf")
        with open(whitelist, "w") as f:
            f.write("*\n")
        os.chmod(whitelist, 0o666)
        cluster.writeMasterConfig(autosign_file=whitelist)
        await cluster.startMaster()
        master = cluster.master
        assert master is not None
        await waitFor(
            lambda: f"chmod go-w {whitelist}" in master.output(),
            "the start-time error about the whitelist",
            context=cluster.logs,
        )
        cluster.startMinion("minion1")
        await cluster.waitForPending(["minion1"])
        store = FilesystemKeyStore(cluster.masterPkiDir)
        # Several retries later it is still pending, each use logged.
        await waitFor(
            lambda: master.output().count(f"chmod go-w {whitelist}") >= 3,
            "errors at each use",
            context=cluster.logs,
        )
        self.assertEqual(store.listKeys(ACCEPTED), [], cluster.logs())
        self.assertIn("minion1", store.listKeys(PENDING))
        os.chmod(whitelist, 0o644)
        await waitFor(
            lambda: "minion1" in store.listKeys(ACCEPTED),
            "minion1 accepted once the whitelist is fixed",
            context=cluster.logs,
        )


class PolicyProcessGroupTests(TestCase):
    """
    A policy executable that starts a background C{sleep} and waits: after
    C{autosign_timeout}, or when the master stops, neither it nor the
    C{sleep} survives (checked by pid), with the real master.
    """

    timeout = 120

    async def startPolicy(self, timeout: float) -> tuple[Cluster, list[int]]:
        """
        Start a master whose C{autosign_policy} writes its pid, starts
        C{sleep 60} in the background, writes its pid and waits (only the
        first time it runs); start a minion and wait for both pids.

        @return: the cluster and the pids of the script and the sleep.
        """
        cluster = Cluster(self)
        os.makedirs(cluster.masterDir, exist_ok=True)
        pids = os.path.join(cluster.masterDir, "pids")
        os.makedirs(pids)
        policy = os.path.join(cluster.masterDir, "policy")
        with open(policy, "w") as f:
            f.write(
                "#!/bin/sh\n"
                f"[ -e {pids}/script ] && exit 1\n"
                f"echo $$ > {pids}/script.tmp && mv {pids}/script.tmp {pids}/script\n"
                "sleep 60 &\n"
                f"echo $! > {pids}/sleep.tmp && mv {pids}/sleep.tmp {pids}/sleep\n"
                "wait\n"
            )
        os.chmod(policy, 0o755)
        cluster.writeMasterConfig(autosign_policy=policy, autosign_timeout=timeout)
        await cluster.startMaster()
        cluster.startMinion("minion1")
        await cluster.waitForPending(["minion1"])
        sleepFile = os.path.join(pids, "sleep")
        await waitFor(lambda: os.path.exists(sleepFile), "the policy's sleep", context=cluster.logs)
        found = []
        for name in ("script", "sleep"):
            with open(os.path.join(pids, name)) as f:
                found.append(int(f.read()))

        def cleanup() -> None:
            for pid in found:
                if _alive(pid):
                    os.kill(pid, 9)

        self.addCleanup(cleanup)
        return cluster, found

    async def test_timeoutKillsTheGroup(self) -> None:
        cluster, found = await self.startPolicy(timeout=1)
        await waitFor(
            lambda: not any(_alive(pid) for pid in found),
            "the policy and its sleep killed",
            context=cluster.logs,
        )
        await sleep(0.5)
        self.assertIn("minion1", FilesystemKeyStore(cluster.masterPkiDir).listKeys(PENDING))
        self.assertIn("killed with its process group", cluster.master.output())  # type: ignore[union-attr]

    async def test_masterStopKillsTheGroup(self) -> None:
        """
        When the master stops (SIGTERM), a running policy and the C{sleep}
        it started are killed, long before their timeout.
        """
        cluster, found = await self.startPolicy(timeout=50)
        self.assertTrue(all(_alive(pid) for pid in found))
        await cluster.stopMaster()
        await waitFor(
            lambda: not any(_alive(pid) for pid in found),
            "the policy and its sleep killed at the master's stop",
            timeout=5,
            context=cluster.logs,
        )
