# -*- test-case-name: tests.test_crypt -*-
"""
Tests for L{salttwist.crypt}.
"""

from __future__ import annotations

import hashlib
import os
import stat

from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ec, rsa
from twisted.trial.unittest import SynchronousTestCase

from salttwist import crypt, serial, wire
from salttwist.crypt import AesCipher, CryptError

# Key generation is slow: these keys serve every test in this module.
_KEY = crypt.generatePrivateKey()
_OTHER_KEY = crypt.generatePrivateKey()
PEM = crypt.publicKeyToPem(_KEY.public_key())
OTHER_PEM = crypt.publicKeyToPem(_OTHER_KEY.public_key())


def _publicPem(key: object) -> bytes:
    """
    @return: the SubjectPublicKeyInfo PEM of a private key's public half.
    """
    return key.public_key().public_bytes(  # type: ignore[attr-defined]
        serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo
    )


class RsaTests(SynchronousTestCase):
    """
    RSA-OAEP encryption and RSA-PSS signatures.
    """

    def test_oaepRoundTrip(self) -> None:
        """
        A secret encrypted to a public key decrypts with its private key.
        """
        secret = os.urandom(32)
        ciphertext = crypt.rsaEncrypt(_KEY.public_key(), secret)
        self.assertNotEqual(ciphertext, secret)
        self.assertEqual(crypt.rsaDecrypt(_KEY, ciphertext), secret)

    def test_oaepWrongKey(self) -> None:
        """
        A ciphertext for one key does not decrypt with another: L{CryptError}.
        """
        ciphertext = crypt.rsaEncrypt(_KEY.public_key(), b"secret")
        self.assertRaises(CryptError, crypt.rsaDecrypt, _OTHER_KEY, ciphertext)

    def test_oaepGarbage(self) -> None:
        """
        Garbage ciphertext raises L{CryptError}.
        """
        self.assertRaises(CryptError, crypt.rsaDecrypt, _KEY, b"\x00" * 256)
        self.assertRaises(CryptError, crypt.rsaDecrypt, _KEY, b"short")

    def test_pssVerify(self) -> None:
        """
        A signature made with the private key verifies with the public key.
        """
        signature = crypt.sign(_KEY, b"message")
        self.assertIsNone(crypt.verify(_KEY.public_key(), signature, b"message"))

    def test_pssTamperedMessage(self) -> None:
        """
        A signature does not verify over a different message.
        """
        signature = crypt.sign(_KEY, b"message")
        self.assertRaises(CryptError, crypt.verify, _KEY.public_key(), signature, b"messagf")

    def test_pssTamperedSignature(self) -> None:
        """
        A signature with one bit flipped does not verify.
        """
        signature = bytearray(crypt.sign(_KEY, b"message"))
        signature[10] ^= 0x01
        self.assertRaises(CryptError, crypt.verify, _KEY.public_key(), bytes(signature), b"message")

    def test_pssWrongKey(self) -> None:
        """
        A signature does not verify under another key.
        """
        signature = crypt.sign(_KEY, b"message")
        self.assertRaises(CryptError, crypt.verify, _OTHER_KEY.public_key(), signature, b"message")

    def test_pssNotBytes(self) -> None:
        """
        A signature or message that is not bytes raises L{CryptError}.
        """
        signature = crypt.sign(_KEY, b"message")
        self.assertRaises(CryptError, crypt.verify, _KEY.public_key(), None, b"message")
        self.assertRaises(CryptError, crypt.verify, _KEY.public_key(), signature, "message")

    def test_generateKeysizeBounds(self) -> None:
        """
        L{crypt.generatePrivateKey} refuses sizes below 2048 or above 8192
        bits.
        """
        self.assertRaises(CryptError, crypt.generatePrivateKey, 1024)
        self.assertRaises(CryptError, crypt.generatePrivateKey, 16384)

    def test_privateKeyPemRoundTrip(self) -> None:
        """
        L{crypt.loadPrivateKey} reads what L{crypt.privateKeyToPem} writes.
        """
        loaded = crypt.loadPrivateKey(crypt.privateKeyToPem(_KEY))
        self.assertEqual(loaded.private_numbers(), _KEY.private_numbers())

    def test_loadPrivateKeyRefuses(self) -> None:
        """
        L{crypt.loadPrivateKey} refuses garbage and non-RSA keys.
        """
        self.assertRaises(CryptError, crypt.loadPrivateKey, b"not a key")
        ecPem = ec.generate_private_key(ec.SECP256R1()).private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.NoEncryption(),
        )
        self.assertRaises(CryptError, crypt.loadPrivateKey, ecPem)


class LoadPublicKeyTests(SynchronousTestCase):
    """
    L{crypt.loadPublicKey} accepts only sound RSA keys.
    """

    def test_good(self) -> None:
        """
        A 2048-bit RSA key with exponent 65537 loads.
        """
        key = crypt.loadPublicKey(PEM)
        self.assertEqual(key.public_numbers(), _KEY.public_key().public_numbers())

    def test_pkcs1Accepted(self) -> None:
        """
        The PKCS#1 C{RSA PUBLIC KEY} encoding loads too, and
        L{crypt.canonicalPublicPem} turns it into the SubjectPublicKeyInfo
        form.
        """
        pkcs1 = _KEY.public_key().public_bytes(
            serialization.Encoding.PEM, serialization.PublicFormat.PKCS1
        )
        self.assertEqual(crypt.canonicalPublicPem(pkcs1), PEM)

    def test_malformed(self) -> None:
        """
        Malformed PEM is refused.
        """
        for pem in [
            b"",
            b"garbage",
            b"-----BEGIN PUBLIC KEY-----\nAAAA\n-----END PUBLIC KEY-----\n",
            PEM[:-40],
        ]:
            self.assertRaises(CryptError, crypt.loadPublicKey, pem)

    def test_exactlyOneBlock(self) -> None:
        """
        Only one public key block, with at most whitespace around it, is a
        public key: a second block after it (even another valid key, which
        the parser would ignore), text before or after, or a NUL after are
        refused by L{crypt.loadPublicKey} and L{crypt.canonicalPublicPem}
        alike (issue 22).
        """
        pkcs1 = _KEY.public_key().public_bytes(
            serialization.Encoding.PEM, serialization.PublicFormat.PKCS1
        )
        for pem in [
            PEM + OTHER_PEM,
            PEM + PEM,
            PEM + b"trailing",
            PEM + b"\x00",
            b"leading\n" + PEM,
            PEM + b"-----BEGIN CERTIFICATE-----\nAAAA\n-----END CERTIFICATE-----\n",
            pkcs1 + PEM,
            PEM.replace(b"-----END PUBLIC KEY-----", b"-----END RSA PUBLIC KEY-----"),
        ]:
            with self.assertRaises(CryptError) as caught:
                crypt.loadPublicKey(pem)
            self.assertIn("exactly one PUBLIC KEY block", str(caught.exception))
            self.assertRaises(CryptError, crypt.canonicalPublicPem, pem)

    def test_whitespaceAround(self) -> None:
        """
        Whitespace before and after the one block, and CRLF line ends, are
        fine.
        """
        for pem in [b"\n  " + PEM + b"\n\n", PEM.replace(b"\n", b"\r\n"), PEM.rstrip()]:
            self.assertEqual(crypt.canonicalPublicPem(pem), PEM)

    def test_notBytes(self) -> None:
        """
        A PEM given as L{str} is refused.
        """
        self.assertRaises(CryptError, crypt.loadPublicKey, PEM.decode("ascii"))

    def test_smallKey(self) -> None:
        """
        A 1024-bit RSA key is refused, with a message naming its size.
        """
        small = rsa.generate_private_key(public_exponent=65537, key_size=1024)
        e = self.assertRaises(CryptError, crypt.loadPublicKey, _publicPem(small))
        self.assertIn("1024", str(e))

    def test_exponentThree(self) -> None:
        """
        A key with public exponent 3 is refused.
        """
        weak = rsa.generate_private_key(public_exponent=3, key_size=2048)
        e = self.assertRaises(CryptError, crypt.loadPublicKey, _publicPem(weak))
        self.assertIn("65537", str(e))

    def test_notRsa(self) -> None:
        """
        An elliptic-curve key is refused.
        """
        ecKey = ec.generate_private_key(ec.SECP256R1())
        e = self.assertRaises(CryptError, crypt.loadPublicKey, _publicPem(ecKey))
        self.assertIn("RSA", str(e))

    def test_oversize(self) -> None:
        """
        Input over 16 KiB is refused before it is parsed.
        """
        self.assertRaises(CryptError, crypt.loadPublicKey, PEM + b"\n" * 16384)

    def test_keptOnceParsed(self) -> None:
        """
        A key loaded again is the object parsed the first time, and its
        canonical PEM is computed once; another key is parsed for itself.
        """
        other = _publicPem(rsa.generate_private_key(public_exponent=65537, key_size=2048))
        self.assertIs(crypt.loadPublicKey(PEM), crypt.loadPublicKey(bytes(bytearray(PEM))))
        self.assertIsNot(crypt.loadPublicKey(other), crypt.loadPublicKey(PEM))
        self.assertIs(crypt.canonicalPublicPem(other), crypt.canonicalPublicPem(other))
        self.assertEqual(crypt.canonicalPublicPem(other), other)

    def test_refusedNeverKept(self) -> None:
        """
        A refused key is refused again, with the same message, every time
        it is given: only keys that passed are kept.
        """
        weak = _publicPem(rsa.generate_private_key(public_exponent=3, key_size=2048))
        first = self.assertRaises(CryptError, crypt.loadPublicKey, weak)
        second = self.assertRaises(CryptError, crypt.canonicalPublicPem, weak)
        self.assertEqual(str(first), str(second))
        self.assertRaises(CryptError, crypt.canonicalPublicPem, "not bytes")  # type: ignore[arg-type]


class FingerprintTests(SynchronousTestCase):
    """
    L{crypt.fingerprint} gives Salt's SHA-256 key fingerprint.
    """

    def test_format(self) -> None:
        """
        The fingerprint is 32 colon-separated lowercase hex pairs.
        """
        self.assertRegex(crypt.fingerprint(PEM), r"\A[0-9a-f]{2}(:[0-9a-f]{2}){31}\Z")

    def test_stable(self) -> None:
        """
        The same key has the same fingerprint, whatever the line endings or
        surrounding whitespace.
        """
        self.assertEqual(crypt.fingerprint(PEM), crypt.fingerprint(PEM))
        self.assertEqual(
            crypt.fingerprint(PEM), crypt.fingerprint(b"\n" + PEM.replace(b"\n", b"\r\n"))
        )

    def test_distinct(self) -> None:
        """
        Two keys have different fingerprints.
        """
        self.assertNotEqual(crypt.fingerprint(PEM), crypt.fingerprint(OTHER_PEM))

    def test_digestOfDer(self) -> None:
        """
        The fingerprint is the SHA-256 of the DER body of the PEM.
        """
        der = _KEY.public_key().public_bytes(
            serialization.Encoding.DER, serialization.PublicFormat.SubjectPublicKeyInfo
        )
        self.assertEqual(crypt.fingerprint(PEM).replace(":", ""), hashlib.sha256(der).hexdigest())


class AesCipherTests(SynchronousTestCase):
    """
    L{AesCipher} is AES-256-GCM with a fresh nonce per message.
    """

    def setUp(self) -> None:
        """
        Make a cipher with a fresh key.
        """
        self.cipher = AesCipher(crypt.newAesKey())

    def test_roundTrip(self) -> None:
        """
        What is encrypted decrypts to the same bytes, with and without AAD.
        """
        self.assertEqual(self.cipher.decrypt(self.cipher.encrypt(b"hello")), b"hello")
        blob = self.cipher.encrypt(b"hello", b"aad")
        self.assertEqual(self.cipher.decrypt(blob, b"aad"), b"hello")
        self.assertEqual(self.cipher.decrypt(self.cipher.encrypt(b"")), b"")

    def test_freshNonce(self) -> None:
        """
        Two encryptions of the same plaintext differ, starting with their
        nonces.
        """
        a = self.cipher.encrypt(b"same")
        b = self.cipher.encrypt(b"same")
        self.assertNotEqual(a, b)
        self.assertNotEqual(a[: crypt.NONCE_BYTES], b[: crypt.NONCE_BYTES])

    def test_tampered(self) -> None:
        """
        Flipping any one bit of a blob (nonce, ciphertext or tag) makes it
        fail with L{CryptError}.
        """
        blob = self.cipher.encrypt(b"hello")
        for i in range(len(blob)):
            tampered = bytearray(blob)
            tampered[i] ^= 0x80
            self.assertRaises(CryptError, self.cipher.decrypt, bytes(tampered))

    def test_wrongAad(self) -> None:
        """
        A blob made with one AAD does not decrypt with another, nor without.
        """
        blob = self.cipher.encrypt(b"hello", b"channel-a")
        self.assertRaises(CryptError, self.cipher.decrypt, blob, b"channel-b")
        self.assertRaises(CryptError, self.cipher.decrypt, blob)

    def test_wrongKey(self) -> None:
        """
        A blob does not decrypt under another key.
        """
        blob = self.cipher.encrypt(b"hello")
        self.assertRaises(CryptError, AesCipher(crypt.newAesKey()).decrypt, blob)

    def test_short(self) -> None:
        """
        A blob shorter than a nonce and a tag, or not bytes, raises
        L{CryptError}.
        """
        self.assertRaises(CryptError, self.cipher.decrypt, b"")
        self.assertRaises(CryptError, self.cipher.decrypt, b"\x00" * 27)
        self.assertRaises(CryptError, self.cipher.decrypt, "x" * 40)

    def test_encryptParts(self) -> None:
        """
        L{AesCipher.encryptParts} gives a fresh nonce and the ciphertext
        that, joined, decrypt as L{AesCipher.encrypt}'s blob does.
        """
        nonce, sealed = self.cipher.encryptParts(b"hello", b"aad")
        self.assertEqual(len(nonce), crypt.NONCE_BYTES)
        self.assertEqual(self.cipher.decrypt(nonce + sealed, b"aad"), b"hello")
        self.assertNotEqual(self.cipher.encryptParts(b"hello", b"aad")[0], nonce)

    def test_views(self) -> None:
        """
        A blob may be given as a view of bytes, small or big; a big one
        tampered with still fails, and a bytearray is refused.
        """
        big = os.urandom(3 * 65536)
        for plaintext in (b"hello", big):
            blob = self.cipher.encrypt(plaintext, b"aad")
            self.assertEqual(self.cipher.decrypt(memoryview(blob), b"aad"), plaintext)
            self.assertEqual(self.cipher.decrypt(memoryview(b"!" + blob)[1:], b"aad"), plaintext)
        blob = bytearray(self.cipher.encrypt(big))
        blob[-1] ^= 1
        self.assertRaises(CryptError, self.cipher.decrypt, bytes(blob))
        self.assertRaises(CryptError, self.cipher.decrypt, memoryview(bytes(blob)))
        self.assertRaises(CryptError, self.cipher.decrypt, bytearray(self.cipher.encrypt(b"x")))

    def test_badKey(self) -> None:
        """
        An AES key must be exactly 32 bytes.
        """
        self.assertRaises(CryptError, AesCipher, b"\x00" * 16)
        self.assertRaises(CryptError, AesCipher, "k" * 32)


class MacTests(SynchronousTestCase):
    """
    HMAC helpers and key derivation.
    """

    def test_hmacEqual(self) -> None:
        """
        L{crypt.hmacEqual} is true only for two equal byte strings.
        """
        mac = crypt.hmacSha256(b"key", b"message")
        self.assertEqual(len(mac), 32)
        self.assertTrue(crypt.hmacEqual(mac, crypt.hmacSha256(b"key", b"message")))
        self.assertFalse(crypt.hmacEqual(mac, crypt.hmacSha256(b"key", b"messagf")))
        self.assertFalse(crypt.hmacEqual(mac, None))  # type: ignore[arg-type]

    def test_deriveKey(self) -> None:
        """
        L{crypt.deriveKey} gives 32-byte keys that depend on both the secret
        and the context.
        """
        key = crypt.deriveKey(b"s" * 32, b"ctx")
        self.assertEqual(len(key), 32)
        self.assertEqual(key, crypt.deriveKey(b"s" * 32, b"ctx"))
        self.assertNotEqual(key, crypt.deriveKey(b"s" * 32, b"ctx2"))
        self.assertNotEqual(key, crypt.deriveKey(b"t" * 32, b"ctx"))

    def test_preparedHmac(self) -> None:
        """
        L{crypt.HmacSha256} gives the same MACs as L{crypt.hmacSha256}, and
        stays usable after each one (it is keyed once, then copied).
        """
        prepared = crypt.HmacSha256(b"key")
        for message in (b"message", b"", b"message"):
            self.assertEqual(prepared.mac(message), crypt.hmacSha256(b"key", message))
        self.assertNotEqual(prepared.mac(b"m"), crypt.HmacSha256(b"other").mac(b"m"))

    def test_sha256(self) -> None:
        """
        L{crypt.sha256} is SHA-256.
        """
        for data in (b"", b"abc", os.urandom(1000)):
            self.assertEqual(crypt.sha256(data), hashlib.sha256(data).digest())


class PublicationFrameTests(SynchronousTestCase):
    """
    The publication frame the master encodes once and completes with each
    subscriber's MAC.
    """

    def test_prefixAndMac(self) -> None:
        """
        L{wire.publicationFramePrefix} followed by a 32-byte MAC decodes to
        C{{"pub", "kid", "mac"}}, for blobs and key generations of every
        encoded size.
        """
        for blob, kid in ((b"", 0), (b"x" * 300, 2**20), (os.urandom(70000), 2**40)):
            mac = os.urandom(wire.PUBLICATION_MAC_BYTES)
            frame = serial.loads(wire.publicationFramePrefix(blob, kid) + mac)
            self.assertEqual(frame, {"pub": blob, "kid": kid, "mac": mac})

    def test_acknowledgingPrefix(self) -> None:
        """
        L{wire.acknowledgingFramePrefixes} turns a publication prefix into
        one whose frame also carries C{ack}, for request id lists of every
        encoded size; anything but a publication prefix is refused.
        """
        for rids in ([1], [1, 2**7, 2**16, 2**40], list(range(1, wire.MAX_PUBLICATION_ACKS + 1))):
            for blob, kid in ((b"", 0), (os.urandom(70000), 2**40)):
                mac = os.urandom(wire.PUBLICATION_MAC_BYTES)
                withAcks = wire.acknowledgingFramePrefixes(wire.publicationFramePrefix(blob, kid))
                prefix = withAcks(rids)
                frame = serial.loads(prefix + mac)
                self.assertEqual(frame, {"pub": blob, "kid": kid, "ack": rids, "mac": mac})
        with self.assertRaises(ValueError):
            wire.acknowledgingFramePrefixes(serial.dumps({"pub": b"", "kid": 0}))

    def test_acknowledgementsMessage(self) -> None:
        """
        The acknowledgements a MAC covers are their numbers, in order; the
        field must be a non-empty list of request ids.
        """
        self.assertEqual(
            wire.publicationAcksMessage([1, 2]),
            b"acks:" + (1).to_bytes(8, "big") + (2).to_bytes(8, "big"),
        )
        self.assertNotEqual(
            wire.publicationAcksMessage([1, 2]), wire.publicationAcksMessage([2, 1])
        )
        self.assertEqual(wire.publicationAcks([3, 2**63 - 1]), [3, 2**63 - 1])
        for bad in (None, 1, [], [0], [-1], [2**63], [1.0], [False], ["1"]):
            with self.assertRaises(ValueError):
                wire.publicationAcks(bad)

    def test_macMessage(self) -> None:
        """
        The MACed message binds the key generation and the blob's digest.
        """
        digest = crypt.sha256(b"blob")
        message = wire.publicationMacMessage(3, digest)
        self.assertNotEqual(message, wire.publicationMacMessage(4, digest))
        self.assertNotEqual(message, wire.publicationMacMessage(3, crypt.sha256(b"blof")))

    def test_macKeyContext(self) -> None:
        """
        The MAC key's context differs for another pub connection (its
        challenge) and for another minion.
        """
        context = wire.publicationMacContext(b"c" * 32, "m1")
        self.assertNotEqual(context, wire.publicationMacContext(b"d" * 32, "m1"))
        self.assertNotEqual(context, wire.publicationMacContext(b"c" * 32, "m2"))


class FileTests(SynchronousTestCase):
    """
    Writing private files and loading key pairs from disk.
    """

    def setUp(self) -> None:
        """
        Make a fresh directory, and make "generating" a key hand out the
        module's key (generation is slow and tested above).
        """
        self.dir = self.mktemp()
        os.makedirs(self.dir)
        self.generated: list[int] = []

        def generate(keysize: int = 2048) -> rsa.RSAPrivateKey:
            self.generated.append(keysize)
            return _KEY

        self.patch(crypt, "generatePrivateKey", generate)

    def test_writePrivateFileMode(self) -> None:
        """
        L{crypt.writePrivateFile} creates the file with mode 0600 and leaves
        no temporary file behind.
        """
        path = os.path.join(self.dir, "secret")
        crypt.writePrivateFile(path, b"data")
        with open(path, "rb") as f:
            self.assertEqual(f.read(), b"data")
        self.assertEqual(stat.S_IMODE(os.stat(path).st_mode), 0o600)
        self.assertEqual(os.listdir(self.dir), ["secret"])

    def test_writePrivateFileReplacesWideMode(self) -> None:
        """
        Writing over an existing world-readable file leaves a 0600 file.
        """
        path = os.path.join(self.dir, "secret")
        with open(path, "wb") as f:
            f.write(b"old")
        os.chmod(path, 0o644)
        crypt.writePrivateFile(path, b"new")
        self.assertEqual(stat.S_IMODE(os.stat(path).st_mode), 0o600)
        with open(path, "rb") as f:
            self.assertEqual(f.read(), b"new")

    def test_writePrivateFileSymlink(self) -> None:
        """
        A symlink planted at the target is replaced by a regular file; the
        file it pointed to is untouched.
        """
        victim = os.path.join(self.dir, "victim")
        with open(victim, "wb") as f:
            f.write(b"original")
        os.chmod(victim, 0o644)
        path = os.path.join(self.dir, "secret")
        os.symlink(victim, path)
        crypt.writePrivateFile(path, b"data")
        self.assertFalse(os.path.islink(path))
        with open(path, "rb") as f:
            self.assertEqual(f.read(), b"data")
        with open(victim, "rb") as f:
            self.assertEqual(f.read(), b"original")
        self.assertEqual(stat.S_IMODE(os.stat(victim).st_mode), 0o644)

    def test_loadOrCreateKeyPair(self) -> None:
        """
        The first call creates C{name.pem} (mode 0600) and C{name.pub}; the
        second loads the same key from them.
        """
        key, pubPem = crypt.loadOrCreateKeyPair(self.dir, "minion")
        pemPath = os.path.join(self.dir, "minion.pem")
        pubPath = os.path.join(self.dir, "minion.pub")
        self.assertEqual(stat.S_IMODE(os.stat(pemPath).st_mode), 0o600)
        with open(pubPath, "rb") as f:
            self.assertEqual(f.read(), pubPem)
        self.assertEqual(
            crypt.loadPublicKey(pubPem).public_numbers(), key.public_key().public_numbers()
        )
        self.assertEqual(sorted(os.listdir(self.dir)), ["minion.pem", "minion.pub"])

        again, againPub = crypt.loadOrCreateKeyPair(self.dir, "minion")
        self.assertEqual(again.private_numbers(), key.private_numbers())
        self.assertEqual(againPub, pubPem)
        self.assertEqual(self.generated, [2048])

    def test_loadOrCreateKeyPairRewritesPub(self) -> None:
        """
        A missing C{name.pub} is written again from the existing private key.
        """
        key, pubPem = crypt.loadOrCreateKeyPair(self.dir, "master")
        os.unlink(os.path.join(self.dir, "master.pub"))
        again, againPub = crypt.loadOrCreateKeyPair(self.dir, "master")
        self.assertEqual(againPub, pubPem)
        with open(os.path.join(self.dir, "master.pub"), "rb") as f:
            self.assertEqual(f.read(), pubPem)

    def test_loadOrCreateKeyPairBadPem(self) -> None:
        """
        A corrupt private key file raises L{CryptError} rather than being
        replaced by a new key.
        """
        pemPath = os.path.join(self.dir, "minion.pem")
        with open(pemPath, "wb") as f:
            f.write(b"corrupt")
        self.assertRaises(CryptError, crypt.loadOrCreateKeyPair, self.dir, "minion")
        with open(pemPath, "rb") as f:
            self.assertEqual(f.read(), b"corrupt")

    def _recordValidation(self) -> list[bool]:
        """
        Record the C{unsafe_skip_rsa_key_validation} argument of every
        private key load, which still loads the key.
        """
        seen: list[bool] = []
        real = serialization.load_pem_private_key

        def load(data: bytes, password: object, **kwargs: object) -> object:
            seen.append(bool(kwargs.get("unsafe_skip_rsa_key_validation")))
            return real(data, password, **kwargs)  # type: ignore[arg-type]

        self.patch(crypt.serialization, "load_pem_private_key", load)
        return seen

    def test_loadOwnPrivateKeySkipsCheckForOwnFile(self) -> None:
        """
        L{crypt.loadOwnPrivateKey} loads a key file of this process's user
        with mode 0600 without the RSA consistency check, and it is the key
        that was written.
        """
        path = os.path.join(self.dir, "minion.pem")
        crypt.writePrivateFile(path, crypt.privateKeyToPem(_KEY))
        seen = self._recordValidation()
        key = crypt.loadOwnPrivateKey(path)
        self.assertEqual(seen, [True])
        self.assertEqual(key.private_numbers(), _KEY.private_numbers())

    def test_loadOwnPrivateKeyChecksReadableFile(self) -> None:
        """
        A key file that its group or others may read or write is loaded with
        the RSA consistency check.
        """
        path = os.path.join(self.dir, "minion.pem")
        crypt.writePrivateFile(path, crypt.privateKeyToPem(_KEY))
        seen = self._recordValidation()
        for mode in (0o640, 0o604, 0o620):
            os.chmod(path, mode)
            crypt.loadOwnPrivateKey(path)
        self.assertEqual(seen, [False, False, False])

    def test_loadOwnPrivateKeyChecksOtherUsersFile(self) -> None:
        """
        A key file owned by another user than this process's effective user
        is loaded with the RSA consistency check, even with mode 0600.
        """
        path = os.path.join(self.dir, "minion.pem")
        crypt.writePrivateFile(path, crypt.privateKeyToPem(_KEY))
        owner = os.stat(path).st_uid
        self.patch(crypt.os, "geteuid", lambda: owner + 1)
        seen = self._recordValidation()
        crypt.loadOwnPrivateKey(path)
        self.assertEqual(seen, [False])

    def test_loadOwnPrivateKeyRefusesGarbage(self) -> None:
        """
        An own key file that holds no private key still raises
        L{CryptError}.
        """
        path = os.path.join(self.dir, "minion.pem")
        crypt.writePrivateFile(path, b"not a key")
        self.assertRaises(CryptError, crypt.loadOwnPrivateKey, path)

    def test_loadOrCreateKeyPairSkipsCheckForItsKey(self) -> None:
        """
        L{crypt.loadOrCreateKeyPair} loads the key file it wrote (0600, this
        user's) without the RSA consistency check.
        """
        crypt.loadOrCreateKeyPair(self.dir, "minion")
        seen = self._recordValidation()
        crypt.loadOrCreateKeyPair(self.dir, "minion")
        self.assertEqual(seen, [True])


class AtomicWriteTests(SynchronousTestCase):
    """
    L{salttwist.files.atomicWrite}, which every atomic file write uses.
    """

    def test_modeWhateverTheUmask(self) -> None:
        """
        The file gets exactly the mode asked for, even under umask 077, and
        no temporary file is left behind.
        """
        from salttwist.files import atomicWrite

        directory = os.path.abspath(self.mktemp())
        os.makedirs(directory)
        path = os.path.join(directory, "f")
        old = os.umask(0o077)
        try:
            atomicWrite(path, b"x" * 100_000, 0o644)
        finally:
            os.umask(old)
        self.assertEqual(os.stat(path).st_mode & 0o777, 0o644)
        with open(path, "rb") as f:
            self.assertEqual(f.read(), b"x" * 100_000)
        self.assertEqual(os.listdir(directory), ["f"])
