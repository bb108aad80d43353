# -*- test-case-name: tests.test_master_core,tests.test_master_rooms -*-
"""
Key watch and rotation: the master acts on changes to the key store.

L{AcceptedIds} keeps the accepted minion ids as last listed (for targeting
without listing thousands of keys per job). L{KeyWatch} reacts to
C{salt/key} events and to the periodic comparison of the key store with the
connected minions (cutting off those no longer accepted), and rotates the
publication key: when trust is taken back, and every C{publish_session}
seconds.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable
from typing import Any

from twisted.internet.defer import Deferred
from twisted.logger import Logger
from zope.interface import implementer

from salttwist import crypt, serial, wire
from salttwist.blocking import RunBlocking
from salttwist.interfaces import IKeyStore
from salttwist.master.grainscache import GrainsCache
from salttwist.master.interfaces import IAdmission, IJobPublisher, IKeyWatch, ISessions
from salttwist.master.keys import PublicationKey
from salttwist.pki.ids import InvalidMinionId


class AcceptedIds:
    """
    The accepted minion ids as last listed, and the generation the listing
    belongs to: every key change starts a new one, and a listing begun in an
    older one is not kept.

    @ivar ids: the ids, or L{None} when they must be listed again.
    @ivar generation: the current generation.
    """

    def __init__(self, keyStore: IKeyStore) -> None:
        self._keyStore = keyStore
        self.ids: frozenset[str] | None = None
        self.generation = 0

    def forget(self) -> None:
        """
        The accepted keys may have changed: list them again when next
        needed.
        """
        self.ids = None
        self.generation += 1

    def list(self) -> tuple[int, frozenset[str]]:
        """
        The accepted minion ids, from the last listing if no key changed
        since (blocking: may list the key store).

        @return: the generation the ids belong to, and the ids.
        """
        generation, cached = self.generation, self.ids
        if cached is not None:
            return generation, cached
        return generation, frozenset(self._keyStore.listKeys("minions"))

    def keep(self, generation: int, ids: frozenset[str]) -> None:
        """
        Remember C{ids} (listed in C{generation}) unless a key changed since.
        """
        if generation == self.generation:
            self.ids = ids


@implementer(IKeyWatch)
class KeyWatch:
    """
    The master's key watch and rotation room.

    @ivar accepted: the accepted ids as last listed.
    """

    # The master's namespace: log lines read as they always did.
    log = Logger(namespace="salttwist.master.core.Master")

    def __init__(
        self,
        keyStore: IKeyStore,
        runBlocking: RunBlocking,
        grainsCache: GrainsCache,
        accepted: AcceptedIds,
    ) -> None:
        self.keyStore = keyStore
        self.runBlocking = runBlocking
        self.grainsCache = grainsCache
        self.accepted = accepted
        self._sessions: ISessions
        self._admission: IAdmission
        self._publisher: IJobPublisher

    def attach(self, sessions: ISessions, admission: IAdmission, publisher: IJobPublisher) -> None:
        """
        Give the key watch the rooms it acts on: the sessions it cuts off,
        the admission whose pending count a key event makes stale, and the
        publisher whose publication key it rotates.
        """
        self._sessions = ISessions(sessions)
        self._admission = IAdmission(admission)
        self._publisher = IJobPublisher(publisher)

    def rotatePublicationKey(self, reason: str) -> None:
        """
        Make a new publication key and hand it to every subscribed minion
        over the pub connection, sealed with a key derived from that
        minion's own session key: no RSA operation and no reconnect per
        minion. Minions without a session get it when they authenticate.
        """
        publisher = self._publisher
        old = publisher.publicationKey
        new = PublicationKey(kid=old.kid + 1)
        publisher.publicationKey = new
        subscribers = self._sessions.subscribers
        for minionId, subscriber in list(subscribers.items()):
            session = self._sessions.sessions.get(minionId)
            sessionKey = session.sessionKey if session is not None else None
            if sessionKey is None:
                subscriber.transport.loseConnection()
                continue
            wrap = crypt.AesCipher(crypt.deriveKey(sessionKey, wire.ROTATE_CONTEXT))
            blob = wrap.encrypt(serial.dumps({"key": new.key}), wire.rotationAad(new.kid))
            subscriber.sendFrame({"rotate": blob, "kid": new.kid})
        self.log.info(
            "publication key rotated to {kid} ({reason}); sent to {n} minions",
            kid=new.kid,
            reason=reason,
            n=len(subscribers),
        )

    #: Called with the accepted ids each time the key store was listed
    #: (L{reconcileKeys}), so other rooms drop what they keep for minions
    #: whose key is gone, however it went (the master's pillar cache).
    onAcceptedListed: Callable[[frozenset[str]], None] | None = None

    def keyEvent(self, tag: str, data: dict[str, Any]) -> None:
        """
        A C{salt/key} event (from salttwist-key, through the pull socket):
        check the key store at once, and rotate the publication key when a
        key was rejected or deleted.
        """
        act = data.get("act")
        self.accepted.forget()
        self._admission.keysChanged(act)
        if act == "delete" and isinstance(data.get("id"), str):
            with contextlib.suppress(InvalidMinionId):
                self.grainsCache.forget(data["id"])
        if act in ("reject", "delete"):
            done = "deleted" if act == "delete" else "rejected"
            self.reconcileKeys(rotateReason=f"key {data.get('id')!r} {done}")

    def reconcileKeys(self, rotateReason: str | None = None) -> Deferred[None]:
        """
        Cut off every connected minion whose key is no longer accepted (on
        disk, whatever changed it), then rotate the publication key if one
        was cut off or C{rotateReason} asks for it. Runs every second, so
        the master acts on key changes within a second even without events.
        """

        # Only connections that existed before the key store was read may be
        # judged by what it said: a minion accepted and authenticated while
        # the directory was being listed must not be cut off.
        before = {m: self._sessions.connectionsOf(m) for m in self._sessions.connectedIds()}
        # Called when the key store changed: whatever was remembered is old.
        accepted = self.accepted
        accepted.forget()
        generation = accepted.generation

        def listAccepted(_: object) -> frozenset[str]:
            return frozenset(self.keyStore.listKeys("minions"))

        def compare(acceptedIds: frozenset[str]) -> None:
            accepted.keep(generation, acceptedIds)
            if self.onAcceptedListed is not None:
                self.onAcceptedListed(acceptedIds)
            gone = [
                m
                for m, protos in before.items()
                if m not in acceptedIds and self._sessions.connectionsOf(m) == protos
            ]
            cut = [m for m in gone if self._sessions.cutOff(m)]
            if cut or rotateReason is not None:
                self.rotatePublicationKey(rotateReason or f"cut off {', '.join(sorted(cut))}")

        return self.runBlocking(listAccepted, None).addCallback(compare)
