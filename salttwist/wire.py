# -*- test-case-name: tests.test_master_auth -*-
"""
The exact bytes that are signed or MACed during authentication and on the
pub channel, in one place so the master and its clients cannot disagree on
them.
"""

from __future__ import annotations

from collections.abc import Callable

from salttwist import serial
from salttwist.symmetric import AES_KEY_BYTES
from salttwist.symmetric import sha256 as _sha256


def authRequestMessage(
    challenge: bytes, nonce: bytes, minionId: str, pubPem: bytes, transient: bool = False
) -> bytes:
    """
    What a minion signs with its private key to prove it holds it: bound to
    the master's per-connection challenge, so it cannot be replayed.

    @param transient: the request asks for a transient session (a
        C{salttwist-call} beside the minion daemon); the flag is signed, so
        nobody on the path can turn one kind of session into the other.
    """
    fields: list[object] = ["salttwist-auth-request", challenge, nonce, minionId, pubPem]
    if transient:
        fields.append("transient")
    return serial.dumps(fields)


def authReplyMessage(
    challenge: bytes,
    nonce: bytes,
    minionId: str,
    keysCiphertext: bytes,
    kid: int,
    publishPort: int,
) -> bytes:
    """
    What the master signs in an accepting auth reply: bound to the minion's
    nonce, so an old reply cannot be replayed to it. C{keysCiphertext} is
    one RSA-OAEP ciphertext of the publication key followed by the session
    key (L{packReplyKeys}).
    """
    return serial.dumps(
        [
            "salttwist-auth-reply",
            challenge,
            nonce,
            minionId,
            keysCiphertext,
            kid,
            publishPort,
        ]
    )


def packReplyKeys(publicationKey: bytes, sessionKey: bytes) -> bytes:
    """
    The plaintext of an auth reply's C{keys}: both 32-byte AES keys in one
    RSA-OAEP block (190 bytes fit in one with a 2048-bit key), so the minion
    spends one RSA decryption on them, not two.
    """
    if len(publicationKey) != AES_KEY_BYTES or len(sessionKey) != AES_KEY_BYTES:
        raise ValueError("auth reply keys must be 32 bytes each")
    return publicationKey + sessionKey


def unpackReplyKeys(plaintext: bytes) -> tuple[bytes, bytes]:
    """
    @return: the publication key and the session key of L{packReplyKeys}.
    @raise ValueError: the plaintext is not two 32-byte keys.
    """
    if len(plaintext) != 2 * AES_KEY_BYTES:
        raise ValueError(f"auth reply keys are {len(plaintext)} bytes, not 64")
    return plaintext[:AES_KEY_BYTES], plaintext[AES_KEY_BYTES:]


#: The most levels of a batch signature's tree (L{authReplyTree}): 2**16
#: replies under one signature at most; a longer path is refused unread.
MAX_BATCH_DEPTH = 16
_LEAF = b"\x00"
_NODE = b"\x01"
_LEFT = 0
_RIGHT = 1


def authReplyBatchMessage(root: bytes) -> bytes:
    """
    What the master signs once for several accepting auth replies: the
    root of a hash tree (L{authReplyTree}) over their L{authReplyMessage}s.
    Its own prefix, so it is never the same bytes as any single reply's
    message.
    """
    return serial.dumps(["salttwist-auth-reply-batch", root])


def authReplyTree(messages: list[bytes]) -> tuple[bytes, list[list[bytes]]]:
    """
    A hash tree over several L{authReplyMessage}s, so that one signature
    over its root (L{authReplyBatchMessage}) vouches for each of them: a
    leaf is the SHA-256 of C{0x00 + message}, a node the SHA-256 of
    C{0x01 + left + right} (the prefixes keep a leaf from passing for a
    node, as in RFC 6962); a node without a sibling goes up a level as it
    is.

    @return: the root and, for each message, its path: each step one byte
        saying on which side the sibling is (0: left, 1: right) followed by
        the sibling's 32-byte hash, from the leaf up (see
        L{authReplyBatchRoot}).
    @raise ValueError: if there are no messages, or more than
        2 ** L{MAX_BATCH_DEPTH}.
    """
    if not messages or len(messages) > 1 << MAX_BATCH_DEPTH:
        raise ValueError(f"cannot make a batch tree of {len(messages)} replies")
    level = [_sha256(_LEAF + m) for m in messages]
    # Which node of the current level each message's path has reached.
    positions = list(range(len(messages)))
    paths: list[list[bytes]] = [[] for _ in messages]
    while len(level) > 1:
        for i, at in enumerate(positions):
            sibling = at ^ 1
            if sibling < len(level):
                side = _LEFT if sibling < at else _RIGHT
                paths[i].append(bytes([side]) + level[sibling])
            positions[i] = at // 2
        level = [
            _sha256(_NODE + level[j] + level[j + 1]) if j + 1 < len(level) else level[j]
            for j in range(0, len(level), 2)
        ]
    return level[0], paths


def authReplyBatchRoot(message: bytes, path: object) -> bytes:
    """
    The root a batched reply's path leads to from its message (what the
    minion checks the master's signature against, through
    L{authReplyBatchMessage}).

    @raise ValueError: if the path is malformed or longer than
        L{MAX_BATCH_DEPTH} steps.
    """
    if not isinstance(path, list) or len(path) > MAX_BATCH_DEPTH:
        raise ValueError("a batch path must be a list of at most 16 steps")
    node = _sha256(_LEAF + message)
    for step in path:
        if not isinstance(step, bytes) or len(step) != 33 or step[0] not in (_LEFT, _RIGHT):
            raise ValueError("malformed batch path step")
        sibling = step[1:]
        if step[0] == _LEFT:
            node = _sha256(_NODE + sibling + node)
        else:
            node = _sha256(_NODE + node + sibling)
    return node


def clientAuthMessage(challenge: bytes, nonce: bytes, user: str | None = None) -> bytes:
    """
    What the local client MACs with the root key or a publisher_acl user's
    key.

    @param user: the user the client says it runs as, when it sends one:
        MACed with the rest, so nobody on the path can change it.
    """
    fields: list[object] = ["salttwist-client-auth", challenge, nonce]
    if user is not None:
        fields.append(user)
    return serial.dumps(fields)


def clientSessionContext(challenge: bytes, nonce: bytes) -> bytes:
    """
    The context the local client's session key is derived for.
    """
    return serial.dumps(["salttwist-client-session", challenge, nonce])


def pubSubscribeMessage(challenge: bytes, minionId: str) -> bytes:
    """
    What a minion MACs with its pub token to subscribe on the pub channel.
    """
    return serial.dumps(["salttwist-pub-subscribe", challenge, minionId])


def pubSubscribedMessage(challenge: bytes, minionId: str, masterTime: float) -> bytes:
    """
    What the master MACs with the minion's pub token when it confirms a
    subscription: its own clock at that moment, so the minion can refuse
    publications made before it subscribed (replays after a restart).
    """
    return serial.dumps(["salttwist-pub-subscribed", challenge, minionId, masterTime])


#: The context the pub-channel token is derived from the session key for.
PUB_TOKEN_CONTEXT = b"pub-subscribe"


#: The context the key wrapping a rotated publication key is derived from the
#: session key for.
ROTATE_CONTEXT = b"pub-rotate"


def rotationAad(kid: int) -> bytes:
    """
    The associated data of the frame carrying publication key C{kid} to one
    minion.
    """
    return b"salttwist-rotate:" + kid.to_bytes(8, "big")


#: How long a publication's MAC is (HMAC-SHA256).
PUBLICATION_MAC_BYTES = 32


def publicationMacContext(challenge: bytes, minionId: str) -> bytes:
    """
    The context a subscription's publication MAC key is derived from its
    pub token for: bound to the pub connection's challenge, so the key of
    one subscription authenticates nothing on another (a publication
    recorded before a minion restarted or reconnected is refused).
    """
    return serial.dumps(["salttwist-pub-mac", challenge, minionId])


def publicationMacMessage(kid: int, blobDigest: bytes) -> bytes:
    """
    What the master MACs for each subscriber of a publication: the key
    generation and the SHA-256 of the sealed blob (hashed once, however
    many subscribers there are).
    """
    return b"salttwist-pub-mac:" + kid.to_bytes(8, "big") + blobDigest


def publicationFramePrefix(blob: bytes, kid: int) -> bytes:
    """
    The encoded publication frame C{{"pub": blob, "kid": kid, "mac": m}}
    without its last L{PUBLICATION_MAC_BYTES} bytes, which are C{m}'s own
    (msgpack writes a 32-byte binary as its two-byte header, then the
    bytes): the master encodes a publication once and appends each
    subscriber's MAC.
    """
    encoded = serial.dumps({"pub": blob, "kid": kid, "mac": bytes(PUBLICATION_MAC_BYTES)})
    return encoded[:-PUBLICATION_MAC_BYTES]


#: The most return acknowledgements one publication frame carries (a frame
#: with more is refused by the minion; the master sends the rest on the req
#: channel).
MAX_PUBLICATION_ACKS = 4096
#: The encoded tail of L{publicationFramePrefix}: the key C{"mac"} and the
#: header of its 32-byte binary value.
_MAC_TAIL = serial.dumps("mac") + b"\xc4" + bytes([PUBLICATION_MAC_BYTES])
_ACK_KEY = serial.dumps("ack")


def publicationAcksMessage(rids: list[int]) -> bytes:
    """
    What a publication's MAC covers after L{publicationMacMessage} when the
    frame also acknowledges returns: the request ids of those returns on the
    minion's req session, as 8-byte numbers (not their msgpack encoding,
    so the minion checks exactly the numbers it will act on).
    """
    return b"acks:" + b"".join(rid.to_bytes(8, "big") for rid in rids)


def acknowledgingFramePrefixes(prefix: bytes) -> Callable[[list[int]], bytes]:
    """
    L{publicationFramePrefix}'s C{prefix} made into a function that gives,
    for request ids C{rids}, the prefix of C{{"pub": blob, "kid": kid,
    "ack": rids, "mac": m}}: one subscriber's publication that also
    acknowledges the returns C{rids} it sent on its req session (see
    L{salttwist.master.sessions.Sessions.holdingReplies}). The publication's
    prefix is checked and cut once, not once per subscriber.

    @raise ValueError: if C{prefix} is not a publication frame prefix.
    """
    if prefix[0] != 0x83 or not prefix.endswith(_MAC_TAIL):
        raise ValueError("not a publication frame prefix")
    start = b"\x84" + prefix[1 : -len(_MAC_TAIL)] + _ACK_KEY

    def acknowledgingFramePrefix(rids: list[int]) -> bytes:
        return start + serial.dumps(rids) + _MAC_TAIL

    return acknowledgingFramePrefix


def publicationAcks(value: object) -> list[int]:
    """
    The request ids of a publication's C{ack} field.

    @raise ValueError: if C{value} is not a non-empty list of at most
        L{MAX_PUBLICATION_ACKS} positive integers below 2**63.
    """
    if not isinstance(value, list) or not 0 < len(value) <= MAX_PUBLICATION_ACKS:
        raise ValueError(f"the acknowledgements are not a list of 1 to {MAX_PUBLICATION_ACKS}")
    for rid in value:
        if type(rid) is not int or not 0 < rid < 2**63:
            raise ValueError(f"acknowledgement {rid!r} is not a request id")
    return value


def publicationAad(kid: int) -> bytes:
    """
    The associated data of a publication sealed with publication key C{kid}.
    """
    return b"salttwist-pub:" + kid.to_bytes(8, "big")


#: How a master's refusal of a return starts when it could not store the
#: return (its job cache failed): the minion keeps the return and sends it
#: again later, where any other refusal is final.
RETURN_NOT_STORED = "return not stored"
#: How a master's refusal of a new job starts when the refusal says nothing
#: of the job itself and may pass (its job cache could not store the job,
#: its cluster's broker is away or the buffer full): a client waiting for
#: an earlier job's returns whose C{saltutil.find_job} is refused so keeps
#: waiting, where any other refusal (an ACL's) is final.
JOB_REFUSED = "job refused:"
