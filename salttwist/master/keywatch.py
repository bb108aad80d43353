# -*- test-case-name: tests.test_master_core,tests.test_master_rooms -*-
"""
Key watch and rotation: the master acts on changes to the key store.

L{AcceptedIds} keeps the accepted minion ids as last listed (for targeting
without listing thousands of keys per job). L{KeyWatch} reacts to
C{salt/key} events and to the periodic comparison of the key store with the
connected minions (cutting off those no longer accepted), and rotates the
publication key: when trust is taken back, and every C{publish_session}
seconds.

A key store shared by several masters (C{keys.cache_driver: postgres})
tells of every change, whoever made it (C{salttwist-key} on another master,
another master's authentications, this master's workers), through
L{KeyStoreFeed}: the changes reach L{KeyWatch.storeChanged} on the reactor,
which cuts off at once a connected minion whose key is no longer accepted.
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Callable
from typing import Any

from twisted.internet.defer import Deferred, maybeDeferred
from twisted.logger import Logger
from zope.interface import implementer

from salttwist import crypt, serial, wire
from salttwist.blocking import RunBlocking
from salttwist.interfaces import IKeyStore
from salttwist.master.grainscache import GrainsCache
from salttwist.master.interfaces import IAdmission, IJobPublisher, IKeyWatch, ISessions
from salttwist.master.keys import PublicationKey
from salttwist.pki.ids import InvalidMinionId
from salttwist.pki.keystore import ACCEPTED


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

    def storeChanged(self, changes: dict[str, list[str]]) -> Deferred[None] | None:
        """
        Keys changed in a key store other processes share (see
        L{KeyStoreFeed}), by whatever means: forget the accepted ids and
        the pending count, drop the grains of minions left without a key,
        and check the key store against the connected minions at once when
        one of those whose key changed is connected here without an
        accepted key (it is then cut off, and the publication key rotates).

        @param changes: each changed minion id, with the states it holds a
            key in now.
        @return: the check's L{Deferred}, if one was started.
        """
        self.accepted.forget()
        # Another master may have added pending keys, or taken some away:
        # count them again (lazily, at most every few seconds).
        self._admission.keysChanged("changed")
        for minionId, states in changes.items():
            if not states:
                with contextlib.suppress(InvalidMinionId):
                    self.grainsCache.forget(minionId)
        # Per changed id, not a set of every connected id: in an auth storm
        # changes come many times a second, a few ids each.
        sessions = self._sessions
        if any(
            ACCEPTED not in states and any(sessions.connectionsOf(m))
            for m, states in changes.items()
        ):
            return self.reconcileKeys()
        return None

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


class KeyStoreFeed:
    """
    Carries the change notifications of a shared key store (its
    C{watch} callback, called on the store's own threads) to
    L{KeyWatch.storeChanged} on the reactor: the changes that come while
    one hand-over is queued go with it, so an auth storm of new keys costs
    one call on the reactor per batch, not one per key.

    @ivar dirty: whether keys changed since the periodic check last ran
        (L{salttwist.master.service.MasterService}); set by every
        hand-over, cleared by that check.
    """

    log = Logger(namespace="salttwist.master.core.Master")

    def __init__(self, reactor: Any, onChanges: Callable[[dict[str, list[str]]], object]) -> None:
        """
        @param reactor: provides C{callFromThread}.
        @param onChanges: called on the reactor with each changed id and
            its states (L{KeyWatch.storeChanged}).
        """
        self._reactor = reactor
        self._onChanges = onChanges
        self._lock = threading.Lock()
        self._pending: dict[str, list[str]] = {}
        self._queued = False
        self.dirty = True

    def __call__(self, minionId: str, states: list[str]) -> None:
        """
        The store's C{watch} callback (any thread): C{minionId} now holds
        keys in C{states}.
        """
        with self._lock:
            self._pending[minionId] = list(states)
            if self._queued:
                return
            self._queued = True
        self._reactor.callFromThread(self._flush)

    def _flush(self) -> None:
        """
        On the reactor: hand over every change queued.
        """
        with self._lock:
            changes, self._pending = self._pending, {}
            self._queued = False
        if not changes:
            return
        self.dirty = True
        maybeDeferred(self._onChanges, changes).addErrback(
            lambda failure: self.log.failure("acting on key store changes failed", failure)
        )
