# -*- test-case-name: tests.test_grainscache -*-
"""
The grains each minion reported, kept by the master so that grain targets
are matched master-side (a grain target waits only for minions that match)
and survive a master restart: one file, C{cachedir/grains.cache} (mode
0600), to which each change is appended as a record (L{packRecord}); the
last record of a minion wins, and the file is rewritten without the records
that no longer count when they make up most of it.

Writes and removals go to the disk in a thread, in batches: one batch at a
time, one append, holding everything that changed while the previous one
was written (the last change of each minion only). An auth storm of
thousands of new minions then costs a few dozen thread hops and writes,
not one per minion, and a removal can never be overtaken by an earlier
write of the same minion.

Not one file per minion (as up to this version, C{cachedir/grains/<id>},
which L{GrainsCache.load} imports once and removes): each new file is an
inode to allocate, and on ext4 without a journal each allocation scans the
inode table for recently deleted inodes; in an auth storm of 5,000 minions
that was about a fifth of the master's CPU, measured with C{perf}. Nor
SQLite, which the master process does not import (2.5 MB of memory).
"""

from __future__ import annotations

import os
import shutil
import struct
from collections.abc import Callable, Container, Iterator
from typing import Any

from twisted.internet.defer import Deferred, succeed
from twisted.logger import Logger
from twisted.python.failure import Failure
from zope.interface import implementer

from salttwist import serial
from salttwist.files import atomicWrite
from salttwist.master.interfaces import IGrainsCache
from salttwist.pki.ids import InvalidMinionId, validateMinionId

#: The largest grains map kept for one minion, serialised.
MAX_GRAINS_BYTES = 1024 * 1024
#: The file is rewritten when it is larger than this many times what its
#: records that count take (and than L{COMPACT_MIN_BYTES}).
COMPACT_RATIO = 2
COMPACT_MIN_BYTES = 1024 * 1024
_LENGTH = struct.Struct(">I")


@implementer(IGrainsCache)
class GrainsCache:
    """
    Minion id -> grains, in memory, written through to the file at
    C{path} (nowhere if L{None}).

    @ivar grains: the cached grains by minion id.
    """

    log = Logger()

    def __init__(self, path: str | None, runBlocking: Callable[..., Deferred]) -> None:
        self._path = path
        self._runBlocking = runBlocking
        self.grains: dict[str, dict[str, Any]] = {}
        #: The ids whose grains in memory are known to be the ones on disk
        #: (read at start, or written since): the same grains reported
        #: again are not written again.
        self._onDisk: set[str] = set()
        #: What the next batch writes (bytes) or removes (L{None}), by id.
        self._queued: dict[str, bytes | None] = {}
        #: Who waits for each id of the next batch.
        self._queuedWaiters: dict[str, list[Deferred[None]]] = {}
        self._writing = False
        #: The size of the file, and of its records that count (the last
        #: one of each minion that has grains).
        self._fileBytes = 0
        self._liveBytes: dict[str, int] = {}

    def load(self) -> None:
        """
        Read the file (blocking: at start, before the reactor runs); import
        the files of the older C{cachedir/grains/} directory, if any, and
        remove it. Records with invalid ids or contents are skipped with a
        log line; a damaged end (a crash in the middle of an append) is
        dropped. The file is rewritten if that left it mostly records that
        no longer count.
        """
        if self._path is None:
            return
        directory = os.path.dirname(self._path) or "."
        os.makedirs(directory, mode=0o700, exist_ok=True)
        latest: dict[str, bytes | None] = {}
        try:
            with open(self._path, "rb") as f:
                content = f.read()
        except FileNotFoundError:
            content = b""
        damaged = False
        for record in readRecords(content):
            if record is None:
                damaged = True
                self.log.warn("dropped the damaged end of {path}", path=self._path)
                break
            latest[record[0]] = record[1]
        legacy = os.path.join(directory, "grains")
        imported = self._importLegacy(legacy) if os.path.isdir(legacy) else {}
        latest.update(imported)
        for name, data in latest.items():
            if data is None:
                continue
            try:
                minionId = validateMinionId(name)
                grains = serial.loads(data)
            except (InvalidMinionId, serial.SerialError) as e:
                self.log.warn("skipping cached grains of {name!r}: {e}", name=name, e=e)
                continue
            if isinstance(grains, dict):
                self.grains[minionId] = grains
                self._onDisk.add(minionId)
                self._liveBytes[minionId] = len(packRecord(minionId, data))
        self._fileBytes = len(content)
        if damaged or imported or self._compactDue():
            self._fileBytes = rewriteRecords(self._path, self._liveRecords())
        if imported:
            shutil.rmtree(legacy, ignore_errors=True)
            self.log.info(
                "imported the grains of {n} minions from {dir} into {path}",
                n=len(imported),
                dir=legacy,
                path=self._path,
            )

    def _importLegacy(self, directory: str) -> dict[str, bytes | None]:
        imported: dict[str, bytes | None] = {}
        for name in os.listdir(directory):
            try:
                minionId = validateMinionId(name)
                with open(os.path.join(directory, minionId), "rb") as f:
                    data = f.read(MAX_GRAINS_BYTES + 1)
                serial.loads(data)
            except (InvalidMinionId, OSError, serial.SerialError) as e:
                self.log.warn("skipping cached grains {name!r}: {e}", name=name, e=e)
                continue
            imported[minionId] = data
        return imported

    def _compactDue(self) -> bool:
        live = sum(self._liveBytes.values())
        return self._fileBytes > max(COMPACT_MIN_BYTES, COMPACT_RATIO * live)

    def _liveRecords(self, leaveOut: Container[str] = ()) -> list[bytes]:
        """
        @return: the records that count: the current grains of each
            minion whose grains are on disk (but those of C{leaveOut}).
        """
        return [
            packRecord(minionId, serial.dumps(self.grains[minionId]))
            for minionId in self._onDisk
            if minionId in self.grains and minionId not in leaveOut
        ]

    def update(self, minionId: str, grains: dict[str, Any]) -> Deferred[None]:
        """
        Record C{grains} for C{minionId} (an authenticated session's id).
        Grains equal to those already on disk for it (a minion
        authenticating again, as a whole fleet does after a master
        restart) are not written again.

        @raise ValueError: if C{grains} is not a map or is too large.
        """
        if not isinstance(grains, dict):
            raise ValueError("grains must be a map")
        if minionId in self._onDisk and self.grains.get(minionId) == grains:
            return succeed(None)
        data = serial.dumps(grains)
        if len(data) > MAX_GRAINS_BYTES:
            raise ValueError(f"grains of {len(data)} bytes exceed {MAX_GRAINS_BYTES}")
        self.grains[minionId] = grains
        self._onDisk.discard(minionId)
        if self._path is None:
            return succeed(None)

        def written(_: object) -> None:
            # Unless newer grains came meanwhile (their write is on its way).
            if self.grains.get(minionId) is grains:
                self._onDisk.add(minionId)

        return self._enqueue(minionId, data).addCallback(written)

    def forget(self, minionId: str) -> Deferred[None]:
        """
        Drop what is cached for C{minionId} (its key was deleted).
        """
        self.grains.pop(minionId, None)
        self._onDisk.discard(minionId)
        if self._path is None:
            return succeed(None)
        return self._enqueue(validateMinionId(minionId), None)

    def _enqueue(self, minionId: str, data: bytes | None) -> Deferred[None]:
        """
        Write C{data} as C{minionId}'s record (a removal if L{None}) with
        the next batch, replacing what that batch would have done to it.

        @return: a L{Deferred} that fires once the batch is written, or
            fails with its error.
        """
        self._queued[minionId] = data
        waiter: Deferred[None] = Deferred()
        self._queuedWaiters.setdefault(minionId, []).append(waiter)
        if not self._writing:
            self._writeBatch()
        return waiter

    def _writeBatch(self) -> None:
        """
        Start writing everything queued, in a thread: appended, or the whole
        file rewritten when it holds mostly records that no longer count;
        start the next batch when this one is done.
        """
        assert self._path is not None
        batch, self._queued = self._queued, {}
        waiters, self._queuedWaiters = self._queuedWaiters, {}
        self._writing = True
        records = []
        for minionId, data in batch.items():
            record = packRecord(minionId, data)
            records.append(record)
            if data is None:
                self._liveBytes.pop(minionId, None)
            else:
                self._liveBytes[minionId] = len(record)
        self._fileBytes += sum(map(len, records))
        if self._compactDue():
            # Every minion's current grains: those on disk, and this batch's.
            records = self._liveRecords(leaveOut=batch)
            records += [packRecord(m, data) for m, data in batch.items() if data is not None]
            self._fileBytes = sum(map(len, records))
            d = self._runBlocking(rewriteRecords, self._path, records)
        else:
            d = self._runBlocking(appendRecords, self._path, records)

        def done(result: object) -> None:
            self._writing = False
            error = result if isinstance(result, Failure) else None
            if error is not None:
                error = Failure(OSError(f"the grains cache could not be written: {error.value}"))
            for idWaiters in waiters.values():
                for waiter in idWaiters:
                    if error is None:
                        waiter.callback(None)
                    else:
                        waiter.errback(error)
            if self._queued:
                self._writeBatch()

        d.addBoth(done)


def packRecord(minionId: str, data: bytes | None) -> bytes:
    """
    One record of the grains file: a 4-byte big-endian length, then the
    msgpack array C{[minionId, data]} (the serialised grains, or L{None}
    for a removal).
    """
    body = serial.dumps([minionId, data])
    return _LENGTH.pack(len(body)) + body


def readRecords(content: bytes) -> Iterator[tuple[str, bytes | None] | None]:
    """
    The records of a grains file, in order; L{None} last if its end is
    damaged (cut short or not a record), after which nothing is read.
    """
    offset, size = 0, len(content)
    while offset < size:
        end = offset + _LENGTH.size
        if end > size:
            yield None
            return
        (length,) = _LENGTH.unpack_from(content, offset)
        if end + length > size:
            yield None
            return
        try:
            record = serial.loads(content[end : end + length])
        except serial.SerialError:
            record = None
        if (
            not isinstance(record, list)
            or len(record) != 2
            or not isinstance(record[0], str)
            or not isinstance(record[1], (bytes, type(None)))
        ):
            yield None
            return
        yield record[0], record[1]
        offset = end + length


def appendRecords(path: str, records: list[bytes]) -> None:
    """
    Append C{records} to the file at C{path} (created 0600, never through
    a symbolic link) in one write. Blocking: run in a thread.

    Not synced: minions report their grains at every authentication, so a
    cache lost in a crash is rebuilt, and thousands of minions
    authenticating at once must not queue on the disk.
    """
    fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
    try:
        view = memoryview(b"".join(records))
        while view:
            view = view[os.write(fd, view) :]
    finally:
        os.close(fd)


def rewriteRecords(path: str, records: list[bytes]) -> int:
    """
    Replace the file at C{path} with C{records} (atomically, 0600).
    Blocking: run in a thread.

    @return: the file's new size.
    """
    data = b"".join(records)
    atomicWrite(path, data, 0o600, durable=False)
    return len(data)
