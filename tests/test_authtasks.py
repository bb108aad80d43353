# -*- test-case-name: tests.test_authtasks -*-
"""
Authentication through the worker pool: L{Master.authenticate} with a pool
runs L{salttwist.master.authtasks} (here in-process with
L{InlineWorkerPool}, through the same serialisation as real workers).
"""

from __future__ import annotations

import io
import os
import sys
from typing import Any

from twisted.internet.task import Clock
from twisted.internet.testing import StringTransport
from twisted.trial.unittest import SynchronousTestCase

from salttwist import crypt, wire
from salttwist.blocking import runSynchronously
from salttwist.config import loadMasterConfig
from salttwist.events.bus import LocalEventBus
from salttwist.master import authtasks
from salttwist.master.core import AUTH_BATCH_HOLD, Master
from salttwist.master.keys import loadMasterKeys
from salttwist.master.reqserver import ReqServerProtocol
from salttwist.pki.credentials import MinionCredentials
from salttwist.pki.keystore import ACCEPTED, PENDING, FilesystemKeyStore
from salttwist.workers.pool import InlineWorkerPool
from tests._pools import RecordingPool
from tests.adversarial._support import authLoad

MINION_KEY = crypt.generatePrivateKey()
MINION_PEM = crypt.publicKeyToPem(MINION_KEY.public_key())


class WorkerMasterMixin:
    """
    Sets up a master whose authentication runs as worker tasks.
    """

    mktemp: Any
    successResultOf: Any

    def setUp(self) -> None:
        """
        A master with real key files and an inline pool that loaded them.
        """
        root = os.path.abspath(self.mktemp())
        config = loadMasterConfig(root, overrides={"root_dir": root})
        for directory in (config["pki_dir"], config["cachedir"]):
            os.makedirs(directory, mode=0o700)
        keys = loadMasterKeys(config["pki_dir"], config["cachedir"], 2048)
        self.store = FilesystemKeyStore(config["pki_dir"])
        pool = InlineWorkerPool(
            initTasks=[("salttwist.master.authtasks.loadAuthenticator", [config["pki_dir"]])]
        )
        self.successResultOf(pool.start())
        self.master = Master(
            config, keys, self.store, LocalEventBus(), runSynchronously, Clock(), workers=pool
        )
        self.keys = keys

    def auth(self) -> tuple[dict[str, Any], bytes]:
        """
        Run one C{_auth} request for C{web1}.
        """
        proto = ReqServerProtocol(self.master)
        proto.makeConnection(StringTransport())
        load = authLoad(proto.challenge, "web1", MINION_KEY, MINION_PEM)
        d = self.master.clearAuth(proto, load)
        # One just before: this one waits to go with others for a while.
        self.master.clock.advance(AUTH_BATCH_HOLD)
        reply, sessionKey, _, _ = self.successResultOf(d)
        return reply, sessionKey


class WorkerAuthTests(WorkerMasterMixin, SynchronousTestCase):
    """
    A master whose authentication runs as worker tasks.
    """

    def test_pendingThenAccepted(self) -> None:
        """
        Through the workers, a new key goes pending on disk; once accepted,
        the reply carries a session key the minion can decrypt and a master
        signature that verifies.
        """
        reply, sessionKey = self.auth()
        self.assertEqual(reply, {"ret": "pending"})
        self.assertEqual(self.store.stateOf("web1"), [PENDING])
        self.store.moveKey("web1", PENDING, ACCEPTED)
        reply, sessionKey = self.auth()
        self.assertEqual(reply["ret"], "accepted")
        publicationKey, session = wire.unpackReplyKeys(crypt.rsaDecrypt(MINION_KEY, reply["keys"]))
        self.assertEqual(session, sessionKey)
        self.assertEqual(publicationKey, self.master.publicationKey.key)
        self.assertEqual(reply["master_pub"], self.keys.publicPem)


class HeldPool(RecordingPool):
    """
    An inline pool whose calls wait until L{release} runs them, as busy
    workers would.
    """

    def __init__(self, pool: InlineWorkerPool) -> None:
        super().__init__()
        self._pool = pool

    def release(self) -> None:
        """
        Run every call made so far.
        """
        calls, self.calls = self.calls, []
        for task, args, d in calls:
            self._pool.run(task, *args).chainDeferred(d)


class BatchedWorkerAuthTests(WorkerMasterMixin, SynchronousTestCase):
    """
    A master whose workers are busy: authentications wait and are checked,
    and signed, together.
    """

    def test_heldAndSignedTogether(self) -> None:
        """
        An authentication that finds a call in flight waits for it to come
        back (and at least L{AUTH_BATCH_HOLD} seconds after it was sent);
        those that waited are checked in one call and their replies share
        one signature, and each minion opens its own.
        """
        self.store.putKey(ACCEPTED, "web1", MINION_PEM)
        pool = HeldPool(self.master.workers)
        self.master.workers = pool
        requests = []
        for _ in range(3):
            proto = ReqServerProtocol(self.master)
            proto.makeConnection(StringTransport())
            load = dict(authLoad(proto.challenge, "web1", MINION_KEY, MINION_PEM), batch_sig=True)
            requests.append((proto, load, self.master.clearAuth(proto, load)))
        self.assertEqual([len(args[0]) for _, args, _ in pool.calls], [1])
        self.master.clock.advance(AUTH_BATCH_HOLD)
        self.assertEqual([len(args[0]) for _, args, _ in pool.calls], [1])
        pool.release()
        self.assertEqual([len(args[0]) for _, args, _ in pool.calls], [2])
        pool.release()
        replies = [self.successResultOf(d)[0] for _, _, d in requests]
        self.assertNotIn("batch_path", replies[0])
        self.assertEqual(replies[1]["sig"], replies[2]["sig"])
        for (proto, load, _), reply in zip(requests, replies, strict=True):
            pki = self.mktemp()
            os.makedirs(pki)
            creds = MinionCredentials("web1", MINION_KEY, MINION_PEM, pki)
            creds.openReply(reply, proto.challenge, load["nonce"])


class AuthenticateManyTests(SynchronousTestCase):
    """
    L{salttwist.master.authtasks.authenticateMany}, the batch task, run in
    this process after L{salttwist.master.authtasks.loadAuthenticator}.
    """

    def setUp(self) -> None:
        """
        A master key and key store in a temporary directory, loaded as a
        worker loads them; C{web1} to C{web3} accepted.
        """
        root = os.path.abspath(self.mktemp())
        config = loadMasterConfig(root, overrides={"root_dir": root})
        for directory in (config["pki_dir"], config["cachedir"]):
            os.makedirs(directory, mode=0o700)
        self.keys = loadMasterKeys(config["pki_dir"], config["cachedir"], 2048)
        self.store = FilesystemKeyStore(config["pki_dir"])
        for minionId in ("web1", "web2", "web3"):
            self.store.putKey(ACCEPTED, minionId, MINION_PEM)
        saved = dict(authtasks._state)
        self.addCleanup(lambda: (authtasks._state.clear(), authtasks._state.update(saved)))
        authtasks.loadAuthenticator(config["pki_dir"])

    def request(self, minionId: str, batchSig: bool = True) -> list[Any]:
        """
        @return: one item of the batch: C{[load, challenge, peer,
            allowNewPending]}, the load signed as a minion signs it.
        """
        challenge = os.urandom(32)
        load = authLoad(challenge, minionId, MINION_KEY, MINION_PEM)
        if batchSig:
            load["batch_sig"] = True
        return [load, challenge, "192.0.2.1:1", True]

    def open(self, item: list[Any], answer: dict[str, Any]) -> Any:
        """
        Open C{answer}'s reply as the minion of C{item} does.
        """
        load, challenge = item[0], item[1]
        pki = self.mktemp()
        os.makedirs(pki)
        creds = MinionCredentials(load["id"], MINION_KEY, MINION_PEM, pki)
        return creds.openReply(answer["result"]["reply"], challenge, load["nonce"])

    def test_oneSignatureForTheBatch(self) -> None:
        """
        Every accepting reply to a minion that checks batch signatures
        carries the same signature and its own path, and each minion opens
        its own; one to a minion that does not is signed alone; an unknown
        id is pending; an invalid request fails alone.
        """
        items = [
            self.request("web1"),
            self.request("web2", batchSig=False),
            self.request("new1"),
            [{"id": "../x"}, b"c" * 32, "192.0.2.1:1", True],
            self.request("web3"),
        ]
        answers = authtasks.authenticateMany(items, b"p" * 32, 7, 4505)
        self.assertEqual(len(answers), 5)
        web1, web2, new1, invalid, web3 = answers
        self.assertEqual(web1["result"]["reply"]["sig"], web3["result"]["reply"]["sig"])
        self.assertNotIn("batch_path", web2["result"]["reply"])
        for item, answer in ((items[0], web1), (items[1], web2), (items[4], web3)):
            opened = self.open(item, answer)
            self.assertEqual(opened.sessionKey, answer["result"]["sessionKey"])
            self.assertEqual((opened.publicationKey, opened.kid), (b"p" * 32, 7))
        self.assertEqual(new1["result"]["reply"], {"ret": "pending"})
        self.assertEqual(invalid["result"]["reply"]["ret"], "error")

    def test_itemErrorIsItsOwn(self) -> None:
        """
        A request that makes the check raise fails alone (its traceback
        goes to the worker's stderr): the others are answered.
        """
        errors = io.StringIO()
        self.patch(sys, "stderr", errors)
        items = [self.request("web1"), ["not a load", b"c", "p", True], self.request("web2")]
        answers = authtasks.authenticateMany(items, b"p" * 32, 7, 4505)
        self.assertEqual(answers[1]["errorType"], "AttributeError")
        self.assertIn("AttributeError", errors.getvalue())
        self.assertNotIn("result", answers[1])
        for item, answer in ((items[0], answers[0]), (items[2], answers[2])):
            self.open(item, answer)
