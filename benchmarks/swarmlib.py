# -*- test-case-name: tests.test_swarm -*-
"""
A swarm of simulated minions for benchmarks: the code of the command
C{benchmarks/swarm.py} (also C{salttwist-swarm} in a checkout's virtualenv,
L{salttwist.cli.swarm}). It is a benchmark tool, not part of the installed
package, so it may use the minion's internals.

Each simulated minion is the real minion protocol stack, built with
L{salttwist.minion.service.buildMinion} from its own configuration, with its
own RSA key pair: real authentication, real crypto, real TCP connections to
the master. Only the process is shared (N minions per process, or a few
processes with C{--procs}), and so are nine things that would make the swarm
slow without changing anything on the wire:

  - key pairs are generated once and kept in C{--keys-dir}, one per minion
    index, so a rerun does not spend minutes in RSA key generation;
  - those cached keys are loaded without OpenSSL's RSA consistency check
    (C{unsafe_skip_rsa_key_validation}): the swarm made them, and the check
    costs about 70 ms per key;
  - the core grains are gathered once and copied for every minion (they
    describe the same host), with each minion's own C{id};
  - authentication's RSA work runs inline on the process's reactor, not in
    a thread pool (one process simulates many minions: the hops cost as
    much as the work);
  - the master's signature over a batch of auth replies (one signature
    for the replies it answered together, see
    L{salttwist.wire.authReplyTree}) is checked once per process, not once
    per simulated minion of the batch (L{SharedVerification}); each
    minion still hashes its own reply up to the signed root;
  - a return waits up to L{SWARM_PERSIST_AFTER} seconds, not 1, for the
    master's acknowledgement before it is written to disk;
  - each key does one private-key operation while the swarm is built
    (L{_warmKey}): OpenSSL prepares a key's Montgomery and blinding values
    at its first private-key operation (about 0.8 ms of the 1.4 ms that
    first operation costs here), which a real minion pays on its own CPU
    and which would otherwise be spent in the middle of an auth storm, on
    the cores the master is measured on;
  - a publication's load is decrypted and decoded once per process, not
    once per simulated minion (L{SharedPublications}): every minion of the
    process receives the same ciphertext under the same publication key
    and would get the same load; each still checks the MAC of its own
    subscription over it first, as a real minion does;
  - the objects that building made are moved out of the garbage
    collector's reach (C{gc.freeze}), and the collector runs with the
    master's thresholds (L{salttwist._startup.MASTER_GC_THRESHOLDS}): with
    Python's defaults every full collection walks the configuration,
    grains and connections of thousands of minions, again and again.

Each process writes its counters to C{--status-dir}/shard-<i>.json every
L{STATUS_INTERVAL} seconds (see L{readStatus}), so a benchmark can tell
when every minion is authenticated or holds a new publication key. With
C{--go-file}, the minions are built first and all start connecting at once
when that file appears (an auth storm). The swarm stops by itself after
C{--duration} seconds, or on SIGTERM/SIGINT.

Besides every C{test.*} function, the simulated minions run
C{swarm.payload [size]}, which returns a string of C{size} bytes (by default
C{--return-bytes}).
"""

from __future__ import annotations

import argparse
import contextlib
import copy
import functools
import gc
import glob
import json
import os
import resource
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import ProcessPoolExecutor
from typing import Any

from cryptography.hazmat.primitives import serialization
from twisted.internet.defer import Deferred, fail, maybeDeferred

from salttwist import crypt
from salttwist._startup import MASTER_GC_THRESHOLDS
from salttwist.blocking import runSynchronously
from salttwist.config import loadMinionConfig
from salttwist.files import MASTER_PUB_FILE
from salttwist.minion import service as minionService
from salttwist.minion.core import Minion
from salttwist.modules import onReactor
from salttwist.pki.keystore import ACCEPTED, FilesystemKeyStore

#: The swarm's command, which each swarm process runs (with C{--shard}).
SWARM_SCRIPT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "swarm.py")
#: Seconds between two status files.
STATUS_INTERVAL = 0.05
#: Seconds between the counts that look at every minion (L{Swarm.status}):
#: with 5,000 minions one such count costs tens of milliseconds, which
#: every L{STATUS_INTERVAL} kept a core busy and the machine never quiet.
SCAN_INTERVAL = 0.5
#: Where keys are cached unless C{--keys-dir} says otherwise.
DEFAULT_KEYS_DIR = os.path.join("benchmarks", ".keys")
#: Seconds the minions get to close their connections when the swarm stops.
STOP_GRACE = 0.5


def raiseFileLimit() -> tuple[int, int]:
    """
    Raise this process's open-file limit to its hard limit (each simulated
    minion holds two sockets; the master two per minion). Children inherit it.

    @return: the new (soft, hard) limits.
    """
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if hard == resource.RLIM_INFINITY:
        hard = max(soft, 1 << 20)
    if soft < hard:
        with contextlib.suppress(ValueError, OSError):
            resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
    return resource.getrlimit(resource.RLIMIT_NOFILE)


def minionIdFor(prefix: str, index: int) -> str:
    """
    @return: the id of simulated minion C{index}.
    """
    return f"{prefix}{index:05d}"


def _keyPath(keysDir: str, index: int, keysize: int) -> str:
    return os.path.join(keysDir, f"rsa{keysize}-{index:05d}.pem")


def _generateKey(path: str, keysize: int) -> None:
    key = crypt.generatePrivateKey(keysize)
    crypt.writePrivateFile(path, crypt.privateKeyToPem(key))
    with open(path[: -len(".pem")] + ".pub.tmp", "wb") as f:
        f.write(crypt.publicKeyToPem(key.public_key()))
    os.replace(path[: -len(".pem")] + ".pub.tmp", path[: -len(".pem")] + ".pub")


def ensureKeys(keysDir: str, count: int, keysize: int = 2048, workers: int = 0) -> int:
    """
    Make sure C{keysDir} holds key pairs for minion indexes C{0..count-1},
    generating the missing ones in C{workers} processes (one per core by
    default).

    @return: how many were generated.
    """
    os.makedirs(keysDir, mode=0o700, exist_ok=True)
    missing = [
        _keyPath(keysDir, i, keysize)
        for i in range(count)
        if not os.path.exists(_keyPath(keysDir, i, keysize)[: -len(".pem")] + ".pub")
    ]
    if not missing:
        return 0
    workers = workers or os.cpu_count() or 1
    if len(missing) < 8 or workers == 1:
        for path in missing:
            _generateKey(path, keysize)
    else:
        with ProcessPoolExecutor(workers) as pool:
            list(pool.map(_generateKey, missing, [keysize] * len(missing), chunksize=16))
    return len(missing)


def readKeyPair(keysDir: str, index: int, keysize: int = 2048) -> tuple[bytes, bytes]:
    """
    @return: the cached private and public PEM of minion index C{index}.
    """
    path = _keyPath(keysDir, index, keysize)
    with open(path, "rb") as f:
        private = f.read()
    with open(path[: -len(".pem")] + ".pub", "rb") as f:
        public = f.read()
    return private, public


def acceptKeys(masterPkiDir: str, keysDir: str, ids: Sequence[tuple[int, str]], keysize: int):
    """
    Put the public keys of C{ids} (index, minion id) in the master's
    accepted keys, so no acceptance step is needed.
    """
    store = FilesystemKeyStore(masterPkiDir)
    for index, minionId in ids:
        _, public = readKeyPair(keysDir, index, keysize)
        store.putKey(ACCEPTED, minionId, public)


#: Seconds a simulated minion's return waits for the master's
#: acknowledgement before it is written to disk (a real minion: 1 s, see
#: L{salttwist.minion.core.PERSIST_AFTER}). Under a burst of thousands of
#: returns the master may take longer than that, and thousands of simulated
#: minions writing to one disk would take the CPU the master is measured on.
SWARM_PERSIST_AFTER = 30.0


def _fastLoadPrivateKey(pem: bytes, ownKey: bool = True) -> Any:
    key = serialization.load_pem_private_key(
        pem, password=None, unsafe_skip_rsa_key_validation=True
    )
    _warmKey(key)
    return key


def _warmKey(key: Any) -> None:
    """
    Make C{key}'s first private-key operation now (a signature nobody
    sees), so that OpenSSL's per-key preparation is not paid during the
    benchmark (see the module's docstring).
    """
    crypt.sign(key, b"salttwist-swarm: warm this key before the storm")


@contextlib.contextmanager
def _fastBuild() -> Iterator[None]:
    """
    While building the swarm: load the cached keys without the RSA
    consistency check, and gather the core grains once.
    """
    grainsCache: dict[str, Any] = {}
    realCoreGrains = minionService.coreGrains
    realLoad = crypt.loadPrivateKey
    realFunctions = minionService.loadFunctions

    def coreGrains(minionId: str, configGrains: dict[str, Any], grainsFile: Any = None) -> Any:
        if "core" not in grainsCache:
            grainsCache["core"] = realCoreGrains(minionId, {}, None)
        grains = copy.deepcopy(grainsCache["core"])
        grains["id"] = minionId
        grains.update(configGrains)
        return grains

    functions = realFunctions()
    minionService.coreGrains = coreGrains  # type: ignore[assignment]
    minionService.loadFunctions = lambda: dict(functions)  # type: ignore[assignment]
    crypt.loadPrivateKey = _fastLoadPrivateKey  # type: ignore[assignment]
    try:
        yield
    finally:
        minionService.coreGrains = realCoreGrains  # type: ignore[assignment]
        minionService.loadFunctions = realFunctions  # type: ignore[assignment]
        crypt.loadPrivateKey = realLoad  # type: ignore[assignment]


class SharedVerification:
    """
    C{crypt.verify} for a swarm process: the master's signature over a
    batch of auth replies is checked once per process instead of once per
    simulated minion of the batch (each of which would check the same
    signature, on the same message, with the same master key). A real
    minion checks it on its own CPU, about 60 us; N of them in one process
    would cost the swarm N times that per storm, which says nothing about
    the master. (Publications carry a MAC per subscriber, not a signature:
    each simulated minion checks its own.)

    Only successes are remembered (the last L{SIZE}), keyed by the public
    key's modulus and exponent, the signature and the message's SHA-256: a
    different key, signature or message is checked for real, and a failure
    is never cached.
    """

    SIZE = 64

    def __init__(self, verify: Any) -> None:
        self._verify = verify
        self._verified: dict[tuple[Any, ...], None] = {}
        self.checks = 0

    def __call__(self, publicKey: Any, signature: bytes, message: bytes) -> None:
        numbers = publicKey.public_numbers()
        key = (numbers.n, numbers.e, signature, crypt.sha256(message))
        if key in self._verified:
            return
        self.checks += 1
        self._verify(publicKey, signature, message)
        self._verified[key] = None
        if len(self._verified) > self.SIZE:
            del self._verified[next(iter(self._verified))]


class SharedPublications:
    """
    C{Jobber._openPublication} for a swarm process: a publication's load is
    decrypted and decoded once for all the simulated minions of the process
    instead of once each. Every subscriber gets the same sealed load (only
    the MAC differs per subscriber, and each minion checks its own before it
    gets here); a real minion decrypts it on its own CPU, and N of them in
    one process would cost the swarm N AES-GCM passes and msgpack decodes
    per job, which says nothing about the master.

    Only successes are remembered (the last L{SIZE}), keyed by the AES key,
    the key generation and the ciphertext: another key or ciphertext is
    opened for real, and a failure is never cached. Each minion gets its own
    copy of the load's map.
    """

    SIZE = 64

    def __init__(self) -> None:
        self._loads: dict[tuple[bytes, int, bytes], dict[str, Any]] = {}
        self.opened = 0

    def open(
        self,
        realOpen: Callable[[crypt.AesCipher, int, bytes], Any],
        cipher: crypt.AesCipher,
        kid: int,
        blob: bytes,
    ) -> Any:
        """
        @param realOpen: the minion's own C{_openPublication}, used when
            this publication was not opened in this process yet.
        """
        key = (cipher.key, kid, blob)
        load = self._loads.get(key)
        if load is None:
            self.opened += 1
            load = realOpen(cipher, kid, blob)
            if not isinstance(load, dict):
                return load
            self._loads[key] = load
            if len(self._loads) > self.SIZE:
                del self._loads[next(iter(self._loads))]
        return dict(load)


class SwarmPillar:
    """
    The pillar of a swarm process's simulated minions, for the pillar
    refresh benchmark (C{--pillar-mark}).

    Each minion's L{LoaderContext.refreshPillar} asks its master for its
    pillar over its own session (C{_pillar}, Salt's wire: C{{"cmd":
    "_pillar", "saltenv": None, "pillarenv": None, "pillar_override": None,
    "grains": {...}}} -> C{{"ret": {pillar}}}) and keeps the answer as
    C{context.pillar}, unless the minion's own code gave it a
    C{refreshPillar} already (then that one runs). Either way the refresh
    is wrapped to note, for the value of the pillar key C{markKey} each
    minion then holds, when the last minion got it: so a benchmark can
    change the master's top file, have every minion refresh (a
    C{saltutil.refresh_pillar} job, or L{refreshAll} when the trigger file
    changes) and read from the status files when all of them hold the new
    value.

    @ivar markKey: the pillar key counted.
    @ivar requests: C{_pillar} refreshes started.
    @ivar failures: refreshes that failed, with the reasons in C{reasons}.
    @ivar markLastAt: C{time.time()} at which a minion last received each
        mark value.
    """

    def __init__(self, markKey: str) -> None:
        self.markKey = markKey
        self.requests = 0
        self.failures = 0
        self.reasons: Counter[str] = Counter()
        self.markLastAt: dict[str, float] = {}
        self._minions: list[Minion] = []

    def attach(self, minion: Minion) -> None:
        """
        Give C{minion} a pillar refresh that is counted.
        """
        context = minion.executor.context
        own = context.refreshPillar or (lambda *args, **kwargs: self.fetch(minion))

        def refresh(*args: Any, **kwargs: Any) -> Any:
            self.requests += 1
            return maybeDeferred(own, *args, **kwargs).addCallbacks(
                lambda pillar: self._received(minion, pillar),
                lambda failure: self._failed(minion, failure),
            )

        context.refreshPillar = refresh
        self._minions.append(minion)

    def fetch(self, minion: Minion) -> Deferred[dict[str, Any]]:
        """
        Ask the master for C{minion}'s pillar over its session, and keep it
        as the minion's C{context.pillar}.

        @return: a L{Deferred} firing with the pillar.
        """
        req = minion.returns.req
        if req is None:
            return fail(ConnectionError(f"minion {minion.id} is not connected to its master"))
        context = minion.executor.context
        payload = {
            "cmd": "_pillar",
            "saltenv": None,
            "pillarenv": None,
            "pillar_override": None,
            "grains": context.grains,
        }

        def keep(reply: dict[str, Any]) -> dict[str, Any]:
            pillar = reply.get("ret")
            if not isinstance(pillar, dict):
                raise ValueError(f"_pillar answered {type(pillar).__name__}, not a map")
            context.pillar = pillar
            return pillar

        return maybeDeferred(req.request, payload).addCallback(keep)

    def _received(self, minion: Minion, pillar: Any) -> Any:
        mark = minion.executor.context.pillar.get(self.markKey)
        if mark is not None:
            self.markLastAt[str(mark)] = time.time()
        return pillar

    def _failed(self, minion: Minion, failure: Any) -> Any:
        self.failures += 1
        reason = f"{type(failure.value).__name__}: {failure.value}"
        self.reasons[reason.replace(minion.id, "<id>")[:160]] += 1
        return failure

    def refreshAll(self) -> None:
        """
        Every minion of this process refreshes its pillar now (those not
        connected fail, and are counted).
        """
        for minion in self._minions:
            minion.executor.context.refreshPillar().addErrback(lambda _: None)

    def counters(self) -> dict[str, Any]:
        """
        @return: the counters and times kept as refreshes happen (cheap:
            no look at every minion).
        """
        return {
            "mark_last_at": dict(self.markLastAt),
            "requests": self.requests,
            "failures": self.failures,
            "failure_reasons": dict(self.reasons.most_common(5)),
        }

    def status(self) -> dict[str, Any]:
        """
        @return: how many minions hold each mark value now (C{marks}), when
            the last one got each, and the counters.
        """
        marks: Counter[str] = Counter()
        for minion in self._minions:
            mark = minion.executor.context.pillar.get(self.markKey)
            if mark is not None:
                marks[str(mark)] += 1
        return {
            "marks": dict(marks),
            "mark_last_at": dict(self.markLastAt),
            "requests": self.requests,
            "failures": self.failures,
            "failure_reasons": dict(self.reasons.most_common(5)),
        }


class PillarTrigger:
    """
    Calls C{refresh} each time the file C{path} changes (appears, or its
    size or modification time differs from the last look): how a benchmark
    has every simulated minion of a process refresh its pillar at once.
    What the file held when the swarm started does not count.
    """

    #: Seconds between two looks at the file.
    INTERVAL = 0.005

    def __init__(self, path: str, refresh: Callable[[], None]) -> None:
        self.path = path
        self.refresh = refresh
        self.fired = 0
        self._last = self._state()

    def _state(self) -> tuple[int, int] | None:
        try:
            info = os.stat(self.path)
        except OSError:
            return None
        return info.st_mtime_ns, info.st_size

    def check(self) -> None:
        """
        Look at the file; call C{refresh} if it changed.
        """
        state = self._state()
        if state is not None and state != self._last:
            self._last = state
            self.fired += 1
            self.refresh()
        else:
            self._last = state


def _writePrivate(path: str, data: bytes) -> None:
    # No fsync (unlike crypt.writePrivateFile): the swarm's directories are
    # scratch, and thousands of fsyncs would dominate building it.
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "wb") as f:
        f.write(data)


class Swarm:
    """
    Simulated minions in this process, and their counters.

    @ivar minions: the L{Minion}s, in index order.
    """

    def __init__(
        self,
        reactor: Any,
        root: str,
        keysDir: str,
        indexes: Sequence[int],
        master: str,
        masterPort: int,
        idPrefix: str = "swarm-",
        keysize: int = 2048,
        returnBytes: int = 0,
        configOverrides: dict[str, Any] | None = None,
        masterPub: bytes | None = None,
        pillarMarkKey: str | None = None,
    ) -> None:
        """
        @param masterPub: the master's public key, pinned in every minion
            before it starts (C{minion_master.pub}), as minions that have
            met this master before hold it; without it each minion pins
            the key at its first authentication, as a new minion does.
        @param pillarMarkKey: count the minions' pillar refreshes and the
            values of this pillar key they hold (L{SwarmPillar}); L{None}:
            no pillar counting.
        """
        self.reactor = reactor
        self.minions: list[Minion] = []
        self.returnBytes = returnBytes
        self.startedAt: float | None = None
        self.everReady = 0
        self.firstReadyAt: float | None = None
        self.lastReadyAt: float | None = None
        self.auths = 0
        self.attemptFailures = 0
        self.returns = 0
        self.kidLastAt: dict[int, float] = {}
        self.failureReasons: Counter[str] = Counter()
        self._seen: set[str] = set()
        self._armed: set[str] = set()
        self._payloadFunction = onReactor(lambda size=None: self._payload(size))
        self.publications = SharedPublications()
        self.pillar = SwarmPillar(pillarMarkKey) if pillarMarkKey else None
        #: The last counts over every minion (L{status}), and when taken.
        self._scan: tuple[Counter[Any], dict[str, Any] | None, Counter[str]] | None = None
        self._scanAt = 0.0
        with _fastBuild():
            for index in indexes:
                self.minions.append(
                    self._build(
                        root,
                        keysDir,
                        index,
                        minionIdFor(idPrefix, index),
                        master,
                        masterPort,
                        keysize,
                        configOverrides or {},
                        masterPub,
                    )
                )

    def _build(
        self,
        root: str,
        keysDir: str,
        index: int,
        minionId: str,
        master: str,
        masterPort: int,
        keysize: int,
        overrides: dict[str, Any],
        masterPub: bytes | None = None,
    ) -> Minion:
        minionRoot = os.path.join(root, minionId)
        options = {
            "root_dir": minionRoot,
            "id": minionId,
            "master": master,
            "master_port": masterPort,
            "keysize": keysize,
            "log_level": "warning",
            **overrides,
        }
        config = loadMinionConfig(minionRoot, overrides=options)
        os.makedirs(config["pki_dir"], mode=0o700, exist_ok=True)
        private, public = readKeyPair(keysDir, index, keysize)
        _writePrivate(os.path.join(config["pki_dir"], "minion.pem"), private)
        with open(os.path.join(config["pki_dir"], "minion.pub"), "wb") as f:
            f.write(public)
        if masterPub is not None:
            with open(os.path.join(config["pki_dir"], MASTER_PUB_FILE), "wb") as f:
                f.write(masterPub)
        minion = minionService.buildMinion(config, self.reactor)
        # Authentication's RSA runs inline, not in the thread pool: the GIL
        # serialises it anyway, and the thread hops cost about as much CPU.
        minion.runBlocking = runSynchronously
        minion.returns.persistAfter = SWARM_PERSIST_AFTER
        minion.executor.functions["swarm.payload"] = self._payloadFunction
        minion.jobber._openPublication = functools.partial(  # type: ignore[method-assign]
            self.publications.open, minion.jobber._openPublication
        )
        self._instrument(minion)
        if self.pillar is not None:
            self.pillar.attach(minion)
        return minion

    def _payload(self, size: int | None = None) -> str:
        """
        Return a string of C{size} bytes (C{--return-bytes} by default).
        """
        return "x" * int(self.returnBytes if size is None else size)

    def _instrument(self, minion: Minion) -> None:
        """
        Count authentications, failed attempts, key rotations and returns
        by wrapping the minion's own methods (nothing changes on the wire).
        """
        jobber = minion.jobber
        rotationReceived = jobber._rotationReceived
        attemptFailed = minion._attemptFailed
        jobDone = jobber.jobDone

        def onRotation(frame: dict[str, Any]) -> None:
            before = jobber._kid
            rotationReceived(frame)
            if jobber._kid != before and jobber._kid is not None:
                self.kidLastAt[jobber._kid] = time.time()

        def onAttemptFailed(failure: Any, attempt: Any = None) -> None:
            self.attemptFailures += 1
            reason = f"{type(failure.value).__name__}: {failure.value}"
            self.failureReasons[reason.replace(minion.id, "<id>")[:160]] += 1
            attemptFailed(failure, attempt)
            if minion.id not in self._armed and minion.state == "waiting":
                self._armReady(minion)

        def onJobDone(result: dict[str, Any], load: dict[str, Any]) -> None:
            self.returns += 1
            jobDone(result, load)

        jobber._rotationReceived = onRotation  # type: ignore[method-assign]
        minion._attemptFailed = onAttemptFailed  # type: ignore[method-assign]
        jobber.jobDone = onJobDone  # type: ignore[method-assign]

    def _armReady(self, minion: Minion) -> None:
        # Armed once per connection: after it fires, the minion's next failed
        # attempt (a lost connection) arms it again.
        self._armed.add(minion.id)
        minion.whenReady().addCallback(self._ready, minion)

    def _ready(self, _: object, minion: Minion) -> None:
        now = time.time()
        self._armed.discard(minion.id)
        # The ready count is looked at again at the next status.
        self._scan = None
        self.auths += 1
        if minion.id not in self._seen:
            self._seen.add(minion.id)
            self.everReady += 1
            if self.firstReadyAt is None:
                self.firstReadyAt = now
            self.lastReadyAt = now
        kid = minion.jobber._kid
        if kid is not None:
            self.kidLastAt[kid] = max(self.kidLastAt.get(kid, 0.0), now)

    def start(self) -> None:
        """
        Start every minion connecting, all in this reactor turn.
        """
        self.startedAt = time.time()
        for minion in self.minions:
            self._armReady(minion)
            minion.start()

    def stop(self) -> None:
        """
        Close every connection and stop retrying.
        """
        for minion in self.minions:
            minion.stop()

    def status(self) -> dict[str, Any]:
        """
        @return: the counters, as written to the status file. The counts
            that look at every minion (C{ready}, C{kids}, the pillar marks)
            are taken again when a minion became ready, else at most every
            L{SCAN_INTERVAL} seconds; the counters and times kept as things
            happen (C{ever_ready}, C{*_last_at}, C{returns}) are always
            current.
        """
        now = time.monotonic()
        if self._scan is None or now - self._scanAt >= SCAN_INTERVAL:
            self._scanAt = now
            # Ready as Minion.whenReady tells it (a session to return on):
            # an attribute, where Minion.state asks the minion's state
            # machine, some 14 us a minion (py-spy): a twentieth of a core
            # for 2,500 minions scanned twice a second.
            ready = [m for m in self.minions if m.returns.req is not None]
            self._scan = (
                Counter(m.jobber._kid for m in ready),
                self.pillar.status() if self.pillar is not None else None,
                Counter(f"{m.masters.current.host}:{m.masters.current.port}" for m in ready),
            )
        kids, pillar, byMaster = self._scan
        if pillar is not None and self.pillar is not None:
            pillar = dict(pillar, **self.pillar.counters())
        return {
            "pid": os.getpid(),
            "time": time.time(),
            "minions": len(self.minions),
            "started_at": self.startedAt,
            "ready": sum(kids.values()),
            "ever_ready": self.everReady,
            "first_ready_at": self.firstReadyAt,
            "last_ready_at": self.lastReadyAt,
            "auths": self.auths,
            "attempt_failures": self.attemptFailures,
            "returns": self.returns,
            "kids": {str(kid): n for kid, n in kids.items()},
            "ready_by_master": dict(byMaster),
            "kid_last_at": {str(kid): t for kid, t in self.kidLastAt.items()},
            "failure_reasons": dict(self.failureReasons.most_common(5)),
            **({"pillar": pillar} if pillar is not None else {}),
        }


def readStatus(statusDir: str) -> dict[str, Any]:
    """
    Sum the status files of every swarm process writing to C{statusDir}.

    @return: the totals, with C{shards} the number of files read; the
        C{*_at} times are the earliest first and latest last ones.
    """
    total: dict[str, Any] = {
        "shards": 0,
        "minions": 0,
        "ready": 0,
        "ever_ready": 0,
        "auths": 0,
        "attempt_failures": 0,
        "returns": 0,
        "kids": Counter(),
        "ready_by_master": Counter(),
        "kid_last_at": {},
        "first_ready_at": None,
        "last_ready_at": None,
        "pids": [],
        "failure_reasons": Counter(),
    }
    for path in sorted(glob.glob(os.path.join(statusDir, "shard-*.json"))):
        try:
            with open(path) as f:
                status = json.load(f)
        except (OSError, ValueError):
            continue
        total["shards"] += 1
        total["pids"].append(status["pid"])
        for name in ("minions", "ready", "ever_ready", "auths", "attempt_failures", "returns"):
            total[name] += status[name]
        total["kids"].update({int(k): v for k, v in status["kids"].items()})
        total["ready_by_master"].update(status.get("ready_by_master", {}))
        total["failure_reasons"].update(status.get("failure_reasons", {}))
        for kid, at in status["kid_last_at"].items():
            total["kid_last_at"][int(kid)] = max(total["kid_last_at"].get(int(kid), 0.0), at)
        if status["first_ready_at"] is not None:
            first = total["first_ready_at"]
            total["first_ready_at"] = min(
                first or status["first_ready_at"], status["first_ready_at"]
            )
        if status["last_ready_at"] is not None:
            total["last_ready_at"] = max(total["last_ready_at"] or 0.0, status["last_ready_at"])
        if "pillar" in status:
            _addPillarStatus(total, status["pillar"])
    total["kids"] = dict(total["kids"])
    total["ready_by_master"] = dict(total["ready_by_master"])
    total["failure_reasons"] = dict(total["failure_reasons"].most_common(5))
    if "pillar" in total:
        for name in ("marks", "failure_reasons"):
            total["pillar"][name] = dict(total["pillar"][name].most_common())
    return total


def _addPillarStatus(total: dict[str, Any], pillar: dict[str, Any]) -> None:
    """
    Add one process's L{SwarmPillar.status} to C{total["pillar"]}: the
    counts summed, each mark's last time the latest.
    """
    into = total.setdefault(
        "pillar",
        {
            "marks": Counter(),
            "mark_last_at": {},
            "requests": 0,
            "failures": 0,
            "failure_reasons": Counter(),
        },
    )
    into["marks"].update(pillar["marks"])
    into["failure_reasons"].update(pillar["failure_reasons"])
    into["requests"] += pillar["requests"]
    into["failures"] += pillar["failures"]
    for mark, at in pillar["mark_last_at"].items():
        into["mark_last_at"][mark] = max(into["mark_last_at"].get(mark, 0.0), at)


def _writeStatus(path: str, status: dict[str, Any]) -> None:
    with open(path + ".tmp", "w") as f:
        json.dump(status, f)
    os.replace(path + ".tmp", path)


def _beginLogging() -> None:
    from twisted.logger import (
        FilteringLogObserver,
        LogLevel,
        LogLevelFilterPredicate,
        globalLogBeginner,
        textFileLogObserver,
    )

    predicate = LogLevelFilterPredicate(defaultLogLevel=LogLevel.warn)
    observer = FilteringLogObserver(textFileLogObserver(sys.stderr), [predicate])
    globalLogBeginner.beginLoggingTo([observer], redirectStandardIO=False)


def _readMasterPub(path: str | None) -> bytes | None:
    """
    @return: the canonical PEM of the master key in C{path}, or L{None}
        without one.
    @raise SystemExit: it is not a public key a minion would accept.
    """
    if path is None:
        return None
    try:
        with open(path, "rb") as f:
            return crypt.canonicalPublicPem(f.read())
    except (OSError, crypt.CryptError) as e:
        raise SystemExit(f"salttwist-swarm: --pin-master {path}: {e}") from e


def _masterPort(options: argparse.Namespace) -> int:
    if options.port:
        return options.port
    with open(options.ports_file) as f:
        return int(json.load(f)["ret_port"])


def _minionOverrides(options: argparse.Namespace) -> dict[str, Any]:
    """
    This shard's minion options: C{--option}s, C{--single-connection},
    and with C{--masters} the list of masters, rotated by the shard's
    number so the shards' minions start on different masters.
    """
    overrides: dict[str, Any] = {}
    for option in options.option:
        key, _, value = option.partition("=")
        try:
            overrides[key] = json.loads(value)
        except ValueError:
            overrides[key] = value
    if options.single_connection:
        overrides["single_connection"] = True
    if options.masters:
        masters = options.masters.split(",")
        shard = options.shard or 0
        first = shard % len(masters)
        # The next processes with the same first master list the others
        # the other way round: a master's minions do not all move to the
        # same one when it dies.
        others = masters[first + 1 :] + masters[:first]
        if shard // len(masters) % 2:
            others.reverse()
        overrides["master"] = [masters[first], *others]
        overrides.setdefault("master_type", "failover")
    return overrides


def _runShard(options: argparse.Namespace) -> int:
    """
    Run this process's share of the swarm under the reactor (the
    daemons' own, L{salttwist.leanreactor}).
    """
    from salttwist.leanreactor import installLeanReactor

    installLeanReactor()
    from twisted.internet import reactor
    from twisted.internet.task import LoopingCall

    raiseFileLimit()
    _beginLogging()
    crypt.verify = SharedVerification(crypt.verify)  # type: ignore[assignment]
    indexes = range(options.shard, options.minions, options.shards)
    root = options.root
    overrides = _minionOverrides(options)
    statusPath = os.path.join(options.status_dir, f"shard-{options.shard}.json")
    swarm = Swarm(
        reactor,
        root,
        options.keys_dir,
        list(indexes),
        options.master,
        _masterPort(options),
        idPrefix=options.id_prefix,
        keysize=options.keysize,
        returnBytes=options.return_bytes,
        configOverrides=overrides,
        masterPub=_readMasterPub(options.pin_master),
        pillarMarkKey=options.pillar_mark,
    )
    status = LoopingCall(lambda: _writeStatus(statusPath, swarm.status()))
    if swarm.pillar is not None and options.pillar_trigger_file:
        trigger = PillarTrigger(options.pillar_trigger_file, swarm.pillar.refreshAll)
        reactor.callWhenRunning(LoopingCall(trigger.check).start, PillarTrigger.INTERVAL)
    gc.collect()
    gc.freeze()
    gc.set_threshold(*MASTER_GC_THRESHOLDS)

    def waitForGo() -> None:
        if options.go_file is None or os.path.exists(options.go_file):
            swarm.start()
        else:
            reactor.callLater(0.002, waitForGo)

    def stop() -> None:
        swarm.stop()
        reactor.callLater(STOP_GRACE, reactor.stop)

    def beforeShutdown() -> None:
        swarm.stop()
        if status.running:
            status.stop()
        _writeStatus(statusPath, swarm.status())

    reactor.callWhenRunning(status.start, STATUS_INTERVAL)
    reactor.callWhenRunning(waitForGo)
    reactor.callLater(options.duration, stop)
    reactor.addSystemEventTrigger("before", "shutdown", beforeShutdown)
    reactor.run()
    return 0


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="salttwist-swarm",
        description="Run N simulated minions (real protocol, keys and TCP) against a master.",
    )
    parser.add_argument("-n", "--minions", type=int, default=100, help="How many (default 100).")
    parser.add_argument("--procs", type=int, default=1, help="Processes to spread them over.")
    parser.add_argument("--master", default="127.0.0.1", help="The master's address.")
    where = parser.add_mutually_exclusive_group(required=True)
    where.add_argument("--port", type=int, help="The master's ret_port.")
    where.add_argument("--ports-file", help="The master's sock_dir/master.ports.")
    parser.add_argument(
        "--accept-into",
        metavar="PKI_DIR",
        help="Put the minions' public keys in this master pki_dir as accepted first.",
    )
    parser.add_argument("--keys-dir", default=DEFAULT_KEYS_DIR, help="Key pair cache.")
    parser.add_argument("--keysize", type=int, default=2048)
    parser.add_argument("--id-prefix", default="swarm-", help="Minion ids: PREFIX00000...")
    parser.add_argument("--root", help="Scratch directory for the minions (default: a temp dir).")
    parser.add_argument("--status-dir", help="Where each process writes shard-<i>.json.")
    parser.add_argument("--go-file", help="Build, then start connecting once this file exists.")
    parser.add_argument(
        "--duration", type=float, default=60.0, help="Seconds before stopping (default 60)."
    )
    parser.add_argument(
        "--return-bytes", type=int, default=64, help="Default size of swarm.payload (64)."
    )
    parser.add_argument(
        "--single-connection",
        action="store_true",
        help="Minions with single_connection: one connection each, to ret_port.",
    )
    parser.add_argument(
        "--pin-master",
        metavar="MASTER_PUB",
        help=(
            "Pin this master public key (the master's pki_dir/master.pub) in every minion "
            "first, as minions that have met the master before (a storm after a master "
            "restart); by default each pins it at its first authentication."
        ),
    )
    parser.add_argument(
        "--pillar-mark",
        metavar="KEY",
        help=(
            "Count the minions' pillar refreshes and the values of this pillar key they hold "
            "(status files, 'pillar'); a minion with no refresh of its own asks for its pillar "
            "with _pillar over its session."
        ),
    )
    parser.add_argument(
        "--pillar-trigger-file",
        metavar="PATH",
        help="With --pillar-mark: every minion refreshes its pillar each time this file changes.",
    )
    parser.add_argument(
        "--masters",
        metavar="HOST:PORT,...",
        help=(
            "Minions with this list of masters (master_type failover unless --option says "
            "otherwise); the list is rotated by each process's number (--procs), so each "
            "process's minions start on another master, and with more processes than masters "
            "the others are listed the other way round every second turn. --port or "
            "--ports-file still sets master_port."
        ),
    )
    parser.add_argument(
        "--option",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="A minion option for every minion (VALUE read as JSON if it is JSON); repeatable.",
    )
    parser.add_argument("--shard", type=int, default=None, help=argparse.SUPPRESS)
    parser.add_argument("--shards", type=int, default=1, help=argparse.SUPPRESS)
    return parser


def main(argv: list[str] | None = None) -> int:
    """
    C{salttwist-swarm}: prepare keys, then run the swarm in one or more
    processes until C{--duration} passes or a signal arrives.
    """
    options = _parser().parse_args(argv)
    if options.shard is not None:
        return _runShard(options)
    _readMasterPub(options.pin_master)
    raiseFileLimit()
    start = time.monotonic()
    made = ensureKeys(options.keys_dir, options.minions, options.keysize)
    if made:
        print(
            f"salttwist-swarm: generated {made} key pairs in {options.keys_dir} "
            f"({time.monotonic() - start:.1f}s)",
            file=sys.stderr,
        )
    ids = [(i, minionIdFor(options.id_prefix, i)) for i in range(options.minions)]
    if options.accept_into:
        acceptKeys(options.accept_into, options.keys_dir, ids, options.keysize)
    cleanup: list[str] = []
    if options.root is None:
        options.root = tempfile.mkdtemp(prefix="salttwist-swarm-")
        cleanup.append(options.root)
    if options.status_dir is None:
        options.status_dir = os.path.join(options.root, "status")
    os.makedirs(options.status_dir, exist_ok=True)
    shardArgs = [
        "--minions",
        str(options.minions),
        "--master",
        options.master,
        "--keys-dir",
        options.keys_dir,
        "--keysize",
        str(options.keysize),
        "--id-prefix",
        options.id_prefix,
        "--root",
        options.root,
        "--status-dir",
        options.status_dir,
        "--duration",
        str(options.duration),
        "--return-bytes",
        str(options.return_bytes),
        "--shards",
        str(options.procs),
        *(["--port", str(options.port)] if options.port else []),
        *(["--ports-file", options.ports_file] if options.ports_file else []),
        *(["--go-file", options.go_file] if options.go_file else []),
        *(["--single-connection"] if options.single_connection else []),
        *(["--masters", options.masters] if options.masters else []),
        *[f"--option={option}" for option in options.option],
        *(["--pin-master", options.pin_master] if options.pin_master else []),
        *(["--pillar-mark", options.pillar_mark] if options.pillar_mark else []),
        *(
            ["--pillar-trigger-file", options.pillar_trigger_file]
            if options.pillar_trigger_file
            else []
        ),
    ]
    children = [
        subprocess.Popen([sys.executable, SWARM_SCRIPT, *shardArgs, "--shard", str(shard)])
        for shard in range(options.procs)
    ]

    def forward(signum: int, frame: Any) -> None:
        for child in children:
            if child.poll() is None:
                child.send_signal(signum)

    signal.signal(signal.SIGTERM, forward)
    signal.signal(signal.SIGINT, forward)
    try:
        codes = [child.wait() for child in children]
    finally:
        for child in children:
            if child.poll() is None:
                child.kill()
                child.wait()
        for path in cleanup:
            shutil.rmtree(path, ignore_errors=True)
    return max(codes, default=0)
