# -*- test-case-name: tests.test_grainscache -*-
"""
The grains each minion reported, kept by the master so that grain targets
are matched master-side (a grain target waits only for minions that match)
and survive a master restart: one msgpack file per minion in
C{cachedir/grains/}.

Writes and removals go to the disk in a thread, in batches: one batch at a
time, holding everything that changed while the previous one was written
(the last change of each minion only). An auth storm of thousands of new
minions then costs a few dozen thread hops, not one per minion, and a
removal can never be overtaken by an earlier write of the same file.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Callable
from typing import Any

from twisted.internet.defer import Deferred, succeed
from twisted.logger import Logger
from twisted.python.failure import Failure

from salttwist import serial
from salttwist.crypt import writePrivateFile
from salttwist.pki.ids import InvalidMinionId, validateMinionId

#: The largest grains map kept for one minion, serialised.
MAX_GRAINS_BYTES = 1024 * 1024


class GrainsCache:
    """
    Minion id -> grains, in memory, written through to C{directory}.

    @ivar grains: the cached grains by minion id.
    """

    log = Logger()

    def __init__(self, directory: str | None, runBlocking: Callable[..., Deferred]) -> None:
        self._directory = directory
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

    def load(self) -> None:
        """
        Read every cached file (blocking: at start, before the reactor runs).
        Unreadable or invalid files are skipped with a log line.
        """
        if self._directory is None:
            return
        os.makedirs(self._directory, mode=0o700, exist_ok=True)
        for name in os.listdir(self._directory):
            try:
                minionId = validateMinionId(name)
                with open(os.path.join(self._directory, minionId), "rb") as f:
                    grains = serial.loads(f.read(MAX_GRAINS_BYTES + 1))
            except (InvalidMinionId, OSError, serial.SerialError) as e:
                self.log.warn("skipping cached grains {name!r}: {e}", name=name, e=e)
                continue
            if isinstance(grains, dict):
                self.grains[minionId] = grains
                self._onDisk.add(minionId)

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
        if self._directory is None:
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
        if self._directory is None:
            return succeed(None)
        return self._enqueue(validateMinionId(minionId), None)

    def _enqueue(self, minionId: str, data: bytes | None) -> Deferred[None]:
        """
        Write C{data} as C{minionId}'s file (remove it if L{None}) with the
        next batch, replacing what that batch would have done to it.

        @return: a L{Deferred} that fires once the batch is done, or fails
            with the error of this file.
        """
        self._queued[minionId] = data
        waiter: Deferred[None] = Deferred()
        self._queuedWaiters.setdefault(minionId, []).append(waiter)
        if not self._writing:
            self._writeBatch()
        return waiter

    def _writeBatch(self) -> None:
        """
        Start writing everything queued, in a thread; start the next batch
        when this one is done.
        """
        assert self._directory is not None
        batch, self._queued = self._queued, {}
        waiters, self._queuedWaiters = self._queuedWaiters, {}
        self._writing = True

        def done(result: dict[str, Exception] | Failure) -> None:
            self._writing = False
            for minionId, idWaiters in waiters.items():
                error = result if isinstance(result, Failure) else result.get(minionId)
                for waiter in idWaiters:
                    if error is None:
                        waiter.callback(None)
                    else:
                        waiter.errback(error)
            if self._queued:
                self._writeBatch()

        self._runBlocking(applyBatch, self._directory, batch).addBoth(done)


def applyBatch(directory: str, batch: dict[str, bytes | None]) -> dict[str, Exception]:
    """
    Write each minion's grains file of C{batch} (0600, replaced atomically)
    or remove it (L{None}). Blocking: run in a thread.

    Not fsynced: minions report their grains at every authentication, so a
    cache lost in a crash is rebuilt, and thousands of minions
    authenticating at once must not queue on the disk.

    @return: the error of each file that could not be written or removed.
    """
    errors: dict[str, Exception] = {}
    for minionId, data in batch.items():
        path = os.path.join(directory, minionId)
        try:
            if data is None:
                with contextlib.suppress(FileNotFoundError):
                    os.unlink(path)
            else:
                writePrivateFile(path, data, False)
        except OSError as e:
            errors[minionId] = e
    return errors
