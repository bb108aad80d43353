# -*- test-case-name: tests.test_cluster_nats_auth -*-
"""
NATS's decentralised authentication, for the cluster's connection to its
broker: NKEYs (Ed25519 keys written in NATS's base32 form) and C{.creds}
files (a user's JWT and its NKEY seed).

A server with NKEY or JWT users puts a C{nonce} in its C{INFO}; the client
proves it holds the user's seed by signing that nonce, and sends in its
C{CONNECT} the signature (C{sig}, base64url without padding) with either
the user's public key (C{nkey}) or its JWT (C{jwt}, whose subject is that
public key, signed by its account).

An NKEY is C{base32(prefix bytes + 32 key bytes + CRC16)}, without padding:
the CRC is CRC-16/XMODEM of the bytes before it, little-endian. A seed
(C{S...}) has two prefix bytes: the seed marker and the kind of key it
makes (C{U}: a user, C{A}: an account, C{O}: an operator). Decoded here
with C{cryptography}'s Ed25519, which the project already needs; see
docs/cluster.md ("Credentials and TLS to the broker") for why not the
C{nkeys} package.
"""

from __future__ import annotations

import base64
import re
from dataclasses import dataclass, field

from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey, Ed25519PublicKey

#: The first prefix byte of a seed (base32: C{S}).
PREFIX_SEED = 18 << 3
#: The prefix bytes of the kinds of public keys (base32: their letter).
PREFIX_OPERATOR = 14 << 3
PREFIX_ACCOUNT = 0
PREFIX_USER = 20 << 3
PREFIX_SERVER = 13 << 3
PREFIX_CLUSTER = 2 << 3
#: The kind named by each public prefix byte, and its letter, for messages.
LETTERS = {
    PREFIX_OPERATOR: "O",
    PREFIX_ACCOUNT: "A",
    PREFIX_USER: "U",
    PREFIX_SERVER: "N",
    PREFIX_CLUSTER: "C",
}
KINDS = {
    PREFIX_OPERATOR: "operator",
    PREFIX_ACCOUNT: "account",
    PREFIX_USER: "user",
    PREFIX_SERVER: "server",
    PREFIX_CLUSTER: "cluster",
}


class NkeyError(ValueError):
    """
    An NKEY, a seed or a C{.creds} file is not usable; the message says why
    (never the seed itself).
    """


def crc16(data: bytes) -> int:
    """
    @return: CRC-16/XMODEM of C{data} (polynomial 0x1021, initial value 0),
        the checksum NKEYs end with.
    """
    crc = 0
    for byte in data:
        crc ^= byte << 8
        for _ in range(8):
            crc = ((crc << 1) ^ 0x1021) if crc & 0x8000 else crc << 1
            crc &= 0xFFFF
    return crc


def _encode(raw: bytes) -> str:
    raw += crc16(raw).to_bytes(2, "little")
    return base64.b32encode(raw).decode("ascii").rstrip("=")


def _decode(text: str, what: str) -> bytes:
    text = text.strip()
    try:
        raw = base64.b32decode(text + "=" * (-len(text) % 8))
    except ValueError:
        raise NkeyError(f"{what} is not an NKEY (base32)") from None
    if len(raw) < 4:
        raise NkeyError(f"{what} is not an NKEY (too short)")
    body, checksum = raw[:-2], int.from_bytes(raw[-2:], "little")
    if crc16(body) != checksum:
        raise NkeyError(f"{what} is not an NKEY: its checksum does not match (a typing error?)")
    return body


def encodePublicKey(prefix: int, key: bytes) -> str:
    """
    @param prefix: L{PREFIX_USER}, L{PREFIX_ACCOUNT}, ...
    @param key: the 32 bytes of an Ed25519 public key.
    @return: its NKEY (C{U...}, C{A...}, ...).
    """
    return _encode(bytes([prefix]) + key)


def encodeSeed(prefix: int, seed: bytes) -> str:
    """
    @param prefix: the kind of key the seed makes (L{PREFIX_USER}, ...).
    @param seed: the 32 bytes of an Ed25519 private key.
    @return: its NKEY seed (C{SU...}, C{SA...}, ...).
    """
    first = PREFIX_SEED | (prefix >> 5)
    second = (prefix & 31) << 3
    return _encode(bytes([first, second]) + seed)


def decodePublicKey(text: str) -> tuple[int, bytes]:
    """
    @return: the prefix byte and the 32 key bytes of a public NKEY.
    @raise NkeyError: it is not one.
    """
    body = _decode(text, "the public key")
    if len(body) != 33 or body[0] not in KINDS:
        raise NkeyError("the public key is not an NKEY of a user, account or operator")
    return body[0], body[1:]


@dataclass(frozen=True)
class NkeyPair:
    """
    An NKEY seed's key pair.

    @ivar prefix: the kind of key (L{PREFIX_USER}, ...).
    @ivar publicKey: the public NKEY (C{U...} for a user).
    """

    prefix: int
    publicKey: str
    _private: Ed25519PrivateKey = field(repr=False, compare=False)

    @classmethod
    def fromSeed(cls, seed: str, expected: int | None = PREFIX_USER) -> NkeyPair:
        """
        Decode an NKEY seed (C{SU...}).

        @param expected: the kind of key the seed must make (L{None}: any).
        @raise NkeyError: not a seed, a bad checksum, or a seed of another
            kind; the message never holds the seed.
        """
        body = _decode(seed, "the seed")
        if len(body) == 33 and body[0] in KINDS:
            raise NkeyError(f"that is a public {KINDS[body[0]]} key, not a seed (S...)")
        if len(body) != 34:
            raise NkeyError("the seed is not an NKEY seed (wrong length)")
        first = body[0] & 0xF8
        prefix = ((body[0] & 0x07) << 5) | ((body[1] & 0xF8) >> 3)
        if first != PREFIX_SEED:
            raise NkeyError("the seed is not an NKEY seed (S...)")
        if prefix not in KINDS:
            raise NkeyError("the seed is for an unknown kind of key")
        if expected is not None and prefix != expected:
            raise NkeyError(
                f"the seed is an {KINDS[prefix]} seed (S{LETTERS[prefix]}...), not a "
                f"{KINDS[expected]} seed (S{LETTERS[expected]}...)"
            )
        private = Ed25519PrivateKey.from_private_bytes(body[2:])
        from cryptography.hazmat.primitives import serialization

        public = private.public_key().public_bytes(
            serialization.Encoding.Raw, serialization.PublicFormat.Raw
        )
        return cls(prefix, encodePublicKey(prefix, public), private)

    def sign(self, data: bytes) -> bytes:
        """
        @return: the Ed25519 signature of C{data}.
        """
        return self._private.sign(data)

    def signNonce(self, nonce: str) -> str:
        """
        @return: the C{CONNECT}'s C{sig} for a server's C{nonce}: the
            signature of its UTF-8 bytes, base64url without padding.
        """
        return base64.urlsafe_b64encode(self.sign(nonce.encode())).rstrip(b"=").decode("ascii")


def verifyNonce(publicKey: str, nonce: str, sig: str) -> bool:
    """
    @return: whether C{sig} (base64url, padding optional) is the signature
        of C{nonce} by C{publicKey}, as the server checks it.
    """
    from cryptography.exceptions import InvalidSignature

    _, key = decodePublicKey(publicKey)
    try:
        raw = base64.urlsafe_b64decode(sig + "=" * (-len(sig) % 4))
        Ed25519PublicKey.from_public_bytes(key).verify(raw, nonce.encode())
    except (InvalidSignature, ValueError):
        return False
    return True


#: A block of a C{.creds} file: a C{-----BEGIN ...-----} line, the value,
#: and a C{------END ...------} line (NATS's tools write 3 or more dashes).
_CREDS_BLOCK = re.compile(
    r"^\s*-{3,}[^\n]*-{3,}\r?\n\s*([A-Za-z0-9_.=-]+)\s*\r?\n\s*-{3,}[^\n]*-{3,}\s*$",
    re.MULTILINE,
)


def parseCreds(text: str) -> tuple[str, NkeyPair]:
    """
    Read a C{.creds} file (as C{nsc} writes it): the user's JWT, then its
    seed, each between dashed lines.

    @return: the JWT and the seed's key pair.
    @raise NkeyError: it holds no JWT or no user seed, or the JWT is not
        for that seed's key.
    """
    blocks = _CREDS_BLOCK.findall(text)
    if len(blocks) < 2:
        raise NkeyError("not a .creds file (a JWT block, then a user NKEY seed block)")
    jwt, seed = blocks[0], blocks[1]
    if jwt.count(".") != 2:
        raise NkeyError("the .creds file's first block is not a JWT")
    pair = NkeyPair.fromSeed(seed)
    subject = jwtClaims(jwt).get("sub")
    if subject != pair.publicKey:
        raise NkeyError(
            f"the .creds file's JWT is for {subject}, not for its seed's key {pair.publicKey}"
        )
    return jwt, pair


def jwtClaims(jwt: str) -> dict[str, object]:
    """
    @return: a JWT's claims, not checked (the server checks them).
    @raise NkeyError: it is not a JWT.
    """
    import json

    try:
        payload = jwt.split(".")[1]
        claims = json.loads(base64.urlsafe_b64decode(payload + "=" * (-len(payload) % 4)))
    except (IndexError, ValueError):
        raise NkeyError("not a JWT") from None
    if not isinstance(claims, dict):
        raise NkeyError("not a JWT")
    return claims


@dataclass(frozen=True)
class NkeyAuth:
    """
    How the client proves who it is to a server with NKEY or JWT users.

    @ivar pair: the user's key pair.
    @ivar jwt: the user's JWT (from a C{.creds} file), or L{None} to log in
        with the bare public key (an C{nkey} user of the server's config).
    @ivar source: the file it came from, for messages.
    """

    pair: NkeyPair = field(repr=False)
    jwt: str | None = field(default=None, repr=False)
    source: str = ""

    def connectFields(self, nonce: str) -> dict[str, str]:
        """
        @return: the C{CONNECT} fields answering the server's C{nonce}:
            C{sig} and C{nkey}, or C{sig} and C{jwt}.
        """
        fields = {"sig": self.pair.signNonce(nonce)}
        if self.jwt is not None:
            fields["jwt"] = self.jwt
        else:
            fields["nkey"] = self.pair.publicKey
        return fields


def loadNkeyAuth(seedFile: str | None = None, credsFile: str | None = None) -> NkeyAuth | None:
    """
    Read C{cluster_broker_nkey} (a file holding a user seed, C{SU...}) or
    C{cluster_broker_creds} (a C{.creds} file). Blocking: call it at start.

    @return: the L{NkeyAuth}, or L{None} if neither is given.
    @raise NkeyError: both are given, a file cannot be read, or it is not
        what it should be (naming the file, never showing the seed).
    """
    if seedFile and credsFile:
        raise NkeyError("give cluster_broker_nkey or cluster_broker_creds, not both")
    path = seedFile or credsFile
    if not path:
        return None
    option = "cluster_broker_nkey" if seedFile else "cluster_broker_creds"
    try:
        with open(path, encoding="utf-8") as f:
            text = f.read()
    except (OSError, UnicodeDecodeError) as e:
        raise NkeyError(f"{option} {path} cannot be read: {getattr(e, 'strerror', e)}") from e
    try:
        if credsFile:
            jwt, pair = parseCreds(text)
            return NkeyAuth(pair, jwt, path)
        seeds = [line.strip() for line in text.splitlines() if line.strip().startswith("S")]
        if len(seeds) != 1:
            raise NkeyError("it must hold one NKEY seed (a line SU...)")
        return NkeyAuth(NkeyPair.fromSeed(seeds[0]), None, path)
    except NkeyError as e:
        raise NkeyError(f"{option} {path}: {e}") from None
