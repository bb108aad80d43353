# -*- test-case-name: tests.test_minion,tests.test_transient_sessions,tests.test_auth_reply -*-
"""
A minion's half of authentication on the req channel, shared by the minion
daemon (L{salttwist.minion.core.Minion}) and C{salttwist-call}
(L{salttwist.client.transient}), so it lives below both: sign the master's
challenge with the minion's key, read the answer, check the master's
identity against the pinned key (or C{master_finger}) and decrypt the keys
the master sent.

The blocking parts (RSA, the pinned-key file) are methods of
L{MinionCredentials}, which L{authenticate} runs through C{runBlocking}.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from twisted.internet.defer import Deferred
from twisted.logger import Logger

from salttwist import crypt, wire
from salttwist.files import MASTER_PUB_FILE, atomicWrite

if TYPE_CHECKING:
    from salttwist.transport.reqclient import ReqClientProtocol

__all__ = [
    "MASTER_PUB_FILE",
    "AuthRefused",
    "AuthReply",
    "MasterIdentityError",
    "MinionCredentials",
    "authenticate",
]

NONCE_BYTES = 32


class AuthRefused(Exception):
    """
    The master did not open a session.

    @ivar ret: C{"pending"}, C{"rejected"}, C{"denied"} or C{"error"}.
    """

    def __init__(self, ret: str, message: str) -> None:
        super().__init__(message)
        self.ret = ret


class MasterIdentityError(Exception):
    """
    The master presented a key other than the pinned one or C{master_finger},
    or its reply was malformed.
    """


@dataclass(frozen=True)
class AuthReply:
    """
    What an accepting master sent, decrypted and verified.
    """

    publicationKey: bytes
    sessionKey: bytes
    publishPort: int
    kid: int
    masterKey: Any


class MinionCredentials:
    """
    A minion's id and key pair, and where it pins its master's key.
    """

    log = Logger()

    def __init__(
        self, minionId: str, privateKey: Any, publicPem: bytes, pkiDir: str, masterFinger: str = ""
    ) -> None:
        self.id = minionId
        self.privateKey = privateKey
        self.publicPem = publicPem
        self.masterFinger = masterFinger
        self.pinnedPath = os.path.join(pkiDir, MASTER_PUB_FILE)

    def authRequest(
        self,
        challenge: bytes,
        nonce: bytes,
        transient: bool = False,
        autosignGrains: dict[str, Any] | None = None,
    ) -> dict[str, Any]:
        """
        The C{_auth} request answering C{challenge}. Blocking (RSA).
        """
        signature = crypt.sign(
            self.privateKey,
            wire.authRequestMessage(challenge, nonce, self.id, self.publicPem, transient),
        )
        request: dict[str, Any] = {
            "cmd": "_auth",
            "id": self.id,
            "pub": self.publicPem,
            "nonce": nonce,
            "sig": signature,
            "autosign_grains": autosignGrains or {},
            # This minion checks a reply signed with others (batch_path,
            # see openReply); not signed: without it the master signs
            # the reply alone, which any minion checks.
            "batch_sig": True,
        }
        if transient:
            request["transient"] = True
        return request

    def openReply(self, reply: dict[str, Any], challenge: bytes, nonce: bytes) -> AuthReply:
        """
        Check the master's identity and signature, pin its key on first
        contact, and decrypt the publication and session keys. Blocking (RSA,
        the pinned-key file).

        @raise MasterIdentityError: the master's key is not the pinned one or
            C{master_finger}, or the reply is malformed.
        @raise crypt.CryptError: the signature or a ciphertext is bad.
        """
        masterPem = crypt.canonicalPublicPem(reply.get("master_pub"))  # type: ignore[arg-type]
        pinned = self.readPinned()
        if pinned is not None and pinned != masterPem:
            raise MasterIdentityError(
                f"the master presents key {crypt.fingerprint(masterPem)}, not the pinned "
                f"{crypt.fingerprint(pinned)} in {self.pinnedPath}; if the master was "
                "rebuilt on purpose, remove that file"
            )
        finger = self.masterFinger or ""
        if finger and crypt.fingerprint(masterPem) != finger.lower():
            raise MasterIdentityError(
                f"the master presents key {crypt.fingerprint(masterPem)}, not master_finger "
                f"{finger}"
            )
        masterKey = crypt.loadPublicKey(masterPem)
        keysCt, kid, port = reply.get("keys"), reply.get("kid"), reply.get("publish_port")
        if not (isinstance(keysCt, bytes) and isinstance(kid, int) and isinstance(port, int)):
            raise MasterIdentityError("malformed auth reply from the master")
        message = wire.authReplyMessage(challenge, nonce, self.id, keysCt, kid, port)
        path = reply.get("batch_path")
        if path is not None:
            # Signed with other replies: the signature is over the root of
            # a hash tree, which only a message the master signed leads to
            # along this path.
            try:
                message = wire.authReplyBatchMessage(wire.authReplyBatchRoot(message, path))
            except ValueError as e:
                raise MasterIdentityError(f"malformed auth reply from the master: {e}") from e
        crypt.verify(masterKey, reply.get("sig"), message)  # type: ignore[arg-type]
        keys = crypt.rsaDecrypt(self.privateKey, keysCt)
        try:
            publicationKey, sessionKey = wire.unpackReplyKeys(keys)
        except ValueError as e:
            raise MasterIdentityError(f"malformed auth reply from the master: {e}") from e
        if pinned is None:
            # 0644, as the minion's own public key. Not fsynced, as before:
            # this runs on the reactor thread, for every minion of a swarm
            # at first contact.
            atomicWrite(self.pinnedPath, masterPem, 0o644, durable=False)
            self.log.info("pinned the master's public key in {path}", path=self.pinnedPath)
        return AuthReply(publicationKey, sessionKey, port, kid, masterKey)

    def readPinned(self) -> bytes | None:
        """
        @return: the pinned master key, or L{None} before the first contact.
        """
        try:
            with open(self.pinnedPath, "rb") as f:
                return crypt.canonicalPublicPem(f.read())
        except FileNotFoundError:
            return None


async def authenticate(
    req: ReqClientProtocol,
    credentials: MinionCredentials,
    runBlocking: Callable[..., Deferred],
    answer: Callable[[Deferred], Deferred] = lambda d: d,
    transient: bool = False,
    autosignGrains: Callable[[], dict[str, Any]] | None = None,
) -> AuthReply:
    """
    Authenticate on the connected req channel C{req}. The caller then
    starts the session with L{ReqClientProtocol.startSession} and the
    returned session key.

    @param answer: bounds the wait for each answer of the master (adds a
        timeout to the L{Deferred} it is given).
    @param transient: ask for a transient session, which does not replace
        the minion daemon's session and cannot subscribe to publications.
    @param autosignGrains: returns the grains to offer the autosign policy.
    @raise AuthRefused: the key is pending, rejected or denied, or the
        master answered an error.
    @raise MasterIdentityError: see L{MinionCredentials.openReply}.
    """
    challenge = await answer(req.hello)
    nonce = os.urandom(NONCE_BYTES)
    grains = autosignGrains() if autosignGrains is not None else {}
    request = await runBlocking(credentials.authRequest, challenge, nonce, transient, grains)
    reply = await answer(req.sendClear(request))
    ret = reply.get("ret")
    if ret == "pending":
        raise AuthRefused(
            "pending",
            "the master has not accepted this minion's key yet "
            f"(salttwist-key -a {credentials.id})",
        )
    if ret in ("rejected", "denied"):
        why = reply.get("error")
        reason = f": {why}" if isinstance(why, str) else ""
        raise AuthRefused(ret, f"the master {ret} this minion's key{reason}")
    if ret != "accepted":
        raise AuthRefused("error", f"authentication failed: {reply.get('error', reply)!r}")
    return await runBlocking(credentials.openReply, reply, challenge, nonce)
