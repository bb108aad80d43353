# -*- test-case-name: tests.test_master_auth -*-
"""
The master's half of minion authentication (seed 000, table 1).

L{Authenticator.authenticate} is blocking (key files, an RSA signature): the
req server runs it off the reactor thread.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from twisted.logger import Logger

from salttwist import crypt, wire
from salttwist.interfaces import IKeyStore
from salttwist.master.keys import MasterKeys, PublicationKey
from salttwist.pki.ids import IdClash, InvalidMinionId, escapeId, validateMinionId
from salttwist.pki.keystore import checkNewId
from salttwist.pki.keystore_pg import KeyStoreUnavailable

NONCE_BYTES = 32
#: The reply to a new id while C{minions_pre} holds C{max_minions_pre} keys.
PENDING_FULL = "master busy: too many pending minion keys (max_minions_pre); retry later"
KEY_STORE_UNAVAILABLE = "master busy: its key store is unavailable; retry later"
"""
The error a minion gets while the master's key store (PostgreSQL) cannot be
read or written: the minion retries with back-off. The reason (the server
and why) stays in the master's log, never on the wire.
"""


@dataclass
class AuthOutcome:
    """
    @ivar reply: the clear-text frame to send back.
    @ivar minionId: the validated id, or L{None} if the request was invalid.
    @ivar sessionKey: the new session key when the minion was accepted.
    @ivar events: C{(tag, data)} pairs to fire on the event bus.
    @ivar undecided: the key is pending and no admin has decided on it: the
        autosign policy may (the master asks it, on the reactor thread).
    @ivar pem: the minion's public key as stored, when undecided.
    @ivar unsigned: the message an accepting reply still has to be signed
        over (see L{Authenticator.signTogether}); never sent anywhere.
    """

    reply: dict[str, Any]
    minionId: str | None = None
    sessionKey: bytes | None = None
    events: list[tuple[str, dict[str, Any]]] = field(default_factory=list)
    undecided: bool = False
    pem: bytes | None = None
    unsigned: bytes | None = None

    def toFields(self) -> dict[str, Any]:
        """
        @return: this outcome as a map of plain values, as an auth worker
            sends it back (see L{fromFields}).
        """
        return {
            "reply": self.reply,
            "minionId": self.minionId,
            "sessionKey": self.sessionKey,
            "events": [[tag, data] for tag, data in self.events],
            "undecided": self.undecided,
            "pem": self.pem,
        }

    @classmethod
    def fromFields(cls, fields: dict[str, Any]) -> AuthOutcome:
        """
        @return: the outcome L{toFields} made C{fields} of.
        """
        return cls(**dict(fields, events=[(tag, data) for tag, data in fields["events"]]))


def _error(message: str) -> AuthOutcome:
    return AuthOutcome({"ret": "error", "error": message})


class Authenticator:
    """
    Decides each auth request against the key store.

    @param publicationKey: returns the current publication key.
    @param publishPort: returns the port minions subscribe to.
    """

    log = Logger()

    def __init__(
        self,
        keyStore: IKeyStore,
        masterKeys: MasterKeys,
        publicationKey: Callable[[], PublicationKey],
        publishPort: Callable[[], int],
    ) -> None:
        self._keys = keyStore
        self._master = masterKeys
        self._publicationKey = publicationKey
        self._publishPort = publishPort

    def authenticate(
        self,
        load: dict[str, Any],
        challenge: bytes,
        peer: str,
        allowNewPending: bool = True,
        signLater: bool = False,
    ) -> AuthOutcome:
        """
        Check one C{_auth} request.

        @param load: C{{"id", "pub", "nonce", "sig"}} as received, and
            C{"transient": True} for a transient session (the flag is part
            of what C{sig} covers).
        @param challenge: the challenge this connection was greeted with.
        @param allowNewPending: whether an unknown id may be added to
            C{minions_pre}; if not (the master's C{max_minions_pre} is
            reached) it is refused with nothing written.
        @param signLater: leave an accepting reply unsigned, with what to
            sign in the outcome's C{unsigned}, if the minion said it checks
            batch signatures (C{"batch_sig": True}): the caller signs it
            with others (L{signTogether}).
        """
        try:
            minionId = validateMinionId(load.get("id"))
        except InvalidMinionId as e:
            self.log.warn("auth from {peer} refused: invalid minion id: {e}", peer=peer, e=e)
            return _error(f"invalid minion id: {e}")
        pem, nonce, sig = load.get("pub"), load.get("nonce"), load.get("sig")
        if not isinstance(nonce, bytes) or len(nonce) != NONCE_BYTES:
            return _error(f"nonce must be {NONCE_BYTES} bytes")
        try:
            publicKey = crypt.loadPublicKey(pem)  # type: ignore[arg-type]
            crypt.verify(
                publicKey,
                sig,
                wire.authRequestMessage(
                    challenge,
                    nonce,
                    minionId,
                    pem,  # type: ignore[arg-type]
                    transient=load.get("transient") is True,
                ),
            )
        except crypt.CryptError as e:
            self.log.warn("auth for {id} from {peer} refused: {e}", id=minionId, peer=peer, e=e)
            return _error(f"authentication failed: {e}")
        canonical = crypt.publicKeyToPem(publicKey)
        try:
            outcome = self._decide(minionId, canonical, allowNewPending)
        except KeyStoreUnavailable:
            # Logged by the master (Admission), once in a while, not per
            # request: during an outage every minion retries.
            return _error(KEY_STORE_UNAVAILABLE)
        if outcome.reply["ret"] != "accepted":
            self.log.info(
                "auth for {id} from {peer}: {ret}",
                id=escapeId(minionId),
                peer=peer,
                ret=outcome.reply["ret"],
            )
            return outcome
        signLater = signLater and load.get("batch_sig") is True
        accepted = self._accept(minionId, publicKey, canonical, challenge, nonce, signLater)
        accepted.events[:0] = outcome.events
        return accepted

    def _decide(self, minionId: str, pem: bytes, allowNewPending: bool = True) -> AuthOutcome:
        keys = self._keys
        event = {"id": minionId, "pub": pem.decode("ascii")}
        refresh = getattr(keys, "refresh", None)
        if refresh is not None and not self._acceptedAsIs(minionId, pem):
            # A store shared with other processes (PostgreSQL) answers from
            # a copy that notifications keep up to date within milliseconds:
            # enough for an accepted minion (the common case, no round
            # trip; a key deleted meanwhile is cut off by the master's
            # check), not for a decision that writes or turns a minion
            # away (a key just accepted by autosign in the master, or
            # written by another worker, would be missed).
            refresh(minionId)
        if keys.getKey("minions_rejected", minionId) is not None:
            return AuthOutcome(
                {"ret": "rejected"},
                minionId,
                events=[("salt/auth", dict(event, act="reject", result=False))],
            )
        for state in ("minions", "minions_pre"):
            stored = keys.getKey(state, minionId)
            if stored is None:
                continue
            if _sameKey(stored, pem):
                if state == "minions":
                    return AuthOutcome({"ret": "accepted"}, minionId)
                return AuthOutcome(
                    {"ret": "pending"},
                    minionId,
                    events=[("salt/auth", dict(event, act="pend", result=True))],
                    undecided=True,
                    pem=pem,
                )
            keys.putKey("minions_denied", minionId, pem)
            self.log.warn(
                "minion {id} presented a key that differs from its {state} key; "
                "the new key was put in minions_denied and refused",
                id=minionId,
                state=state,
            )
            return AuthOutcome(
                {"ret": "denied"},
                minionId,
                events=[
                    ("salt/auth", dict(event, act="denied", result=False)),
                    ("salt/key", {"act": "deny", "id": minionId}),
                ],
            )
        if not allowNewPending:
            # Logged by the master, at most once a minute (not per request).
            return AuthOutcome({"ret": "error", "error": PENDING_FULL}, minionId)
        refused = self._refuseNewId(minionId, event)
        if refused is not None:
            return refused
        keys.putKey("minions_pre", minionId, pem)
        return AuthOutcome(
            {"ret": "pending"},
            minionId,
            events=[
                ("salt/auth", dict(event, act="pend", result=True)),
                ("salt/key", {"act": "pend", "id": minionId}),
            ],
            undecided=True,
            pem=pem,
        )

    def _acceptedAsIs(self, minionId: str, pem: bytes) -> bool:
        """
        @return: whether the store holds C{pem} as the accepted key of
            C{minionId}, and no rejected key.
        """
        stored = self._keys.getKey("minions", minionId)
        return (
            stored is not None
            and _sameKey(stored, pem)
            and self._keys.getKey("minions_rejected", minionId) is None
        )

    def _refuseNewId(self, minionId: str, event: dict[str, Any]) -> AuthOutcome | None:
        """
        A new id (no key in any state) breaking the store's id rules is
        refused, and one clashing with an existing id is denied, with
        nothing written; the minion is told why (L{checkNewId}).
        """
        try:
            checkNewId(self._keys, minionId)
        except IdClash as e:
            self.log.warn("new minion id denied: {e}", e=e)
            return AuthOutcome(
                {"ret": "denied", "error": str(e)},
                minionId,
                events=[("salt/auth", dict(event, act="denied", result=False, reason=str(e)))],
            )
        except InvalidMinionId as e:
            self.log.warn("new minion id refused: {e}", e=e)
            return _error(f"invalid minion id: {e}")
        return None

    def _accept(
        self,
        minionId: str,
        publicKey: Any,
        pem: bytes,
        challenge: bytes,
        nonce: bytes,
        signLater: bool = False,
    ) -> AuthOutcome:
        publication = self._publicationKey()
        sessionKey = os.urandom(crypt.AES_KEY_BYTES)
        keysCt = crypt.rsaEncrypt(publicKey, wire.packReplyKeys(publication.key, sessionKey))
        port = self._publishPort()
        message = wire.authReplyMessage(challenge, nonce, minionId, keysCt, publication.kid, port)
        reply = {
            "ret": "accepted",
            "master_pub": self._master.publicPem,
            "keys": keysCt,
            "kid": publication.kid,
            "publish_port": port,
        }
        event = (
            "salt/auth",
            {"id": minionId, "pub": pem.decode("ascii"), "act": "accept", "result": True},
        )
        outcome = AuthOutcome(reply, minionId, sessionKey, [event])
        if signLater:
            outcome.unsigned = message
        else:
            reply["sig"] = crypt.sign(self._master.privateKey, message)
        return outcome

    def signTogether(self, outcomes: list[AuthOutcome]) -> None:
        """
        Sign the accepting replies among C{outcomes} left unsigned
        (C{signLater}) with one RSA signature: alone, one is signed as any
        reply is (over its L{wire.authReplyMessage}); several are signed
        over the root of a hash tree of their messages
        (L{wire.authReplyBatchMessage}), and each reply carries its path to
        that root as C{batch_path}. A minion recomputes its own message from
        what it sent and received, hashes it up its path and checks the
        signature on the root: only a message the master signed leads
        there (SHA-256 being collision resistant), so the reply is bound to
        its challenge, nonce, id, keys, key id and port as firmly as by a
        signature of its own.
        """
        waiting = [o for o in outcomes if o.unsigned is not None]
        if len(waiting) == 1:
            only = waiting[0]
            only.reply["sig"] = crypt.sign(self._master.privateKey, only.unsigned)  # type: ignore[arg-type]
            only.unsigned = None
        elif waiting:
            root, paths = wire.authReplyTree([o.unsigned for o in waiting])  # type: ignore[misc]
            signature = crypt.sign(self._master.privateKey, wire.authReplyBatchMessage(root))
            for outcome, path in zip(waiting, paths, strict=True):
                outcome.reply["sig"] = signature
                outcome.reply["batch_path"] = path
                outcome.unsigned = None


def _sameKey(stored: bytes, pem: bytes) -> bool:
    """
    @param pem: a canonical PEM (L{crypt.publicKeyToPem} of a vetted key).
    @return: whether C{stored} is the same key.
    """
    if stored == pem:
        # The same bytes as a canonical PEM: the same key, no need to parse
        # it again (a key store writes keys in canonical form).
        return True
    try:
        return crypt.canonicalPublicPem(stored) == pem
    except crypt.CryptError:
        return False
