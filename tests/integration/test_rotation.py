# -*- test-case-name: tests.integration.test_rotation -*-
"""
Integration tests of the publication key's rotation with a real
C{salttwist-master}: a listener that holds an old publication key (a
minion cut off since, or anyone who got the key once) reads nothing the
master publishes after a restart or a C{publish_session} rotation.

The listener and the observer are raw clients of the req and pub channels
in this process, speaking the protocol as a minion does
(L{salttwist.pki.credentials.authenticate}, then a subscription MACed from
the session key), so that the test holds the keys and the sealed frames
themselves. Each publication is sealed once for every subscriber (only the
MAC is per subscriber), so the observer's frames are what anyone on any
minion's link sees.
"""

from __future__ import annotations

import os
from typing import Any

from twisted.internet.defer import maybeDeferred
from twisted.internet.endpoints import TCP4ClientEndpoint

from salttwist import crypt, serial, wire
from salttwist.minion.pubclient import PubClientProtocol
from salttwist.pki.credentials import AuthReply, MinionCredentials, authenticate
from salttwist.pki.keystore import ACCEPTED, FilesystemKeyStore
from salttwist.transport.framing import quietFactory
from salttwist.transport.reqclient import ReqClientProtocol
from tests.integration.harness import DEADLINE, Cluster, _reactor, seedKeyPair, waitFor
from tests.integration.test_end_to_end import IntegrationTestCase

MAX_FRAME = 1024 * 1024


def openPublication(key: bytes, kid: int, blob: bytes) -> dict[str, Any]:
    """
    Open a sealed publication as a minion does.

    @raise crypt.CryptError: C{key} does not open it.
    """
    return serial.loads(crypt.AesCipher(key).decrypt(blob, wire.publicationAad(kid)))  # type: ignore[no-any-return]


class RawMinion:
    """
    An accepted minion's id and key, used by hand: authenticate, subscribe,
    collect the publication frames and follow rotations, as the minion
    daemon does.

    @ivar keys: the publication keys it holds, by generation.
    @ivar publications: the publication frames received.
    """

    def __init__(self, minionId: str, pkiDir: str) -> None:
        self.id = minionId
        privateKey = crypt.loadOwnPrivateKey(os.path.join(pkiDir, "minion.pem"))
        self.credentials = MinionCredentials(
            minionId, privateKey, crypt.publicKeyToPem(privateKey.public_key()), pkiDir
        )
        self.keys: dict[int, bytes] = {}
        self.publications: list[dict[str, Any]] = []
        self.reply: AuthReply | None = None
        self._connections: list[Any] = []

    async def connect(self, port: int, proto: Any) -> Any:
        """
        @return: a connected protocol of C{proto}'s kind to 127.0.0.1:C{port}.
        """
        endpoint = TCP4ClientEndpoint(_reactor(), "127.0.0.1", port, timeout=int(DEADLINE))
        connected = await endpoint.connect(quietFactory(proto))
        self._connections.append(connected)
        return connected

    async def join(self, retPort: int) -> AuthReply:
        """
        Authenticate on C{retPort}, then subscribe on the pub port the
        master names.
        """
        req: ReqClientProtocol = await self.connect(retPort, lambda: ReqClientProtocol(MAX_FRAME))
        reply = await authenticate(
            req,
            self.credentials,
            lambda f, *a: maybeDeferred(f, *a),
            lambda d: d.addTimeout(DEADLINE, _reactor()),
        )
        req.startSession(reply.sessionKey)
        self.reply = reply
        self.keys[reply.kid] = reply.publicationKey
        pub: PubClientProtocol = await self.connect(
            reply.publishPort, lambda: PubClientProtocol(MAX_FRAME)
        )
        challenge = await pub.hello
        token = crypt.deriveKey(reply.sessionKey, wire.PUB_TOKEN_CONTEXT)
        mac = crypt.hmacSha256(token, wire.pubSubscribeMessage(challenge, self.id))
        ret = await pub.subscribe(self.id, mac, acknowledgements=False)
        if ret != "subscribed":
            raise AssertionError(f"{self.id}: subscription refused: {ret!r}")
        pub.onPublication = self._frame
        return reply

    def _frame(self, frame: dict[str, Any]) -> None:
        if "rotate" in frame:
            # A rotation during the test: follow it as a minion does.
            assert self.reply is not None
            wrap = crypt.AesCipher(crypt.deriveKey(self.reply.sessionKey, wire.ROTATE_CONTEXT))
            load = serial.loads(wrap.decrypt(frame["rotate"], wire.rotationAad(frame["kid"])))
            self.keys[frame["kid"]] = load["key"]
        elif "pub" in frame:
            self.publications.append(frame)

    def close(self) -> None:
        """
        Drop every connection (the keys stay in memory).
        """
        for proto in self._connections:
            proto.transport.loseConnection()
        self._connections = []


class PublicationKeyRotationTests(IntegrationTestCase):
    """
    What a holder of an old publication key reads after a rotation: nothing.
    """

    timeout = 120

    async def startMaster(self, **options: Any) -> None:
        """
        Seed the keys of the master, C{listener} and C{observer} (both
        accepted), and start the master with C{options}.
        """
        cluster: Cluster = self.cluster
        seedKeyPair(cluster.masterPkiDir, "master", "master")
        store = FilesystemKeyStore(cluster.masterPkiDir)
        for minionId in ("listener", "observer"):
            pem = seedKeyPair(cluster.minionPkiDir(minionId), "minion", minionId)
            store.putKey(ACCEPTED, minionId, pem)
        cluster.writeMasterConfig(**options)
        await cluster.startMaster()

    def raw(self, minionId: str) -> RawMinion:
        """
        @return: a L{RawMinion} for C{minionId}, closed at the end of the test.
        """
        raw = RawMinion(minionId, self.cluster.minionPkiDir(minionId))
        self.addCleanup(raw.close)
        return raw

    async def publishTo(self, raw: RawMinion) -> dict[str, Any]:
        """
        Publish C{test.ping} to C{raw}'s id with the real CLI and wait for
        its frame.

        @return: the publication frame C{raw} received.
        """
        before = len(raw.publications)
        result = await self.cluster.salt(raw.id, "test.ping", "--async")
        self.assertEqual(result.code, 0, self.cluster.explain(result))
        await waitFor(
            lambda: len(raw.publications) > before,
            f"a publication to {raw.id}",
            context=self.cluster.logs,
        )
        return raw.publications[before]

    def assertOpens(self, raw: RawMinion, frame: dict[str, Any]) -> None:
        """
        C{raw}'s key of the frame's generation opens it: a C{test.ping}.
        """
        load = openPublication(raw.keys[frame["kid"]], frame["kid"], frame["pub"])
        self.assertEqual(load["fun"], "test.ping")

    def assertUnreadable(self, oldKid: int, oldKey: bytes, frame: dict[str, Any]) -> None:
        """
        The old key opens C{frame} neither under its generation nor under
        the old one.
        """
        for kid in {oldKid, frame["kid"]}:
            self.assertRaises(crypt.CryptError, openPublication, oldKey, kid, frame["pub"])

    async def listenerHoldingOldKey(self) -> tuple[int, bytes]:
        """
        The listener joins, reads a publication with its key (so the key is
        right), then goes away holding it.

        @return: the generation and the key it holds.
        """
        listener = self.raw("listener")
        reply = await listener.join(self.cluster.ports["ret_port"])  # type: ignore[index]
        self.assertOpens(listener, await self.publishTo(listener))
        listener.close()
        return reply.kid, reply.publicationKey

    async def test_masterRestart(self) -> None:
        """
        After the master restarts, its publications are sealed with a key
        made at its start: the key held from before opens none, though the
        generation numbers start again from the same value.
        """
        await self.startMaster()
        oldKid, oldKey = await self.listenerHoldingOldKey()
        await self.cluster.stopMaster()
        await self.cluster.startMaster()
        observer = self.raw("observer")
        await observer.join(self.cluster.ports["ret_port"])  # type: ignore[index]
        frame = await self.publishTo(observer)
        self.assertOpens(observer, frame)
        self.assertNotEqual(observer.keys[frame["kid"]], oldKey)
        self.assertUnreadable(oldKid, oldKey, frame)

    async def test_publishSessionRotation(self) -> None:
        """
        Once C{publish_session} has elapsed, the master seals with a new key
        (a new generation): the key held from before opens nothing
        published after the rotation, while the master keeps running.
        """
        await self.startMaster(publish_session=3)
        oldKid, oldKey = await self.listenerHoldingOldKey()
        master = self.cluster.master
        assert master is not None
        await waitFor(
            lambda: f"publication key rotated to {oldKid + 1}" in master.output(),
            "the publish_session rotation",
            context=self.cluster.logs,
        )
        observer = self.raw("observer")
        reply = await observer.join(self.cluster.ports["ret_port"])  # type: ignore[index]
        self.assertGreater(reply.kid, oldKid)
        frame = await self.publishTo(observer)
        self.assertGreater(frame["kid"], oldKid)
        self.assertOpens(observer, frame)
        self.assertUnreadable(oldKid, oldKey, frame)
