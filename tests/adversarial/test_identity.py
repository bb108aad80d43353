# -*- test-case-name: tests.adversarial.test_identity -*-
"""
Attacks on minion identity: hostile ids, ids that look alike, weak or
malformed keys, and another key for an id that is already known. Run
against a real L{FilesystemKeyStore} so that "nothing on disk" is checked
on disk.
"""

from __future__ import annotations

import os
import unicodedata
from typing import Any

from cryptography.hazmat.primitives.asymmetric import ec, ed25519, rsa
from twisted.internet.testing import MemoryReactorClock, StringTransport
from twisted.trial.unittest import SkipTest, SynchronousTestCase

from salttwist import crypt
from salttwist.config import loadMasterConfig
from salttwist.events.bus import LocalEventBus
from salttwist.master.auth import Authenticator
from salttwist.master.core import Master, runSynchronously
from salttwist.master.keys import MasterKeys, PublicationKey
from salttwist.master.reqserver import ReqServerFactory
from salttwist.pki.keystore import ACCEPTED, DENIED, PENDING, REJECTED, FilesystemKeyStore
from salttwist.transport.framing import PREAUTH_MAX_FRAME
from tests.adversarial._support import (
    ATTACKER_KEY,
    ATTACKER_PEM,
    MASTER_KEY,
    MASTER_PEM,
    MINION_KEYS,
    MINION_PEMS,
    ROOT_KEY,
    authLoad,
    frameBytes,
)

CHALLENGE = b"c" * 32

#: Ids that must be refused before any path is built.
HOSTILE_IDS: list[Any] = [
    "../evil",
    "../../../../etc/cron.d/x",
    "..",
    ".",
    ".hidden",
    "a/b",
    "/abs",
    "a\\b",
    "..\\..\\windows",
    "a\0b",
    "\0",
    "a\x07b",
    "a\nb",
    "a\rb",
    "a\x1b[31mred",
    "a\x7fb",
    "a\x85b",
    "a b",
    "a\tb",
    "a\u00a0b",
    "a\u2028b",
    "admin\u202egnp.exe",
    "a\u2066b",
    "a\u200bb",
    "a\u200db",
    "\ufeffweb1",
    "web1\u00ad",
    "x" * 256,
    "\u00e9" * 128,
    "x" * 65536,
    "\ud800",
    "",
    None,
    5,
    ["m1"],
    {"id": "m1"},
    b"m1",
]


def _derLength(n: int) -> bytes:
    if n < 0x80:
        return bytes([n])
    body = n.to_bytes((n.bit_length() + 7) // 8, "big")
    return bytes([0x80 | len(body)]) + body


def _der(tag: int, body: bytes) -> bytes:
    return bytes([tag]) + _derLength(len(body)) + body


def _derInt(value: int) -> bytes:
    body = value.to_bytes(value.bit_length() // 8 + 1, "big")
    return _der(0x02, body)


def rsaPublicPem(n: int, e: int) -> bytes:
    """
    A SubjectPublicKeyInfo PEM for the RSA numbers C{(n, e)}, encoded by
    hand so that no library refuses to build a bad key before the master
    sees it.
    """
    import base64

    algorithm = _der(0x30, _der(0x06, bytes.fromhex("2a864886f70d010101")) + b"\x05\x00")
    key = _der(0x30, _derInt(n) + _derInt(e))
    spki = _der(0x30, algorithm + _der(0x03, b"\x00" + key))
    b64 = base64.encodebytes(spki).replace(b"\n", b"")
    lines = [b64[i : i + 64] for i in range(0, len(b64), 64)]
    return b"-----BEGIN PUBLIC KEY-----\n" + b"\n".join(lines) + b"\n-----END PUBLIC KEY-----\n"


E3_KEY = rsa.generate_private_key(public_exponent=3, key_size=2048)
SMALL_KEY = rsa.generate_private_key(public_exponent=65537, key_size=1024)
_N2048 = MINION_KEYS["m1"].public_key().public_numbers().n


class KeyStoreMaster(SynchronousTestCase):
    """
    An L{Authenticator} over a L{FilesystemKeyStore} in a fresh C{pki_dir}.
    """

    def setUp(self) -> None:
        """
        Make the key store and the authenticator.
        """
        self.pkiDir = os.path.abspath(self.mktemp())
        self.keyStore = FilesystemKeyStore(self.pkiDir)
        self.auth = Authenticator(
            self.keyStore,
            MasterKeys(MASTER_KEY, MASTER_PEM, ROOT_KEY),
            lambda: PublicationKey(),
            lambda: 4505,
        )

    def filesOnDisk(self) -> list[str]:
        """
        @return: every file under C{pki_dir}, relative to it.
        """
        found = []
        for directory, _, files in os.walk(self.pkiDir):
            for name in files:
                found.append(os.path.relpath(os.path.join(directory, name), self.pkiDir))
        return sorted(found)

    def authenticate(self, minionId: Any, key: Any, pem: bytes | None = None) -> dict[str, Any]:
        """
        @return: the reply to an C{_auth} for C{minionId} signed by C{key}.
        """
        return self.auth.authenticate(
            authLoad(CHALLENGE, minionId, key, pem), CHALLENGE, "peer"
        ).reply


class HostileIdTests(KeyStoreMaster):
    """
    Ids with traversal, separators, NUL, control, bidi, zero-width or
    whitespace characters, or over 255 bytes, are refused before any path
    is built (Salt's CVE-2017-12791 and the traversal CVEs' class).
    """

    def test_refusedNothingOnDisk(self) -> None:
        """
        Each of L{HOSTILE_IDS}, correctly signed, is answered with an error
        naming an invalid id, and not one file is created anywhere under
        C{pki_dir} (nor beside it).
        """
        parent = os.path.dirname(self.pkiDir)
        before = sorted(os.listdir(parent))
        for minionId in HOSTILE_IDS:
            pem = MINION_PEMS["m1"]
            reply = self.auth.authenticate(
                {"cmd": "_auth", "id": minionId, "pub": pem, "nonce": b"n" * 32, "sig": b"s"},
                CHALLENGE,
                "peer",
            )
            self.assertEqual(reply.reply["ret"], "error", repr(minionId)[:40])
            self.assertIn("invalid minion id", reply.reply["error"], repr(minionId)[:40])
        self.assertEqual(self.filesOnDisk(), [])
        self.assertEqual(sorted(os.listdir(parent)), before)

    def test_hugeIdClosedOnHeader(self) -> None:
        """
        A 64 KiB id cannot even be sent before authentication: the frame
        carrying it is over the pre-authentication limit, and the master
        closes the connection on the length header, with no reply and
        nothing on disk.
        """
        root = os.path.abspath(self.mktemp())
        master = Master(
            loadMasterConfig(root, overrides={"root_dir": root}),
            MasterKeys(MASTER_KEY, MASTER_PEM, ROOT_KEY),
            self.keyStore,
            LocalEventBus(),
            runSynchronously,
            MemoryReactorClock(),
        )
        proto = ReqServerFactory(master).buildProtocol(None)
        transport = StringTransport()
        proto.makeConnection(transport)
        transport.clear()
        frame = frameBytes(authLoad(CHALLENGE, "x" * 65536, MINION_KEYS["m1"]))
        self.assertGreater(len(frame), PREAUTH_MAX_FRAME)
        proto.dataReceived(frame)
        self.assertTrue(transport.disconnected)
        self.assertEqual(transport.value(), b"")
        self.assertEqual(self.filesOnDisk(), [])


class LookAlikeIdTests(KeyStoreMaster):
    """
    Ids an admin cannot tell apart on screen are refused (issue 22): by
    default a new id is a host name, so blank and lookalike letters,
    combining marks and other normal forms never get in; and a new id that
    is another existing id in another case is denied. Nothing is written
    for either, and the existing key is untouched.
    """

    def test_caseDenied(self) -> None:
        """
        C{web1} accepted with one key; C{Web1} and C{WEB1} with other keys
        are denied with nothing written, the reply says why, and C{web1}
        still authenticates.
        """
        self.keyStore.putKey(ACCEPTED, "web1", MINION_PEMS["m1"])
        for minionId, key in (("Web1", ATTACKER_KEY), ("WEB1", MINION_KEYS["m2"])):
            reply = self.authenticate(minionId, key)
            self.assertEqual(reply["ret"], "denied")
            self.assertIn("'web1'", reply["error"])
            self.assertIn("regardless of ASCII case", reply["error"])
        self.assertEqual(self.keyStore.getKey(ACCEPTED, "web1"), MINION_PEMS["m1"])
        self.assertEqual(self.filesOnDisk(), [f"{ACCEPTED}/web1"])
        self.assertEqual(self.authenticate("web1", MINION_KEYS["m1"])["ret"], "accepted")

    def test_caseDeniedInEveryState(self) -> None:
        """
        A key for C{WEB1} is denied whichever state C{web1}'s key is in:
        pending, accepted, rejected or denied.
        """
        for state in (PENDING, ACCEPTED, REJECTED, DENIED):
            self.keyStore.putKey(state, "web1", MINION_PEMS["m1"])
            self.assertEqual(self.authenticate("WEB1", ATTACKER_KEY)["ret"], "denied", state)
            self.assertEqual(self.filesOnDisk(), [f"{state}/web1"])
            self.keyStore.deleteKey(state, "web1")

    def test_lookalikesRefused(self) -> None:
        """
        Blank letters (U+3164, U+2800), a combining mark, Cyrillic and
        full-width lookalikes, and the NFD spelling of an id are refused
        with an error naming the rule and the character (escaped), and
        nothing is written.
        """
        self.keyStore.putKey(ACCEPTED, "web1", MINION_PEMS["m1"])
        nfd = unicodedata.normalize("NFD", "caf\u00e9")
        cases = {
            "web1\u3164": "U+3164",
            "web1\u2800": "U+2800",
            "web\u0301": "U+0301",
            "w\u0435b1": "U+0435",
            "\uff57eb1": "U+FF57",
            nfd: "U+0301",
        }
        for minionId, named in cases.items():
            reply = self.authenticate(minionId, ATTACKER_KEY)
            self.assertEqual(reply["ret"], "error", minionId)
            self.assertIn("invalid minion id", reply["error"])
            self.assertIn(named, reply["error"])
            self.assertIn("ASCII letters, digits", reply["error"])
        self.assertEqual(self.filesOnDisk(), [f"{ACCEPTED}/web1"])

    def test_targetsAndOptionsRefused(self) -> None:
        """
        Ids that are target expressions or look like options or broken
        host names are refused with nothing written.
        """
        for minionId in ("*", "web*", "G@role:web", "E@.*", "-rf", "web1.", "a..b", "a,b"):
            reply = self.authenticate(minionId, ATTACKER_KEY)
            self.assertEqual(reply["ret"], "error", minionId)
            self.assertIn("invalid minion id", reply["error"])
        self.assertEqual(self.filesOnDisk(), [])

    def test_existingNonconformingKeysStillWork(self) -> None:
        """
        A key stored before the rules (here C{caf\u00e9}, accepted) still
        authenticates: the rules are for new ids.
        """
        self.keyStore.putKey(ACCEPTED, "caf\u00e9", MINION_PEMS["m1"])
        self.assertEqual(self.authenticate("caf\u00e9", MINION_KEYS["m1"])["ret"], "accepted")


class UnicodeIdTests(KeyStoreMaster):
    """
    With C{allow_unicode_minion_ids}, Unicode ids are admitted in NFC form,
    but invisible, combining-only, mixed-script and confusable ones are not.
    """

    def setUp(self) -> None:
        """
        The key store follows the Unicode id rules.
        """
        from salttwist.pki.ids import IdRules

        super().setUp()
        try:
            IdRules(unicode=True).require()
        except Exception as e:
            raise SkipTest(f"PyICU is not installed: {e}") from e
        self.keyStore.idRules = IdRules(unicode=True)

    def test_admitted(self) -> None:
        """
        NFC ids in one script (with Latin) are pending.
        """
        for minionId in ("caf\u00e9", "\u0441\u0435\u0440\u0432\u0435\u0440-1", "web1"):
            self.assertEqual(self.authenticate(minionId, ATTACKER_KEY)["ret"], "pending")

    def test_refused(self) -> None:
        """
        NFD, blank letters, a leading combining mark, mixed Latin and
        Cyrillic, and full-width letters are refused with nothing written.
        """
        for minionId in (
            unicodedata.normalize("NFD", "caf\u00e9"),
            "web1\u3164",
            "web1\u2800",
            "\u0301web",
            "w\u0435b1",
            "\uff57eb1",
            "*",
        ):
            reply = self.authenticate(minionId, ATTACKER_KEY)
            self.assertEqual(reply["ret"], "error", minionId)
            self.assertIn("allow_unicode_minion_ids", reply["error"])
        self.assertEqual(self.filesOnDisk(), [])

    def test_confusableDenied(self) -> None:
        """
        An all-Cyrillic id with the skeleton of an existing Latin id, and
        another case of an existing Unicode id, are denied.
        """
        self.keyStore.putKey(ACCEPTED, "cep", MINION_PEMS["m1"])
        self.keyStore.putKey(ACCEPTED, "caf\u00e9", MINION_PEMS["m2"])
        reply = self.authenticate("\u0441\u0435\u0440", ATTACKER_KEY)
        self.assertEqual(reply["ret"], "denied")
        self.assertIn("UTS #39", reply["error"])
        self.assertEqual(self.authenticate("CAF\u00c9", ATTACKER_KEY)["ret"], "denied")
        self.assertEqual(sorted(self.filesOnDisk()), [f"{ACCEPTED}/caf\u00e9", f"{ACCEPTED}/cep"])


class WeakKeyTests(KeyStoreMaster):
    """
    Keys that are weak, huge or not RSA public keys are refused before the
    key store is touched.
    """

    def assertRefused(self, pem: Any, signer: Any = ATTACKER_KEY) -> None:
        """
        An C{_auth} carrying C{pem} (signed by C{signer}) is an error and
        nothing is stored.
        """
        reply = self.auth.authenticate(
            authLoad(CHALLENGE, "victim", signer, pem if isinstance(pem, bytes) else b"x")
            | {"pub": pem},
            CHALLENGE,
            "peer",
        ).reply
        self.assertEqual(reply["ret"], "error", pem[:80] if isinstance(pem, bytes) else pem)
        self.assertEqual(self.filesOnDisk(), [])

    def test_smallExponents(self) -> None:
        """
        Public exponents 1 and 3 are refused, even with a valid signature by
        the e=3 key itself; so are even and huge exponents.
        """
        self.assertRefused(crypt.publicKeyToPem(E3_KEY.public_key()), signer=E3_KEY)
        for e in (1, 3, 5, 17, 65536, 2**64 + 1):
            self.assertRefused(rsaPublicPem(_N2048, e))

    def test_shortModuli(self) -> None:
        """
        A 1024-bit key (signing for itself) and a 2047-bit modulus are
        refused.
        """
        self.assertRefused(crypt.publicKeyToPem(SMALL_KEY.public_key()), signer=SMALL_KEY)
        self.assertRefused(rsaPublicPem((1 << 2046) | 1, 65537))

    def test_secondBlockOrTrailingBytes(self) -> None:
        """
        A key followed by a second PEM block (the attacker's key after a
        victim's, or the reverse) or by trailing bytes is refused before
        the key store is touched, even when the signature is by the first
        key (issue 22).
        """
        first = MINION_PEMS["m1"]
        for pem in (first + ATTACKER_PEM, first + b"trailing\n", first + b"\x00"):
            self.assertRefused(pem, signer=MINION_KEYS["m1"])

    def test_hugeModuli(self) -> None:
        """
        Moduli of 8193, 16384 and 65536 bits (which would make every RSA
        operation slow), and a PEM over 16 KiB, are refused without doing
        RSA work with them.
        """
        for bits in (8193, 16384, 65536):
            self.assertRefused(rsaPublicPem((1 << (bits - 1)) | 1, 65537))
        self.assertRefused(
            b"-----BEGIN PUBLIC KEY-----\n" + b"A" * 17000 + b"\n-----END PUBLIC KEY-----\n"
        )

    def test_malformedAndForeignKeys(self) -> None:
        """
        Empty, truncated, garbage or non-PEM data, a private key, and EC or
        Ed25519 public keys are refused.
        """
        pem = MINION_PEMS["m1"]
        for bad in (
            b"",
            b"-----BEGIN PUBLIC KEY-----\n-----END PUBLIC KEY-----\n",
            pem[: len(pem) // 2],
            pem.replace(b"M", b"N", 3),
            b"\x00" * 400,
            crypt.privateKeyToPem(ATTACKER_KEY),
            crypt.publicKeyToPem(ec.generate_private_key(ec.SECP256R1()).public_key()),
            crypt.publicKeyToPem(ed25519.Ed25519PrivateKey.generate().public_key()),
            pem.decode("ascii"),
            None,
            [pem],
        ):
            self.assertRefused(bad)


class ChangedKeyTests(KeyStoreMaster):
    """
    A known id presenting another key is denied and the known key stays.
    """

    def test_acceptedIdNewKeyDenied(self) -> None:
        """
        C{m1} is accepted; an attacker proving possession of another key
        under the id C{m1} is denied: no session key, the accepted key file
        is byte for byte unchanged, the attacker's key is parked in
        C{minions_denied}, and the real C{m1} still authenticates.
        """
        self.keyStore.putKey(ACCEPTED, "m1", MINION_PEMS["m1"])
        path = os.path.join(self.pkiDir, ACCEPTED, "m1")
        with open(path, "rb") as f:
            before = f.read()
        outcome = self.auth.authenticate(authLoad(CHALLENGE, "m1", ATTACKER_KEY), CHALLENGE, "p")
        self.assertEqual(outcome.reply, {"ret": "denied"})
        self.assertIsNone(outcome.sessionKey)
        with open(path, "rb") as f:
            self.assertEqual(f.read(), before)
        self.assertEqual(self.keyStore.getKey(DENIED, "m1"), ATTACKER_PEM)
        self.assertEqual(self.authenticate("m1", MINION_KEYS["m1"])["ret"], "accepted")

    def test_pendingIdNewKeyDenied(self) -> None:
        """
        C{m3} is pending with one key; another key under C{m3} is denied and
        the pending key is unchanged (the first to ask keeps the id until an
        admin decides).
        """
        self.assertEqual(self.authenticate("m3", MINION_KEYS["m2"])["ret"], "pending")
        self.assertEqual(self.authenticate("m3", ATTACKER_KEY)["ret"], "denied")
        self.assertEqual(self.keyStore.getKey(PENDING, "m3"), MINION_PEMS["m2"])
        self.assertEqual(self.keyStore.getKey(DENIED, "m3"), ATTACKER_PEM)
        self.assertEqual(self.authenticate("m3", MINION_KEYS["m2"])["ret"], "pending")

    def test_rejectedStaysRejected(self) -> None:
        """
        A rejected id is refused whatever key it presents, and is never put
        back in C{minions_pre}.
        """
        self.keyStore.putKey(REJECTED, "bad", ATTACKER_PEM)
        for key in (ATTACKER_KEY, MINION_KEYS["m1"]):
            self.assertEqual(self.authenticate("bad", key)["ret"], "rejected")
        self.assertEqual(self.keyStore.stateOf("bad"), [REJECTED])

    def test_signatureMustMatchPresentedKey(self) -> None:
        """
        Presenting C{m1}'s real public key without its private key (the
        request signed by another key, or over another challenge) fails
        and changes nothing.
        """
        self.keyStore.putKey(ACCEPTED, "m1", MINION_PEMS["m1"])
        reply = self.authenticate("m1", ATTACKER_KEY, pem=MINION_PEMS["m1"])
        self.assertEqual(reply["ret"], "error")
        stale = authLoad(b"o" * 32, "m1", MINION_KEYS["m1"])
        self.assertEqual(self.auth.authenticate(stale, CHALLENGE, "p").reply["ret"], "error")
        self.assertEqual(self.filesOnDisk(), [f"{ACCEPTED}/m1"])

    def test_autoAcceptStillDenies(self) -> None:
        """
        Even with C{auto_accept}, an accepted id presenting another key is
        denied through the whole master (autosign never overrides a known
        key), and its accepted key stays.
        """
        root = os.path.abspath(self.mktemp())
        config = loadMasterConfig(root, overrides={"root_dir": root, "auto_accept": True})
        master = Master(
            config,
            MasterKeys(MASTER_KEY, MASTER_PEM, ROOT_KEY),
            self.keyStore,
            LocalEventBus(),
            runSynchronously,
            MemoryReactorClock(),
        )
        self.keyStore.putKey(ACCEPTED, "m1", MINION_PEMS["m1"])

        class Proto:
            challenge = CHALLENGE
            peerName = "peer"

        result = self.successResultOf(
            master.clearAuth(Proto(), authLoad(CHALLENGE, "m1", ATTACKER_KEY))  # type: ignore[arg-type]
        )
        self.assertEqual(result[0], {"ret": "denied"})
        self.assertIsNone(result[1])
        self.assertEqual(self.keyStore.getKey(ACCEPTED, "m1"), MINION_PEMS["m1"])
        self.assertEqual(self.keyStore.getKey(DENIED, "m1"), ATTACKER_PEM)
        self.assertEqual(self.keyStore.stateOf("m1"), [ACCEPTED, DENIED])
