# -*- test-case-name: tests.test_crypt,tests.test_session -*-
"""
Symmetric crypto: AES-256-GCM with a fresh random nonce per message,
HMAC-SHA256 for proofs of a shared secret, and key derivation.

The RSA half is in L{salttwist.crypt}, which re-exports all of this; a
command that only logs in to the master and opens a session (the
C{salttwist} command's direct client) imports this module alone and is
spared the asymmetric half of C{cryptography}.
"""

from __future__ import annotations

import os

# Neither hashlib nor hmac: both load the system's libcrypto (through
# _hashlib), 3.7 MB of every minion, while cryptography brings its own
# OpenSSL anyway. The constant-time comparison is the one hmac itself
# falls back to without _hashlib.
from _operator import _compare_digest
from dataclasses import dataclass, field

from cryptography.exceptions import InvalidTag
from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives import hmac as _hmac
from cryptography.hazmat.primitives.ciphers.aead import AESGCM

__all__ = [
    "AES_KEY_BYTES",
    "NONCE_BYTES",
    "TAG_BYTES",
    "AesCipher",
    "CryptError",
    "HmacSha256",
    "deriveKey",
    "hmacEqual",
    "hmacSha256",
    "newAesKey",
    "sha256",
]

NONCE_BYTES = 12
#: The GCM tag that ends every ciphertext.
TAG_BYTES = 16
AES_KEY_BYTES = 32
_SHA256 = hashes.SHA256()


class CryptError(ValueError):
    """
    Raised when a key, ciphertext or signature is malformed or does not verify.
    """


def newAesKey() -> bytes:
    """
    A fresh random 256-bit key.
    """
    return os.urandom(AES_KEY_BYTES)


#: A ciphertext larger than this is sliced as a view rather than copied.
BIG_CIPHERTEXT = 65536


@dataclass(frozen=True)
class AesCipher:
    """
    AES-256-GCM with a fresh random 96-bit nonce per message; the nonce is
    prepended to the ciphertext. C{aad} binds a ciphertext to its purpose so a
    blob made for one channel is refused on another.
    """

    key: bytes
    # The expanded key, made once: building an AESGCM costs several times
    # more than sealing a small message with it.
    _aead: AESGCM = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        if not isinstance(self.key, bytes) or len(self.key) != AES_KEY_BYTES:
            raise CryptError("AES key must be 32 bytes")
        object.__setattr__(self, "_aead", AESGCM(self.key))

    def encrypt(self, plaintext: bytes, aad: bytes = b"") -> bytes:
        """
        @return: nonce + ciphertext + tag.
        """
        nonce = os.urandom(NONCE_BYTES)
        return nonce + self._aead.encrypt(nonce, plaintext, aad)

    def encryptParts(self, plaintext: bytes, aad: bytes = b"") -> tuple[bytes, bytes]:
        """
        L{encrypt} in its two parts, the nonce and the ciphertext with its
        tag, which joined are what L{encrypt} returns: a big ciphertext can
        be sent after its nonce without being copied to join them.
        """
        nonce = os.urandom(NONCE_BYTES)
        return nonce, self._aead.encrypt(nonce, plaintext, aad)

    def decrypt(self, blob: bytes | memoryview, aad: bytes = b"") -> bytes:
        """
        @param blob: bytes, or a view of bytes (a big blob is not copied to
            take its nonce off; see L{BIG_CIPHERTEXT}).
        @raise CryptError: if C{blob} is short, tampered with or made with
            another key or C{aad}.
        """
        if not isinstance(blob, (bytes, memoryview)) or len(blob) < NONCE_BYTES + TAG_BYTES:
            raise CryptError("ciphertext too short")
        if len(blob) > BIG_CIPHERTEXT and isinstance(blob, bytes):
            blob = memoryview(blob)
        try:
            return self._aead.decrypt(blob[:NONCE_BYTES], blob[NONCE_BYTES:], aad)
        except InvalidTag as e:
            raise CryptError("ciphertext does not authenticate") from e


def hmacSha256(key: bytes, message: bytes) -> bytes:
    """
    HMAC-SHA256 of C{message}.
    """
    mac = _hmac.HMAC(key, _SHA256)
    mac.update(message)
    return mac.finalize()


class HmacSha256:
    """
    HMAC-SHA256 under one key, set up once: each L{mac} then costs about
    half of a L{hmacSha256} (1.8 against 3.3 us here), which counts where
    one process MACs a message for each of thousands of keys.
    """

    __slots__ = ("_keyed",)

    def __init__(self, key: bytes) -> None:
        self._keyed = _hmac.HMAC(key, _SHA256)

    def mac(self, message: bytes) -> bytes:
        """
        @return: the HMAC-SHA256 of C{message} under this key.
        """
        mac = self._keyed.copy()
        mac.update(message)
        return mac.finalize()


#: A fresh SHA-256 context that L{sha256} copies: a copy costs about half
#: of making a context (whose constructor checks its algorithm against
#: cryptography's abstract classes), and a minion hashes every publication.
_SHA256_CONTEXT = hashes.Hash(_SHA256)


def sha256(data: bytes) -> bytes:
    """
    The SHA-256 digest of C{data}.
    """
    digest = _SHA256_CONTEXT.copy()
    digest.update(data)
    return digest.finalize()


def hmacEqual(a: bytes, b: bytes) -> bool:
    """
    Constant-time comparison of two MACs.
    """
    return isinstance(a, bytes) and isinstance(b, bytes) and _compare_digest(a, b)


def deriveKey(secret: bytes, context: bytes) -> bytes:
    """
    Derive a 256-bit key bound to C{context} from C{secret} (HMAC-SHA256 as a
    PRF; both inputs are already uniformly random where we use it).
    """
    return hmacSha256(secret, b"salttwist-kdf:" + context)
