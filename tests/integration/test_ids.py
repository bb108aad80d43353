# -*- test-case-name: tests.integration.test_ids -*-
"""
The id rules of issue 22 with real daemons: a master with an accepted
C{web1} denies a minion C{WEB1} and refuses a minion C{web1.}, writing no
key for either, and both minions log why; a key stored before the rules
(C{web1\\u3164}) is named in the master's warning at start, listed escaped
by the real C{salttwist-key -L} and deleted by its escaped form.
"""

from __future__ import annotations

import os

from twisted.trial.unittest import TestCase

from salttwist.pki.keystore import ACCEPTED, STATES, FilesystemKeyStore
from tests.integration.harness import Cluster, seedKeyPair, waitFor

IMPOSTOR = "web1\u3164"


class IdRulesTests(TestCase):
    """
    A master and C{web1}, accepted; an old impostor key beside it.
    """

    timeout = 90

    async def setUp(self) -> None:
        self.cluster = Cluster(self)
        store = FilesystemKeyStore(self.cluster.masterPkiDir)
        otherPem = seedKeyPair(self.cluster.minionPkiDir("other"), "minion", "other")
        store.putKey(ACCEPTED, IMPOSTOR, otherPem)
        await self.cluster.startReady(("web1",))
        self.store = FilesystemKeyStore(self.cluster.masterPkiDir)

    def keyFiles(self) -> list[str]:
        """
        @return: every key file under the master's state directories.
        """
        return sorted(
            f"{state}/{name}"
            for state in STATES
            for name in os.listdir(os.path.join(self.cluster.masterPkiDir, state))
        )

    async def test_caseAndGrammar(self) -> None:
        """
        C{WEB1} is denied and C{web1.} refused; each minion logs the reason,
        the master logs it with the rule, and no key file is written.
        """
        cluster = self.cluster
        before = self.keyFiles()
        for minionId in ("WEB1", "web1."):
            seedKeyPair(cluster.minionPkiDir(minionId), "minion", minionId)
            cluster.startMinion(minionId)
        denied = "the master denied this minion's key: minion id 'WEB1' is the same"
        refused = "invalid minion id: minion id 'web1.' ends with '.'"

        def told() -> bool:
            return (
                denied in cluster.minions["WEB1"].output()
                and refused in cluster.minions["web1."].output()
            )

        await waitFor(told, "both minions to be told why", context=cluster.logs)

        def logged() -> bool:
            master = cluster.master.output() if cluster.master is not None else ""
            return (
                "refused: minion id 'WEB1' is the same regardless of ASCII case" in master
                and "refused: invalid minion id: minion id 'web1.' ends with '.'" in master
            )

        await waitFor(logged, "the master to log both refusals", context=cluster.logs)
        self.assertEqual(self.keyFiles(), before)

    async def test_oldImpostorWarnedListedDeleted(self) -> None:
        """
        The master's start warning names the old impostor escaped;
        C{salttwist-key -L} lists it escaped and C{-d} with that form
        deletes it alone.
        """
        cluster = self.cluster
        master = cluster.master.output() if cluster.master is not None else ""
        self.assertIn("'web1\\u3164' in minions", master, cluster.logs())
        listed = await cluster.key("-L")
        self.assertEqual(listed.code, 0, cluster.explain(listed))
        self.assertIn("web1\\u3164", listed.out.splitlines())
        self.assertIn("web1", listed.out.splitlines())
        self.assertNotIn("\u3164", listed.out)
        deleted = await cluster.key("-d", "web1\\u3164", "-y")
        self.assertEqual(deleted.code, 0, cluster.explain(deleted))
        self.assertIn("Key for minion web1\\u3164 deleted.", deleted.out)
        self.assertEqual(self.store.listKeys(ACCEPTED), ["web1"])
