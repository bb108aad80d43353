# -*- test-case-name: tests.test_authtasks -*-
"""
Authentication through the worker pool: L{Master.authenticate} with a pool
runs L{salttwist.master.authtasks} (here in-process with
L{InlineWorkerPool}, through the same serialisation as real workers).
"""

from __future__ import annotations

import os
from typing import Any

from twisted.internet.task import Clock
from twisted.internet.testing import StringTransport
from twisted.trial.unittest import SynchronousTestCase

import salttwist.master.authtasks  # noqa: F401 (registers the tasks)
from salttwist import crypt, wire
from salttwist.blocking import runSynchronously
from salttwist.config import loadMasterConfig
from salttwist.events.bus import LocalEventBus
from salttwist.master.auth import NONCE_BYTES
from salttwist.master.core import Master
from salttwist.master.keys import loadMasterKeys
from salttwist.master.reqserver import ReqServerProtocol
from salttwist.pki.keystore import ACCEPTED, PENDING, FilesystemKeyStore
from salttwist.workers.pool import InlineWorkerPool

MINION_KEY = crypt.generatePrivateKey()
MINION_PEM = crypt.publicKeyToPem(MINION_KEY.public_key())


class WorkerAuthTests(SynchronousTestCase):
    """
    A master whose authentication runs as worker tasks.
    """

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
        nonce = os.urandom(NONCE_BYTES)
        load = {
            "cmd": "_auth",
            "id": "web1",
            "pub": MINION_PEM,
            "nonce": nonce,
            "sig": crypt.sign(
                MINION_KEY, wire.authRequestMessage(proto.challenge, nonce, "web1", MINION_PEM)
            ),
        }
        reply, sessionKey, _, _ = self.successResultOf(self.master.clearAuth(proto, load))
        return reply, sessionKey

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
