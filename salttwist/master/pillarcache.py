# -*- test-case-name: tests.test_master_pillarserving -*-
"""
Each minion's pillar as last compiled, kept by the master for pillar
targeting (C{-I}, C{I@}, C{J@}) and, with C{pillar_cache}, to answer
C{_pillar} without compiling again.

Held in memory only (pillar is secret: it is not written to the master's
disk), each minion's as its msgpack bytes: about a sixth of the memory of
the same data as Python objects (a 200-key pillar: 25 KB against some 150
KB; 5,000 minions: 125 MB against 750 MB), decoded when read.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any

from zope.interface import implementer

from salttwist import serial
from salttwist.master.interfaces import IPillarCache

#: The saltenv and pillarenv a pillar was compiled for (L{None}: the
#: configured default).
PillarEnv = tuple[str | None, str | None]


@implementer(IPillarCache)
class PillarCache:
    """
    Minion id -> its last compiled pillar, with when and for which
    saltenv and pillarenv it was compiled.

    @ivar pillars: the cached pillar by minion id, msgpack-encoded;
        read-only to others (L{get}, L{byId} decode it).
    """

    def __init__(self) -> None:
        self.pillars: dict[str, bytes] = {}
        #: C{(stamp, env)} of each cached pillar, by minion id.
        self._stamps: dict[str, tuple[float | None, PillarEnv]] = {}
        #: How many times each minion id was forgotten: a compile that
        #: started before a L{forget} must not store its result after it.
        self._generations: dict[str, int] = {}

    def get(self, minionId: str) -> dict[str, Any] | None:
        """
        @return: C{minionId}'s last compiled pillar, or L{None}.
        """
        packed = self.pillars.get(minionId)
        return None if packed is None else serial.loads(packed)

    def store(
        self,
        minionId: str,
        pillar: dict[str, Any],
        stamp: float | None = None,
        env: PillarEnv = (None, None),
    ) -> None:
        """
        Keep C{pillar} as C{minionId}'s.

        @param stamp: when it was compiled (the master clock's seconds);
            L{None}: unknown, never fresh for L{fresh}.
        @param env: the C{(saltenv, pillarenv)} it was compiled for.
        """
        self.storePacked(minionId, serial.dumps(pillar), stamp, env)

    def storePacked(
        self,
        minionId: str,
        packed: bytes,
        stamp: float | None = None,
        env: PillarEnv = (None, None),
    ) -> None:
        """
        L{store} a pillar given as its msgpack bytes (L{serial.dumps} of
        a mapping), kept as they are.
        """
        self.pillars[minionId] = packed
        self._stamps[minionId] = (stamp, env)

    def fresh(self, minionId: str, env: PillarEnv, now: float, ttl: float) -> dict[str, Any] | None:
        """
        @return: C{minionId}'s cached pillar if it was compiled for C{env}
            less than C{ttl} seconds before C{now} (Salt's
            C{pillar_cache_ttl}), else L{None}.
        """
        packed = self.freshPacked(minionId, env, now, ttl)
        return None if packed is None else serial.loads(packed)

    def freshPacked(self, minionId: str, env: PillarEnv, now: float, ttl: float) -> bytes | None:
        """
        @return: what L{fresh} gives, as its msgpack bytes.
        """
        packed = self.pillars.get(minionId)
        if packed is None:
            return None
        stamp, cachedEnv = self._stamps.get(minionId, (None, (None, None)))
        if stamp is None or cachedEnv != env or now - stamp >= ttl:
            return None
        return packed

    def forget(self, minionId: str) -> None:
        """
        Drop C{minionId}'s pillar (its key was deleted or rejected).
        """
        self.pillars.pop(minionId, None)
        self._stamps.pop(minionId, None)
        self._generations[minionId] = self._generations.get(minionId, 0) + 1

    def keepOnly(self, acceptedIds: frozenset[str]) -> None:
        """
        Drop the pillar of every minion not in C{acceptedIds} (its key is
        gone, even if no C{salt/key} event said so).
        """
        for minionId in [m for m in self.pillars if m not in acceptedIds]:
            self.forget(minionId)

    def generation(self, minionId: str) -> int:
        """
        @return: how many times C{minionId} was forgotten: compare it before
            and after a compile to know whether its result may be stored.
        """
        return self._generations.get(minionId, 0)

    def byId(self) -> Mapping[str, dict[str, Any]]:
        """
        @return: every cached pillar by minion id, as they are now (later
            changes do not show): each decoded when first looked up, so
            take this on the reactor thread (it copies only references) and
            read it in a thread if there are many.
        """
        return PackedPillars(dict(self.pillars))


class PackedPillars(Mapping[str, dict[str, Any]]):
    """
    Pillars by minion id over their msgpack bytes, each decoded once, when
    first looked up (a pillar target reads only the minions it considers).
    """

    def __init__(self, packed: dict[str, bytes]) -> None:
        self._packed = packed
        self._decoded: dict[str, dict[str, Any]] = {}

    def __getitem__(self, minionId: str) -> dict[str, Any]:
        pillar = self._decoded.get(minionId)
        if pillar is None:
            pillar = self._decoded[minionId] = serial.loads(self._packed[minionId])
        return pillar

    def __iter__(self) -> Iterator[str]:
        return iter(self._packed)

    def __len__(self) -> int:
        return len(self._packed)

    def __contains__(self, minionId: object) -> bool:
        return minionId in self._packed
