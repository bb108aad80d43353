# -*- test-case-name: tests.test_auth_reply -*-
"""
The accepting auth reply's key block: both AES keys in one RSA-OAEP
ciphertext, opened by L{salttwist.pki.credentials.MinionCredentials.openReply};
and replies the master signed together (one signature over a hash tree).
"""

from __future__ import annotations

import os
from typing import Any

from twisted.trial.unittest import SynchronousTestCase

from salttwist import crypt, wire
from salttwist.pki.credentials import MasterIdentityError, MinionCredentials

MASTER_KEY = crypt.generatePrivateKey()
MASTER_PEM = crypt.publicKeyToPem(MASTER_KEY.public_key())
MINION_KEY = crypt.generatePrivateKey()
MINION_PEM = crypt.publicKeyToPem(MINION_KEY.public_key())
CHALLENGE = b"c" * 32
NONCE = b"n" * 32


def signedReply(keysPlaintext: bytes, kid: int = 3, port: int = 4505) -> dict[str, Any]:
    """
    An accepting reply for minion C{web1}, signed by L{MASTER_KEY}, whose key
    block is C{keysPlaintext} encrypted to L{MINION_KEY}.
    """
    keysCt = crypt.rsaEncrypt(MINION_KEY.public_key(), keysPlaintext)
    return {
        "ret": "accepted",
        "master_pub": MASTER_PEM,
        "keys": keysCt,
        "kid": kid,
        "publish_port": port,
        "sig": crypt.sign(
            MASTER_KEY, wire.authReplyMessage(CHALLENGE, NONCE, "web1", keysCt, kid, port)
        ),
    }


class ReplyKeysTests(SynchronousTestCase):
    """
    L{wire.packReplyKeys} and L{wire.unpackReplyKeys}.
    """

    def test_roundTrip(self) -> None:
        """
        The publication key comes first and the session key second, and
        both come back as they went in.
        """
        publication, session = os.urandom(32), os.urandom(32)
        packed = wire.packReplyKeys(publication, session)
        self.assertEqual(len(packed), 64)
        self.assertEqual(wire.unpackReplyKeys(packed), (publication, session))

    def test_wrongLengths(self) -> None:
        """
        Keys that are not 32 bytes each are refused on both sides, with the
        size named.
        """
        self.assertRaises(ValueError, wire.packReplyKeys, b"x" * 31, b"y" * 32)
        e = self.assertRaises(ValueError, wire.unpackReplyKeys, b"x" * 48)
        self.assertIn("48 bytes", str(e))


class OpenReplyTests(SynchronousTestCase):
    """
    L{MinionCredentials.openReply} with one key block.
    """

    def credentials(self) -> MinionCredentials:
        pki = self.mktemp()
        os.makedirs(pki)
        return MinionCredentials("web1", MINION_KEY, MINION_PEM, pki)

    def test_opensBothKeys(self) -> None:
        """
        A well-formed reply gives the publication key, the session key, the
        key id and the publish port, and pins the master's key.
        """
        publication, session = os.urandom(32), os.urandom(32)
        creds = self.credentials()
        opened = creds.openReply(
            signedReply(wire.packReplyKeys(publication, session)), CHALLENGE, NONCE
        )
        self.assertEqual(opened.publicationKey, publication)
        self.assertEqual(opened.sessionKey, session)
        self.assertEqual((opened.kid, opened.publishPort), (3, 4505))
        self.assertEqual(creds.readPinned(), MASTER_PEM)

    def test_shortKeyBlock(self) -> None:
        """
        A signed reply whose key block does not hold two 32-byte keys is
        refused as malformed, and nothing is pinned.
        """
        creds = self.credentials()
        e = self.assertRaises(
            MasterIdentityError, creds.openReply, signedReply(b"k" * 48), CHALLENGE, NONCE
        )
        self.assertIn("malformed auth reply", str(e))
        self.assertIsNone(creds.readPinned())

    def test_oldTwoCiphertextReply(self) -> None:
        """
        A reply in the old shape (C{aes} and C{session}, no C{keys}) is
        refused as malformed.
        """
        reply = signedReply(wire.packReplyKeys(os.urandom(32), os.urandom(32)))
        reply["aes"] = reply["session"] = reply.pop("keys")
        self.assertRaises(
            MasterIdentityError, self.credentials().openReply, reply, CHALLENGE, NONCE
        )

    def test_tamperedKeyBlock(self) -> None:
        """
        A key block changed after the master signed is refused by the
        signature check (L{crypt.CryptError}), before any RSA decryption.
        """
        reply = signedReply(wire.packReplyKeys(os.urandom(32), os.urandom(32)))
        reply["keys"] = crypt.rsaEncrypt(MINION_KEY.public_key(), b"z" * 64)
        self.assertRaises(crypt.CryptError, self.credentials().openReply, reply, CHALLENGE, NONCE)


def batchedReplies(count: int, index: int) -> tuple[dict[str, Any], list[bytes]]:
    """
    An accepting reply for minion C{web1} signed, as the master signs a
    batch, together with C{count - 1} other minions' replies: C{web1}'s is
    number C{index}.

    @return: C{web1}'s reply, and the messages of every reply in the batch.
    """
    keysCt = crypt.rsaEncrypt(
        MINION_KEY.public_key(), wire.packReplyKeys(os.urandom(32), os.urandom(32))
    )
    messages = [
        wire.authReplyMessage(os.urandom(32), os.urandom(32), f"other{i}", b"x" * 256, 3, 4505)
        for i in range(count)
    ]
    messages[index] = wire.authReplyMessage(CHALLENGE, NONCE, "web1", keysCt, 3, 4505)
    root, paths = wire.authReplyTree(messages)
    reply = {
        "ret": "accepted",
        "master_pub": MASTER_PEM,
        "keys": keysCt,
        "kid": 3,
        "publish_port": 4505,
        "sig": crypt.sign(MASTER_KEY, wire.authReplyBatchMessage(root)),
        "batch_path": paths[index],
    }
    return reply, messages


class ReplyTreeTests(SynchronousTestCase):
    """
    L{wire.authReplyTree} and L{wire.authReplyBatchRoot}: the hash tree one
    master signature over several accepting replies is made on.
    """

    def test_everyPathLeadsToTheRoot(self) -> None:
        """
        For every batch size, each message's path leads from that message
        to the root, and from no other message of the batch.
        """
        for count in range(1, 12):
            messages = [os.urandom(40) for _ in range(count)]
            root, paths = wire.authReplyTree(messages)
            for i, (message, path) in enumerate(zip(messages, paths, strict=True)):
                self.assertEqual(wire.authReplyBatchRoot(message, path), root)
                for j, other in enumerate(messages):
                    if j != i:
                        self.assertNotEqual(wire.authReplyBatchRoot(other, path), root)

    def test_leafIsNotANode(self) -> None:
        """
        A leaf and a node are hashed with different prefixes: the two
        children of a node, presented as a message with an empty path, do
        not lead to the root.
        """
        root, paths = wire.authReplyTree([b"a", b"b"])
        leafA = paths[1][0][1:]
        leafB = paths[0][0][1:]
        self.assertNotEqual(wire.authReplyBatchRoot(leafA + leafB, []), root)

    def test_batchMessageIsNotAReplyMessage(self) -> None:
        """
        What the master signs for a batch starts with a prefix of its own.
        """
        self.assertIn(b"salttwist-auth-reply-batch", wire.authReplyBatchMessage(b"r" * 32))

    def test_malformedPaths(self) -> None:
        """
        A path that is not a list of 33-byte steps with a side byte of 0 or
        1, or longer than L{wire.MAX_BATCH_DEPTH}, is refused with
        L{ValueError}.
        """
        for path in (
            None,
            b"x" * 33,
            [b"x" * 32],
            [b"\x02" + b"x" * 32],
            ["\x00" + "x" * 32],
            [b"\x00" + b"x" * 32] * (wire.MAX_BATCH_DEPTH + 1),
        ):
            self.assertRaises(ValueError, wire.authReplyBatchRoot, b"m", path)

    def test_sizeLimits(self) -> None:
        """
        A tree needs at least one message.
        """
        self.assertRaises(ValueError, wire.authReplyTree, [])


class BatchedReplyTests(SynchronousTestCase):
    """
    L{MinionCredentials.openReply} with a reply signed together with
    others (C{batch_path}).
    """

    def credentials(self) -> MinionCredentials:
        pki = self.mktemp()
        os.makedirs(pki)
        return MinionCredentials("web1", MINION_KEY, MINION_PEM, pki)

    def test_requestSaysSo(self) -> None:
        """
        The minion's C{_auth} request says it checks batch signatures.
        """
        request = self.credentials().authRequest(CHALLENGE, NONCE)
        self.assertIs(request["batch_sig"], True)

    def test_opens(self) -> None:
        """
        A reply signed with others opens, wherever it is in the batch.
        """
        for count, index in ((2, 0), (2, 1), (5, 4), (32, 17)):
            reply, _ = batchedReplies(count, index)
            opened = self.credentials().openReply(reply, CHALLENGE, NONCE)
            self.assertEqual((opened.kid, opened.publishPort), (3, 4505))

    def test_otherMinionsPath(self) -> None:
        """
        A reply carrying another reply's path (or a changed field) does not
        verify: the signature check fails and nothing is pinned.
        """
        reply, _ = batchedReplies(4, 1)
        other, _ = batchedReplies(4, 2)
        reply["batch_path"] = other["batch_path"]
        creds = self.credentials()
        self.assertRaises(crypt.CryptError, creds.openReply, reply, CHALLENGE, NONCE)
        self.assertIsNone(creds.readPinned())
        reply, _ = batchedReplies(4, 1)
        reply["kid"] = 4
        self.assertRaises(crypt.CryptError, creds.openReply, reply, CHALLENGE, NONCE)

    def test_notForThisChallenge(self) -> None:
        """
        A batched reply is bound to the challenge and nonce of this
        connection, as a reply signed alone is.
        """
        reply, _ = batchedReplies(3, 0)
        self.assertRaises(
            crypt.CryptError, self.credentials().openReply, reply, CHALLENGE, b"m" * 32
        )

    def test_pathWithoutBatchSignature(self) -> None:
        """
        A reply signed alone does not verify once a path is added to it, and
        a batch signature does not verify without its path.
        """
        reply = signedReply(wire.packReplyKeys(os.urandom(32), os.urandom(32)))
        reply["batch_path"] = []
        self.assertRaises(crypt.CryptError, self.credentials().openReply, reply, CHALLENGE, NONCE)
        batched, _ = batchedReplies(2, 0)
        del batched["batch_path"]
        self.assertRaises(crypt.CryptError, self.credentials().openReply, batched, CHALLENGE, NONCE)

    def test_malformedPath(self) -> None:
        """
        A malformed path is refused as a malformed reply.
        """
        reply, _ = batchedReplies(2, 0)
        reply["batch_path"] = [b"\x05" * 33]
        e = self.assertRaises(
            MasterIdentityError, self.credentials().openReply, reply, CHALLENGE, NONCE
        )
        self.assertIn("malformed auth reply", str(e))
