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
C{cluster_job_max_age}. The drops are logged in one line per kind every
L{DROP_LOG_INTERVAL} seconds at most, counting them (L{DropCounter}): a
copy of a message handled already at C{info} (the broker delivers again
what it did not see acknowledged, after every reconnection: hundreds of
copies after a big job), a message outside the window as a warning.

The key rotates without stopping the cluster (L{ClusterKeyring}): a
sealed message starts with the id of the key that sealed it (L{keyId}: the
first bytes of a hash of the key), so a master opens it with that key,
its current one (C{cluster.key}, which seals) or one of its previous ones
(C{cluster.previous_keys}, accepted for C{cluster_previous_keys_grace}
seconds after the master first read them). L{ClusterKeyWatcher} reads the
files again when they change. The format before key ids is not read: all
the masters of a cluster are upgraded together.
"""

from __future__ import annotations

import hashlib
import os
import struct
import time
from collections import OrderedDict
from collections.abc import Callable, Sequence
from typing import Any

from twisted.internet.defer import maybeDeferred
from twisted.internet.interfaces import IDelayedCall, IReactorTime
from twisted.internet.task import LoopingCall
from twisted.logger import Logger
from zope.interface import implementer

from salttwist.cluster.interfaces import EVENT, JOB, RETURN, IClusterBus
from salttwist.crypt import newAesKey, writePrivateFile
from salttwist.daemon import StartupError, checkPrivatePath
from salttwist.symmetric import AES_KEY_BYTES, NONCE_BYTES, TAG_BYTES, AesCipher, CryptError

#: The shared key's file in C{cluster_pki_dir}.
CLUSTER_KEY_FILE = "cluster.key"
#: The file of the keys that still open messages but seal none (one a line).
PREVIOUS_KEYS_FILE = "cluster.previous_keys"
#: Bytes of a key's id, in clear at the start of every sealed message.
KEY_ID_BYTES = 4
#: What a sealed message starts with, inside the seal: its sending time
#: (seconds since the epoch, a double) and a random id.
_HEADER = struct.Struct("!d12s")
#: Bytes a seal adds to a message.
SEAL_BYTES = KEY_ID_BYTES + NONCE_BYTES + TAG_BYTES + _HEADER.size
#: Seconds between two looks at the key files (L{ClusterKeyWatcher}).
KEY_CHECK_INTERVAL = 10.0
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
#: Seconds between two log lines about the messages of one kind dropped
#: for one reason (L{DropCounter}): the first is logged at once, the
#: others counted and logged together.
DROP_LOG_INTERVAL = 10.0
#: The words for the kinds of messages in the drops' log lines.
_KIND_WORDS = {EVENT: "event", JOB: "job", RETURN: "return"}
#: Why L{ReplayWindow.why} drops a message whose id it has seen.
HANDLED_ALREADY = "a copy of it was handled already"


class ClusterKeyError(ValueError):
    """
    The cluster key file is unusable; the message says why.
    """


def keyId(key: bytes) -> bytes:
    """
    @return: the id of a cluster key: the first L{KEY_ID_BYTES} bytes of a
        SHA-256 of it (in its own domain), which tells which key sealed a
        message and shows in logs, without telling anything of the key.
    """
    return hashlib.sha256(b"salttwist cluster key id\0" + key).digest()[:KEY_ID_BYTES]


def _readPrivate(path: str, what: str, runAs: str | None) -> bytes:
    """
    Read a key file after the check the daemon makes of its other private
    files (L{salttwist.daemon.checkPrivatePath}): a regular file, not a
    symlink, owned by root, this process's user or C{runAs}, mode 0600 or
    less; opened without following a symlink. Blocking.

    @raise FileNotFoundError: there is no such file.
    @raise ClusterKeyError: the check refuses it, saying why.
    """
    try:
        checkPrivatePath(path, 0o077, runAs=runAs)
    except StartupError as e:
        reason = str(e).removeprefix("refusing to start: ")
        raise ClusterKeyError(f"the {what}: {reason}") from e
    fd = os.open(path, os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0))
    with os.fdopen(fd, "rb") as f:
        return f.read()


def _parseKey(text: bytes) -> bytes | None:
    try:
        key = bytes.fromhex(text.decode("ascii"))
    except (UnicodeDecodeError, ValueError):
        return None
    return key if len(key) == AES_KEY_BYTES else None


def loadPreviousKeys(directory: str, runAs: str | None = None) -> list[bytes]:
    """
    Read C{directory}'s L{PREVIOUS_KEYS_FILE}: a key (64 hex digits) a line;
    blank lines and lines starting with C{#} are skipped. Blocking.

    @param runAs: the C{user} option (its user may own the file).
    @return: the keys, none if there is no such file.
    @raise ClusterKeyError: the file is refused as the daemon's private
        files are (see L{_readPrivate}), or a line is not a key (its number
        is given, never its text).
    """
    path = os.path.join(directory, PREVIOUS_KEYS_FILE)
    try:
        text = _readPrivate(path, "previous cluster keys", runAs)
    except FileNotFoundError:
        return []
    keys = []
    for number, line in enumerate(text.splitlines(), 1):
        line = line.strip()
        if not line or line.startswith(b"#"):
            continue
        key = _parseKey(line)
        if key is None:
            raise ClusterKeyError(
                f"{path}: line {number} is not a cluster key ({AES_KEY_BYTES * 2} hex digits)"
            )
        keys.append(key)
    return keys


def loadOrCreateClusterKey(directory: str, runAs: str | None = None) -> tuple[bytes, str, bool]:
    """
    Read the cluster key from C{directory}, making one (and the directory,
    mode 0700) if there is none.

    @param runAs: the C{user} option (its user may own the file).
    @return: the key, its file's path, and whether it was just made.
    @raise ClusterKeyError: the file is not 64 hex digits, or it is refused
        as the daemon's private files are (see L{_readPrivate}).
    """
    path = os.path.join(directory, CLUSTER_KEY_FILE)
    try:
        return readClusterKey(path, runAs), path, False
    except FileNotFoundError:
        os.makedirs(directory, mode=0o700, exist_ok=True)
        key = newAesKey()
        writePrivateFile(path, key.hex().encode() + b"\n")
        return key, path, True


def readClusterKey(path: str, runAs: str | None = None) -> bytes:
    """
    Read a cluster key file (never making one).

    @raise FileNotFoundError: there is none.
    @raise ClusterKeyError: see L{loadOrCreateClusterKey}.
    """
    key = _parseKey(_readPrivate(path, "cluster key", runAs).strip())
    if key is None:
        raise ClusterKeyError(f"{path}: not a cluster key ({AES_KEY_BYTES * 2} hex digits)")
    return key


class ClusterKeyring:
    """
    The cluster keys a master holds: the current one, which seals and
    opens, and the previous ones, which only open, each for C{grace}
    seconds after it became a previous key on this master (added as one, or
    moved there from current in a rotation's step 2), so a key left behind
    after a rotation stops working by itself.

    @ivar currentId: the current key's L{keyId}.
    """

    log = Logger()

    def __init__(
        self,
        current: bytes,
        previous: Sequence[bytes] = (),
        grace: float | None = None,
        now: Callable[[], float] = time.monotonic,
    ) -> None:
        """
        @param grace: seconds a previous key opens messages (L{None}: until
            it is taken out).
        @param now: a clock for the grace (monotonic: a wall clock set back
            would prolong it).
        @raise ClusterKeyError: two different keys have the same id.
        """
        self.grace = grace
        self._now = now
        #: When each previous key became one (a current key has no entry).
        self._previousSince: dict[bytes, float] = {}
        self._expiredLogged: set[bytes] = set()
        self.update(current, previous)

    def update(self, current: bytes, previous: Sequence[bytes] = ()) -> None:
        """
        Hold these keys from now on (the key files were read again). A key
        previous before and still previous keeps the time it became one; a
        key that was current (or not held) and is now previous starts its
        grace now.

        @raise ClusterKeyError: two different keys have the same id; the
            keys held are not changed.
        """
        byId: dict[bytes, bytes] = {}
        for key in (current, *previous):
            kid = keyId(key)
            if byId.get(kid, key) != key:
                raise ClusterKeyError(
                    f"two cluster keys have the same id {kid.hex()}: make a new key"
                )
            byId[kid] = key
        now = self._now()
        currentId = keyId(current)
        self.currentId = currentId
        self._sealer = AesCipher(current)
        self._openers = {kid: AesCipher(key) for kid, key in byId.items()}
        self._previousSince = {
            kid: self._previousSince.get(kid, now) for kid in byId if kid != currentId
        }
        self._expiredLogged &= set(self._previousSince)

    @property
    def previousIds(self) -> list[bytes]:
        """
        The ids of the previous keys held (expired or not).
        """
        return [kid for kid in self._openers if kid != self.currentId]

    def seal(self, plaintext: bytes, aad: bytes) -> bytes:
        """
        @return: the current key's id, then C{plaintext} sealed with it
            (AES-256-GCM, the id bound to it too).
        """
        kid = self.currentId
        return kid + self._sealer.encrypt(plaintext, aad + kid)

    def open(self, sealed: bytes, aad: bytes) -> bytes:
        """
        @return: the plaintext of a message L{seal}ed with a key held.
        @raise CryptError: saying why it does not open: a key this master
            does not hold (its id given), a previous key past its grace, or
            a message that is not sealed with the key its id names.
        """
        kid = sealed[:KEY_ID_BYTES]
        cipher = self._openers.get(kid) if len(kid) == KEY_ID_BYTES else None
        if cipher is None:
            raise CryptError(f"it is sealed with a key this master does not hold (id {kid.hex()})")
        if kid != self.currentId and self.grace is not None:
            if self._now() - self._previousSince[kid] > self.grace:
                raise CryptError(
                    f"it is sealed with the previous key {kid.hex()}, whose grace "
                    f"({self.grace:.0f} s) has passed"
                )
        return cipher.decrypt(sealed[KEY_ID_BYTES:], aad + kid)

    def expiredIds(self) -> list[bytes]:
        """
        @return: the previous keys past their grace, each only once (to log
            that they can be taken out).
        """
        if self.grace is None:
            return []
        now, expired = self._now(), []
        for kid in self.previousIds:
            if kid not in self._expiredLogged and now - self._previousSince[kid] > self.grace:
                self._expiredLogged.add(kid)
                expired.append(kid)
        return expired


def _fileSignature(path: str) -> tuple[int, int, int] | None:
    try:
        info = os.stat(path)
    except FileNotFoundError:
        return None
    return (info.st_ino, info.st_size, info.st_mtime_ns)


class ClusterKeyWatcher:
    """
    Reads the key files again when they change (looked at every
    L{KEY_CHECK_INTERVAL} seconds), so a rotation needs no restart. Files
    that cannot be read, or do not hold keys, are logged, and the keys held
    are kept until they are fixed.
    """

    log = Logger()

    def __init__(
        self,
        directory: str,
        keyring: ClusterKeyring,
        clock: Any,
        interval: float = KEY_CHECK_INTERVAL,
        runAs: str | None = None,
    ) -> None:
        """
        @param runAs: the C{user} option (its user may own the key files).
        """
        self.directory = directory
        self._runAs = runAs
        self.keyring = keyring
        self._paths = [
            os.path.join(directory, name) for name in (CLUSTER_KEY_FILE, PREVIOUS_KEYS_FILE)
        ]
        self._seen = self._signatures()
        self._loop = LoopingCall(self.check)
        self._loop.clock = clock
        self._interval = interval

    def _signatures(self) -> list[tuple[int, int, int] | None]:
        return [_fileSignature(path) for path in self._paths]

    def start(self) -> None:
        """
        Look at the files every interval.
        """
        self._loop.start(self._interval, now=False)

    def stop(self) -> None:
        """
        Stop looking.
        """
        if self._loop.running:
            self._loop.stop()

    def check(self) -> None:
        """
        Read the files again if they changed since last read; log the
        previous keys whose grace has passed. Two C{stat}s, and a read of
        a few hundred bytes when they changed: short enough for the reactor.
        """
        for kid in self.keyring.expiredIds():
            self.log.warn(
                "cluster: the previous cluster key {id} no longer opens messages (its grace "
                "has passed): take it out of {path}",
                id=kid.hex(),
                path=self._paths[1],
            )
        signatures = self._signatures()
        if signatures == self._seen:
            return
        try:
            # Never made afresh here: a new key would cut this master off.
            current = readClusterKey(self._paths[0], self._runAs)
            previous = loadPreviousKeys(self.directory, self._runAs)
            before = self.keyring.currentId
            self.keyring.update(current, previous)
        except FileNotFoundError:
            self.log.error("cluster: {path} is gone; keeping the keys held", path=self._paths[0])
            return
        except (ClusterKeyError, OSError) as e:
            # Not remembered as seen: a file caught half-written is read
            # again at the next look.
            self.log.error(
                "cluster: cannot read the cluster keys again ({error}); keeping the keys held",
                error=str(e),
            )
            return
        self._seen = signatures
        self.log.info(
            "cluster: cluster keys read again: sealing with {current}{changed}, "
            "also opening {previous}",
            current=self.keyring.currentId.hex(),
            changed="" if before == self.keyring.currentId else f" (was {before.hex()})",
            previous=", ".join(kid.hex() for kid in self.keyring.previousIds) or "no other",
        )


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
            return HANDLED_ALREADY
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


class DropCounter:
    """
    Counts the messages dropped for one reason and logs them in one line
    every C{interval} seconds at most: the first drop after a quiet
    interval at once, the ones after it together when the interval ends,
    so a burst of thousands makes two lines, and every drop is counted in
    one.
    """

    def __init__(
        self,
        clock: IReactorTime,
        emit: Callable[[int, str], None],
        interval: float = DROP_LOG_INTERVAL,
    ) -> None:
        """
        @param emit: writes the line: called with how many were dropped
            since the last line, and why the last one was.
        """
        self._clock = clock
        self._emit = emit
        self.interval = interval
        #: Drops not yet logged, and why the last one was dropped.
        self.count = 0
        self._why = ""
        self._loggedAt = float("-inf")
        self._timer: IDelayedCall | None = None

    def dropped(self, why: str) -> None:
        """
        One more message was dropped, because of C{why}.
        """
        self.count += 1
        self._why = why
        if self._timer is not None:
            return
        now = self._clock.seconds()
        due = self._loggedAt + self.interval
        if now >= due:
            self._log()
        else:
            self._timer = self._clock.callLater(due - now, self._due)

    def _due(self) -> None:
        self._timer = None
        self._log()

    def _log(self) -> None:
        count, self.count = self.count, 0
        self._loggedAt = self._clock.seconds()
        if count:
            self._emit(count, self._why)

    def stop(self) -> None:
        """
        Log the drops not yet logged, and leave no timer running.
        """
        if self._timer is not None:
            if self._timer.active():
                self._timer.cancel()
            self._timer = None
        self._log()


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
        key: bytes | ClusterKeyring,
        clusterId: str,
        now: Callable[[], float] = time.time,
        maxAges: dict[str, float] | None = None,
        clock: IReactorTime | None = None,
    ) -> None:
        """
        @param key: the cluster key, or the keys (a L{ClusterKeyring}).
        @param now: the wall clock (the masters compare their times).
        @param maxAges: the replay window of each kind (L{MAX_AGES}).
        @param clock: the timers of the log lines about dropped messages
            (L{DropCounter}); the global reactor, found when first needed,
            if L{None}.
        """
        self._inner = inner
        #: The keys that seal and open.
        self.keyring = key if isinstance(key, ClusterKeyring) else ClusterKeyring(key)
        self._clusterId = clusterId
        self._now = now
        self.windows = {kind: ReplayWindow(age) for kind, age in (maxAges or MAX_AGES).items()}
        self.memberId = inner.memberId
        self._clock = clock
        #: The counters of dropped messages, by kind and reason (copies
        #: handled already, or outside the window), made at the first.
        self.drops: dict[tuple[str, bool], DropCounter] = {}

    def _dropped(self, kind: str, why: str) -> None:
        """
        A C{kind} message was dropped by the replay window because of
        C{why}: counted, and logged with the others (L{DropCounter}).
        """
        copy = why == HANDLED_ALREADY
        counter = self.drops.get((kind, copy))
        if counter is None:
            if self._clock is None:
                from twisted.internet import reactor

                self._clock = reactor  # type: ignore[assignment]
            assert self._clock is not None
            word = _KIND_WORDS.get(kind, kind)
            if copy:

                def emit(count: int, why: str) -> None:
                    self.log.info(
                        "cluster: dropped {count} {kind} message(s) this master had handled "
                        "already, since the last such line: the broker delivers again what "
                        "it did not see acknowledged (after a reconnection: normal); many "
                        "with no reconnection would be a replay",
                        count=count,
                        kind=word,
                    )

            else:

                def emit(count: int, why: str) -> None:
                    self.log.warn(
                        "cluster: dropped {count} {kind} message(s) outside the replay "
                        "window, since the last such line; the last because {why} (a "
                        "replay, or a clock far off)",
                        count=count,
                        kind=word,
                        why=why,
                    )

            counter = self.drops[kind, copy] = DropCounter(self._clock, emit)
        counter.dropped(why)

    @property
    def maxPayload(self) -> int:
        """
        The inner bus's limit less the seal.
        """
        return self._inner.maxPayload - SEAL_BYTES  # type: ignore[no-any-return]

    def bufferedSize(self, size: int) -> int:
        """
        @return: the bytes a message of C{size} bytes takes in the
            L{outbox} (which holds it sealed: L{SEAL_BYTES} more).
        """
        return size + SEAL_BYTES

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
                plaintext = self.keyring.open(payload, aad)
                if len(plaintext) < _HEADER.size:
                    raise CryptError("no header")
            except CryptError as e:
                self.log.warn(
                    "cluster: dropped a {kind} message that does not open with this "
                    "master's cluster keys ({why}): a master with another cluster.key, "
                    "or a forgery",
                    kind=kind,
                    why=str(e) or "not sealed with the key its id names",
                )
                return None
            sentAt, msgId = _HEADER.unpack_from(plaintext)
            why = window.why(msgId, sentAt, self._now())
            if why is not None:
                self._dropped(kind, why)
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
        return self._inner.publish(kind, self.keyring.seal(header + payload, self._aad(kind)))

    def start(self) -> None:
        """
        See L{IClusterBus.start}.
        """
        self._inner.start()

    def stop(self) -> Any:
        """
        See L{IClusterBus.stop}: the drops not yet logged are logged.
        """
        for counter in self.drops.values():
            counter.stop()
        return self._inner.stop()

    def whyUnavailable(self) -> str | None:
        """
        See L{IClusterBus.whyUnavailable}.
        """
        return self._inner.whyUnavailable()  # type: ignore[no-any-return]
