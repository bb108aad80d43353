# -*- test-case-name: tests.integration.test_keys -*-
"""
Trust taken back from a live minion, with real processes: a master and
three connected minions, and the real C{salttwist-key} deleting or
rejecting one of them while the others keep working.

Each test starts its own master and three minions, their keys accepted
beforehand (L{Cluster.startReady}), so that no RSA key is generated and no
acceptance is waited for.
"""

from __future__ import annotations

import json
import time
from collections.abc import Sequence

from twisted.trial.unittest import TestCase

from salttwist.pki.keystore import PENDING, REJECTED, FilesystemKeyStore
from tests.integration.harness import Cluster, CommandResult, waitFor

KEPT = ("minion1", "minion2")
CUT = "minion3"

AUTHENTICATED = "authenticated and subscribed to its master"
LOST = "lost the connection to the master"
ROTATED = "publication key rotated"
#: The reason the master gives for the rotation it makes on a C{salt/key}
#: event (L{salttwist.master.keywatch.KeyWatch.keyEvent}).
KEY_EVENT_REASON = "key {id!r} {done}"


class TrustTakenBackTests(TestCase):
    """
    C{salttwist-key -d} and C{-r} on a connected minion: the master closes
    that minion's connections and rotates the publication key, acting on
    the command's C{salt/key} event; the other minions get the new key
    over their sessions, without authenticating again, and keep answering
    jobs; the cut-off minion gets neither the new key nor any job.
    """

    timeout = 90

    async def setUp(self) -> None:
        self.cluster = Cluster(self)
        await self.cluster.startReady((*KEPT, CUT))
        self.store = FilesystemKeyStore(self.cluster.masterPkiDir)

    def since(self, minionId: str) -> str:
        """
        @return: what minion C{minionId} logged since L{mark}.
        """
        return self.cluster.minions[minionId].output()[self.marks[minionId] :]

    def mark(self) -> None:
        """
        Remember how much each minion has logged so far.
        """
        self.marks = {name: len(process.output()) for name, process in self.cluster.minions.items()}

    async def ping(self, expected: Sequence[str]) -> CommandResult:
        """
        Run C{salttwist '*' test.ping} and check that exactly C{expected}
        answer C{True}, with exit code 0.
        """
        result = await self.cluster.salt("*", "test.ping", "--static", "--out", "json")
        self.assertEqual(result.code, 0, self.cluster.explain(result))
        self.assertEqual(
            json.loads(result.out), dict.fromkeys(expected, True), self.cluster.explain(result)
        )
        return result

    async def takeTrustBack(self, args: Sequence[str], verb: str) -> None:
        """
        With all three minions answering jobs, run C{salttwist-key ARGS}
        against L{CUT}, and check what every daemon does after it: the
        master rotates the publication key for the reason the command's
        C{salt/key} event gives (C{key 'minion3' deleted}: it acted on the
        event, not only on its once-a-second look at the key store, whose
        rotation says C{cut off minion3}), L{CUT} logs that it lost its
        connection, each of L{KEPT} logs the new publication key, and
        L{CUT} does not. How long that took is printed, not checked.
        """
        cluster = self.cluster
        await self.ping((*KEPT, CUT))
        self.mark()

        result = await cluster.key(*args)
        exited = time.monotonic()
        self.assertEqual(result.code, 0, cluster.explain(result))
        self.assertIn(f"Key for minion {CUT} {verb}.", result.out, str(result))

        master = cluster.master
        assert master is not None
        byEvent = f"({KEY_EVENT_REASON.format(id=CUT, done=verb)})"

        def cutOffAndRotated() -> bool:
            return (
                LOST in self.since(CUT)
                and all(ROTATED in self.since(m) for m in KEPT)
                and byEvent in master.output()
            )

        await waitFor(
            cutOffAndRotated,
            f"{CUT} to be cut off and the others to get a new publication key {byEvent}",
            context=cluster.logs,
        )
        print(f"\nmaster acted on salttwist-key {verb} {time.monotonic() - exited:.2f}s after it")
        self.assertNotIn(ROTATED, self.since(CUT), cluster.logs())

    async def assertOthersUnaffected(self) -> None:
        """
        L{KEPT} answer C{test.ping} and L{CUT} is no longer targeted; L{KEPT}
        authenticated once in their lives (the new key reached them over
        their sessions), and L{CUT} ran nothing since it was cut off.
        """
        await self.ping(KEPT)
        logs = self.cluster.logs()
        for minionId in KEPT:
            self.assertEqual(self.cluster.minions[minionId].output().count(AUTHENTICATED), 1, logs)
            self.assertIn("running test.ping", self.since(minionId), logs)
        self.assertNotIn("running", self.since(CUT), logs)
        self.assertNotIn(AUTHENTICATED, self.since(CUT), logs)

    async def test_deleteConnectedMinion(self) -> None:
        """
        C{salttwist-key -d minion3 -y} while the minions run jobs: the
        master acts on its event, minion3 loses its connection and the
        other two log the new publication key (minion3 does not). minion3
        then authenticates
        again with the key the master no longer knows, which is a new
        pending key. C{salttwist '*' test.ping} gets C{True} from the other
        two, which never authenticated again, and does not list minion3,
        which runs nothing.
        """
        await self.takeTrustBack(("-d", CUT, "-y"), "deleted")

        def pendingAgain() -> bool:
            return CUT in self.store.listKeys(PENDING) and "not accepted" in self.since(CUT)

        await waitFor(pendingAgain, f"{CUT} to be pending again", context=self.cluster.logs)
        self.assertEqual(self.store.stateOf(CUT), [PENDING], self.cluster.logs())
        await self.assertOthersUnaffected()

    async def test_rejectConnectedMinion(self) -> None:
        """
        C{salttwist-key -r minion3 -y --include-accepted} (C{-r} alone
        rejects only pending keys, as in Salt) behaves the same way, except
        that minion3's key stays rejected: its next authentication is
        refused.
        """
        await self.takeTrustBack(("-r", CUT, "-y", "--include-accepted"), "rejected")
        await waitFor(
            lambda: "the master rejected this minion's key" in self.since(CUT),
            f"{CUT}'s authentication to be refused",
            context=self.cluster.logs,
        )
        self.assertEqual(self.store.stateOf(CUT), [REJECTED], self.cluster.logs())
        await self.assertOthersUnaffected()
