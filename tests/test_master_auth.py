# -*- test-case-name: tests.test_master_auth -*-
"""
Tests for L{salttwist.master.auth}, the master's half of minion
authentication, and for the local client's authentication
(L{Master.clearClientAuth}).
"""

from __future__ import annotations

import os
from typing import Any

from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import rsa
from twisted.internet.defer import Deferred
from twisted.internet.task import Clock
from twisted.internet.testing import StringTransport
from twisted.trial.unittest import SynchronousTestCase
from zope.interface import implementer
from zope.interface.verify import verifyClass

from salttwist import crypt, wire
from salttwist.config import loadMasterConfig
from salttwist.events.bus import LocalEventBus
from salttwist.interfaces import IKeyStore
from salttwist.master.auth import NONCE_BYTES, Authenticator, AuthOutcome
from salttwist.master.core import Master, runSynchronously
from salttwist.master.keys import MasterKeys, PublicationKey
from salttwist.master.reqserver import ReqServerProtocol
from salttwist.pki.autosign import AutosignDecision
from salttwist.pki.credentials import MinionCredentials
from salttwist.pki.keystore import (
    ACCEPTED,
    DENIED,
    PENDING,
    REJECTED,
    STATES,
    InMemoryKeyStore,
)

# Key generation is slow: these serve every test of the module.
MASTER_KEY = crypt.generatePrivateKey()
MASTER_PEM = crypt.publicKeyToPem(MASTER_KEY.public_key())
MINION_KEY = crypt.generatePrivateKey()
MINION_PEM = crypt.publicKeyToPem(MINION_KEY.public_key())
OTHER_KEY = crypt.generatePrivateKey()
OTHER_PEM = crypt.publicKeyToPem(OTHER_KEY.public_key())
# Below crypt.MIN_RSA_BITS, so generatePrivateKey would refuse to make it.
WEAK_KEY = rsa.generate_private_key(public_exponent=65537, key_size=1024)
WEAK_PEM = crypt.publicKeyToPem(WEAK_KEY.public_key())
ROOT_KEY = os.urandom(32)

INVALID_IDS = ["../x", "a/b", "", "a\x00b", "x" * 300, "..", None, 7]


@implementer(IKeyStore)
class RecordingKeyStore:
    """
    An L{InMemoryKeyStore} that records the name of every method called.

    @ivar calls: the method names, in call order.
    """

    def __init__(self) -> None:
        self.store = InMemoryKeyStore()
        self.calls: list[str] = []

    def _record(self, name: str, *args: Any, **kwargs: Any) -> Any:
        """
        Record C{name}, then call it on the wrapped store.
        """
        self.calls.append(name)
        return getattr(self.store, name)(*args, **kwargs)

    def getKey(self, state: str, minionId: str) -> bytes | None:
        return self._record("getKey", state, minionId)

    def putKey(self, state: str, minionId: str, pem: bytes) -> None:
        self._record("putKey", state, minionId, pem)

    def moveKey(self, minionId: str, fromState: str, toState: str, **kw: Any) -> bool:
        return self._record("moveKey", minionId, fromState, toState, **kw)

    def deleteKey(self, state: str, minionId: str) -> bool:
        return self._record("deleteKey", state, minionId)

    def listKeys(self, state: str) -> list[str]:
        return self._record("listKeys", state)

    def stateOf(self, minionId: str) -> list[str]:
        return self._record("stateOf", minionId)


verifyClass(IKeyStore, RecordingKeyStore)


def authRequest(
    minionId: Any,
    challenge: bytes,
    key: rsa.RSAPrivateKey = MINION_KEY,
    pem: Any = None,
    nonce: Any = None,
    signChallenge: bytes | None = None,
    signWith: rsa.RSAPrivateKey | None = None,
) -> dict[str, Any]:
    """
    Build an C{_auth} load as a minion does.

    @param key: the minion's key; its public half is sent unless C{pem} is.
    @param signChallenge: sign over this challenge instead of C{challenge}.
    @param signWith: sign with this key instead of C{key}.
    """
    if pem is None:
        pem = crypt.publicKeyToPem(key.public_key())
    if nonce is None:
        nonce = os.urandom(NONCE_BYTES)
    signed = signChallenge if signChallenge is not None else challenge
    message = wire.authRequestMessage(
        signed, nonce if isinstance(nonce, bytes) else b"", minionId, pem
    )
    return {
        "cmd": "_auth",
        "id": minionId,
        "pub": pem,
        "nonce": nonce,
        "sig": crypt.sign(signWith or key, message),
    }


class AuthenticatorTests(SynchronousTestCase):
    """
    Tests for L{Authenticator.authenticate} against an in-memory key store,
    one test per key state.
    """

    def setUp(self) -> None:
        """
        Make a key store that records its calls, an authenticator over it,
        and a challenge.
        """
        self.keys = RecordingKeyStore()
        self.store = self.keys.store
        self.publication = PublicationKey(kid=1)
        self.publishPort = 4505
        self.challenge = os.urandom(32)
        self.authenticator = self.makeAuthenticator()

    def makeAuthenticator(self) -> Authenticator:
        """
        @return: an authenticator over C{self.keys} whose publication key
            and publish port are read from C{self} at each call.
        """
        return Authenticator(
            self.keys,
            MasterKeys(MASTER_KEY, MASTER_PEM, ROOT_KEY),
            lambda: self.publication,
            lambda: self.publishPort,
        )

    def authenticate(self, load: dict[str, Any]) -> AuthOutcome:
        """
        Run one request over C{self.challenge}.
        """
        return self.authenticator.authenticate(load, self.challenge, "192.0.2.1:1234")

    def assertStoreEmpty(self) -> None:
        """
        Every state of the store is empty.
        """
        for state in STATES:
            self.assertEqual(self.store.listKeys(state), [], state)

    def assertAcceptedReply(self, outcome: AuthOutcome, minionId: str, load: dict) -> None:
        """
        C{outcome} accepts C{minionId}: its reply carries the master's key,
        the current publication key and port, a session key encrypted to the
        minion's key in the same RSA-OAEP block as the publication key, and a
        master signature over L{wire.authReplyMessage}.
        """
        reply = outcome.reply
        self.assertEqual(reply["ret"], "accepted")
        self.assertEqual(outcome.minionId, minionId)
        self.assertEqual(reply["master_pub"], MASTER_PEM)
        self.assertEqual(reply["kid"], self.publication.kid)
        self.assertEqual(reply["publish_port"], self.publishPort)
        crypt.verify(
            MASTER_KEY.public_key(),
            reply["sig"],
            wire.authReplyMessage(
                self.challenge,
                load["nonce"],
                minionId,
                reply["keys"],
                reply["kid"],
                reply["publish_port"],
            ),
        )
        self.assertNotIn("aes", reply)
        self.assertNotIn("session", reply)
        publicationKey, session = wire.unpackReplyKeys(crypt.rsaDecrypt(MINION_KEY, reply["keys"]))
        self.assertEqual(publicationKey, self.publication.key)
        self.assertEqual(len(session), crypt.AES_KEY_BYTES)
        self.assertEqual(session, outcome.sessionKey)

    def test_unknownIdIsPending(self) -> None:
        """
        An unknown id is answered C{pending}, its key is stored in
        C{minions_pre}, and C{salt/auth} (act C{pend}) and C{salt/key} (act
        C{pend}) events are produced. No session is opened.
        """
        outcome = self.authenticate(authRequest("web1", self.challenge))
        self.assertEqual(outcome.reply, {"ret": "pending"})
        self.assertEqual(outcome.minionId, "web1")
        self.assertIsNone(outcome.sessionKey)
        self.assertEqual(self.store.getKey(PENDING, "web1"), MINION_PEM)
        self.assertEqual(self.store.stateOf("web1"), [PENDING])
        self.assertEqual(
            outcome.events,
            [
                (
                    "salt/auth",
                    {"id": "web1", "pub": MINION_PEM.decode(), "act": "pend", "result": True},
                ),
                ("salt/key", {"act": "pend", "id": "web1"}),
            ],
        )

    def test_pendingSameKeyIsPending(self) -> None:
        """
        A pending id presenting its pending key is answered C{pending} again,
        with a C{salt/auth} C{pend} event; the store does not change.
        """
        self.store.putKey(PENDING, "web1", MINION_PEM)
        outcome = self.authenticate(authRequest("web1", self.challenge))
        self.assertEqual(outcome.reply, {"ret": "pending"})
        self.assertIsNone(outcome.sessionKey)
        self.assertEqual(self.store.stateOf("web1"), [PENDING])
        self.assertEqual([tag for tag, _ in outcome.events], ["salt/auth"])
        self.assertEqual(outcome.events[0][1]["act"], "pend")

    def test_acceptedSameKeyIsAccepted(self) -> None:
        """
        An accepted id presenting its accepted key is answered C{accepted}:
        the reply's signature verifies with the master's key over
        L{wire.authReplyMessage}, C{keys} decrypts with the minion's
        private key to the publication and session keys, and C{kid} and
        C{publish_port} are the current ones (read when the request is
        answered, not when the authenticator was made).
        """
        self.store.putKey(ACCEPTED, "web1", MINION_PEM)
        self.publication = PublicationKey(kid=7)
        self.publishPort = 14505
        load = authRequest("web1", self.challenge)
        outcome = self.authenticate(load)
        self.assertAcceptedReply(outcome, "web1", load)
        self.assertEqual(
            outcome.events,
            [
                (
                    "salt/auth",
                    {"id": "web1", "pub": MINION_PEM.decode(), "act": "accept", "result": True},
                )
            ],
        )
        self.assertEqual(self.store.stateOf("web1"), [ACCEPTED])

    def test_acceptedSessionKeysDiffer(self) -> None:
        """
        Each accepted authentication gets a fresh session key.
        """
        self.store.putKey(ACCEPTED, "web1", MINION_PEM)
        first = self.authenticate(authRequest("web1", self.challenge))
        second = self.authenticate(authRequest("web1", self.challenge))
        self.assertNotEqual(first.sessionKey, second.sessionKey)

    def test_acceptedKeyInAnotherEncoding(self) -> None:
        """
        The accepted key sent in another PEM encoding (PKCS#1) is the same
        key, and is accepted.
        """
        self.store.putKey(ACCEPTED, "web1", MINION_PEM)
        pkcs1 = MINION_KEY.public_key().public_bytes(
            serialization.Encoding.PEM, serialization.PublicFormat.PKCS1
        )
        load = authRequest("web1", self.challenge, pem=pkcs1)
        self.assertAcceptedReply(self.authenticate(load), "web1", load)

    def test_signLater(self) -> None:
        """
        With C{signLater}, an accepting reply to a minion that checks batch
        signatures (C{batch_sig}) is left unsigned, with the message to sign
        in C{unsigned}; to any other minion it is signed at once.
        """
        self.store.putKey(ACCEPTED, "web1", MINION_PEM)
        load = dict(authRequest("web1", self.challenge), batch_sig=True)
        outcome = self.authenticator.authenticate(load, self.challenge, "peer", signLater=True)
        self.assertNotIn("sig", outcome.reply)
        reply = outcome.reply
        self.assertEqual(
            outcome.unsigned,
            wire.authReplyMessage(
                self.challenge, load["nonce"], "web1", reply["keys"], reply["kid"], 4505
            ),
        )
        load = authRequest("web1", self.challenge)
        outcome = self.authenticator.authenticate(load, self.challenge, "peer", signLater=True)
        self.assertIsNone(outcome.unsigned)
        self.assertAcceptedReply(outcome, "web1", load)

    def test_signTogetherOne(self) -> None:
        """
        L{Authenticator.signTogether} signs a lone unsigned reply as a
        reply is signed alone: over its L{wire.authReplyMessage}, no path.
        """
        self.store.putKey(ACCEPTED, "web1", MINION_PEM)
        load = dict(authRequest("web1", self.challenge), batch_sig=True)
        outcome = self.authenticator.authenticate(load, self.challenge, "peer", signLater=True)
        self.authenticator.signTogether([outcome])
        self.assertIsNone(outcome.unsigned)
        self.assertNotIn("batch_path", outcome.reply)
        self.assertAcceptedReply(outcome, "web1", load)

    def test_signTogetherSeveral(self) -> None:
        """
        Several unsigned replies get one signature over the root of their
        hash tree and each its own path, with which each minion opens its
        reply; outcomes that were not left unsigned are untouched.
        """
        ids = ["web1", "web2", "web3"]
        for minionId in ids:
            self.store.putKey(ACCEPTED, minionId, MINION_PEM)
        loads = [dict(authRequest(i, self.challenge), batch_sig=True) for i in ids]
        outcomes = [
            self.authenticator.authenticate(load, self.challenge, "peer", signLater=True)
            for load in loads
        ]
        pending = self.authenticate(authRequest("new1", self.challenge))
        self.authenticator.signTogether([outcomes[0], pending, *outcomes[1:]])
        self.assertEqual(pending.reply, {"ret": "pending"})
        self.assertEqual(len({o.reply["sig"] for o in outcomes}), 1)
        for minionId, load, outcome in zip(ids, loads, outcomes, strict=True):
            self.assertIsNone(outcome.unsigned)
            self.assertIsInstance(outcome.reply["batch_path"], list)
            pki = self.mktemp()
            os.makedirs(pki)
            creds = MinionCredentials(minionId, MINION_KEY, MINION_PEM, pki)
            opened = creds.openReply(outcome.reply, self.challenge, load["nonce"])
            self.assertEqual(opened.sessionKey, outcome.sessionKey)
        self.assertRaises(
            crypt.CryptError,
            MinionCredentials("web1", MINION_KEY, MINION_PEM, pki).openReply,
            outcomes[1].reply,
            self.challenge,
            loads[1]["nonce"],
        )

    def test_acceptedDifferentKeyIsDenied(self) -> None:
        """
        An accepted id presenting another key is answered C{denied}, with no
        session; the new key is put in C{minions_denied}, the accepted key is
        untouched, and C{salt/auth} C{denied} and C{salt/key} C{deny} events
        are produced.
        """
        self.store.putKey(ACCEPTED, "web1", MINION_PEM)
        outcome = self.authenticate(authRequest("web1", self.challenge, key=OTHER_KEY))
        self.assertEqual(outcome.reply, {"ret": "denied"})
        self.assertIsNone(outcome.sessionKey)
        self.assertEqual(self.store.getKey(ACCEPTED, "web1"), MINION_PEM)
        self.assertEqual(self.store.getKey(DENIED, "web1"), OTHER_PEM)
        self.assertEqual(self.store.stateOf("web1"), [ACCEPTED, DENIED])
        self.assertEqual(
            outcome.events,
            [
                (
                    "salt/auth",
                    {"id": "web1", "pub": OTHER_PEM.decode(), "act": "denied", "result": False},
                ),
                ("salt/key", {"act": "deny", "id": "web1"}),
            ],
        )

    def test_pendingDifferentKeyIsDenied(self) -> None:
        """
        A pending id presenting another key is answered C{denied}; the new key
        is put in C{minions_denied} and the pending key is untouched.
        """
        self.store.putKey(PENDING, "web1", MINION_PEM)
        outcome = self.authenticate(authRequest("web1", self.challenge, key=OTHER_KEY))
        self.assertEqual(outcome.reply, {"ret": "denied"})
        self.assertIsNone(outcome.sessionKey)
        self.assertEqual(self.store.getKey(PENDING, "web1"), MINION_PEM)
        self.assertEqual(self.store.getKey(DENIED, "web1"), OTHER_PEM)
        self.assertEqual(self.store.stateOf("web1"), [PENDING, DENIED])

    def test_rejected(self) -> None:
        """
        A rejected id is answered C{rejected}, with no session, whichever key
        it presents; nothing is stored.
        """
        self.store.putKey(REJECTED, "web1", MINION_PEM)
        for key in (MINION_KEY, OTHER_KEY):
            outcome = self.authenticate(authRequest("web1", self.challenge, key=key))
            self.assertEqual(outcome.reply, {"ret": "rejected"})
            self.assertIsNone(outcome.sessionKey)
            self.assertEqual(outcome.events[0][1]["act"], "reject")
        self.assertEqual(self.store.stateOf("web1"), [REJECTED])

    def test_newAndPendingKeysUndecided(self) -> None:
        """
        An unknown key, and a pending id presenting its pending key, come out
        pending and marked undecided, with the canonical key, so that the
        master asks its autosign policy; the authenticator itself never
        accepts a key.
        """
        load = authRequest("web1", self.challenge)
        for _ in range(2):
            outcome = self.authenticate(load)
            self.assertEqual(outcome.reply, {"ret": "pending"})
            self.assertTrue(outcome.undecided)
            self.assertEqual(outcome.pem, MINION_PEM)
        self.assertEqual(self.store.stateOf("web1"), [PENDING])

    def test_changedKeyNotUndecided(self) -> None:
        """
        A key that differs from the accepted or pending one is denied and is
        never handed to the autosign policy.
        """
        self.store.putKey(ACCEPTED, "web1", MINION_PEM)
        self.store.putKey(PENDING, "web2", MINION_PEM)
        for minionId in ("web1", "web2"):
            outcome = self.authenticate(authRequest(minionId, self.challenge, key=OTHER_KEY))
            self.assertEqual(outcome.reply, {"ret": "denied"})
            self.assertFalse(outcome.undecided)
        self.assertEqual(self.store.getKey(ACCEPTED, "web1"), MINION_PEM)
        self.assertEqual(self.store.getKey(PENDING, "web2"), MINION_PEM)

    def test_invalidIds(self) -> None:
        """
        An invalid minion id (path traversal, separator, empty, NUL, too
        long, not a string) is answered C{error}, and the key store is never
        called.
        """
        if True:
            for minionId in INVALID_IDS:
                load = authRequest(minionId, self.challenge)
                outcome = self.authenticate(load)
                self.assertEqual(outcome.reply["ret"], "error", repr(minionId))
                self.assertIn("invalid minion id", outcome.reply["error"])
                self.assertIsNone(outcome.minionId)
                self.assertIsNone(outcome.sessionKey)
                self.assertEqual(outcome.events, [])
        self.assertEqual(self.keys.calls, [])
        self.assertStoreEmpty()

    def assertRefused(self, load: dict[str, Any]) -> None:
        """
        C{load} is answered C{error} without a session, events or any call
        to the key store.
        """
        outcome = self.authenticate(load)
        self.assertEqual(outcome.reply["ret"], "error")
        self.assertIsNone(outcome.sessionKey)
        self.assertEqual(outcome.events, [])
        self.assertEqual(self.keys.calls, [])
        self.assertStoreEmpty()

    def test_proofOverAnotherChallenge(self) -> None:
        """
        A signature over another challenge (a replayed request) is refused
        with C{error}, before the key store is consulted.
        """
        self.assertRefused(authRequest("web1", self.challenge, signChallenge=os.urandom(32)))

    def test_proofByAnotherKey(self) -> None:
        """
        A request carrying one key but signed by another is refused with
        C{error}.
        """
        self.assertRefused(authRequest("web1", self.challenge, signWith=OTHER_KEY))

    def test_proofForAnotherId(self) -> None:
        """
        A signature made for another minion id does not authenticate this one.
        """
        load = authRequest("web2", self.challenge)
        load["id"] = "web1"
        self.assertRefused(load)

    def test_missingOrMalformedSignature(self) -> None:
        """
        A request without a signature, or with one that is not bytes, is
        refused with C{error}.
        """
        for sig in (None, b"", "sig", 5):
            load = authRequest("web1", self.challenge)
            load["sig"] = sig
            self.assertRefused(load)

    def test_weakKey(self) -> None:
        """
        A 1024-bit key is refused with C{error}, even correctly signed and
        with C{auto_accept}; it is never stored.
        """
        self.authenticator = self.makeAuthenticator()
        self.assertRefused(authRequest("web1", self.challenge, key=WEAK_KEY))

    def test_malformedPublicKey(self) -> None:
        """
        A public key that is not PEM, or not bytes, is refused with C{error}.
        """
        for pem in (b"not a key", "-----BEGIN PUBLIC KEY-----", 12):
            load = authRequest("web1", self.challenge)
            load["pub"] = pem
            self.assertRefused(load)

    def test_badNonce(self) -> None:
        """
        A nonce that is not bytes, or not L{NONCE_BYTES} long, is refused
        with C{error}.
        """
        for nonce in ("x" * NONCE_BYTES, NONCE_BYTES, [b"x"], b"short", b"x" * 33):
            self.assertRefused(authRequest("web1", self.challenge, nonce=nonce))
        load = authRequest("web1", self.challenge)
        del load["nonce"]
        self.assertRefused(load)


class ClientAuthTests(SynchronousTestCase):
    """
    Tests for L{Master.clearClientAuth}: the local client proves it can read
    the root key with a MAC over the connection's challenge.
    """

    def setUp(self) -> None:
        """
        Make a master and one req connection on a L{StringTransport}.
        """
        root = self.mktemp()
        config = loadMasterConfig(root, overrides={"root_dir": root})
        self.master = Master(
            config,
            MasterKeys(MASTER_KEY, MASTER_PEM, ROOT_KEY),
            InMemoryKeyStore(),
            LocalEventBus(),
            runSynchronously,
            Clock(),
        )
        self.proto = ReqServerProtocol(self.master)
        self.proto.makeConnection(StringTransport())

    def clientLoad(self, nonce: Any, key: bytes = ROOT_KEY, challenge: bytes | None = None):
        """
        @return: a C{_client_auth} load MACed with C{key} over C{challenge}
            (the connection's by default).
        """
        challenge = self.proto.challenge if challenge is None else challenge
        mac = crypt.hmacSha256(key, wire.clientAuthMessage(challenge, nonce))
        return {"cmd": "_client_auth", "nonce": nonce, "mac": mac}

    def test_rightMac(self) -> None:
        """
        The right MAC opens a C{client} session whose key is derived from the
        root key for this challenge and nonce; the root key itself is not
        the session key.
        """
        nonce = os.urandom(NONCE_BYTES)
        reply, key, role, minionId = self.master.clearClientAuth(self.proto, self.clientLoad(nonce))
        self.assertEqual(reply, {"ret": "ok"})
        self.assertEqual(
            key,
            crypt.deriveKey(ROOT_KEY, wire.clientSessionContext(self.proto.challenge, nonce)),
        )
        self.assertNotEqual(key, ROOT_KEY)
        self.assertEqual(role, "client")
        self.assertIsNone(minionId)

    def assertFails(self, load: dict[str, Any]) -> None:
        """
        C{load} is answered with an error and opens no session.
        """
        reply, key, role, minionId = self.master.clearClientAuth(self.proto, load)
        self.assertEqual(reply["ret"], "error")
        self.assertIsNone(key)
        self.assertIsNone(role)
        self.assertIsNone(minionId)

    def test_wrongMac(self) -> None:
        """
        A MAC made with another key, over another challenge, or that is
        missing or not bytes, is refused.
        """
        nonce = os.urandom(NONCE_BYTES)
        self.assertFails(self.clientLoad(nonce, key=os.urandom(32)))
        self.assertFails(self.clientLoad(nonce, challenge=os.urandom(32)))
        for mac in (None, b"", "mac", 1):
            load = self.clientLoad(nonce)
            load["mac"] = mac
            self.assertFails(load)

    def test_badNonce(self) -> None:
        """
        A short, long or non-bytes nonce is refused even with a MAC made
        correctly over it.
        """
        for nonce in (b"", b"x" * (NONCE_BYTES - 1), b"x" * (NONCE_BYTES + 1)):
            self.assertFails(self.clientLoad(nonce))
        load = self.clientLoad(os.urandom(NONCE_BYTES))
        load["nonce"] = "x" * NONCE_BYTES
        self.assertFails(load)


class AutosignWiringTests(SynchronousTestCase):
    """
    L{Master.clearAuth} asks the autosign policy about undecided keys and
    acts on its verdict.
    """

    def makeMaster(self, files: dict[str, str] | None = None, **overrides: Any) -> Master:
        """
        A master whose config has C{overrides}, with a recording bus.

        @param files: option name -> text of a file to write under the
            master's root and name in that option.
        """
        root = os.path.abspath(self.mktemp())
        os.makedirs(root)
        for option, text in (files or {}).items():
            path = os.path.join(root, option)
            with open(path, "w") as f:
                f.write(text)
            overrides[option] = path
        config = loadMasterConfig(root, overrides={"root_dir": root, **overrides})
        self.events: list[tuple[str, dict[str, Any]]] = []
        bus = LocalEventBus()
        bus.subscribe([], lambda tag, data: self.events.append((tag, data)))
        self.store = InMemoryKeyStore()
        self.master = Master(
            config,
            MasterKeys(MASTER_KEY, MASTER_PEM, ROOT_KEY),
            self.store,
            bus,
            runSynchronously,
            Clock(),
        )
        self.proto = ReqServerProtocol(self.master)
        self.proto.makeConnection(StringTransport())
        return self.master

    def auth(self, minionId: str = "web1") -> dict[str, Any]:
        """
        Run one C{_auth} request; return the reply.
        """
        load = authRequest(minionId, self.proto.challenge)
        reply, _, _, _ = self.successResultOf(self.master.clearAuth(self.proto, load))
        return reply

    def keyEvents(self) -> list[dict[str, Any]]:
        """
        The C{salt/key} events fired so far.
        """
        return [data for tag, data in self.events if tag == "salt/key"]

    def test_autoAcceptNewKey(self) -> None:
        """
        With C{auto_accept}, an unknown minion is accepted at once with a full
        signed reply, its key moved to C{minions}, and a C{salt/key} accept
        event names the policy.
        """
        self.makeMaster(auto_accept=True)
        reply = self.auth()
        self.assertEqual(reply["ret"], "accepted")
        self.assertEqual(self.store.stateOf("web1"), [ACCEPTED])
        accept = [e for e in self.keyEvents() if e["act"] == "accept"]
        self.assertEqual(accept[0]["policy"], "auto_accept")

    def test_autosignFalseWins(self) -> None:
        """
        C{autosign: false} keeps the key pending even with C{auto_accept}.
        """
        self.makeMaster(auto_accept=True, autosign=False)
        self.assertEqual(self.auth()["ret"], "pending")
        self.assertEqual(self.store.stateOf("web1"), [PENDING])
        [authEvent] = [d for t, d in self.events if t == "salt/auth"]
        self.assertEqual(authEvent["policy"], "autosign_disabled")

    def test_whitelistAccepts(self) -> None:
        """
        An id listed in C{autosign_file} is accepted.
        """
        self.makeMaster(files={"autosign_file": "web*\n"})
        self.assertEqual(self.auth("web1")["ret"], "accepted")
        self.assertEqual(self.auth("db1")["ret"], "pending")

    def test_autorejectRejects(self) -> None:
        """
        An id listed in C{autoreject_file} is moved to C{minions_rejected},
        refused, and the publication key is rotated (as for every reject).
        """
        master = self.makeMaster(files={"autoreject_file": "bad*\n"}, auto_accept=True)
        kid = master.publicationKey.kid
        self.assertEqual(self.auth("bad1")["ret"], "rejected")
        self.assertEqual(self.store.stateOf("bad1"), [REJECTED])
        self.assertEqual(master.publicationKey.kid, kid + 1)

    def test_adminWinsRace(self) -> None:
        """
        If the pending key was moved by someone else while the policy was
        deciding, the policy's verdict is not applied.
        """
        master = self.makeMaster(auto_accept=True)
        decided: Deferred[Any] = Deferred()
        self.patch(master.autosign, "decide", lambda *a: decided)
        d = master.clearAuth(self.proto, authRequest("web1", self.proto.challenge))
        self.store.moveKey("web1", PENDING, REJECTED)
        decided.callback(AutosignDecision("accept", "auto_accept", "test"))
        reply, _, _, _ = self.successResultOf(d)
        self.assertEqual(reply["ret"], "pending")
        self.assertEqual(self.store.stateOf("web1"), [REJECTED])
