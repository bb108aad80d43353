# -*- test-case-name: tests.test_call_masters -*-
"""
Tests for C{salttwist-call}'s choice of master when its minion config
lists several (L{salttwist.client.transient.MasterCaller}): the order
(L{salttwist.masteraddress.masterOrder}), moving on from a master that is
down, hung, refuses the key or presents a key not pinned for it, and the
error naming every master when none takes the session. Two L{Master}s in
memory (L{tests.test_minion_failover.MasterPair}), time on a
L{MemoryReactorClock}.
"""

from __future__ import annotations

import os
from typing import Any

from twisted.internet.defer import Deferred
from twisted.trial.unittest import SynchronousTestCase

from salttwist import crypt
from salttwist.client.transient import CallerError, MasterCaller
from salttwist.config import loadMinionConfig
from salttwist.master.core import runSynchronously
from salttwist.masteraddress import MasterAddress, masterOrder
from salttwist.pki.credentials import MASTER_PUB_FILE
from salttwist.pki.keystore import ACCEPTED, PENDING
from salttwist.pki.masterpins import ownPinFile
from tests.test_minion_failover import (
    A_REQ,
    B_REQ,
    HOST,
    MASTER_PEM,
    MINION_KEY,
    MINION_PEM,
    OTHER_MASTER_PEM,
    A,
    B,
    FailoverTestCase,
)


def _reverse(masters: list[MasterAddress]) -> None:
    masters.reverse()


class MasterOrderTests(SynchronousTestCase):
    """
    L{masterOrder}: the order C{salttwist-call} (and the failover minion)
    tries the masters in.
    """

    def config(self, **options: Any) -> dict[str, Any]:
        return {"master": ["m1", "m2", "m3"], "master_port": 4506, **options}

    def test_asListed(self) -> None:
        """
        Without C{random_master}, as listed, each without a port on
        C{master_port}.
        """
        self.assertEqual(
            [str(m) for m in masterOrder(self.config(), _reverse)],
            ["m1:4506", "m2:4506", "m3:4506"],
        )

    def test_randomMaster(self) -> None:
        """
        C{random_master} shuffles the whole list, with a plain list or
        C{master_type: failover}.
        """
        for options in ({}, {"master_type": "failover"}):
            order = masterOrder(self.config(random_master=True, **options), _reverse)
            self.assertEqual([m.host for m in order], ["m3", "m2", "m1"], options)

    def test_failbackKeepsFirst(self) -> None:
        """
        With C{master_type: failover} and C{master_failback}, the first
        master stays first and the others are shuffled, as Salt does.
        """
        order = masterOrder(
            self.config(random_master=True, master_type="failover", master_failback=True),
            _reverse,
        )
        self.assertEqual([m.host for m in order], ["m1", "m3", "m2"])

    def test_oneMaster(self) -> None:
        """
        A single master (a string) is the only one, whatever the options.
        """
        order = masterOrder({"master": "salt", "master_port": 4506, "random_master": True})
        self.assertEqual(order, [MasterAddress("salt", 4506)])


class _Callers(FailoverTestCase):
    """
    Callers whose config lists masters A then B.
    """

    def makeCaller(
        self,
        accept: tuple[str, ...] = ("A", "B"),
        pins: dict[str, bytes] | None = None,
        **options: Any,
    ) -> tuple[MasterCaller, Deferred[Any]]:
        """
        A caller of C{m1} for masters A then B (C{master_type} as given,
        Salt's default C{str} if not), its key accepted on the masters
        named in C{accept}, the master keys C{pins} (file name in
        C{pki_dir}: key) pinned, each step given 5 s; and its session being
        opened.
        """
        for name in accept:
            self.net.sites[name].keyStore.putKey(ACCEPTED, "m1", MINION_PEM)
        root = os.path.abspath(self.mktemp())
        config = loadMinionConfig(
            root,
            overrides={
                "root_dir": root,
                "id": "m1",
                "master": [f"{HOST}:{A_REQ}", f"{HOST}:{B_REQ}"],
                **options,
            },
        )
        self.pkiDir = config["pki_dir"]
        os.makedirs(self.pkiDir, mode=0o700)
        crypt.writePrivateFile(
            os.path.join(self.pkiDir, "minion.pem"), crypt.privateKeyToPem(MINION_KEY)
        )
        for name, pem in (pins or {}).items():
            with open(os.path.join(self.pkiDir, name), "wb") as f:
                f.write(pem)
        caller = MasterCaller(
            config,
            "m1",
            self.net.reactor,
            runSynchronously,
            connectTCP=self.net.connectTCP,
            timeout=5.0,
            shuffle=_reverse,
        )
        self.addCleanup(caller.close)
        session = Deferred.fromCoroutine(caller.session())
        self.net.flush()
        return caller, session


class CallerFailoverTests(_Callers):
    """
    A caller whose config lists masters A then B, both with one key pair.
    """

    def test_firstUpIsUsed(self) -> None:
        """
        With both masters up the first is used, and only it is contacted.
        """
        caller, session = self.makeCaller(master_type="failover")
        self.successResultOf(session)
        self.assertEqual(caller.master, A)
        self.assertEqual(self.net.reqAttempts(), [A_REQ])
        self.assertIn("m1", self.net.sites["A"].master.transients)

    def test_firstDownFailover(self) -> None:
        """
        With C{master_type: failover}, a first master that refuses the
        connection is left at once for the second, which takes the session
        and the return.
        """
        self.net.sites["A"].up = False
        caller, session = self.makeCaller(master_type="failover")
        self.successResultOf(session)
        self.assertEqual(caller.master, B)
        self.assertEqual(self.net.reqAttempts(), [A_REQ, B_REQ])
        sent = Deferred.fromCoroutine(
            caller.sendReturn("test.ping", [], {"return": True, "retcode": 0, "success": True})
        )
        self.net.flush()
        jid = self.successResultOf(sent)
        self.assertIn(jid, self.net.jobCache.jobs)
        self.assertIn(f"salt/job/{jid}/ret/m1", [t for t, _ in self.net.sites["B"].events])

    def test_firstDownPlainList(self) -> None:
        """
        With a plain list (Salt's default C{master_type: str}, its
        multi-master mode), the first master that answers is used, its key
        pinned already.
        """
        self.net.sites["A"].up = False
        caller, session = self.makeCaller(pins={MASTER_PUB_FILE: MASTER_PEM})
        self.successResultOf(session)
        self.assertEqual(caller.master, B)

    def test_hungMasterLeftAfterTimeout(self) -> None:
        """
        A master that takes the connection but does not answer is left for
        the next once the step's timeout has passed, not before.
        """
        self.net.sites["A"].hung = True
        caller, session = self.makeCaller(master_type="failover")
        self.net.advance(4.9)
        self.assertNoResult(session)
        self.net.advance(0.2)
        self.successResultOf(session)
        self.assertEqual(caller.master, B)

    def test_keyNotAcceptedLeft(self) -> None:
        """
        A master that has not accepted the minion's key (it is pending
        there) is left for one that has, as the daemon leaves it.
        """
        caller, session = self.makeCaller(accept=("B",), master_type="failover")
        self.successResultOf(session)
        self.assertEqual(caller.master, B)
        self.assertEqual(self.net.sites["A"].keyStore.getKey(PENDING, "m1"), MINION_PEM)

    def test_randomMaster(self) -> None:
        """
        With C{random_master} the masters are tried in the shuffled order.
        """
        caller, session = self.makeCaller(master_type="failover", random_master=True)
        self.successResultOf(session)
        self.assertEqual(caller.master, B)
        self.assertEqual(self.net.reqAttempts(), [B_REQ])

    def test_noneTakesIt(self) -> None:
        """
        When no master takes the session the error names every master
        tried and why each was left, in order; every later use fails the
        same way without trying again.
        """
        self.net.sites["A"].up = False
        self.net.sites["B"].hung = True
        caller, session = self.makeCaller(accept=(), master_type="failover")
        self.net.advance(5.0)
        error = str(self.failureResultOf(session, CallerError).value)
        self.assertTrue(error.startswith("none of the 2 masters took the session; tried "), error)
        self.assertIn(f"{A}: cannot reach the master at {A}", error)
        self.assertIn(f"{B}: the master at {B} did not answer within 5 s", error)
        self.assertLess(error.index(str(A)), error.index(f"{B}:"))
        attempts = len(self.net.attempts)
        again = Deferred.fromCoroutine(caller.session())
        self.assertEqual(str(self.failureResultOf(again, CallerError).value), error)
        self.assertEqual(len(self.net.attempts), attempts)


class CallerPinTests(_Callers):
    """
    Masters with key pairs of their own (B's is not A's): the caller trusts
    each master's key as the daemon does, never a key it has not pinned.
    """

    masterKeys = {"B": b"other"}

    def test_unpinnedKeyRefused(self) -> None:
        """
        With the shared pin holding A's key and A down, B's own key is not
        trusted: the call fails naming the file to place B's key in, and
        nothing is pinned for B.
        """
        self.net.sites["A"].up = False
        caller, session = self.makeCaller(
            master_type="failover", pins={MASTER_PUB_FILE: MASTER_PEM}
        )
        error = str(self.failureResultOf(session, CallerError).value)
        ownPath = os.path.join(self.pkiDir, ownPinFile(B))
        self.assertIn(f"{B}: master {B} presents key", error)
        self.assertIn(f"place its public key in {ownPath}", error)
        self.assertFalse(os.path.exists(ownPath))
        self.assertNotIn("m1", self.net.sites["B"].master.transients)

    def test_ownPinTrusted(self) -> None:
        """
        With B's key in B's own pin file, B is used when A is down.
        """
        self.net.sites["A"].up = False
        caller, session = self.makeCaller(
            master_type="failover",
            pins={MASTER_PUB_FILE: MASTER_PEM, ownPinFile(B): OTHER_MASTER_PEM},
        )
        self.successResultOf(session)
        self.assertEqual(caller.master, B)

    def test_ownPinMustMatch(self) -> None:
        """
        A master whose own pin holds another key than the one it presents
        is left, though it presents the shared pinned key: B, presenting
        the key pinned for it alone, is used.
        """
        caller, session = self.makeCaller(
            master_type="failover",
            pins={
                MASTER_PUB_FILE: MASTER_PEM,
                ownPinFile(A): OTHER_MASTER_PEM,
                ownPinFile(B): OTHER_MASTER_PEM,
            },
        )
        self.successResultOf(session)
        self.assertEqual(caller.master, B)
        self.assertEqual(self.net.reqAttempts(), [A_REQ, B_REQ])
        self.assertNotIn("m1", self.net.sites["A"].master.transients)

    def test_firstContactPinsWhoAnswers(self) -> None:
        """
        With nothing pinned and A down, B's key is pinned in
        C{minion_master.pub} at first contact, as the daemon does; no file
        of B's own is written.
        """
        self.net.sites["A"].up = False
        caller, session = self.makeCaller(master_type="failover")
        self.successResultOf(session)
        with open(os.path.join(self.pkiDir, MASTER_PUB_FILE), "rb") as f:
            self.assertEqual(crypt.canonicalPublicPem(f.read()), OTHER_MASTER_PEM)
        self.assertFalse(os.path.exists(os.path.join(self.pkiDir, ownPinFile(B))))

    def test_plainListNoFirstContactButFirst(self) -> None:
        """
        With a plain list and nothing pinned, a master other than the first
        is never trusted on first contact (the daemon uses the first alone,
        against C{minion_master.pub}: B's key pinned there would lock it
        out of A): with A down the call fails naming the files, and nothing
        is pinned.
        """
        self.net.sites["A"].up = False
        caller, session = self.makeCaller()
        error = str(self.failureResultOf(session, CallerError).value)
        self.assertIn(f"{B}: no master key is pinned yet and master {B} is not the first", error)
        self.assertIn(os.path.join(self.pkiDir, ownPinFile(B)), error)
        self.assertFalse(os.path.exists(os.path.join(self.pkiDir, MASTER_PUB_FILE)))
        self.assertFalse(os.path.exists(os.path.join(self.pkiDir, ownPinFile(B))))
        self.assertNotIn("m1", self.net.sites["B"].master.transients)

    def test_plainListFirstPinnedOnFirstContact(self) -> None:
        """
        With a plain list and nothing pinned, the first master's key is
        pinned in C{minion_master.pub} at first contact, as the daemon
        pins it.
        """
        caller, session = self.makeCaller()
        self.successResultOf(session)
        self.assertEqual(caller.master, A)
        with open(os.path.join(self.pkiDir, MASTER_PUB_FILE), "rb") as f:
            self.assertEqual(crypt.canonicalPublicPem(f.read()), MASTER_PEM)

    def test_plainListRandomFirstIsTheListed(self) -> None:
        """
        With C{random_master} shuffling a plain list, the first is still
        the first listed (the daemon's): B, tried first, is not trusted on
        first contact; A is, and is used.
        """
        caller, session = self.makeCaller(random_master=True)
        self.successResultOf(session)
        self.assertEqual(caller.master, A)
        self.assertEqual(self.net.reqAttempts(), [B_REQ, A_REQ])
        with open(os.path.join(self.pkiDir, MASTER_PUB_FILE), "rb") as f:
            self.assertEqual(crypt.canonicalPublicPem(f.read()), MASTER_PEM)

    def test_plainListOwnPinTrusted(self) -> None:
        """
        With a plain list, B's key in B's own pin file is trusted when A is
        down, though nothing else is pinned.
        """
        self.net.sites["A"].up = False
        caller, session = self.makeCaller(pins={ownPinFile(B): OTHER_MASTER_PEM})
        self.successResultOf(session)
        self.assertEqual(caller.master, B)
        self.assertFalse(os.path.exists(os.path.join(self.pkiDir, MASTER_PUB_FILE)))
