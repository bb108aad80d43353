# -*- test-case-name: tests.integration.test_fileserver_transfer -*-
"""
Integration tests of the file server's transfers (issue 20): a real master
serving C{file_roots} and a real minion fetching with C{cp.cache_file}
over its session, driven by the real C{salttwist} command.

A 256 MiB file is fetched whole and checked by SHA-256, while the master's
and the minion's peak resident memory (C{VmHWM} in C{/proc/<pid>/status})
must grow far less than the file: both stream it through a bounded window
of chunks. Two fetches run at once while C{test.ping} still answers
promptly.
"""

from __future__ import annotations

import hashlib
import json
import os
import time
from typing import Any

from twisted.internet.defer import Deferred, gatherResults
from twisted.internet.threads import deferToThread
from twisted.trial.unittest import TestCase

from salttwist.config import loadMinionConfig
from tests.integration.harness import Cluster, CommandResult, sleep

MINION = "minion1"
MIB = 1024 * 1024
#: The big file's size.
BIG_SIZE = 256 * MIB
#: How much a daemon's peak RSS may grow while it moves the big file:
#: the transfer window (8 chunks of 1 MiB on each side), the reply write
#: buffer and what the allocator keeps. Far less than the file.
PEAK_GROWTH_BOUND = 64 * MIB


def writeBigFile(path: str, size: int) -> str:
    """
    Write C{size} bytes of varied content in 1 MiB chunks (never the whole
    file in memory), hashing them as they are written.

    @return: the file's SHA-256.
    """
    digest = hashlib.sha256()
    os.makedirs(os.path.dirname(path), exist_ok=True)
    block = os.urandom(MIB)
    with open(path, "wb") as f:
        for i in range(size // MIB):
            chunk = i.to_bytes(8, "big") + block[8:]
            digest.update(chunk)
            f.write(chunk)
    return digest.hexdigest()


def sha256Of(path: str) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        while chunk := f.read(MIB):
            digest.update(chunk)
    return digest.hexdigest()


def peakRss(pid: int) -> int:
    """
    @return: the peak resident set size of process C{pid} (C{VmHWM}).
    """
    with open(f"/proc/{pid}/status") as status:
        for line in status:
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) * 1024
    raise AssertionError(f"no VmHWM in /proc/{pid}/status")


def cpuSeconds(pid: int) -> float:
    """
    @return: the CPU time process C{pid} used so far (user and system, its
        threads included).
    """
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


class FileTransferTests(TestCase):
    """
    C{cp.cache_file} through a real master and minion.
    """

    timeout = 600

    async def setUp(self) -> None:
        self.cluster = Cluster(self)
        self.roots = os.path.join(self.cluster.baseDir, "srv", "salt")
        os.makedirs(self.roots)
        self.cluster.writeMasterConfig(file_roots={"base": [self.roots]})
        await self.cluster.startReady((MINION,))
        self.minionCache = loadMinionConfig(
            self.cluster.minionDir(MINION),
            overrides={"root_dir": self.cluster.minionDir(MINION)},
        )["cachedir"]

    async def tearDown(self) -> None:
        await self.cluster.stopAll()

    async def cacheFile(self, url: str) -> tuple[CommandResult, Any]:
        result = await self.cluster.salt(MINION, "cp.cache_file", url, "-t", "300", "--out", "json")
        self.assertEqual(result.code, 0, self.cluster.explain(result))
        return result, json.loads(result.out)[MINION]

    async def test_bigFileStreamed(self) -> None:
        """
        A 256 MiB file arrives whole (its SHA-256 checked) in the minion's
        cache, while neither daemon's peak RSS grows by more than
        L{PEAK_GROWTH_BOUND}; fetching it again transfers nothing.
        """
        expected = await deferToThread(writeBigFile, os.path.join(self.roots, "big.bin"), BIG_SIZE)
        # The command's own cost (start, publish, return), to subtract.
        with open(os.path.join(self.roots, "tiny.txt"), "wb") as f:
            f.write(b"tiny\n")
        start = time.monotonic()
        await self.cacheFile("salt://tiny.txt")
        overhead = time.monotonic() - start
        masterPid, minionPid = self.cluster.master.pid, self.cluster.minions[MINION].pid
        assert masterPid is not None and minionPid is not None
        masterBefore, minionBefore = peakRss(masterPid), peakRss(minionPid)
        masterCpu, minionCpu = cpuSeconds(masterPid), cpuSeconds(minionPid)
        start = time.monotonic()
        result, path = await self.cacheFile("salt://big.bin")
        elapsed = time.monotonic() - start
        self.assertEqual(path, os.path.join(self.minionCache, "files", "base", "big.bin"))
        self.assertEqual(await deferToThread(sha256Of, path), expected)
        masterCpu = cpuSeconds(masterPid) - masterCpu
        minionCpu = cpuSeconds(minionPid) - minionCpu
        masterGrowth = peakRss(masterPid) - masterBefore
        minionGrowth = peakRss(minionPid) - minionBefore
        self.assertLess(masterGrowth, PEAK_GROWTH_BOUND, f"master peak grew {masterGrowth}")
        self.assertLess(minionGrowth, PEAK_GROWTH_BOUND, f"minion peak grew {minionGrowth}")
        net = max(elapsed - overhead, 1e-3)
        print(
            f"\n256 MiB cold: {elapsed:.2f} s with the command ({BIG_SIZE / MIB / elapsed:.0f} "
            f"MiB/s), {net:.2f} s without the command's own {overhead:.2f} s "
            f"({BIG_SIZE / MIB / net:.0f} MiB/s, the master's first hash of the file "
            f"included); peak RSS growth master {masterGrowth / MIB:.1f} MiB, minion "
            f"{minionGrowth / MIB:.1f} MiB; CPU master {masterCpu:.2f} s, minion "
            f"{minionCpu:.2f} s"
        )
        mtime = os.stat(path).st_mtime_ns
        start = time.monotonic()
        await self.cacheFile("salt://big.bin")
        print(f"256 MiB cached re-check: {time.monotonic() - start:.2f} s with the command")
        self.assertEqual(os.stat(path).st_mtime_ns, mtime)

    async def test_parallelFetchesLeaveJobsAnswering(self) -> None:
        """
        Two fetches run at once (both files arrive whole) while a
        C{test.ping} job answers: its answer comes before either fetch has
        returned (a minion busy with the transfers would answer after
        them). How long the ping took is printed.
        """
        size = 128 * MIB
        hashes = {}
        for name in ("one.bin", "two.bin"):
            hashes[name] = await deferToThread(writeBigFile, os.path.join(self.roots, name), size)
        fetches = gatherResults(
            [
                Deferred.fromCoroutine(self.cacheFile("salt://one.bin")),
                Deferred.fromCoroutine(self.cacheFile("salt://two.bin")),
            ],
            consumeErrors=True,
        )
        # Let both transfers get going before the ping.
        await sleep(0.5)
        start = time.monotonic()
        ping = await self.cluster.salt(MINION, "test.ping", "--out", "json")
        pingTime = time.monotonic() - start
        self.assertEqual(ping.code, 0, self.cluster.explain(ping))
        self.assertEqual(json.loads(ping.out), {MINION: True})
        self.assertFalse(fetches.called, "the fetches ended before the ping: make the files bigger")
        results = await fetches
        for (_, path), name in zip(results, ("one.bin", "two.bin"), strict=True):
            self.assertEqual(await deferToThread(sha256Of, path), hashes[name])
        print(f"\ntest.ping during two fetches: {pingTime:.2f} s")
