# -*- test-case-name: tests.test_crypt -*-
"""
Keys, ciphers and signatures.

RSA keys (OAEP-SHA256 to encrypt, PSS-SHA256 to sign; never PKCS#1 v1.5),
AES-256-GCM with a fresh random nonce per message, HMAC-SHA256 for proofs of
a shared secret. Every function here is CPU work: callers on the reactor
thread hand the expensive ones (key generation, private-key operations) to a
thread or worker.
"""

from __future__ import annotations

import base64
import functools
import os
import re

from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import padding, rsa

from salttwist.files import atomicWrite

# The symmetric half lives in its own module (a command that only opens a
# session need not import the RSA half); it is part of this module's API.
from salttwist.symmetric import AES_KEY_BYTES as AES_KEY_BYTES
from salttwist.symmetric import NONCE_BYTES as NONCE_BYTES
from salttwist.symmetric import AesCipher as AesCipher
from salttwist.symmetric import CryptError as CryptError
from salttwist.symmetric import HmacSha256 as HmacSha256
from salttwist.symmetric import deriveKey as deriveKey
from salttwist.symmetric import hmacEqual as hmacEqual
from salttwist.symmetric import hmacSha256 as hmacSha256
from salttwist.symmetric import newAesKey as newAesKey
from salttwist.symmetric import sha256 as sha256

MIN_RSA_BITS = 2048
MAX_RSA_BITS = 8192

_OAEP = padding.OAEP(
    mgf=padding.MGF1(algorithm=hashes.SHA256()), algorithm=hashes.SHA256(), label=None
)
_PSS = padding.PSS(mgf=padding.MGF1(hashes.SHA256()), salt_length=padding.PSS.DIGEST_LENGTH)
#: One instance for every signature (a minion verifies one per job).
_SHA256 = hashes.SHA256()


def generatePrivateKey(keysize: int = 2048) -> rsa.RSAPrivateKey:
    """
    Make a new RSA private key with public exponent 65537.
    """
    if not MIN_RSA_BITS <= keysize <= MAX_RSA_BITS:
        raise CryptError(f"keysize must be between {MIN_RSA_BITS} and {MAX_RSA_BITS}")
    return rsa.generate_private_key(public_exponent=65537, key_size=keysize)


def privateKeyToPem(key: rsa.RSAPrivateKey) -> bytes:
    """
    Serialise a private key as unencrypted PKCS#8 PEM.
    """
    return key.private_bytes(
        serialization.Encoding.PEM,
        serialization.PrivateFormat.PKCS8,
        serialization.NoEncryption(),
    )


def publicKeyToPem(key: rsa.RSAPublicKey) -> bytes:
    """
    Serialise a public key as SubjectPublicKeyInfo PEM.
    """
    return key.public_bytes(
        serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo
    )


def loadPrivateKey(pem: bytes, ownKey: bool = False) -> rsa.RSAPrivateKey:
    """
    Parse a PEM private key.

    @param ownKey: the key comes from a file only this process's user can
        write (see L{loadOwnPrivateKey}): skip the RSA consistency check.
    @raise CryptError: if it is not an RSA private key.
    """
    try:
        key = serialization.load_pem_private_key(
            pem, password=None, unsafe_skip_rsa_key_validation=ownKey
        )
    except (ValueError, TypeError) as e:
        raise CryptError(f"not a PEM private key: {e}") from e
    if not isinstance(key, rsa.RSAPrivateKey):
        raise CryptError("not an RSA private key")
    return key


#: Parsed public keys kept by L{loadPublicKey} and L{canonicalPublicPem},
#: by their PEM bytes: a minion meets one master key at every
#: authentication (its reply and the pinned copy), and a process of
#: simulated minions meets it once per minion.
PUBLIC_KEY_CACHE = 64


def loadPublicKey(pem: bytes) -> rsa.RSAPublicKey:
    """
    Parse and vet a PEM public key. The last L{PUBLIC_KEY_CACHE} keys that
    passed are kept (a key object is immutable); a refused one never is.

    @raise CryptError: if it is malformed, not exactly one public key block
        with at most whitespace around it, not RSA, smaller than
        L{MIN_RSA_BITS}, larger than L{MAX_RSA_BITS}, or has a public exponent
        other than 65537.
    """
    return _parsePublicKey(_publicPemBytes(pem))


def _publicPemBytes(pem: object) -> bytes:
    """
    @return: C{pem} as plain bytes (a cache key), if it may be a public key.
    @raise CryptError: it is not bytes, or over 16 KiB (refused unparsed).
    """
    if not isinstance(pem, bytes) or len(pem) > 16384:
        raise CryptError("public key must be PEM bytes of at most 16 KiB")
    return bytes(pem)


#: Exactly one public key block (SubjectPublicKeyInfo, or PKCS#1 "RSA
#: PUBLIC KEY"), surrounded by whitespace at most: no second block, no
#: headers, no text before or after, which the parser would ignore.
_ONE_PUBLIC_PEM = re.compile(
    rb"\s*-----BEGIN (?P<label>(?:RSA )?PUBLIC KEY)-----\r?\n"
    rb"[A-Za-z0-9+/=\r\n\t ]+"
    rb"-----END (?P=label)-----\s*"
)


@functools.lru_cache(maxsize=PUBLIC_KEY_CACHE)
def _parsePublicKey(pem: bytes) -> rsa.RSAPublicKey:
    if not _ONE_PUBLIC_PEM.fullmatch(pem):
        raise CryptError(
            "not a PEM public key: expected exactly one PUBLIC KEY block, "
            "with nothing but whitespace around it"
        )
    try:
        key = serialization.load_pem_public_key(pem)
    except (ValueError, TypeError) as e:
        raise CryptError(f"not a PEM public key: {e}") from e
    if not isinstance(key, rsa.RSAPublicKey):
        raise CryptError("not an RSA public key")
    if not MIN_RSA_BITS <= key.key_size <= MAX_RSA_BITS:
        raise CryptError(
            f"RSA key of {key.key_size} bits is outside {MIN_RSA_BITS}..{MAX_RSA_BITS}"
        )
    if key.public_numbers().e != 65537:
        raise CryptError("RSA public exponent must be 65537")
    return key


def canonicalPublicPem(pem: bytes) -> bytes:
    """
    Parse, vet and re-serialise a public key, so that two encodings of one key
    compare equal and nothing but the key itself is ever stored. Kept as
    L{loadPublicKey} keeps keys.
    """
    return _canonicalPem(_publicPemBytes(pem))


@functools.lru_cache(maxsize=PUBLIC_KEY_CACHE)
def _canonicalPem(pem: bytes) -> bytes:
    return publicKeyToPem(_parsePublicKey(pem))


def fingerprint(pem: bytes) -> str:
    """
    The SHA-256 fingerprint of a public key, as Salt shows it: the digest of
    the DER body of the PEM, in colon-separated lowercase hex pairs.
    """
    lines = [
        line.strip()
        for line in pem.strip().splitlines()
        if line.strip() and not line.startswith(b"-----")
    ]
    der = base64.b64decode(b"".join(lines))
    digest = sha256(der).hex()
    return ":".join(digest[i : i + 2] for i in range(0, len(digest), 2))


def rsaEncrypt(publicKey: rsa.RSAPublicKey, plaintext: bytes) -> bytes:
    """
    Encrypt a short secret to C{publicKey} with RSA-OAEP-SHA256.
    """
    return publicKey.encrypt(plaintext, _OAEP)


def rsaDecrypt(privateKey: rsa.RSAPrivateKey, ciphertext: bytes) -> bytes:
    """
    Decrypt an RSA-OAEP-SHA256 ciphertext.

    @raise CryptError: if it does not decrypt.
    """
    try:
        return privateKey.decrypt(ciphertext, _OAEP)
    except (ValueError, TypeError) as e:
        raise CryptError("RSA decryption failed") from e


def sign(privateKey: rsa.RSAPrivateKey, message: bytes) -> bytes:
    """
    Sign C{message} with RSA-PSS-SHA256.
    """
    return privateKey.sign(message, _PSS, _SHA256)


def verify(publicKey: rsa.RSAPublicKey, signature: bytes, message: bytes) -> None:
    """
    Check an RSA-PSS-SHA256 signature.

    @raise CryptError: if it does not verify.
    """
    if not isinstance(signature, bytes) or not isinstance(message, bytes):
        raise CryptError("signature and message must be bytes")
    try:
        publicKey.verify(signature, message, _PSS, _SHA256)
    except (InvalidSignature, ValueError, TypeError) as e:
        raise CryptError("bad signature") from e


def writePrivateFile(path: str, data: bytes, durable: bool = True) -> None:
    """
    Create C{path} with mode 0600 and write C{data}, never following a
    symlink and never widening the mode of an existing file (see
    L{salttwist.files.atomicWrite}).

    @param durable: fsync before the rename; a cache that is rebuilt anyway
        can skip that disk wait.
    """
    atomicWrite(path, data, 0o600, durable)


def loadOwnPrivateKey(path: str) -> rsa.RSAPrivateKey:
    """
    Load a daemon's own private key from C{path}.

    The RSA consistency check (about 70 ms for a 2048-bit key, more for
    larger ones) guards against a malformed or maliciously crafted key; it
    is skipped only when the file belongs to this process's effective user
    and neither its group nor others may read or write it (mode 0600 or
    stricter, as L{writePrivateFile} makes it). Such a key was written by
    this user, normally by L{loadOrCreateKeyPair} itself: whoever could plant
    a bad key there could as well replace it with any key, so the check would
    protect against nothing. Any other file is loaded with the full check.

    @raise CryptError: if it is not an RSA private key.
    """
    with open(path, "rb") as f:
        info = os.fstat(f.fileno())
        pem = f.read()
    owned = info.st_uid == os.geteuid() and not info.st_mode & 0o077
    return loadPrivateKey(pem, ownKey=owned)


def loadOrCreateKeyPair(
    pkiDir: str, name: str, keysize: int = 2048
) -> tuple[rsa.RSAPrivateKey, bytes]:
    """
    Load C{pkiDir/name.pem}, creating it (mode 0600) and C{name.pub} if it
    does not exist. Blocking: call it before the reactor runs or in a thread.

    @return: the private key and the public key PEM.
    """
    privPath = os.path.join(pkiDir, name + ".pem")
    pubPath = os.path.join(pkiDir, name + ".pub")
    if os.path.exists(privPath):
        key = loadOwnPrivateKey(privPath)
    else:
        key = generatePrivateKey(keysize)
        writePrivateFile(privPath, privateKeyToPem(key))
    pubPem = publicKeyToPem(key.public_key())
    if not os.path.exists(pubPath):
        atomicWrite(pubPath, pubPem, 0o644)
    return key, pubPem
