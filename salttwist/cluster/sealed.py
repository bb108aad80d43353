# -*- test-case-name: tests.test_cluster -*-
"""
The cluster's messages sealed with a key the masters share
(L{SealedClusterBus}), so the broker and whoever else reaches it can
neither read the jobs and returns that cross it nor forge one.

Every master of a cluster holds the same 256-bit key, in
C{cluster_pki_dir/cluster.key} (64 hex digits, mode 0600). Each message is
sealed with AES-256-GCM under it, bound to the cluster and the message's
kind; a message that does not open is dropped and logged.

Nothing that crosses the broker can be replayed: each sealed message carries
its sending time and a random id inside the seal (L{ReplayWindow}). A
message older than its kind's window (L{MAX_AGES}: a minute for an event,
the broker's retention for a job or a return) or from too far in the future
is dropped, and so is one whose id was handled within the window. On top
of that a master drops a jid it knows, and a job older than
C{cluster_job_max_age}.
"""

from __future__ import annotations

import os
import stat
import struct
import time
from collections import OrderedDict
from collections.abc import Callable
from typing import Any

from twisted.internet.defer import maybeDeferred
from twisted.logger import Logger
from zope.interface import implementer

from salttwist.cluster.interfaces import EVENT, JOB, RETURN, IClusterBus
from salttwist.crypt import newAesKey, writePrivateFile
from salttwist.symmetric import AES_KEY_BYTES, NONCE_BYTES, TAG_BYTES, AesCipher, CryptError

#: The shared key's file in C{cluster_pki_dir}.
CLUSTER_KEY_FILE = "cluster.key"
#: What a sealed message starts with, inside the seal: its sending time
#: (seconds since the epoch, a double) and a random id.
_HEADER = struct.Struct("!d12s")
#: Bytes a seal adds to a message.
SEAL_BYTES = NONCE_BYTES + TAG_BYTES + _HEADER.size
#: Seconds a sealed message of each kind is accepted after it was sent: a
#: best-effort event comes at once or never; a durable job or return may
#: wait in the broker for its retention (L{salttwist.cluster.nats}'s
#: C{STREAM_MAX_AGE}, an hour) while a master is away, plus a minute.
MAX_AGES = {EVENT: 60.0, JOB: 3660.0, RETURN: 3660.0}
#: Seconds a message may seem to come from the future (the masters' clocks
#: differ a little).
FUTURE_SKEW = 60.0
#: How many message ids each kind's window remembers at most: past it the
#: oldest are forgotten early (and that is logged once), so memory stays
#: bounded whatever the traffic.
REMEMBERED_IDS = 200_000


class ClusterKeyError(ValueError):
    """
    The cluster key file is unusable; the message says why.
    """


def loadOrCreateClusterKey(directory: str) -> tuple[bytes, str, bool]:
    """
    Read the cluster key from C{directory}, making one (and the directory,
    mode 0700) if there is none.

    @return: the key, its file's path, and whether it was just made.
    @raise ClusterKeyError: the file is not 64 hex digits, or others than
        its owner may read it.
    """
    path = os.path.join(directory, CLUSTER_KEY_FILE)
    try:
        info = os.stat(path)
    except FileNotFoundError:
        os.makedirs(directory, mode=0o700, exist_ok=True)
        key = newAesKey()
        writePrivateFile(path, key.hex().encode() + b"\n")
        return key, path, True
    if info.st_mode & (stat.S_IRWXG | stat.S_IRWXO):
        raise ClusterKeyError(
            f"{path}: the cluster key may be read by others than its owner "
            f"(mode {stat.S_IMODE(info.st_mode):o}); chmod 600 it"
        )
    with open(path, "rb") as f:
        text = f.read().strip()
    try:
        key = bytes.fromhex(text.decode("ascii"))
    except (UnicodeDecodeError, ValueError):
        key = b""
    if len(key) != AES_KEY_BYTES:
        raise ClusterKeyError(f"{path}: not a cluster key ({AES_KEY_BYTES * 2} hex digits)")
    return key, path, False


class ReplayWindow:
    """
    The ids of the messages of one kind handled lately, to drop a copy
    replayed by whoever reaches the broker.

    An id is kept while its message could still be accepted (until it is
    C{maxAge} old): forgetting it later is safe, because by then the age
    check drops the message.
    """

    def __init__(self, maxAge: float, cap: int = REMEMBERED_IDS) -> None:
        self.maxAge = maxAge
        self.cap = cap
        self.overflowed = False
        self._seen: OrderedDict[bytes, float] = OrderedDict()

    def why(self, msgId: bytes, sentAt: float, now: float) -> str | None:
        """
        @return: why a message sent at C{sentAt} with C{msgId} must be
            dropped now, or L{None} to handle it.
        """
        self._forget(now)
        if sentAt < now - self.maxAge:
            return f"it was sent {now - sentAt:.0f} s ago (the window is {self.maxAge:.0f} s)"
        if sentAt > now + FUTURE_SKEW:
            return f"it is dated {sentAt - now:.0f} s in the future"
        if msgId in self._seen:
            return "a copy of it was handled already"
        return None

    def handled(self, msgId: bytes, sentAt: float) -> None:
        """
        Remember that the message C{msgId}, sent at C{sentAt}, was handled.
        """
        self._seen[msgId] = sentAt
        while len(self._seen) > self.cap:
            self._seen.popitem(last=False)
            self.overflowed = True

    def _forget(self, now: float) -> None:
        # In the order they were handled: one handled late but sent early
        # waits behind newer ones, which only keeps it longer.
        seen, oldest = self._seen, now - self.maxAge
        while seen:
            msgId, sentAt = next(iter(seen.items()))
            if sentAt >= oldest:
                break
            del seen[msgId]

    def __len__(self) -> int:
        return len(self._seen)


@implementer(IClusterBus)
class SealedClusterBus:
    """
    An L{IClusterBus} whose messages are sealed with the cluster key,
    over another one.
    """

    log = Logger()

    def __init__(
        self,
        inner: Any,
        key: bytes,
        clusterId: str,
        now: Callable[[], float] = time.time,
        maxAges: dict[str, float] | None = None,
    ) -> None:
        """
        @param now: the wall clock (the masters compare their times).
        @param maxAges: the replay window of each kind (L{MAX_AGES}).
        """
        self._inner = inner
        self._cipher = AesCipher(key)
        self._clusterId = clusterId
        self._now = now
        self.windows = {kind: ReplayWindow(age) for kind, age in (maxAges or MAX_AGES).items()}
        self.memberId = inner.memberId

    @property
    def maxPayload(self) -> int:
        """
        The inner bus's limit less the seal.
        """
        return self._inner.maxPayload - SEAL_BYTES  # type: ignore[no-any-return]

    @property
    def outbox(self) -> Any:
        """
        The inner bus's outbox.
        """
        return self._inner.outbox

    @property
    def connected(self) -> bool:
        """
        Whether the inner bus is connected.
        """
        return self._inner.connected  # type: ignore[no-any-return]

    @property
    def unreachableLimit(self) -> float:
        """
        The inner bus's limit.
        """
        return self._inner.unreachableLimit  # type: ignore[no-any-return]

    def _aad(self, kind: str) -> bytes:
        return f"salttwist-cluster/{self._clusterId}/{kind}".encode()

    def subscribe(self, kind: str, handler: Callable[[bytes], Any]) -> None:
        """
        See L{IClusterBus.subscribe}: C{handler} gets the opened message; one
        that does not open is dropped (acknowledged) and logged.
        """
        aad = self._aad(kind)
        window = self.windows.get(kind)
        if window is None:
            # An unknown kind: the inner bus refuses it below.
            window = ReplayWindow(max(MAX_AGES.values()))

        def opened(payload: bytes) -> Any:
            try:
                plaintext = self._cipher.decrypt(payload, aad)
                if len(plaintext) < _HEADER.size:
                    raise CryptError("no header")
            except CryptError:
                self.log.warn(
                    "cluster: dropped a {kind} message that does not open with this "
                    "master's cluster key (a master with another cluster.key, or a forgery)",
                    kind=kind,
                )
                return None
            sentAt, msgId = _HEADER.unpack_from(plaintext)
            why = window.why(msgId, sentAt, self._now())
            if why is not None:
                self.log.warn(
                    "cluster: dropped a {kind} message: {why} (a replay, or a clock far off)",
                    kind=kind,
                    why=why,
                )
                return None
            if window.overflowed:
                window.overflowed = False
                self.log.warn(
                    "cluster: more than {cap} {kind} messages within {age:.0f} s: the oldest "
                    "ids were forgotten early, so a replay of those would not be seen",
                    cap=window.cap,
                    kind=kind,
                    age=window.maxAge,
                )
            d = maybeDeferred(handler, plaintext[_HEADER.size :])
            d.addCallback(lambda result: (window.handled(msgId, sentAt), result)[1])
            return d

        self._inner.subscribe(kind, opened)

    def publish(self, kind: str, payload: bytes) -> Any:
        """
        See L{IClusterBus.publish}.
        """
        header = _HEADER.pack(self._now(), os.urandom(12))
        return self._inner.publish(kind, self._cipher.encrypt(header + payload, self._aad(kind)))

    def start(self) -> None:
        """
        See L{IClusterBus.start}.
        """
        self._inner.start()

    def stop(self) -> Any:
        """
        See L{IClusterBus.stop}.
        """
        return self._inner.stop()

    def whyUnavailable(self) -> str | None:
        """
        See L{IClusterBus.whyUnavailable}.
        """
        return self._inner.whyUnavailable()  # type: ignore[no-any-return]
