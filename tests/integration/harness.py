# -*- test-case-name: tests.integration.test_end_to_end -*-
"""
Run real salttwist daemons and commands for the integration tests.

Every process is started from the console scripts of salttwist as users
install it (a wheel built from the checkout, installed into a fresh
virtualenv: see L{tests._installed}), with that virtualenv's C{bin}
directory first on C{PATH} and without C{PYTHONPATH}, on 127.0.0.1 with
ports chosen by the OS. A L{Cluster} stops every daemon it
started when its test ends: SIGTERM, then SIGKILL if it has not exited after
L{STOP_GRACE} seconds; only those processes, by their pid.

Failure messages carry the output of every daemon of the cluster, so a
failing test shows what the master and the minions logged.
"""

from __future__ import annotations

import json
import os
import shutil
import stat
import tempfile
import time
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from typing import Any, TypeVar

import yaml
from twisted.internet import task
from twisted.internet.defer import Deferred
from twisted.internet.error import ProcessDone, ProcessTerminated
from twisted.internet.protocol import ProcessProtocol
from twisted.internet.utils import getProcessOutputAndValue
from twisted.python.failure import Failure
from twisted.trial.unittest import FailTest, SkipTest, TestCase

from salttwist import crypt
from salttwist.config import loadMasterConfig, loadMinionConfig
from salttwist.events.client import EventListenerProtocol, listenEvents
from salttwist.master.service import EVENT_PUB_SOCKET, PORTS_FILE
from salttwist.pki.keystore import ACCEPTED, PENDING, FilesystemKeyStore
from tests._installed import installedCopy

DEADLINE = 20.0
"""
Seconds a condition may take before the test fails.
"""

STOP_GRACE = 5.0
"""
Seconds a daemon has to exit after SIGTERM before it gets SIGKILL.
"""

POLL_INTERVAL = 0.05

_T = TypeVar("_T")


def makeTraversable(path: str) -> None:
    """
    Let every user search each directory from C{/} down to C{path}: set
    o+x where it is missing (only the test's own temporary directories
    lack it), or skip the test if that is not possible.
    """
    path = os.path.abspath(path)
    parts = path.split(os.sep)
    for i in range(2, len(parts) + 1):
        directory = os.sep.join(parts[:i]) or os.sep
        info = os.stat(directory)
        if not info.st_mode & stat.S_IXOTH:
            try:
                os.chmod(directory, stat.S_IMODE(info.st_mode) | stat.S_IXOTH)
            except OSError as e:
                raise SkipTest(f"{directory} is not searchable by nobody: {e}") from e


def _reactor() -> Any:
    """
    The global reactor, looked up late (trial has installed it by then).
    """
    from twisted.internet import reactor

    return reactor


def binPath(name: str) -> str:
    """
    @return: the path of console script C{name} of the installed copy.
    """
    return os.path.join(installedCopy().bin, name)


def installedPython() -> str:
    """
    @return: the interpreter of the installed copy, for programs that use
        salttwist's Python API.
    """
    return installedCopy().python


def childEnvironment() -> dict[str, str]:
    """
    The environment of every child: ours, with the installed copy's C{bin}
    first on C{PATH}, unbuffered output, no C{PYTHONPATH} (the children
    import the installed copy, never the checkout), and none of the
    variables the daemon wrappers use to pass their log settings to twistd.
    """
    env = {
        key: value
        for key, value in os.environ.items()
        if not key.startswith("SALTTWIST_LOG_") and key != "PYTHONPATH"
    }
    binDir = installedCopy().bin
    env["PATH"] = os.pathsep.join([binDir, *filter(None, env.get("PATH", "").split(os.pathsep))])
    env["PYTHONUNBUFFERED"] = "1"
    return env


_KEY_PAIRS: dict[str, tuple[bytes, bytes]] = {}


def seedKeyPair(pkiDir: str, name: str, owner: str) -> bytes:
    """
    Give a daemon its key pair before it starts, as C{pkiDir/name.pem} and
    C{pkiDir/name.pub}, so that it need not generate one (RSA key generation
    is slow). Each C{owner} gets one key pair for the whole test run.

    @return: the public key PEM.
    """
    if owner not in _KEY_PAIRS:
        key = crypt.generatePrivateKey(2048)
        _KEY_PAIRS[owner] = (crypt.privateKeyToPem(key), crypt.publicKeyToPem(key.public_key()))
    privatePem, publicPem = _KEY_PAIRS[owner]
    os.makedirs(pkiDir, mode=0o700, exist_ok=True)
    crypt.writePrivateFile(os.path.join(pkiDir, f"{name}.pem"), privatePem)
    with open(os.path.join(pkiDir, f"{name}.pub"), "wb") as f:
        f.write(publicPem)
    return publicPem


def sleep(seconds: float) -> Deferred[None]:
    """
    @return: a L{Deferred} that fires after C{seconds} on the real reactor.
    """
    return task.deferLater(_reactor(), seconds, lambda: None)


async def waitFor(
    check: Callable[[], _T | Awaitable[_T]],
    description: str,
    timeout: float = DEADLINE,
    context: Callable[[], str] = lambda: "",
) -> _T:
    """
    Call C{check} every L{POLL_INTERVAL} seconds until it returns something
    true, and return that.

    @param check: returns a value or an awaitable of one; a check may raise
        L{FailTest} to stop the wait at once (a daemon died, say).
    @param description: what is awaited, for the failure message.
    @param context: called for more text (daemon logs) on failure.
    @raise FailTest: if C{timeout} seconds pass first.
    """
    deadline = time.monotonic() + timeout
    while True:
        value = check()
        if isinstance(value, Awaitable):
            value = await value
        if value:
            return value
        if time.monotonic() > deadline:
            raise FailTest(f"timed out after {timeout:.0f}s waiting for {description}\n{context()}")
        await sleep(POLL_INTERVAL)


@dataclass
class CommandResult:
    """
    The outcome of one command run to completion.

    @ivar argv: the command line.
    @ivar out: its standard output.
    @ivar err: its standard error.
    @ivar code: its exit code, or minus the signal that ended it.
    @ivar elapsed: wall-clock seconds from spawn to exit.
    """

    argv: list[str]
    out: str
    err: str
    code: int
    elapsed: float

    def __str__(self) -> str:
        return (
            f"$ {' '.join(self.argv)}\n"
            f"exit code {self.code} after {self.elapsed:.2f}s\n"
            f"--- stdout ---\n{self.out}--- stderr ---\n{self.err}"
        )


async def runCommand(argv: Sequence[str], cwd: str | None = None) -> CommandResult:
    """
    Run a command (its first word a console script of the virtualenv) and
    collect its output, with standard input closed.
    """
    argv = [binPath(argv[0]), *argv[1:]]
    start = time.monotonic()
    try:
        out, err, code = await getProcessOutputAndValue(
            argv[0], argv[1:], env=childEnvironment(), path=cwd, reactor=_reactor()
        )
    except tuple as e:
        # getProcessOutputAndValue errbacks with (out, err, signal) when a
        # signal ended the process.
        out, err, signal = e.args
        code = -signal
    return CommandResult(
        argv,
        out.decode("utf-8", "replace"),
        err.decode("utf-8", "replace"),
        code,
        time.monotonic() - start,
    )


class DaemonProcess(ProcessProtocol):
    """
    One daemon started with C{reactor.spawnProcess}, with everything it
    wrote on stdout and stderr (interleaved, as a log).

    @ivar name: a label for messages.
    @ivar ended: fires with L{None} once the process has exited and its
        pipes are closed.
    @ivar exitCode: its exit code, once ended (L{None} if a signal ended it).
    @ivar signal: the signal that ended it, if any.
    """

    def __init__(self, name: str) -> None:
        self.name = name
        self._output = bytearray()
        self.ended: Deferred[None] = Deferred()
        self.exitCode: int | None = None
        self.signal: int | None = None
        self.pid: int | None = None

    def connectionMade(self) -> None:
        self.pid = self.transport.pid

    def childDataReceived(self, childFD: int, data: bytes) -> None:
        self._output += data

    def processEnded(self, reason: Failure) -> None:
        if reason.check(ProcessDone, ProcessTerminated):
            self.exitCode = reason.value.exitCode
            self.signal = reason.value.signal
        self.ended.callback(None)

    @property
    def running(self) -> bool:
        """
        Has the process not ended yet?
        """
        return not self.ended.called

    def output(self) -> str:
        """
        @return: what the process wrote so far.
        """
        return self._output.decode("utf-8", "replace")

    def status(self) -> str:
        """
        @return: C{running}, C{exit code N} or C{killed by signal N}.
        """
        if self.running:
            return f"running (pid {self.pid})"
        if self.signal is not None:
            return f"killed by signal {self.signal}"
        return f"exit code {self.exitCode}"

    def describe(self) -> str:
        """
        @return: the name, status and output of the process, for messages.
        """
        return f"=== {self.name} ({self.status()}) ===\n{self.output()}"

    def sendSignal(self, signal: str) -> None:
        """
        Send C{signal} (C{"TERM"}, C{"KILL"}...) if the process still runs.
        """
        if self.running:
            self.transport.signalProcess(signal)

    async def waitForExit(self, timeout: float) -> bool:
        """
        @return: whether the process ended within C{timeout} seconds.
        """
        deadline = time.monotonic() + timeout
        while self.running and time.monotonic() < deadline:
            await sleep(POLL_INTERVAL)
        return not self.running

    async def stop(self, grace: float = STOP_GRACE) -> None:
        """
        SIGTERM, then SIGKILL if the process still runs after C{grace}
        seconds; return once it has ended.
        """
        self.sendSignal("TERM")
        if not await self.waitForExit(grace):
            self.sendSignal("KILL")
        await self.ended


def spawnDaemon(
    name: str,
    argv: Sequence[str],
    cwd: str | None = None,
    uid: int | None = None,
    gid: int | None = None,
) -> DaemonProcess:
    """
    Start console script C{argv[0]} of the installed copy (or the program
    at that absolute path) as a daemon process, as user C{uid} and group
    C{gid} if given.
    """
    process = DaemonProcess(name)
    executable = binPath(argv[0])
    _reactor().spawnProcess(
        process,
        executable,
        [executable, *argv[1:]],
        env=childEnvironment(),
        path=cwd,
        uid=uid,
        gid=gid,
    )
    return process


class EventWatcher:
    """
    A subscriber to a master's event bus, in the test process, that keeps
    the tags it sees.
    """

    def __init__(self) -> None:
        self.tags: list[str] = []
        self._proto: EventListenerProtocol | None = None

    async def connect(self, sockDir: str, prefixes: Sequence[str] = ("salt/",)) -> None:
        """
        Subscribe to the bus of the master whose C{sock_dir} is C{sockDir}.
        """
        self._proto = await listenEvents(
            _reactor(),
            os.path.join(sockDir, EVENT_PUB_SOCKET),
            list(prefixes),
            lambda tag, data: self.tags.append(tag),
        )

    async def close(self) -> None:
        """
        Disconnect, and wait until the connection is gone.
        """
        proto, self._proto = self._proto, None
        if proto is not None:
            proto.transport.loseConnection()
            await proto.lost


class Cluster:
    """
    A master and its minions, each a real daemon, under one temporary
    directory; torn down by a cleanup of C{testCase}.

    The directories live in C{testCase.mktemp()}, but the daemons see them
    through a short symbolic link in the system's temporary directory: the
    master's UNIX sockets are under C{root_dir}, and trial's paths are
    longer than a socket path may be (108 bytes).

    @ivar masterDir: the master's config directory and C{root_dir}.
    @ivar ports: the C{master.ports} of the running master, or L{None}.
    """

    def __init__(self, testCase: TestCase) -> None:
        self.testCase = testCase
        realDir = os.path.abspath(testCase.mktemp())
        os.makedirs(realDir)
        linkHolder = tempfile.mkdtemp(prefix="st-")
        self.baseDir = os.path.join(linkHolder, "r")
        os.symlink(realDir, self.baseDir)
        self.masterDir = os.path.join(self.baseDir, "master")
        self.master: DaemonProcess | None = None
        self.minions: dict[str, DaemonProcess] = {}
        self.ports: dict[str, Any] | None = None
        self._daemons: list[DaemonProcess] = []
        self._watchers: list[EventWatcher] = []
        testCase.addCleanup(shutil.rmtree, linkHolder, ignore_errors=True)
        testCase.addCleanup(self.stopAll)

    # -- paths and configs -------------------------------------------------

    def masterConfig(self) -> dict[str, Any]:
        """
        @return: the master's configuration as the daemon loads it (every
            test config has this C{root_dir}; it is set here too, for the
            time before the file is written).
        """
        return loadMasterConfig(self.masterDir, overrides={"root_dir": self.masterDir})

    @property
    def sockDir(self) -> str:
        """
        The master's C{sock_dir}.
        """
        return self.masterConfig()["sock_dir"]

    @property
    def masterPkiDir(self) -> str:
        """
        The master's C{pki_dir}.
        """
        return self.masterConfig()["pki_dir"]

    def minionDir(self, minionId: str) -> str:
        """
        @return: the config directory and C{root_dir} of minion C{minionId}.
        """
        return os.path.join(self.baseDir, minionId)

    def minionPkiDir(self, minionId: str) -> str:
        """
        @return: the C{pki_dir} of minion C{minionId}.
        """
        minionDir = self.minionDir(minionId)
        return loadMinionConfig(minionDir, overrides={"root_dir": minionDir})["pki_dir"]

    def writeMasterConfig(self, **options: Any) -> str:
        """
        Write the master's config file: C{root_dir}, 127.0.0.1, ports from
        the OS and log level C{info}, updated with C{options}.

        @return: the path of the file.
        """
        config = {
            "root_dir": self.masterDir,
            "interface": "127.0.0.1",
            "publish_port": 0,
            "ret_port": 0,
            "log_level": "info",
            **options,
        }
        return _writeYaml(os.path.join(self.masterDir, "master"), config)

    def writeMinionConfig(self, minionId: str, **options: Any) -> str:
        """
        Write minion C{minionId}'s config file, pointing at the running
        master's C{ret_port}, with fast retries.

        @return: the path of the file.
        """
        assert self.ports is not None, "start the master first"
        config = {
            "root_dir": self.minionDir(minionId),
            "id": minionId,
            "master": "127.0.0.1",
            "master_port": self.ports["ret_port"],
            "acceptance_wait_time": 0.5,
            "recon_default": 200,
            "recon_max": 1000,
            "random_reauth_delay": 0,
            "log_level": "info",
            **options,
        }
        return _writeYaml(os.path.join(self.minionDir(minionId), "minion"), config)

    # -- daemons -----------------------------------------------------------

    def spawn(
        self, name: str, argv: Sequence[str], uid: int | None = None, gid: int | None = None
    ) -> DaemonProcess:
        """
        Start a daemon (C{argv[0]} a console script of the installed copy)
        that this cluster stops at the end of the test, and whose output
        its failure messages show; as user C{uid} and group C{gid} if given.
        """
        process = spawnDaemon(name, argv, cwd=self.baseDir, uid=uid, gid=gid)
        self._daemons.append(process)
        return process

    def _readPorts(self, process: DaemonProcess, path: str) -> dict[str, Any] | None:
        """
        The ports file at C{path}, once C{process} has written it; fail at
        once if C{process} has exited.
        """
        if not process.running:
            raise FailTest(f"{process.name} exited before it was ready\n{self.logs()}")
        try:
            with open(path) as f:
                ports = json.load(f)
        except (OSError, ValueError):
            return None
        return ports if ports.get("pid") == process.pid else None

    async def startMaster(
        self, argv: Sequence[str] | None = None, uid: int | None = None, gid: int | None = None
    ) -> DaemonProcess:
        """
        Start the master (writing the default config if there is none) and
        wait until it has written its ports file.

        @param argv: the command line; C{salttwist-master -c DIR} by default.
        @param uid: the user it runs as from the start, if not this one.
        @param gid: its group, with C{uid}.
        """
        if not os.path.exists(os.path.join(self.masterDir, "master")):
            self.writeMasterConfig()
        if argv is None:
            argv = ["salttwist-master", "-c", self.masterDir]
        process = self.spawn("master", argv, uid=uid, gid=gid)
        self.master = process
        path = os.path.join(self.sockDir, PORTS_FILE)
        self.ports = await waitFor(
            lambda: self._readPorts(process, path), "the master's ports file", context=self.logs
        )
        return process

    async def stopMaster(self) -> None:
        """
        Stop the master (SIGTERM) and wait for its exit.
        """
        assert self.master is not None
        await self.master.stop()

    def startMinion(
        self, minionId: str, command: Sequence[str] = ("salttwist-minion",), **options: Any
    ) -> DaemonProcess:
        """
        Write minion C{minionId}'s config (if it has none) and start it.

        @param command: how: C{salttwist-minion} by default, or e.g.
            C{("twistd", "-n", "salttwist-minion")}; C{-c DIR} follows.
        """
        if not os.path.exists(os.path.join(self.minionDir(minionId), "minion")):
            self.writeMinionConfig(minionId, **options)
        process = self.spawn(minionId, [*command, "-c", self.minionDir(minionId)])
        self.minions[minionId] = process
        return process

    async def stopAll(self) -> None:
        """
        Close the event watchers, then stop every daemon still running.
        """
        for watcher in self._watchers:
            await watcher.close()
        for process in self._daemons:
            process.sendSignal("TERM")
        for process in self._daemons:
            if not await process.waitForExit(STOP_GRACE):
                process.sendSignal("KILL")
            await process.ended

    async def watchEvents(self) -> EventWatcher:
        """
        @return: a subscriber to the running master's event bus, closed
            with the cluster.
        """
        watcher = EventWatcher()
        await watcher.connect(self.sockDir)
        self._watchers.append(watcher)
        return watcher

    async def startReady(
        self,
        minionIds: Sequence[str] = ("minion1", "minion2"),
        twistd: bool = False,
        **minionOptions: Any,
    ) -> None:
        """
        Start the master and C{minionIds}, their keys already accepted, and
        wait until each minion has authenticated and subscribed (the master
        fires C{salt/minion/<id>/start}).

        @param twistd: start them as C{twistd -n salttwist-master} and
            C{twistd -n --pidfile FILE salttwist-minion} (each minion's
            twistd its own pidfile) instead of the commands.
        @param minionOptions: for the minions' configs.

        The key pairs are put in place before the daemons start, which saves
        generating them and waiting for the pending key to be retried;
        L{tests.integration.test_end_to_end.KeyAcceptanceTests} covers that.
        """
        seedKeyPair(self.masterPkiDir, "master", "master")
        store = FilesystemKeyStore(self.masterPkiDir)
        for minionId in minionIds:
            publicPem = seedKeyPair(self.minionPkiDir(minionId), "minion", minionId)
            store.putKey(ACCEPTED, minionId, publicPem)
        if twistd:
            await self.startMaster(["twistd", "-n", "salttwist-master", "-c", self.masterDir])
        else:
            await self.startMaster()
        watcher = await self.watchEvents()
        for minionId in minionIds:
            self.startMinion(
                minionId,
                self.twistdCommand(minionId) if twistd else ("salttwist-minion",),
                **minionOptions,
            )
        await self.waitForStart(watcher, minionIds)

    def twistdCommand(self, minionId: str) -> tuple[str, ...]:
        """
        @return: C{twistd} running minion C{minionId} in the foreground, with
            a pidfile in its directory (twistd's default, C{twistd.pid} in
            the working directory, is the master's).
        """
        pidfile = os.path.join(self.minionDir(minionId), "twistd.pid")
        return ("twistd", "-n", "--pidfile", pidfile, "salttwist-minion")

    async def waitForPending(self, minionIds: Sequence[str]) -> None:
        """
        Wait until the keys of C{minionIds} are pending on the master.
        """
        store = FilesystemKeyStore(self.masterPkiDir)

        def pending() -> bool:
            for process in self.minions.values():
                if not process.running:
                    raise FailTest(f"{process.name} exited\n{self.logs()}")
            return set(minionIds) <= set(store.listKeys(PENDING))

        await waitFor(pending, f"pending keys of {', '.join(minionIds)}", context=self.logs)

    async def waitForStart(self, watcher: EventWatcher, minionIds: Sequence[str]) -> None:
        """
        Wait until C{watcher} has seen C{salt/minion/<id>/start} for each of
        C{minionIds}.
        """
        expected = {f"salt/minion/{minionId}/start" for minionId in minionIds}
        await waitFor(
            lambda: expected <= set(watcher.tags),
            f"the start events of {', '.join(minionIds)}",
            context=self.logs,
        )

    # -- commands ----------------------------------------------------------

    async def salt(self, *args: str) -> CommandResult:
        """
        Run C{salttwist -c MASTER_DIR ARGS}.
        """
        return await runCommand(["salttwist", "-c", self.masterDir, *args], cwd=self.baseDir)

    async def key(self, *args: str) -> CommandResult:
        """
        Run C{salttwist-key -c MASTER_DIR ARGS}.
        """
        return await runCommand(["salttwist-key", "-c", self.masterDir, *args], cwd=self.baseDir)

    # -- messages ----------------------------------------------------------

    def logs(self) -> str:
        """
        @return: the status and output of every daemon started, for
            failure messages.
        """
        return "\n".join(process.describe() for process in self._daemons)

    def explain(self, result: CommandResult | None = None) -> str:
        """
        @return: a failure message: the command's outcome, then the logs.
        """
        return (f"{result}\n" if result is not None else "") + self.logs()


def _writeYaml(path: str, data: dict[str, Any]) -> str:
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "w") as f:
        yaml.safe_dump(data, f, default_flow_style=False)
    return path
