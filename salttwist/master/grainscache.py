# -*- test-case-name: tests.test_grainscache -*-
"""
The grains each minion reported, kept by the master so that grain targets
are matched master-side (a grain target waits only for minions that match)
and survive a master restart: one msgpack file per minion in
C{cachedir/grains/}.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Callable
from typing import Any

from twisted.internet.defer import Deferred, succeed
from twisted.logger import Logger

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

        # Not fsynced: minions report their grains at every authentication,
        # so a cache lost in a crash is rebuilt, and thousands of minions
        # authenticating at once must not queue on the disk.
        return self._runBlocking(
            writePrivateFile, os.path.join(self._directory, minionId), data, False
        ).addCallback(written)

    def forget(self, minionId: str) -> Deferred[None]:
        """
        Drop what is cached for C{minionId} (its key was deleted).
        """
        self.grains.pop(minionId, None)
        self._onDisk.discard(minionId)
        if self._directory is None:
            return succeed(None)
        path = os.path.join(self._directory, validateMinionId(minionId))

        def remove() -> None:
            with contextlib.suppress(FileNotFoundError):
                os.unlink(path)

        return self._runBlocking(remove)
