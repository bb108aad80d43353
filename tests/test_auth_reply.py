# -*- test-case-name: tests.test_auth_reply -*-
"""
The accepting auth reply's key block: both AES keys in one RSA-OAEP
ciphertext, opened by L{salttwist.minion.auth.MinionCredentials.openReply}.
"""

from __future__ import annotations

import os
from typing import Any

from twisted.trial.unittest import SynchronousTestCase

from salttwist import crypt, wire
from salttwist.minion.auth import MasterIdentityError, MinionCredentials

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
