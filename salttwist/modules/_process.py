# -*- test-case-name: tests.test_modules_cmd -*-
"""
Child processes for the execution modules, with Salt's C{cmd} semantics
(working directory, environment, stdin, C{runas}, timeout, output logging),
spawned by the reactor so that a long command never blocks the minion.

Also L{inThread}, for a module function on the reactor that has a little
blocking work to do.
"""

from __future__ import annotations

import inspect
import os
import pwd
import shlex
import shutil
import signal
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from twisted.internet.defer import Deferred, maybeDeferred
from twisted.internet.protocol import ProcessProtocol
from twisted.internet.threads import deferToThreadPool
from twisted.logger import Logger, LogLevel
from twisted.python import threadable
from twisted.python.failure import Failure

from salttwist.modules import CommandExecutionError, LoaderContext, SaltInvocationError
from salttwist.modules._jobprocesses import JobProcesses, killTree

log = Logger(namespace="salttwist.modules.cmd")

#: The shell of C{cmd.run}; Salt takes the minion's C{$SHELL}, which a
#: daemon rarely has, so the result is nearly always this.
DEFAULT_SHELL = "/bin/sh"

#: Salt's C{output_loglevel} names, mapped to Twisted's levels.
LOG_LEVELS = {
    "all": LogLevel.debug,
    "garbage": LogLevel.debug,
    "trace": LogLevel.debug,
    "debug": LogLevel.debug,
    "profile": LogLevel.debug,
    "info": LogLevel.info,
    "warning": LogLevel.warn,
    "warn": LogLevel.warn,
    "error": LogLevel.error,
    "critical": LogLevel.critical,
    "quiet": None,
}

#: What Salt sets so that commands answer in English and parsers work.
_C_LOCALE = (
    "LC_CTYPE",
    "LC_NUMERIC",
    "LC_TIME",
    "LC_COLLATE",
    "LC_MONETARY",
    "LC_MESSAGES",
    "LC_PAPER",
    "LC_NAME",
    "LC_ADDRESS",
    "LC_TELEPHONE",
    "LC_MEASUREMENT",
    "LC_IDENTIFICATION",
    "LANGUAGE",
)


def inThread(reactor: Any, f: Callable[..., Any], *args: Any, **kwargs: Any) -> Deferred:
    """
    Run C{f} in C{reactor}'s thread pool; with a reactor that has none (a
    test clock), run it now.
    """
    getThreadPool = getattr(reactor, "getThreadPool", None)
    if getThreadPool is None:
        return maybeDeferred(f, *args, **kwargs)
    return deferToThreadPool(reactor, getThreadPool(), f, *args, **kwargs)


def offReactorThread(reactor: Any) -> bool:
    """
    Whether this is a thread other than the running reactor's, where a
    call on the reactor must be waited for (C{blockingCallFromThread}); a
    test's L{Clock} has no thread: everything runs where it is called.
    """
    return (
        threadable.ioThread is not None
        and not threadable.isInIOThread()
        and hasattr(reactor, "callFromThread")
    )


class ChdirTool:
    """
    Finds, once per process, an C{env} that takes C{-C DIR} (GNU
    coreutils 8.28 and later), with which a command started in another
    directory needs no fork of the minion (L{spawnArguments}).

    @ivar path: that C{env}, or L{None} (none, or not known yet).
    @ivar known: whether the search has ended.
    """

    def __init__(self) -> None:
        self.path: str | None = None
        self.known = False
        self._searching = False

    def get(self, reactor: Any) -> str | None:
        """
        @return: L{path}; the first call starts the search in C{reactor}'s
            thread pool (it runs one C{env -C / sh -c ...}) and returns
            L{None}, as every call does until the search ends.
        """
        if not self.known and not self._searching:
            self._searching = True

            def found(path: str | None) -> None:
                self.path, self.known = path, True

            def failed(failure: Failure) -> None:
                self.known = True

            inThread(reactor, findChdirTool).addCallbacks(found, failed)
        return self.path


def findChdirTool() -> str | None:
    """
    @return: the path of an C{env} on C{PATH} that runs a command in the
        directory C{-C} names (it is tried, blocking), or L{None}.
    """
    import subprocess

    env = shutil.which("env")
    if env is None or not os.path.isabs(env) or not os.access(DEFAULT_SHELL, os.X_OK):
        return None
    try:
        tried = subprocess.run(
            [env, "-C", "/", DEFAULT_SHELL, "-c", 'test "$(pwd -P)" = /'],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            timeout=10,
            check=False,
        )
    except (OSError, subprocess.SubprocessError):
        return None
    return env if tried.returncode == 0 else None


#: This process's L{ChdirTool}.
CHDIR_TOOL = ChdirTool()


#: glibc's and musl's C{POSIX_SPAWN_SETPGROUP} and C{POSIX_SPAWN_SETSIGDEF}.
_POSIX_SPAWN_SETPGROUP, _POSIX_SPAWN_SETSIGDEF = 0x02, 0x04
#: The file actions L{ChdirSpawner} builds (its own numbering).
_ACTION_CLOSE, _ACTION_DUP2 = 0, 1
#: Bytes reserved for C{posix_spawn_file_actions_t}, C{posix_spawnattr_t}
#: and C{sigset_t} (80, 336 and 128 on glibc for x86-64): room to spare.
_STRUCT_ROOM = 1024


class ChdirSpawner:
    """
    C{posix_spawn} through the C library with
    C{posix_spawn_file_actions_addchdir_np} (glibc 2.29 and later, musl
    1.1.24 and later): a command started in another directory than the
    minion's needs neither a fork of the minion nor an C{env -C} to
    change directory (one C{exec} fewer: about 0.7 ms of CPU each command
    and each C{onlyif}/C{unless}); and the call, through C{ctypes},
    releases the GIL while the child starts, which C{os.posix_spawn}
    does not.

    @ivar available: whether the C library has what this needs (and
        Twisted the hook it uses); otherwise L{spawnArguments}' ways
        apply.
    """

    def __init__(self) -> None:
        self._libc: Any = None
        self.available = False
        try:
            import ctypes

            from twisted.internet import process

            libc = ctypes.CDLL(None, use_errno=True)
            for name in (
                "posix_spawn",
                "posix_spawn_file_actions_init",
                "posix_spawn_file_actions_destroy",
                "posix_spawn_file_actions_addclose",
                "posix_spawn_file_actions_adddup2",
                "posix_spawn_file_actions_addchdir_np",
                "posix_spawnattr_init",
                "posix_spawnattr_destroy",
                "posix_spawnattr_setflags",
                "posix_spawnattr_setpgroup",
                "posix_spawnattr_setsigdefault",
                "sigemptyset",
                "sigaddset",
            ):
                getattr(libc, name)
            hooks = ("_trySpawnInsteadOfFork", "_getFileActions", "_listOpenFDs")
            if not all(hasattr(process.Process, h) or hasattr(process, h) for h in hooks):
                return
        except (ImportError, OSError, AttributeError):
            return
        self._libc = libc
        self.available = True
        #: Whether the C library can close every descriptor from a number
        #: on in the child (C{posix_spawn_file_actions_addclosefrom_np},
        #: glibc 2.34 and later): then no list of the minion's descriptors
        #: is needed (L{runCommandHere}).
        self.canCloseFrom = hasattr(libc, "posix_spawn_file_actions_addclosefrom_np")

    def spawn(
        self,
        executable: str | bytes,
        argv: list[str] | list[bytes],
        environment: dict[Any, Any],
        cwd: str | bytes,
        actions: list[tuple[int, ...]],
        defaultSignals: list[int],
        closeFrom: int | None = None,
        newGroup: bool = True,
    ) -> int:
        """
        Start C{executable} (an absolute path) with C{argv} and
        C{environment} in C{cwd}, after C{actions} (C{(_ACTION_CLOSE, fd)}
        or C{(_ACTION_DUP2, fd, newfd)}) and, if C{closeFrom} is given (see
        L{canCloseFrom}), the closing of every descriptor from C{closeFrom}
        on, with C{defaultSignals} back to their default disposition; with
        C{newGroup}, as the leader of a process group of its own (its pgid
        its pid), which L{killTree} kills whole.

        @return: the child's pid.
        @raise OSError: the child could not start (no such directory or
            executable, ...), as C{os.posix_spawn} raises it.
        """
        import ctypes

        libc = self._libc
        path = os.fsencode(executable)
        args = [os.fsencode(a) for a in argv]
        env = [os.fsencode(k) + b"=" + os.fsencode(v) for k, v in environment.items()]
        argvArray = (ctypes.c_char_p * (len(args) + 1))(*args, None)
        envArray = (ctypes.c_char_p * (len(env) + 1))(*env, None)
        fileActions = ctypes.create_string_buffer(_STRUCT_ROOM)
        attributes = ctypes.create_string_buffer(_STRUCT_ROOM)
        signals = ctypes.create_string_buffer(_STRUCT_ROOM)
        pid = ctypes.c_int(0)
        if libc.posix_spawn_file_actions_init(fileActions) != 0:
            raise OSError(ctypes.get_errno(), "posix_spawn_file_actions_init failed")
        try:
            if libc.posix_spawnattr_init(attributes) != 0:
                raise OSError(ctypes.get_errno(), "posix_spawnattr_init failed")
            try:
                err = 0
                for action in actions:
                    if action[0] == _ACTION_CLOSE:
                        err = err or libc.posix_spawn_file_actions_addclose(fileActions, action[1])
                    else:
                        err = err or libc.posix_spawn_file_actions_adddup2(
                            fileActions, action[1], action[2]
                        )
                if closeFrom is not None:
                    err = err or libc.posix_spawn_file_actions_addclosefrom_np(
                        fileActions, closeFrom
                    )
                err = err or libc.posix_spawn_file_actions_addchdir_np(
                    fileActions, os.fsencode(cwd)
                )
                flags = 0
                if defaultSignals:
                    libc.sigemptyset(signals)
                    for number in defaultSignals:
                        libc.sigaddset(signals, number)
                    err = err or libc.posix_spawnattr_setsigdefault(attributes, signals)
                    flags |= _POSIX_SPAWN_SETSIGDEF
                if newGroup:
                    err = err or libc.posix_spawnattr_setpgroup(attributes, 0)
                    flags |= _POSIX_SPAWN_SETPGROUP
                if flags:
                    err = err or libc.posix_spawnattr_setflags(attributes, ctypes.c_short(flags))
                err = err or libc.posix_spawn(
                    ctypes.byref(pid), path, fileActions, attributes, argvArray, envArray
                )
            finally:
                libc.posix_spawnattr_destroy(attributes)
        finally:
            libc.posix_spawn_file_actions_destroy(fileActions)
        if err:
            raise OSError(err, os.strerror(err), os.fsdecode(path))
        return pid.value

    def spawnProcess(
        self,
        reactor: Any,
        protocol: ProcessProtocol,
        executable: str,
        argv: list[str],
        environment: dict[str, str],
        cwd: str,
    ) -> Any:
        """
        C{reactor.spawnProcess(protocol, executable, argv, environment,
        path=cwd)}, the child started by L{spawn} instead of a fork.

        @return: the process transport.
        """
        return _chdirProcessClass()(
            reactor, executable, argv, environment, cwd, protocol, spawner=self
        )

    def usableWith(self, reactor: Any) -> bool:
        """
        @return: whether L{spawnProcess} can start a process for
            C{reactor} (a POSIX reactor of Twisted's: not a test's fake).
        """
        if not self.available:
            return False
        from twisted.internet.posixbase import PosixReactorBase

        return isinstance(reactor, PosixReactorBase)


#: The signals a program may handle, in order (not the C library's own).
_VALID_SIGNALS = sorted(int(n) for n in signal.valid_signals())


def ignoredSignals() -> list[int]:
    """
    @return: the signals this process ignores (a child started by
        C{posix_spawn} would inherit that; it gets them back to their
        default, as Twisted's spawn gives them), as the kernel has them
        (C{SigIgn} in C{/proc/self/status}: one read instead of a
        C{signal.getsignal} of each of the 64 signals, a tenth of a
        millisecond a command); from C{signal.getsignal} where C{/proc}
        cannot be read.
    """
    try:
        with open("/proc/self/status", "rb") as f:
            for line in f:
                if line.startswith(b"SigIgn:"):
                    mask = int(line.split()[1], 16)
                    # Not the C library's own (32 and 33 under glibc, which
                    # ignores them once threads run): no child may reset
                    # those, and Python's signal module does not know them.
                    return [n for n in _VALID_SIGNALS if mask >> (n - 1) & 1]
    except (OSError, ValueError, IndexError):
        pass
    return [n for n in _VALID_SIGNALS if signal.getsignal(n) == signal.SIG_IGN]


_CHDIR_PROCESS: Any = None


def _chdirProcessClass() -> Any:
    """
    @return: Twisted's L{Process <twisted.internet.process.Process>}
        whose child starts by L{ChdirSpawner.spawn} in its directory
        (made once: Twisted's process module is imported late, as the
        reactor is).
    """
    global _CHDIR_PROCESS
    if _CHDIR_PROCESS is not None:
        return _CHDIR_PROCESS
    import fcntl

    from twisted.internet import process

    class ChdirProcess(process.Process):
        """
        A process started in its directory by a L{ChdirSpawner}; in the
        minion's own directory by Python's C{os.posix_spawnp} (no change
        of directory: the same start, without the C{ctypes} calls), as
        Twisted's own spawn does, with the signals and process group
        L{ChdirSpawner.spawn} gives.
        """

        def __init__(self, *args: Any, spawner: ChdirSpawner, **kwargs: Any) -> None:
            self._spawner = spawner
            super().__init__(*args, **kwargs)

        def _trySpawnInsteadOfFork(
            self,
            path: Any,
            uid: Any,
            gid: Any,
            executable: Any,
            args: Any,
            environment: Any,
            kwargs: dict[str, Any],
        ) -> bool:
            fdState = []
            for fd in process._listOpenFDs():
                try:
                    closeOnExec = fcntl.fcntl(fd, fcntl.F_GETFD, fcntl.FD_CLOEXEC)
                except OSError:
                    continue
                fdState.append((fd, closeOnExec))
            fdmap = kwargs.get("fdmap") or {}
            ignored = ignoredSignals()
            if path is None or _isHere(path):
                self.pid = os.posix_spawnp(
                    executable,
                    args,
                    environment or {},
                    file_actions=process._getFileActions(
                        fdState, fdmap, os.POSIX_SPAWN_CLOSE, os.POSIX_SPAWN_DUP2
                    ),
                    setsigdef=ignored,
                    setpgroup=0 if newGroups() else None,
                )
            else:
                actions = process._getFileActions(fdState, fdmap, _ACTION_CLOSE, _ACTION_DUP2)
                self.pid = self._spawner.spawn(
                    executable, args, environment or {}, path, actions, ignored, None, newGroups()
                )
            self.status = -1
            return True

    _CHDIR_PROCESS = ChdirProcess
    return ChdirProcess


#: This process's L{ChdirSpawner}.
CHDIR_SPAWNER = ChdirSpawner()


#: Whether commands start in process groups of their own (L{newGroups});
#: L{None} until first asked.
NEW_GROUPS: bool | None = None


def newGroups() -> bool:
    """
    Whether the commands this process starts lead process groups of their
    own, which a killed job kills whole (L{killTree}): yes, unless this
    process runs in the foreground of its controlling terminal (a
    C{salttwist-call} or a minion typed at a shell), where a command in
    another group that reads the terminal (C{sudo} asking for a password)
    would be stopped (C{SIGTTIN}) instead of asking. Decided once per
    process (L{NEW_GROUPS}).
    """
    global NEW_GROUPS
    if NEW_GROUPS is None:
        try:
            terminal = os.open("/dev/tty", os.O_RDONLY | os.O_NOCTTY)
        except OSError:  # no controlling terminal: a daemon
            NEW_GROUPS = True
        else:
            try:
                NEW_GROUPS = os.tcgetpgrp(terminal) != os.getpgrp()
            except OSError:
                NEW_GROUPS = True
            finally:
                os.close(terminal)
    return NEW_GROUPS


_GROUP_PROCESS: Any = None


def _groupProcessClass() -> Any:
    """
    @return: Twisted's L{Process <twisted.internet.process.Process>},
        always forked, whose child makes itself the leader of a process
        group of its own before it becomes its user and C{exec}s: for a
        command run as another user (C{runas}), which a fork starts anyway,
        to be killed whole with its job (L{killTree}).
    """
    global _GROUP_PROCESS
    if _GROUP_PROCESS is not None:
        return _GROUP_PROCESS
    from twisted.internet import process

    class GroupProcess(process.Process):
        """
        A forked process that leads a process group of its own.
        """

        def _trySpawnInsteadOfFork(self, *args: Any) -> bool:
            return False

        def _setupChild(self, fdmap: dict[int, int]) -> None:
            os.setpgid(0, 0)
            super()._setupChild(fdmap)

    _GROUP_PROCESS = GroupProcess
    return GroupProcess


def _isPosixReactor(reactor: Any) -> bool:
    """
    @return: whether C{reactor} is a POSIX reactor of Twisted's (not a
        test's fake), whose processes L{_groupProcessClass} can start.
    """
    from twisted.internet.posixbase import PosixReactorBase

    return isinstance(reactor, PosixReactorBase)


def spawnArguments(
    executable: str,
    argv: list[str],
    cwd: str,
    uid: int | None,
    gid: int | None,
    chdirTool: str | None,
) -> tuple[str, list[str], str | None]:
    """
    How a command is started: Twisted starts a process with
    C{posix_spawn} (well under a millisecond of the minion's CPU) only
    when it has no directory to change to and no user to become;
    otherwise it forks the minion, whose whole address space is copied
    and then written by the child before its C{exec} (some 10 ms of CPU
    in each, for every command and every C{onlyif}/C{unless} of a state).
    A command that runs as the minion's user in another directory than
    the minion's starts as C{env -C <cwd> <argv>} when C{chdirTool} is
    such an C{env}: it changes directory and C{exec}s the command, which
    keeps the pid, arguments, environment and directory a fork would give
    it. Any other case forks as before (a user to become, an C{argv[0]}
    that is not the executable's absolute path).

    @return: C{(executable, argv, path)} for C{spawnProcess}.
    """
    if uid is not None or gid is not None:
        return executable, argv, cwd
    try:
        here = os.getcwd()
    except OSError:
        here = None
    if here is not None and os.path.abspath(cwd) == here:
        return executable, argv, None
    if (
        chdirTool is None
        or not argv
        or argv[0] != executable
        or not os.path.isabs(executable)
        or "=" in executable
    ):
        return executable, argv, cwd
    return chdirTool, [chdirTool, "-C", cwd, *argv], None


def _isHere(cwd: str) -> bool:
    """
    @return: whether C{cwd} is the minion's working directory (a command
        started there needs no change of directory).
    """
    try:
        return os.path.abspath(cwd) == os.getcwd()
    except OSError:
        return False


def _logLevel(name: Any) -> LogLevel | None:
    try:
        return LOG_LEVELS[str(name).lower()]
    except KeyError:
        log.error(
            "Invalid output_loglevel {loglevel!r}. Valid levels are: {levels}. "
            "Falling back to 'info'.",
            loglevel=name,
            levels=", ".join(sorted(LOG_LEVELS)),
        )
        return LogLevel.info


def _parseEnv(env: Any) -> dict[str, str]:
    """
    Salt accepts C{env} as a map or as a list of one-key maps.
    """
    if not env:
        return {}
    if isinstance(env, list):
        merged: dict[Any, Any] = {}
        for item in env:
            if not isinstance(item, dict):
                raise SaltInvocationError("env must be a map or a list of maps")
            merged.update(item)
        env = merged
    if not isinstance(env, dict):
        raise SaltInvocationError("env must be a map or a list of maps")
    return {str(k): "" if v is None else str(v) for k, v in env.items()}


class _Collector(ProcessProtocol):
    """
    Feed stdin, collect stdout and stderr (apart and interleaved), and fire
    C{done} with C{(pid, exitCode, stdout, stderr, merged)}.
    """

    def __init__(self, stdin: bytes | None, done: Deferred) -> None:
        self.stdin = stdin
        self.done = done
        self.out: list[bytes] = []
        self.err: list[bytes] = []
        self.merged: list[bytes] = []
        self.pid: int | None = None

    def connectionMade(self) -> None:
        """
        Remember the pid, write stdin and close it.
        """
        self.pid = self.transport.pid
        if self.stdin:
            self.transport.write(self.stdin)
        self.transport.closeStdin()

    def outReceived(self, data: bytes) -> None:
        """
        Keep standard output.
        """
        self.out.append(data)
        self.merged.append(data)

    def errReceived(self, data: bytes) -> None:
        """
        Keep standard error.
        """
        self.err.append(data)
        self.merged.append(data)

    def processEnded(self, reason: Failure) -> None:
        """
        Fire C{done}, unless the timeout already did.
        """
        if self.done.called:
            return
        status = reason.value
        code = status.exitCode
        if code is None:
            # Killed by a signal: negative, as subprocess reports it.
            code = -(status.signal or 0)
        out, err = b"".join(self.out), b"".join(self.err)
        # With one stream silent the interleaved output is the other one:
        # the same object, not a second copy (nor, see shape, a second
        # decoded string) of a command's whole output.
        merged = out if not err else err if not out else b"".join(self.merged)
        self.out, self.err, self.merged = [], [], []
        self.done.callback((self.pid, code, out, err, merged))

    def kill(self, signum: int = signal.SIGKILL) -> None:
        """
        Kill the process and everything it started (its process group, and
        whatever is below it: a shell's children would keep the pipes
        open), and stop reading.
        """
        if self.pid is not None and not self.done.called:
            killTree(self.pid, signum)
        try:
            self.transport.loseConnection()
        except Exception:  # the process is already gone
            pass


def _decode(data: bytes, rstrip: bool) -> str:
    text = data.decode("utf-8", "replace")
    return text.rstrip() if rstrip else text


def _checkTimeout(timeout: Any) -> float | None:
    if timeout is None or timeout is False or timeout == 0:
        return None
    if isinstance(timeout, bool) or not isinstance(timeout, int | float):
        try:
            timeout = float(timeout)
        except (TypeError, ValueError):
            raise CommandExecutionError(f"Error: timeout {timeout} must be a number") from None
    if timeout <= 0:
        return None
    return timeout


@dataclass
class _Command:
    """
    A command ready to start (L{_prepare}), and how its result is told.
    """

    display: str
    argv: list[str]
    executable: str
    environ: dict[str, str]
    cwd: str
    uid: int | None
    gid: int | None
    stdin: bytes | None
    timeout: float | None
    level: LogLevel | None
    retcodesOk: list[int]
    ignoreRetcode: bool
    rstrip: bool

    def shape(
        self, result: tuple[int, int, bytes, bytes, bytes] | None, pid: int | None
    ) -> dict[str, Any]:
        """
        @param result: C{(pid, exit code, stdout, stderr, both
            interleaved)}, or L{None} if the command timed out.
        @param pid: the command's pid (for a timeout's result).
        @return: L{runCommand}'s result, the output logged.
        """
        if result is None:
            words = f"{self.display} : Timed out after {self.timeout:g} seconds"
            ret = {"pid": pid, "retcode": 1, "stdout": words, "stderr": "", "output": words}
        else:
            pid, code, out, err, merged = result
            stdout, stderr = _decode(out, self.rstrip), _decode(err, self.rstrip)
            if merged is out:
                output = stdout
            elif merged is err:
                output = stderr
            else:
                output = _decode(merged, self.rstrip)
            ret = {
                "pid": pid,
                "retcode": 0 if code in self.retcodesOk else code,
                "stdout": stdout,
                "stderr": stderr,
                "output": output,
            }
        ret["jobRetcode"] = 0 if self.ignoreRetcode else ret["retcode"]
        _logOutput(self.level, self.display, ret, self.ignoreRetcode)
        return ret


def runCommand(context: LoaderContext, cmd: Any, **options: Any) -> Deferred[dict[str, Any]]:
    """
    Run C{cmd} as Salt's C{cmd} module does; see L{salttwist.modules.cmd}.
    C{options} are Salt's (C{cwd}, C{stdin}, C{runas}, C{shell},
    C{python_shell}, C{env}, C{clean_env}, C{rstrip}, C{output_loglevel},
    C{timeout}, C{reset_system_locale}, C{ignore_retcode}, C{prepend_path},
    C{success_retcodes}, C{stdin_raw_newlines}), checked by L{_prepare}.

    @return: a L{Deferred} firing with C{{"pid", "retcode", "stdout",
        "stderr", "output"}} (C{output} is stdout and stderr interleaved as
        they arrived, which is what C{cmd.run} returns) and C{jobRetcode},
        the retcode the job gets (0 under C{ignore_retcode}).
    @raise CommandExecutionError: the command cannot be started (bad
        C{cwd}, shell, user, or executable), synchronously.
    """
    command = _prepare(context, cmd, **options)
    return _runOnReactor(context.reactor, command, context.jid, context.processes)


def commandOptions() -> tuple[inspect.Parameter, ...]:
    """
    @return: Salt's command options as L{_prepare} takes them (after
        C{context} and C{cmd}), with their defaults: the one signature that
        L{runCommand}, L{runCommandHere} and the C{cmd} module's functions
        share.
    """
    return tuple(inspect.signature(_prepare).parameters.values())[2:]


def _checkNoNul(argv: list[str], environ: dict[str, str], cwd: Any) -> None:
    """
    Refuse what the C library would silently cut short: a NUL byte in an
    argument, in the environment or in C{cwd}, and an C{=} in a variable's
    name (as Python's own spawn and Salt's C{subprocess} refuse them).

    @raise SaltInvocationError: naming the problem.
    """
    for arg in argv:
        if "\x00" in arg:
            raise SaltInvocationError(f"the command holds a NUL byte: {arg!r}")
    for name, value in environ.items():
        if "\x00" in name or "=" in name or not name:
            raise SaltInvocationError(f"bad environment variable name {name!r}")
        if "\x00" in str(value):
            raise SaltInvocationError(f"environment variable {name} holds a NUL byte")
    if cwd and "\x00" in str(cwd):
        raise SaltInvocationError(f"cwd holds a NUL byte: {str(cwd)!r}")


def _prepare(
    context: LoaderContext,
    cmd: Any,
    cwd: str | None = None,
    stdin: str | None = None,
    runas: str | None = None,
    shell: str = DEFAULT_SHELL,
    python_shell: bool | None = None,
    env: Any = None,
    clean_env: bool = False,
    rstrip: bool = True,
    output_loglevel: str = "debug",
    timeout: Any = None,
    reset_system_locale: bool = True,
    ignore_retcode: bool = False,
    prepend_path: str | None = None,
    success_retcodes: Any = None,
    stdin_raw_newlines: bool = False,
) -> _Command:
    """
    Check and resolve a command's options (L{runCommand}'s) and log that it
    runs.

    @raise CommandExecutionError: the command cannot be started (bad
        C{cwd}, shell, user, or executable).
    """
    level = _logLevel(output_loglevel)
    timeout = _checkTimeout(timeout)
    if isinstance(cmd, list | tuple):
        argv = [str(a) for a in cmd]
        display = shlex.join(argv)
        useShell = False
    else:
        display = "" if cmd is None else str(cmd)
        # Salt defaults to a shell for jobs published from the CLI (they
        # carry a jid), which every call here is.
        useShell = python_shell is None or bool(python_shell)
        argv = [shell, "-c", display] if useShell else shlex.split(display)
    if not display.strip() or not argv:
        raise SaltInvocationError("cmd must be a non-empty command")

    uid = gid = None
    environ = {} if clean_env else dict(os.environ)
    environ.pop("NOTIFY_SOCKET", None)
    if runas:
        if os.geteuid() != 0:
            raise CommandExecutionError(
                f"runas={runas!r} needs the minion to run as root; it runs as uid {os.geteuid()}"
            )
        try:
            user = pwd.getpwnam(str(runas))
        except KeyError:
            raise CommandExecutionError(f"User '{runas}' is not available") from None
        uid, gid = user.pw_uid, user.pw_gid
        environ.update({"HOME": user.pw_dir, "USER": user.pw_name, "LOGNAME": user.pw_name})
    environ.update(_parseEnv(env))
    if reset_system_locale:
        for name in _C_LOCALE:
            environ.setdefault(name, "C")
    if prepend_path:
        environ["PATH"] = ":".join(p for p in (str(prepend_path), environ.get("PATH")) if p)

    _checkNoNul(argv, environ, cwd)

    if not cwd:
        cwd = os.path.expanduser(f"~{runas or ''}")
        if not os.access(cwd, os.R_OK):
            cwd = "/"
    cwd = str(cwd)
    if not os.path.isabs(cwd) or not os.path.isdir(cwd):
        raise CommandExecutionError(f"Specified cwd '{cwd}' either not absolute or does not exist")

    if useShell:
        if not os.path.isfile(shell) or not os.access(shell, os.X_OK):
            raise CommandExecutionError(f"The shell {shell} is not available")
        executable = shell
    else:
        found = shutil.which(argv[0], path=environ.get("PATH", os.defpath))
        if found is None:
            raise CommandExecutionError(
                f"Unable to run command '{display}', reason: "
                f"[Errno 2] No such file or directory: '{argv[0]}'"
            )
        executable = found

    retcodesOk = [0]
    if success_retcodes is not None:
        items = success_retcodes if isinstance(success_retcodes, list) else [success_retcodes]
        try:
            retcodesOk = [int(i) for item in items for i in str(item).split(",")]
        except ValueError:
            raise SaltInvocationError("success_retcodes must be a list of integers") from None

    stdinBytes = None
    if stdin is not None:
        text = str(stdin)
        if not stdin_raw_newlines:
            # Salt turns a "\n" typed on the command line into a newline.
            text = text.replace("\\n", "\n")
        stdinBytes = text.encode("utf-8")

    if level is not None:
        log.info(
            "Executing command {cmd!r}{user} in directory {cwd!r}",
            cmd=argv[0] if not useShell else display.split()[0],
            user=f" as user {runas!r}" if runas else "",
            cwd=cwd,
        )

    return _Command(
        display=display,
        argv=argv,
        executable=executable,
        environ=environ,
        cwd=cwd,
        uid=uid,
        gid=gid,
        stdin=stdinBytes,
        timeout=timeout,
        level=level,
        retcodesOk=retcodesOk,
        ignoreRetcode=bool(ignore_retcode),
        rstrip=bool(rstrip),
    )


def _runOnReactor(
    reactor: Any, command: _Command, jid: str | None, processes: JobProcesses
) -> Deferred[dict[str, Any]]:
    """
    Start C{command} through C{reactor}; see L{runCommand}. The command
    leads a process group of its own, noted in C{processes} under job
    C{jid} while it runs (so that killing the job kills it).
    """
    # Cancelling the job (saltutil.kill_job) kills the process tree.
    done: Deferred = Deferred(lambda _: collector.kill())
    collector = _Collector(command.stdin, done)
    uid, gid, cwd = command.uid, command.gid, command.cwd
    if uid is None and gid is None and CHDIR_SPAWNER.usableWith(reactor):
        try:
            CHDIR_SPAWNER.spawnProcess(
                reactor, collector, command.executable, command.argv, command.environ, cwd
            )
        except OSError as e:
            raise CommandExecutionError(
                f"Unable to run command '{command.display}' in directory '{cwd}': {e}"
            ) from None
    elif (uid is not None or gid is not None) and newGroups() and _isPosixReactor(reactor):
        # A fork anyway (another user to become): its child leads a group.
        _groupProcessClass()(
            reactor, command.executable, command.argv, command.environ, cwd, collector, uid, gid
        )
    else:
        # A C library without what ChdirSpawner needs, or a test's fake
        # reactor: Twisted's spawn, without a group of its own (killTree
        # still finds what the command started through /proc).
        spawnExecutable, spawnArgv, spawnPath = spawnArguments(
            command.executable, command.argv, cwd, uid, gid, CHDIR_TOOL.get(reactor)
        )
        reactor.spawnProcess(
            collector,
            spawnExecutable,
            spawnArgv,
            env=command.environ,
            path=spawnPath,
            uid=uid,
            gid=gid,
        )

    pid = collector.pid
    if jid is not None and pid is not None:
        # If the job was killed while the command started, this kills it.
        processes.add(jid, pid)

    timer = None
    if command.timeout is not None:

        def expire() -> None:
            if done.called:
                return
            collector.kill()
            done.callback(None)

        timer = reactor.callLater(command.timeout, expire)

    def shape(result: tuple[int, int, bytes, bytes, bytes] | None) -> dict[str, Any]:
        if timer is not None and timer.active():
            timer.cancel()
        return command.shape(result, collector.pid)

    if jid is not None and pid is not None:

        def forget(result: Any) -> Any:
            processes.discard(jid, pid)
            return result

        done.addBoth(forget)
    return done.addCallback(shape)


def runCommandHere(context: LoaderContext, cmd: Any, **options: Any) -> dict[str, Any] | None:
    """
    L{runCommand} in the calling thread, which it blocks until the command
    ends: for a thread that would otherwise only wait for the reactor to
    run it (a state run's C{onlyif}/C{unless}), this saves the trips to the
    reactor and back and Twisted's process machinery (some 0.5 ms of the
    minion's CPU a command). The child starts by L{ChdirSpawner} (in its
    directory, the GIL released meanwhile) with the descriptors, signals,
    environment and directory L{runCommand} gives it; a C{timeout} kills
    it and everything it started, as there.

    Never call it on the reactor's thread.

    @param options: L{runCommand}'s.
    @return: L{runCommand}'s result; L{None} (and nothing done) where it
        cannot run here: a C{runas} user to become, or a C library without
        what L{ChdirSpawner} needs (then run it with L{runCommand}).
    @raise CommandExecutionError: as L{runCommand}.
    """
    if options.get("runas") or not CHDIR_SPAWNER.available:
        return None
    command = _prepare(context, cmd, **options)
    return command.shape(*_runHere(command, context.jid, context.processes))


def _runHere(
    command: _Command, jid: str | None, processes: JobProcesses
) -> tuple[tuple[int, int, bytes, bytes, bytes] | None, int]:
    """
    Run C{command} in this thread (L{runCommandHere}), as the leader of a
    process group of its own, noted in C{processes} under job C{jid} while
    it runs: killing the job kills it (its pipes then close, and this
    thread reaps it and returns its end).

    @return: C{(result, pid)} for L{_Command.shape}: the result L{None} if
        the command timed out.
    """
    import fcntl
    import selectors
    import time

    from twisted.internet import process

    opened: list[int] = []
    pid: int | None = None

    def pipe() -> tuple[int, int]:
        r, w = os.pipe()
        opened.extend((r, w))
        return r, w

    def close(fd: int) -> None:
        if fd in opened:
            opened.remove(fd)
            os.close(fd)

    try:
        inRead, inWrite = pipe()
        outRead, outWrite = pipe()
        errRead, errWrite = pipe()
        fdmap = {0: inRead, 1: outWrite, 2: errWrite}
        closeFrom: int | None = None
        if CHDIR_SPAWNER.canCloseFrom and min(fdmap.values()) > 2:
            # The pipes onto 0, 1 and 2, then every other descriptor
            # closed: no list of the minion's descriptors to make.
            actions: list[tuple[int, ...]] = [
                (_ACTION_DUP2, parent, child) for child, parent in fdmap.items()
            ]
            closeFrom = 3
        else:
            fdState = []
            for fd in process._listOpenFDs():
                try:
                    fdState.append((fd, fcntl.fcntl(fd, fcntl.F_GETFD, fcntl.FD_CLOEXEC)))
                except OSError:
                    continue
            actions = process._getFileActions(fdState, fdmap, _ACTION_CLOSE, _ACTION_DUP2)
        ignored = ignoredSignals()
        try:
            pid = CHDIR_SPAWNER.spawn(
                command.executable,
                command.argv,
                command.environ,
                command.cwd,
                actions,
                ignored,
                closeFrom,
                newGroups(),
            )
        except OSError as e:
            raise CommandExecutionError(
                f"Unable to run command '{command.display}' in directory '{command.cwd}': {e}"
            ) from None
        if jid is not None:
            # If the job was killed while the command started, this kills it.
            processes.add(jid, pid)
        for fd in (inRead, outWrite, errWrite):
            close(fd)
        pending = memoryview(command.stdin or b"")
        out: list[bytes] = []
        err: list[bytes] = []
        merged: list[bytes] = []
        deadline = None if command.timeout is None else time.monotonic() + command.timeout
        timedOut = False
        with selectors.DefaultSelector() as selector:
            selector.register(outRead, selectors.EVENT_READ, out)
            selector.register(errRead, selectors.EVENT_READ, err)
            if pending:
                os.set_blocking(inWrite, False)
                selector.register(inWrite, selectors.EVENT_WRITE, None)
            else:
                close(inWrite)
            while selector.get_map():
                wait = None if deadline is None else deadline - time.monotonic()
                if wait is not None and wait <= 0:
                    timedOut = True
                    break
                for key, _ in selector.select(wait):
                    fd = key.fd
                    if key.data is None:
                        try:
                            pending = pending[os.write(fd, pending) :]
                        except (BlockingIOError, InterruptedError):
                            continue
                        except OSError:  # the command closed its stdin
                            pending = memoryview(b"")
                        if not pending:
                            selector.unregister(fd)
                            close(fd)
                        continue
                    data = os.read(fd, 65536)
                    if data:
                        key.data.append(data)
                        merged.append(data)
                    else:
                        selector.unregister(fd)
                        close(fd)
        status = None
        if not timedOut:
            # Its output closed, the command may still run (it closed
            # them itself): wait for its end until the timeout.
            status = _waitUntil(pid, deadline)
            timedOut = status is None
        if timedOut:
            killTree(pid)
            os.waitpid(pid, 0)
    finally:
        if jid is not None and pid is not None:
            processes.discard(jid, pid)
        for fd in list(opened):
            close(fd)
    if timedOut or status is None:
        return None, pid
    outBytes, errBytes = b"".join(out), b"".join(err)
    both = outBytes if not errBytes else errBytes if not outBytes else b"".join(merged)
    return (pid, os.waitstatus_to_exitcode(status), outBytes, errBytes, both), pid


def _waitUntil(pid: int, deadline: float | None) -> int | None:
    """
    Reap child C{pid}, waiting at most until C{deadline} (C{time.monotonic}
    seconds; L{None}: as long as it takes).

    @return: its wait status, or L{None} if it still runs at C{deadline}.
    """
    import select
    import time

    if deadline is None:
        return os.waitpid(pid, 0)[1]
    try:
        pidfd = os.pidfd_open(pid)
    except (AttributeError, OSError):
        pidfd = None
    try:
        while True:
            done, status = os.waitpid(pid, os.WNOHANG)
            if done:
                return status
            wait = deadline - time.monotonic()
            if wait <= 0:
                return None
            if pidfd is not None:
                select.select([pidfd], [], [], wait)
            else:
                time.sleep(min(wait, 0.01))
    finally:
        if pidfd is not None:
            os.close(pidfd)


#: The longest command a failure line shows; the rest is counted.
LOGGED_COMMAND_LIMIT = 1000


def _loggedCommand(cmd: str) -> str:
    """
    @return: C{cmd} as a failure line shows it: whole, unless longer than
        L{LOGGED_COMMAND_LIMIT} characters, then cut with a count of the
        rest. The line quotes it with C{!r}, which escapes newlines and
        control characters, so the line stays one line that cannot forge
        others or drive a terminal.
    """
    if len(cmd) <= LOGGED_COMMAND_LIMIT:
        return cmd
    return f"{cmd[:LOGGED_COMMAND_LIMIT]}... [{len(cmd) - LOGGED_COMMAND_LIMIT} more characters]"


def _logOutput(level: LogLevel | None, cmd: str, ret: dict[str, Any], ignoreRetcode: bool) -> None:
    """
    Log a finished command's output at C{level} (nothing if L{None}: Salt's
    C{output_loglevel=quiet}); a failed command, with its output, at error
    at least.

    @param cmd: the whole command as typed (a list joined with shell
        quoting). A failure line shows it whole, where Salt shows only its
        first word: C{output_loglevel=quiet} keeps a command that holds a
        secret out of the log.
    """
    if level is None:
        return
    if ret["retcode"] != 0 and not ignoreRetcode:
        # As Salt: a failed command's output is logged at least at error.
        if level < LogLevel.error:
            level = LogLevel.error
        log.error(
            "Command {cmd!r} failed with return code: {retcode}",
            cmd=_loggedCommand(cmd),
            retcode=ret["retcode"],
        )
    if ret["stdout"]:
        log.emit(level, "stdout: {stdout}", stdout=ret["stdout"])
    if ret["stderr"]:
        log.emit(level, "stderr: {stderr}", stderr=ret["stderr"])
    if ret["retcode"]:
        log.emit(level, "retcode: {retcode}", retcode=ret["retcode"])
