# -*- test-case-name: tests.test_runners_manage -*-
"""
Tests for L{salttwist.runners.manage}, the C{manage.*} runners.

The master is real (see L{tests.test_runners_jobs.makeMaster}); its key store
refuses to be used outside C{runBlocking}, so a runner that would touch the
key files on the reactor thread fails its test. "Connected" minions are
entries in C{master.subscribers}.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from twisted.internet.defer import Deferred
from twisted.trial.unittest import SynchronousTestCase

from salttwist.master.core import runSynchronously
from salttwist.pki.keystore import ACCEPTED, DENIED, PENDING, InMemoryKeyStore
from tests.test_runners_jobs import MASTER_PEM, FakeSubscriber, makeMaster, wireArgs


class GuardedKeyStore(InMemoryKeyStore):
    """
    An in-memory key store that fails every call made outside
    L{GuardedKeyStore.runBlocking}, the way the master's blocking work runs.

    @ivar blockingCalls: how many functions went through C{runBlocking}.
    """

    def __init__(self) -> None:
        super().__init__()
        self._inBlocking = False
        self._setUp = True
        self.blockingCalls = 0

    def ready(self) -> None:
        """
        The test's keys are in place: guard every call from now on.
        """
        self._setUp = False

    def runBlocking(self, f: Callable[..., Any], *args: Any, **kwargs: Any) -> Deferred[Any]:
        """
        Run C{f} now, with the key store allowed.
        """
        self.blockingCalls += 1
        self._inBlocking = True
        try:
            return runSynchronously(f, *args, **kwargs)
        finally:
            self._inBlocking = False

    def _check(self) -> None:
        if not (self._setUp or self._inBlocking):
            raise AssertionError("the key store was used outside runBlocking")

    def putKey(self, state: str, minionId: str, pem: bytes) -> None:
        """
        See L{InMemoryKeyStore.putKey}.
        """
        self._check()
        super().putKey(state, minionId, pem)

    def deleteKey(self, state: str, minionId: str) -> bool:
        """
        See L{InMemoryKeyStore.deleteKey}.
        """
        self._check()
        return super().deleteKey(state, minionId)

    def listKeys(self, state: str) -> list[str]:
        """
        See L{InMemoryKeyStore.listKeys}.
        """
        self._check()
        return super().listKeys(state)

    def getKey(self, state: str, minionId: str) -> bytes | None:
        """
        See L{InMemoryKeyStore.getKey}.
        """
        self._check()
        return super().getKey(state, minionId)


class ManageTestCase(SynchronousTestCase):
    """
    minion1, minion2 and minion3 accepted; minion1 and minion3 connected.
    """

    def setUp(self) -> None:
        """
        Build the master and connect two minions.
        """
        self.keyStore = GuardedKeyStore()
        self.master = makeMaster(
            self,
            keyStore=self.keyStore,
            runBlocking=self.keyStore.runBlocking,
            nodegroups={"odd": "L@minion1,minion3"},
        )
        self.keyStore.ready()
        self.master.subscribers["minion1"] = FakeSubscriber("10.0.0.1")  # type: ignore[assignment]
        self.master.subscribers["minion3"] = FakeSubscriber("10.0.0.3")  # type: ignore[assignment]
        self.events: list[tuple[str, dict[str, Any]]] = []
        self.master.bus.subscribe(["salt/key"], lambda tag, data: self.events.append((tag, data)))

    def run_(self, fun: str, *args: Any, **kwargs: Any) -> Any:
        """
        Run a runner as C{salttwist-run} does.

        @return: its return.
        """
        reply = self.successResultOf(
            self.master.clientRunner(
                None,  # type: ignore[arg-type]
                {"fun": fun, "arg": wireArgs(args, kwargs)},
            )
        )
        return reply["return"]

    def runFails(self, fun: str, *args: Any, **kwargs: Any) -> str:
        """
        Run a runner that fails with L{ValueError}.

        @return: the error message.
        """
        d = self.master.clientRunner(
            None,  # type: ignore[arg-type]
            {"fun": fun, "arg": wireArgs(args, kwargs)},
        )
        return str(self.failureResultOf(d, ValueError).value)


class StatusTests(ManageTestCase):
    """
    C{manage.status}, C{manage.up} and C{manage.down} split the accepted
    minions into connected and not.
    """

    def test_status(self) -> None:
        """
        Every accepted minion is up (connected) or down, each list sorted;
        the key store is read off the reactor thread.
        """
        self.assertEqual(
            self.run_("manage.status"), {"up": ["minion1", "minion3"], "down": ["minion2"]}
        )
        self.assertGreater(self.keyStore.blockingCalls, 0)

    def test_upAndDown(self) -> None:
        """
        C{manage.up} and C{manage.down} are the two halves.
        """
        self.assertEqual(self.run_("manage.up"), ["minion1", "minion3"])
        self.assertEqual(self.run_("manage.down"), ["minion2"])

    def test_target(self) -> None:
        """
        C{tgt} and C{tgt_type} restrict the minions considered, including
        the master's nodegroups.
        """
        self.assertEqual(
            self.run_("manage.status", tgt="minion[12]"), {"up": ["minion1"], "down": ["minion2"]}
        )
        self.assertEqual(
            self.run_("manage.status", tgt="minion2,minion3", tgt_type="list"),
            {"up": ["minion3"], "down": ["minion2"]},
        )
        self.assertEqual(
            self.run_("manage.up", tgt="odd", tgt_type="nodegroup"), ["minion1", "minion3"]
        )
        self.assertEqual(self.run_("manage.down", tgt="odd", tgt_type="nodegroup"), [])

    def test_pillarTarget(self) -> None:
        """
        A pillar target is matched with the master's pillar cache: a minion
        whose cached pillar does not match is not counted as down, one whose
        pillar is not cached may match and is.
        """
        self.master.pillarCache.store("minion1", {"role": "web"})
        self.master.pillarCache.store("minion3", {"role": "db"})
        self.assertEqual(
            self.run_("manage.status", tgt="role:web", tgt_type="pillar"),
            {"up": ["minion1"], "down": ["minion2"]},
        )

    def test_pillarOfDeletedKeyForgotten(self) -> None:
        """
        A key removed from the key store without any C{salt/key} event
        takes its minion's cached pillar with it at the next check of the
        key store (L{KeyWatch.reconcileKeys}); the others stay.
        """
        self.master.pillarCache.store("minion1", {"secret": "s1"})
        self.master.pillarCache.store("minion2", {"secret": "s2"})
        self.successResultOf(
            self.keyStore.runBlocking(self.keyStore.deleteKey, ACCEPTED, "minion2")
        )
        self.successResultOf(self.master.reconcileKeys())
        self.assertEqual(sorted(self.master.pillarCache.byId()), ["minion1"])

    def test_badTarget(self) -> None:
        """
        An invalid target fails with the targeting error.
        """
        self.assertIn("invalid target", self.runFails("manage.status", tgt="a", tgt_type="nope"))

    def test_timeoutsTaken(self) -> None:
        """
        Salt's C{timeout} and C{gather_job_timeout} are taken (and need no
        wait: nothing is sent to the minions).
        """
        self.assertEqual(
            self.run_("manage.up", timeout=1, gather_job_timeout=2), ["minion1", "minion3"]
        )

    def test_unacceptedNotListed(self) -> None:
        """
        Pending keys are not minions yet: they are neither up nor down.
        """
        self.keyStore.keys[PENDING]["newbie"] = MASTER_PEM
        self.assertEqual(self.run_("manage.down"), ["minion2"])


class DownRemoveKeysTests(ManageTestCase):
    """
    C{manage.down removekeys=True} deletes the keys of the minions that are
    down.
    """

    def test_removeKeys(self) -> None:
        """
        Every key of a down minion goes, through C{runBlocking}, and the
        master hears of it on its bus as it does from C{salttwist-key -d};
        connected minions keep theirs.
        """
        self.keyStore.keys[DENIED]["minion2"] = MASTER_PEM
        self.assertEqual(self.run_("manage.down", removekeys=True), ["minion2"])
        self.assertEqual(self.keyStore.stateOf("minion2"), [])
        self.assertEqual(sorted(self.keyStore.keys[ACCEPTED]), ["minion1", "minion3"])
        self.assertEqual(self.events, [("salt/key", self.events[0][1])])
        self.assertEqual(self.events[0][1]["act"], "delete")
        self.assertEqual(self.events[0][1]["id"], "minion2")

    def test_keepByDefault(self) -> None:
        """
        Without C{removekeys} nothing is deleted.
        """
        self.run_("manage.down")
        self.assertEqual(sorted(self.keyStore.keys[ACCEPTED]), ["minion1", "minion2", "minion3"])
        self.assertEqual(self.events, [])

    def test_reconnected(self) -> None:
        """
        A down minion that connects again while the keys of the others are
        being deleted keeps its key.
        """
        del self.master.subscribers["minion3"]
        original = self.keyStore.runBlocking

        def runBlocking(f: Callable[..., Any], *args: Any, **kwargs: Any) -> Deferred[Any]:
            if args and args[-1] == "minion2":
                # minion3 connects while minion2's keys are deleted.
                self.master.subscribers["minion3"] = FakeSubscriber()  # type: ignore[assignment]
            return original(f, *args, **kwargs)

        self.master.runBlocking = runBlocking
        self.assertEqual(self.run_("manage.down", removekeys=True), ["minion2", "minion3"])
        self.assertEqual(sorted(self.keyStore.keys[ACCEPTED]), ["minion1", "minion3"])
        self.assertEqual([data["id"] for _, data in self.events], ["minion2"])


class PresenceTests(ManageTestCase):
    """
    C{manage.present}, C{manage.joined}, C{manage.list_state} and their
    C{not_} counterparts.
    """

    def test_present(self) -> None:
        """
        The connected minions, sorted; C{joined} and C{list_state} are the
        same.
        """
        for fun in ("manage.present", "manage.joined", "manage.list_state"):
            self.assertEqual(self.run_(fun), ["minion1", "minion3"], fun)

    def test_notPresent(self) -> None:
        """
        The accepted minions that are not connected.
        """
        for fun in ("manage.not_present", "manage.not_joined", "manage.list_not_state"):
            self.assertEqual(self.run_(fun), ["minion2"], fun)

    def test_subset(self) -> None:
        """
        C{subset} (a list, or ids separated by commas) restricts the answer.
        """
        self.assertEqual(self.run_("manage.present", subset=["minion3", "minion2"]), ["minion3"])
        self.assertEqual(self.run_("manage.present", subset="minion1, minion2"), ["minion1"])
        self.assertEqual(self.run_("manage.not_present", subset=["minion1"]), [])
        self.assertIn("subset", self.runFails("manage.present", subset=5))

    def test_showIp(self) -> None:
        """
        C{show_ip=True} maps each connected minion to the address its
        connection comes from.
        """
        self.assertEqual(
            self.run_("manage.joined", show_ip=True),
            {"minion1": "10.0.0.1", "minion3": "10.0.0.3"},
        )
        self.assertEqual(self.run_("manage.not_joined", show_ip=True), ["minion2"])
