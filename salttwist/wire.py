# -*- test-case-name: tests.test_master_auth -*-
"""
The exact bytes that are signed or MACed during authentication, in one place
so the master and its clients cannot disagree on them.
"""

from __future__ import annotations

from salttwist import serial


def authRequestMessage(challenge: bytes, nonce: bytes, minionId: str, pubPem: bytes) -> bytes:
    """
    What a minion signs with its private key to prove it holds it: bound to
    the master's per-connection challenge, so it cannot be replayed.
    """
    return serial.dumps(["salttwist-auth-request", challenge, nonce, minionId, pubPem])


def authReplyMessage(
    challenge: bytes,
    nonce: bytes,
    minionId: str,
    aesCiphertext: bytes,
    sessionCiphertext: bytes,
    kid: int,
    publishPort: int,
) -> bytes:
    """
    What the master signs in an accepting auth reply: bound to the minion's
    nonce, so an old reply cannot be replayed to it.
    """
    return serial.dumps(
        [
            "salttwist-auth-reply",
            challenge,
            nonce,
            minionId,
            aesCiphertext,
            sessionCiphertext,
            kid,
            publishPort,
        ]
    )


def clientAuthMessage(challenge: bytes, nonce: bytes) -> bytes:
    """
    What the local client MACs with the root key.
    """
    return serial.dumps(["salttwist-client-auth", challenge, nonce])


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


def publicationAad(kid: int) -> bytes:
    """
    The associated data of a publication sealed with publication key C{kid}.
    """
    return b"salttwist-pub:" + kid.to_bytes(8, "big")
