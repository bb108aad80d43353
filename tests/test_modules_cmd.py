# -*- test-case-name: tests.test_modules_cmd -*-
"""
Tests for L{salttwist.modules.cmd}: real C{sh} and C{echo} processes spawned
by the real reactor (each test well under a second).
"""

from __future__ import annotations

import errno
import inspect
import os
import pwd
import signal
import time
from typing import Any

from twisted.internet.defer import Deferred
from twisted.internet.task import deferLater
from twisted.internet.testing import EventLoggingObserver
from twisted.logger import LogLevel, formatEvent, globalLogPublisher
from twisted.python import log
from twisted.trial.unittest import SkipTest, TestCase

from salttwist.blocking import threadRunner
from salttwist.modules import (
    CommandExecutionError,
    LoaderContext,
    Retcode,
    SaltInvocationError,
    cmd,
    loadFunctions,
)
from salttwist.modules._process import commandOptions, runCommand, runCommandHere
from salttwist.modules.executor import Executor


def kw(**kwargs: Any) -> dict[str, Any]:
    """
    @return: Salt's wire form of keyword arguments.
    """
    return {"__kwarg__": True, **kwargs}


class CmdTests(TestCase):
    """
    C{cmd.*} run commands through the reactor with Salt's options and
    return shapes.
    """

    def setUp(self) -> None:
        """
        A context and executor on the real reactor.
        """
        from twisted.internet import reactor

        self.reactor = reactor
        self.context = LoaderContext(opts={"id": "m1"}, grains={}, reactor=reactor)
        self.executor = Executor(loadFunctions(), self.context, threadRunner(reactor))

    def job(self, fun: str, *arg: Any) -> Deferred:
        """
        @return: the job return of C{fun} with C{arg}.
        """
        return self.executor.run(fun, list(arg))

    async def test_runCombinesOutput(self) -> None:
        """
        C{cmd.run} returns stdout and stderr together, trailing newline
        stripped, with the command's exit code as the job's retcode.
        """
        result = await self.job("cmd.run", "echo out; echo err >&2; exit 3")
        self.assertEqual(result, {"return": "out\nerr", "retcode": 3, "success": False})

    async def test_oneStreamKeptOnce(self) -> None:
        """
        When only one stream has output, the interleaved output is that
        stream's string itself, not a second copy of a command's whole
        output; with both, it interleaves them.
        """
        for command, stream in (("echo out", "stdout"), ("echo err >&2", "stderr")):
            ret = await runCommand(self.context, command)
            self.assertEqual(ret["output"], ret[stream])
            self.assertIs(ret["output"], ret[stream])
        ret = await runCommand(self.context, "echo a; sleep 0.05; echo b >&2; sleep 0.05; echo c")
        self.assertEqual((ret["stdout"], ret["stderr"], ret["output"]), ("a\nc", "b", "a\nb\nc"))

    async def test_cancelKillsProcessTree(self) -> None:
        """
        Cancelling a running C{cmd.run} job (what saltutil.kill_job does)
        kills the shell and the processes it started, at once.
        """
        marker = os.path.abspath(self.mktemp())
        os.makedirs(os.path.dirname(marker), exist_ok=True)
        d = self.job("cmd.run", f"sleep 30 & echo $! > {marker}; wait")
        for _ in range(200):
            if os.path.exists(marker) and open(marker).read().strip():
                break
            await deferLater(self.reactor, 0.02, lambda: None)
        with open(marker) as f:
            child = int(f.read())
        d.cancel()
        result = await d
        self.assertEqual(result["retcode"], 1)
        for _ in range(100):
            try:
                os.kill(child, 0)
            except ProcessLookupError:
                break
            await deferLater(self.reactor, 0.02, lambda: None)
        self.assertRaises(ProcessLookupError, os.kill, child, 0)

    async def test_jobCommandNotedUnderItsJid(self) -> None:
        """
        A C{cmd.run} job's command is noted under the job's jid while it
        runs (so that C{saltutil.term_job} reaches it): C{SIGTERM} sent to
        the job's commands runs the shell's C{trap}, and the job ends with
        the command.
        """
        jid = "20261127010203123456"
        pidFile = os.path.abspath(self.mktemp())
        os.makedirs(os.path.dirname(pidFile), exist_ok=True)
        command = f"trap 'exit 3' TERM; echo $$ > {pidFile}; sleep 300 & wait"
        d = self.executor.run("cmd.run", [command], jid)
        for _ in range(500):
            if os.path.exists(pidFile) and open(pidFile).read().strip():
                break
            await deferLater(self.reactor, 0.01, lambda: None)
        with open(pidFile) as f:
            shell = int(f.read())
        self.assertEqual(self.context.processes.groups(jid), [shell])
        self.context.processes.kill(jid, signal.SIGTERM)
        result = await d
        self.assertEqual((result["retcode"], result["success"]), (3, False))
        self.assertEqual(self.context.processes.groups(jid), [])

    async def test_runSuccess(self) -> None:
        """
        A command exiting 0 is a successful job.
        """
        result = await self.job("cmd.run", "echo hello")
        self.assertEqual(result, {"return": "hello", "retcode": 0, "success": True})

    async def test_runAll(self) -> None:
        """
        C{cmd.run_all} returns Salt's C{pid}, C{retcode}, C{stdout} and
        C{stderr}; the job's retcode is the command's.
        """
        value = await cmd.run_all(self.context, "echo a; echo b >&2; exit 2")
        self.assertIsInstance(value, Retcode)
        self.assertEqual(value.retcode, 2)
        self.assertEqual(sorted(value.value), ["pid", "retcode", "stderr", "stdout"])
        self.assertEqual(
            (value.value["stdout"], value.value["stderr"], value.value["retcode"]), ("a", "b", 2)
        )
        self.assertIsInstance(value.value["pid"], int)

    async def test_runStdoutStderr(self) -> None:
        """
        C{cmd.run_stdout} and C{cmd.run_stderr} return one stream each.
        """
        command = "echo a; echo b >&2"
        self.assertEqual(await cmd.run_stdout(self.context, command), Retcode("a", 0))
        self.assertEqual(await cmd.run_stderr(self.context, command), Retcode("b", 0))

    async def test_retcode(self) -> None:
        """
        C{cmd.retcode} returns the exit code, which is also the job's.
        """
        result = await self.job("cmd.retcode", "exit 7")
        self.assertEqual(result, {"return": 7, "retcode": 7, "success": False})
        self.assertEqual(await cmd.retcode(self.context, "true"), Retcode(0, 0))

    async def test_shellByDefault(self) -> None:
        """
        Without C{python_shell}, the command goes through the shell, as for
        Salt jobs from the CLI: variables and pipes work.
        """
        value = await cmd.run(self.context, "X=1; echo $X | tr 1 2")
        self.assertEqual(value, Retcode("2", 0))

    async def test_noShell(self) -> None:
        """
        With C{python_shell=False} the command is split like a shell would,
        but no shell runs it: C{$HOME} stays literal.
        """
        value = await cmd.run(self.context, "echo '$HOME' \"a b\"", python_shell=False)
        self.assertEqual(value, Retcode("$HOME a b", 0))

    async def test_listNoShell(self) -> None:
        """
        A list is run as the program and its arguments, with no shell.
        """
        value = await cmd.run(self.context, ["echo", "a;b", "$X"])
        self.assertEqual(value, Retcode("a;b $X", 0))

    async def test_shellFunction(self) -> None:
        """
        C{cmd.shell} always uses the shell.
        """
        self.assertEqual(await cmd.shell(self.context, "echo a && echo b"), Retcode("a\nb", 0))

    async def test_cwd(self) -> None:
        """
        C{cwd} sets the working directory.
        """
        directory = os.path.realpath(self.mktemp())
        os.mkdir(directory)
        self.assertEqual(await cmd.run(self.context, "pwd", cwd=directory), Retcode(directory, 0))

    async def test_cwdWithoutFork(self) -> None:
        """
        With an C{env} that takes C{-C}, a command in another directory
        is started through it (no fork of the minion) and runs as a fork
        would run it: in C{cwd}, as C{/bin/sh -c <command>} under the pid
        it was started with, with the environment given.
        """
        from salttwist.modules import _process

        tool = _process.ChdirTool()
        tool.path, tool.known = _process.findChdirTool(), True
        if tool.path is None:
            raise SkipTest("no env here takes -C")
        self.patch(_process, "CHDIR_TOOL", tool)
        # Where the C library cannot change directory in posix_spawn.
        spawner = _process.ChdirSpawner()
        spawner.available = False
        self.patch(_process, "CHDIR_SPAWNER", spawner)
        started: list[tuple[Any, ...]] = []
        spawn = self.reactor.spawnProcess

        def recording(protocol: Any, executable: str, args: list[str], **kwargs: Any) -> Any:
            started.append((executable, args, kwargs.get("path")))
            return spawn(protocol, executable, args, **kwargs)

        self.patch(self.reactor, "spawnProcess", recording)
        directory = os.path.realpath(self.mktemp())
        os.mkdir(directory)
        ret = await runCommand(
            self.context,
            'pwd; echo "$0"; tr "\\0" " " < /proc/$$/cmdline; echo; echo "$FOO"',
            cwd=directory,
            env={"FOO": "bar"},
        )
        lines = ret["stdout"].splitlines()
        self.assertEqual(lines[0], directory)
        self.assertEqual(lines[1], "/bin/sh")
        self.assertTrue(lines[2].startswith("/bin/sh -c pwd;"), lines[2])
        self.assertEqual(lines[3], "bar")
        self.assertEqual(started[0][0], tool.path)
        self.assertEqual(started[0][1][:4], [tool.path, "-C", directory, "/bin/sh"])
        self.assertIsNone(started[0][2])

    async def test_cwdSpawnedInPlace(self) -> None:
        """
        Where the C library's C{posix_spawn} can change directory, a
        command in another directory starts as C{/bin/sh -c <command>}
        itself (no C{env}, no fork of the minion: not through
        C{reactor.spawnProcess}), in C{cwd}, under the pid reported, with
        the environment given, without the minion's inheritable
        descriptors, and with the signals the minion ignores (C{SIGPIPE})
        back to their default.
        """
        from salttwist.modules import _process

        if not _process.CHDIR_SPAWNER.usableWith(self.reactor):
            raise SkipTest("this C library's posix_spawn cannot change directory")
        started: list[Any] = []
        spawn = self.reactor.spawnProcess

        def recording(*args: Any, **kwargs: Any) -> Any:
            started.append(args)
            return spawn(*args, **kwargs)

        self.patch(self.reactor, "spawnProcess", recording)
        leaked = os.open(os.devnull, os.O_RDONLY)
        self.addCleanup(os.close, leaked)
        os.set_inheritable(leaked, True)
        directory = os.path.realpath(self.mktemp())
        os.mkdir(directory)
        ret = await runCommand(
            self.context,
            'pwd; echo "$0"; tr "\\0" " " < /proc/$$/cmdline; echo; echo "$FOO"; echo $$; '
            "ls /proc/$$/fd | tr '\\n' ' '; echo; grep SigIgn /proc/$$/status",
            cwd=directory,
            env={"FOO": "bar"},
        )
        lines = ret["stdout"].splitlines()
        self.assertEqual(lines[0], directory)
        self.assertEqual(lines[1], "/bin/sh")
        self.assertTrue(lines[2].startswith("/bin/sh -c pwd;"), lines[2])
        self.assertEqual(lines[3], "bar")
        self.assertEqual(int(lines[4]), ret["pid"])
        self.assertNotIn(str(leaked), lines[5].split())
        ignored = int(lines[6].split()[1], 16)
        self.assertFalse(ignored & (1 << (signal.SIGPIPE - 1)), lines[6])
        self.assertEqual(started, [])

    def test_chdirSpawnerErrors(self) -> None:
        """
        L{_process.ChdirSpawner.spawn} raises L{OSError} naming the
        problem when the child cannot start: no such directory, no such
        executable.
        """
        from salttwist.modules import _process

        spawner = _process.CHDIR_SPAWNER
        if not spawner.available:
            raise SkipTest("this C library's posix_spawn cannot change directory")
        missing = os.path.abspath(self.mktemp())
        e = self.assertRaises(
            OSError, spawner.spawn, "/bin/sh", ["/bin/sh", "-c", "true"], {}, missing, [], []
        )
        self.assertEqual(e.errno, errno.ENOENT)
        e = self.assertRaises(OSError, spawner.spawn, missing, [missing], {}, "/", [], [])
        self.assertEqual(e.errno, errno.ENOENT)

    def test_spawnArguments(self) -> None:
        """
        L{_process.spawnArguments}: the minion's own directory needs no
        C{path}; another one goes through the C{env} given when C{argv[0]}
        is the executable's absolute path; a user to become, no such
        C{env}, or another C{argv[0]}, keep C{path} (a fork).
        """
        from salttwist.modules._process import spawnArguments

        argv = ["/bin/sh", "-c", "true"]
        here = os.getcwd()
        elsewhere = "/" if here != "/" else "/tmp"
        self.assertEqual(
            spawnArguments("/bin/sh", argv, here, None, None, None), ("/bin/sh", argv, None)
        )
        self.assertEqual(
            spawnArguments("/bin/sh", argv, elsewhere, None, None, "/usr/bin/env"),
            ("/usr/bin/env", ["/usr/bin/env", "-C", elsewhere, *argv], None),
        )
        for args in (
            ("/bin/sh", argv, elsewhere, 0, 0, "/usr/bin/env"),
            ("/bin/sh", argv, elsewhere, None, None, None),
            ("/bin/ls", ["ls", "-l"], elsewhere, None, None, "/usr/bin/env"),
            ("/opt/a=b/sh", ["/opt/a=b/sh"], elsewhere, None, None, "/usr/bin/env"),
        ):
            self.assertEqual(spawnArguments(*args), (args[0], args[1], elsewhere))

    def test_badCwd(self) -> None:
        """
        A relative or missing C{cwd} is refused with Salt's message.
        """
        for bad in ("relative/dir", "/nonexistent/dir"):
            error = self.assertRaises(CommandExecutionError, cmd.run, self.context, "pwd", cwd=bad)
            self.assertEqual(
                str(error), f"Specified cwd '{bad}' either not absolute or does not exist"
            )

    def test_nulRefused(self) -> None:
        """
        A NUL byte in the command, an argument, the environment or C{cwd},
        and an C{=} in a variable's name, are refused naming the problem:
        the C library would cut the string short and run something else
        (C{"echo start\\x00; rm -rf x"} ran C{echo start}).
        """
        cases = [
            ((self.context, "echo start\x00; echo tail"), {}, "NUL byte"),
            ((self.context, ["/bin/echo", "a\x00b"]), {}, "NUL byte"),
            ((self.context, "true"), {"env": {"A": "x\x00y"}}, "variable A holds a NUL"),
            ((self.context, "true"), {"env": {"A=B": "c"}}, "bad environment variable name"),
            ((self.context, "true"), {"cwd": "/tmp\x00/x"}, "cwd holds a NUL"),
        ]
        for args, kwargs, message in cases:
            error = self.assertRaises(SaltInvocationError, cmd.run, *args, **kwargs)
            self.assertIn(message, str(error))

    async def test_defaultCwdIsHome(self) -> None:
        """
        Without C{cwd}, the command runs in the home directory of the user
        (or C{/} when that is unreadable), as in Salt.
        """
        home = os.path.expanduser("~")
        expected = home if os.access(home, os.R_OK) else "/"
        value = await cmd.run(self.context, "pwd")
        self.assertEqual(os.path.realpath(value.value), os.path.realpath(expected))

    async def test_env(self) -> None:
        """
        C{env} adds variables (a map or a list of maps) to the minion's
        environment.
        """
        value = await cmd.run(self.context, 'echo "$A $B"', env={"A": "1", "B": 2})
        self.assertEqual(value, Retcode("1 2", 0))
        value = await cmd.run(self.context, 'echo "$A $B"', env=[{"A": "x"}, {"B": "y"}])
        self.assertEqual(value, Retcode("x y", 0))

    async def test_cleanEnv(self) -> None:
        """
        C{clean_env=True} drops the minion's environment.
        """
        os.environ["SALTTWIST_TEST_VAR"] = "leak"
        self.addCleanup(os.environ.pop, "SALTTWIST_TEST_VAR")
        inherited = await cmd.run(self.context, 'echo "[$SALTTWIST_TEST_VAR]"')
        self.assertEqual(inherited.value, "[leak]")
        cleaned = await cmd.run(self.context, 'echo "[$SALTTWIST_TEST_VAR]"', clean_env=True)
        self.assertEqual(cleaned.value, "[]")

    async def test_locale(self) -> None:
        """
        Commands run with the C locale unless C{reset_system_locale=False}.
        """
        self.assertEqual((await cmd.run(self.context, "echo $LC_MESSAGES")).value, "C")
        value = await cmd.run(
            self.context, "echo x$LC_MESSAGES", reset_system_locale=False, env={"LC_MESSAGES": ""}
        )
        self.assertEqual(value.value, "x")

    async def test_prependPath(self) -> None:
        """
        C{prepend_path} goes before C{PATH}.
        """
        value = await cmd.run(self.context, "echo $PATH", prepend_path="/opt/x/bin")
        self.assertTrue(value.value.startswith("/opt/x/bin:"), value.value)

    async def test_stdin(self) -> None:
        """
        C{stdin} is written to the command; a typed C{\\n} becomes a newline
        unless C{stdin_raw_newlines}.
        """
        self.assertEqual(await cmd.run(self.context, "cat", stdin="a\\nb"), Retcode("a\nb", 0))
        value = await cmd.run(self.context, "cat", stdin="a\\nb", stdin_raw_newlines=True)
        self.assertEqual(value, Retcode("a\\nb", 0))

    async def test_noStdinIsEof(self) -> None:
        """
        Without C{stdin}, a command reading its input gets end-of-file at
        once instead of hanging.
        """
        self.assertEqual(await cmd.run(self.context, "cat; echo done"), Retcode("done", 0))

    async def test_timeout(self) -> None:
        """
        A command still running at C{timeout} is killed with everything it
        started (a background child holding the output pipe too), and the
        result is Salt's wording with retcode 1.
        """
        pidFile = os.path.abspath(self.mktemp())
        command = f"sleep 30 & echo $! > {pidFile}; wait"
        started = time.monotonic()
        result = await self.job("cmd.run", command, kw(timeout=0.3))
        log.msg(f"cmd.run timed out after {time.monotonic() - started:.2f} s")
        self.assertEqual(
            result,
            {"return": f"{command} : Timed out after 0.3 seconds", "retcode": 1, "success": False},
        )
        with open(pidFile) as f:
            child = int(f.read())
        # SIGKILL takes effect asynchronously: allow it a moment.
        for _ in range(100):
            state = self.processState(child)
            if state in ("gone", "Z", "X"):
                break
            await deferLater(self.reactor, 0.01, lambda: None)
        # Dead: gone, or a zombie waiting for its new parent.
        self.assertIn(state, ("gone", "Z", "X"))

    def processState(self, pid: int) -> str:
        """
        @return: the state letter of C{pid} in C{/proc}, or C{"gone"}.
        """
        try:
            with open(f"/proc/{pid}/stat") as f:
                return f.read().rpartition(")")[2].split()[0]
        except FileNotFoundError:
            return "gone"

    async def test_timeoutRunAll(self) -> None:
        """
        C{cmd.run_all} on timeout has Salt's message in C{stdout}, empty
        C{stderr} and retcode 1.
        """
        value = await cmd.run_all(self.context, "sleep 5", timeout=0.2)
        self.assertEqual(value.retcode, 1)
        self.assertEqual(value.value["stdout"], "sleep 5 : Timed out after 0.2 seconds")
        self.assertEqual(value.value["stderr"], "")

    def test_timeoutNotNumber(self) -> None:
        """
        A C{timeout} that is not a number is refused.
        """
        error = self.assertRaises(
            CommandExecutionError, cmd.run, self.context, "true", timeout="soon"
        )
        self.assertEqual(str(error), "Error: timeout soon must be a number")

    async def test_reactorNotBlocked(self) -> None:
        """
        While a command runs, the reactor keeps running other work.
        """
        ticks: list[float] = []
        deferLater(self.reactor, 0.05, ticks.append, 1)
        value = await cmd.run(self.context, "sleep 0.3; echo late")
        self.assertEqual(value, Retcode("late", 0))
        self.assertEqual(ticks, [1])

    async def test_successRetcodes(self) -> None:
        """
        Exit codes in C{success_retcodes} count as 0.
        """
        self.assertEqual(
            await cmd.retcode(self.context, "exit 2", success_retcodes=[2, 3]), Retcode(0, 0)
        )
        self.assertEqual(
            await cmd.retcode(self.context, "exit 3", success_retcodes="2,3"), Retcode(0, 0)
        )

    async def test_ignoreRetcode(self) -> None:
        """
        C{ignore_retcode=True} makes the job succeed whatever the exit code;
        C{cmd.run_all} still reports the command's code.
        """
        value = await cmd.run_all(self.context, "exit 4", ignore_retcode=True)
        self.assertEqual((value.retcode, value.value["retcode"]), (0, 4))

    def test_missingProgram(self) -> None:
        """
        Without a shell, a program that does not exist is an error naming
        it, before anything is spawned.
        """
        error = self.assertRaises(
            CommandExecutionError,
            cmd.run,
            self.context,
            "salttwist-no-such-program x",
            python_shell=False,
        )
        self.assertIn("No such file or directory: 'salttwist-no-such-program'", str(error))

    async def test_missingProgramJob(self) -> None:
        """
        Through the executor, such an error is Salt's C{ERROR: ...} with
        retcode 1.
        """
        result = await self.job("cmd.run", ["salttwist-no-such-program"])
        self.assertTrue(result["return"].startswith("ERROR: Unable to run command"), result)
        self.assertEqual((result["retcode"], result["success"]), (1, False))

    def test_missingShell(self) -> None:
        """
        A C{shell} that does not exist is refused with Salt's message.
        """
        error = self.assertRaises(
            CommandExecutionError, cmd.run, self.context, "true", shell="/no/such/sh"
        )
        self.assertEqual(str(error), "The shell /no/such/sh is not available")

    def test_emptyCommand(self) -> None:
        """
        An empty command is refused.
        """
        self.assertRaises(SaltInvocationError, cmd.run, self.context, "  ")

    async def test_runas(self) -> None:
        """
        As root, C{runas} runs the command as that user, with its C{HOME}.
        """
        if os.geteuid() != 0:
            raise self.skipTest("needs root")
        value = await cmd.run(self.context, "id -un; echo $HOME; echo $USER", runas="nobody")
        home = pwd.getpwnam("nobody").pw_dir
        self.assertEqual(value, Retcode(f"nobody\n{home}\nnobody", 0))

    def test_runasNotRoot(self) -> None:
        """
        C{runas} on a minion that is not root is a clear error.
        """
        self.patch(os, "geteuid", lambda: 1000)
        error = self.assertRaises(
            CommandExecutionError, cmd.run, self.context, "id", runas="nobody"
        )
        self.assertIn("needs the minion to run as root", str(error))
        self.assertIn("uid 1000", str(error))

    def test_runasUnknownUser(self) -> None:
        """
        An unknown C{runas} user is Salt's "is not available".
        """
        if os.geteuid() != 0:
            raise self.skipTest("needs root")
        error = self.assertRaises(
            CommandExecutionError, cmd.run, self.context, "id", runas="no-such-user-xyz"
        )
        self.assertEqual(str(error), "User 'no-such-user-xyz' is not available")

    async def test_outputLoglevel(self) -> None:
        """
        The command and its output are logged, the output at
        C{output_loglevel}; C{quiet} logs nothing.
        """
        events = EventLoggingObserver.createWithCleanup(self, globalLogPublisher)
        await cmd.run(self.context, "echo logged-out", output_loglevel="info")
        outputs = [e for e in events if "stdout" in e and e["stdout"] == "logged-out"]
        self.assertEqual([e["log_level"] for e in outputs], [LogLevel.info])
        self.assertTrue(any("Executing command" in e["log_format"] for e in events))
        before = len(events)
        await cmd.run(self.context, "echo quiet-out", output_loglevel="quiet")
        self.assertEqual(list(events)[before:], [])

    async def test_outputLoglevelFailure(self) -> None:
        """
        A failing command's output is logged at error at least, after a
        line naming the command and its exit code.
        """
        events = EventLoggingObserver.createWithCleanup(self, globalLogPublisher)
        await cmd.run(self.context, "echo bad-out; exit 5", output_loglevel="debug")
        failed = [e for e in events if e.get("retcode") == 5 and "failed" in e["log_format"]]
        self.assertEqual(len(failed), 1)
        outputs = [e for e in events if e.get("stdout") == "bad-out"]
        self.assertEqual([e["log_level"] for e in outputs], [LogLevel.error])

    async def test_failureLogsWholeCommand(self) -> None:
        """
        A failed command is logged whole, in Salt's words (C{Command '...'
        failed with return code: N}): not only its first word.
        """
        events = EventLoggingObserver.createWithCleanup(self, globalLogPublisher)
        await cmd.run(self.context, "test -e /no/such/file-st && echo yes")
        await cmd.run(self.context, ["sh", "-c", "exit 3", "x y"], python_shell=False)
        failed = [formatEvent(e) for e in events if "failed" in e["log_format"]]
        self.assertEqual(
            failed,
            [
                "Command 'test -e /no/such/file-st && echo yes' failed with return code: 1",
                "Command \"sh -c 'exit 3' 'x y'\" failed with return code: 3",
            ],
        )

    async def test_failureLogSafe(self) -> None:
        """
        The command in the failure line is quoted with its control
        characters escaped, so it is one line that cannot forge others,
        and a very long command is cut; with C{output_loglevel=quiet}
        (the way to keep a command holding secrets out of the log) it is
        not logged at all.
        """
        events = EventLoggingObserver.createWithCleanup(self, globalLogPublisher)
        await cmd.run(self.context, "true\nfalse # \x1b[31mred")
        await cmd.run(self.context, "false " + "x" * 3000)
        await cmd.run(self.context, "false secret-st", output_loglevel="quiet")
        failed = [formatEvent(e) for e in events if "failed" in e["log_format"]]
        self.assertEqual(len(failed), 2, failed)
        self.assertEqual(
            failed[0], "Command 'true\\nfalse # \\x1b[31mred' failed with return code: 1"
        )
        self.assertNotIn("\n", failed[0])
        self.assertLess(len(failed[1]), 1100)
        self.assertIn("x" * 900, failed[1])
        self.assertIn("[2006 more characters]", failed[1])
        self.assertFalse([e for e in events if "secret-st" in formatEvent(e)])

    async def test_outputLoglevelInvalid(self) -> None:
        """
        An unknown C{output_loglevel} logs an error and falls back to info.
        """
        events = EventLoggingObserver.createWithCleanup(self, globalLogPublisher)
        await cmd.run(self.context, "echo odd-out", output_loglevel="loud")
        self.assertTrue(any("Invalid output_loglevel" in e["log_format"] for e in events))
        outputs = [e for e in events if e.get("stdout") == "odd-out"]
        self.assertEqual([e["log_level"] for e in outputs], [LogLevel.info])

    async def test_scriptInline(self) -> None:
        """
        C{cmd.script} runs a script given as text (starting with C{#!}),
        with C{args} split as a shell would, and returns C{run_all}'s shape.
        """
        value = await cmd.script(self.context, '#!/bin/sh\necho "[$1] [$2]"\nexit 3', "a 'b c'")
        self.assertEqual(value.retcode, 3)
        self.assertEqual(value.value["stdout"], "[a] [b c]")
        self.assertEqual(sorted(value.value), ["pid", "retcode", "stderr", "stdout"])

    async def test_scriptLocalPath(self) -> None:
        """
        C{cmd.script} runs a local script file (a copy of it, removed
        afterwards), also as C{file://}.
        """
        path = os.path.abspath(self.mktemp())
        with open(path, "w") as f:
            f.write('#!/bin/sh\necho "$0"\n')
        for source in (path, "file://" + path):
            value = await cmd.script(self.context, source)
            copy = value.value["stdout"]
            self.assertNotEqual(copy, path)
            self.assertEqual(value.retcode, 0)
            # Removal runs in a thread after the result: wait for it.
            for _ in range(50):
                if not os.path.exists(copy):
                    break
                await deferLater(self.reactor, 0.01, lambda: None)
            self.assertFalse(os.path.exists(os.path.dirname(copy)))

    async def test_scriptSaltUrlRefused(self) -> None:
        """
        A C{salt://} source is refused: there is no file server.
        """
        result = await self.job("cmd.script", "salt://scripts/x.sh")
        self.assertTrue(result["return"].startswith("ERROR: cmd.script cannot fetch"), result)
        self.assertIn("no file server", result["return"])
        self.assertEqual(result["retcode"], 1)

    async def test_scriptMissing(self) -> None:
        """
        A script path that does not exist is an error.
        """
        result = await self.job("cmd.script", "/no/such/script.sh")
        self.assertEqual(
            result["return"], "ERROR: Script '/no/such/script.sh' not found on the minion"
        )

    def test_which(self) -> None:
        """
        C{cmd.which} finds an executable on C{PATH}, or returns C{None};
        C{cmd.has_exec} says whether there is one.
        """
        self.assertTrue(os.path.isabs(cmd.which("sh")))
        self.assertIsNone(cmd.which("salttwist-no-such-program"))
        self.assertTrue(cmd.has_exec("sh"))
        self.assertFalse(cmd.has_exec("salttwist-no-such-program"))

    def test_whichInThread(self) -> None:
        """
        C{cmd.which} and C{cmd.has_exec} search the disk, so they run in a
        thread; the other functions spawn on the reactor.
        """
        for f in (cmd.which, cmd.has_exec):
            self.assertFalse(getattr(f, "runsOnReactor", False))
        for f in (cmd.run, cmd.run_all, cmd.run_stdout, cmd.run_stderr, cmd.retcode, cmd.shell):
            self.assertTrue(f.runsOnReactor)


class CmdSignatureTests(TestCase):
    """
    The C{cmd} functions take the command options, defined once
    (L{commandOptions}), as parameters of plain functions.
    """

    def test_optionsOfRunCommand(self) -> None:
        """
        Each C{cmd} function takes its own leading parameters and then
        the command options (L{commandOptions}), in order, with the same defaults;
        C{cmd.shell} has no C{python_shell}.
        """
        options = list(commandOptions())
        self.assertEqual(options[0].name, "cwd")
        leading = {"script": ["context", "source", "args"], "shell": ["context", "cmd"]}
        for name in ("run", "run_all", "run_stdout", "run_stderr", "retcode", "shell", "script"):
            parameters = list(inspect.signature(getattr(cmd, name)).parameters.values())
            own = leading.get(name, ["context", "cmd"])
            expected = [p for p in options if not (name == "shell" and p.name == "python_shell")]
            self.assertEqual([p.name for p in parameters[: len(own)]], own, name)
            self.assertEqual(parameters[len(own) :], expected, name)

    def test_badArgumentsAsPython(self) -> None:
        """
        A call with an unknown option or too many arguments fails with the
        L{TypeError} Python gives a function written out, naming the
        function.
        """
        with self.assertRaises(TypeError) as caught:
            cmd.run(None, "true", nope=1)
        self.assertEqual(str(caught.exception), "run() got an unexpected keyword argument 'nope'")
        with self.assertRaises(TypeError) as caught:
            cmd.shell(None, "true", python_shell=False)
        self.assertEqual(
            str(caught.exception), "shell() got an unexpected keyword argument 'python_shell'"
        )
        with self.assertRaises(TypeError) as caught:
            cmd.script(None, *range(18))
        self.assertEqual(
            str(caught.exception),
            "script() takes from 2 to 18 positional arguments but 19 were given",
        )


class RunHereTests(TestCase):
    """
    L{runCommandHere}: a command run in the calling thread gives what
    L{runCommand} gives through the reactor; C{cmd.retcode} called from a
    thread (a state's C{unless}) runs there.
    """

    def setUp(self) -> None:
        from twisted.internet import reactor

        from salttwist.modules import _process

        if not _process.CHDIR_SPAWNER.available:
            raise SkipTest("this C library's posix_spawn cannot change directory")
        self.reactor = reactor
        self.context = LoaderContext(opts={"id": "m1"}, grains={}, reactor=reactor)

    async def test_sameAsThroughReactor(self) -> None:
        """
        Output, standard error, exit codes, C{cwd}, C{env}, C{stdin},
        C{success_retcodes} and a command without a shell give the same
        result in the calling thread as through the reactor (but the pid).
        """
        directory = os.path.realpath(self.mktemp())
        os.mkdir(directory)
        cases: list[tuple[Any, dict[str, Any]]] = [
            ("echo a; echo b", {}),
            ("echo e >&2; exit 3", {}),
            ("exit 3", {"success_retcodes": [3]}),
            ("pwd; echo $FOO", {"cwd": directory, "env": {"FOO": "bar"}}),
            ("cat", {"stdin": "in\\nput"}),
            (["printf", "%s|", "x y", "z"], {}),
            ("printf '  spaced  '", {"rstrip": False}),
        ]
        for command, options in cases:
            here = runCommandHere(self.context, command, **options)
            there = await runCommand(self.context, command, **options)
            self.assertIsNotNone(here)
            assert here is not None
            self.assertNotEqual(here.pop("pid"), there.pop("pid"))
            self.assertEqual(here, there, command)

    def test_bothStreams(self) -> None:
        """
        Standard output and standard error are kept apart, and together in
        C{output}.
        """
        ret = runCommandHere(self.context, "echo out; echo err >&2")
        assert ret is not None
        self.assertEqual((ret["stdout"], ret["stderr"]), ("out", "err"))
        self.assertEqual(sorted(ret["output"].splitlines()), ["err", "out"])

    def test_bigStdin(self) -> None:
        """
        A C{stdin} bigger than a pipe holds is written while the output is
        read: no deadlock.
        """
        ret = runCommandHere(self.context, "wc -c; cat >/dev/null", stdin="x" * (1 << 20))
        assert ret is not None
        self.assertEqual(ret["stdout"].strip(), str(1 << 20))

    def test_childState(self) -> None:
        """
        The child is C{/bin/sh -c <command>} under the pid reported, without
        the minion's inheritable descriptors, with the signals the minion
        ignores (C{SIGPIPE}) back to their default.
        """
        leaked = os.open(os.devnull, os.O_RDONLY)
        self.addCleanup(os.close, leaked)
        os.set_inheritable(leaked, True)
        ret = runCommandHere(
            self.context,
            "echo $$; tr '\\0' ' ' < /proc/$$/cmdline; echo; "
            "ls /proc/$$/fd | tr '\\n' ' '; echo; grep SigIgn /proc/$$/status",
            cwd="/",
        )
        assert ret is not None
        lines = ret["stdout"].splitlines()
        self.assertEqual(int(lines[0]), ret["pid"])
        self.assertTrue(lines[1].startswith("/bin/sh -c echo"), lines[1])
        self.assertNotIn(str(leaked), lines[2].split())
        self.assertFalse(int(lines[3].split()[1], 16) & (1 << (signal.SIGPIPE - 1)), lines[3])

    def test_ignoredSignals(self) -> None:
        """
        L{_process.ignoredSignals} (read from C{/proc}) names the signals
        C{signal.getsignal} says are ignored, one ignored now included.
        """
        from salttwist.modules import _process

        previous = signal.signal(signal.SIGUSR1, signal.SIG_IGN)
        self.addCleanup(signal.signal, signal.SIGUSR1, previous)
        expected = [n for n in range(1, signal.NSIG) if signal.getsignal(n) == signal.SIG_IGN]
        self.assertIn(signal.SIGUSR1, expected)
        self.assertEqual(_process.ignoredSignals(), expected)

    def test_childStateListingDescriptors(self) -> None:
        """
        Where the C library cannot close every descriptor from 3 on, the
        minion's are listed and closed one by one: the child is the same.
        """
        from salttwist.modules import _process

        self.patch(_process.CHDIR_SPAWNER, "canCloseFrom", False)
        self.test_childState()

    async def test_timeout(self) -> None:
        """
        A command still running at C{timeout} is killed with what it
        started; the result is Salt's wording with retcode 1.
        """
        pidFile = os.path.abspath(self.mktemp())
        command = f"sleep 30 & echo $! > {pidFile}; wait"
        ret = runCommandHere(self.context, command, timeout=0.3)
        assert ret is not None
        words = f"{command} : Timed out after 0.3 seconds"
        self.assertEqual(
            (ret["retcode"], ret["stdout"], ret["stderr"], ret["output"]), (1, words, "", words)
        )
        with open(pidFile) as f:
            child = int(f.read())
        for _ in range(100):
            state = CmdTests.processState(self, child)  # type: ignore[arg-type]
            if state in ("gone", "Z", "X"):
                break
            await deferLater(self.reactor, 0.01, lambda: None)
        self.assertIn(state, ("gone", "Z", "X"))

    def test_timeoutAfterOutputClosed(self) -> None:
        """
        A command that closed its output but still runs at C{timeout} is
        killed too (its end is waited for until the timeout, not longer).
        """
        command = "exec >/dev/null 2>&1; sleep 30"
        ret = runCommandHere(self.context, command, timeout=0.3)
        assert ret is not None
        self.assertEqual(
            (ret["retcode"], ret["stdout"]), (1, f"{command} : Timed out after 0.3 seconds")
        )
        self.assertEqual(CmdTests.processState(self, ret["pid"]), "gone")  # type: ignore[arg-type]

    def test_refusedAsThroughReactor(self) -> None:
        """
        A bad C{cwd} is refused with L{runCommand}'s words; a C{runas}
        user is left to L{runCommand} (L{None}, nothing run).
        """
        missing = os.path.abspath(self.mktemp())
        error = self.assertRaises(
            CommandExecutionError, runCommandHere, self.context, "true", cwd=missing
        )
        self.assertIn(missing, str(error))
        marker = os.path.abspath(self.mktemp())
        self.assertIsNone(runCommandHere(self.context, f"touch {marker}", runas="nobody"))
        self.assertFalse(os.path.exists(marker))

    async def test_retcodeFromThread(self) -> None:
        """
        C{cmd.retcode} and C{cmd.run_all} called through C{__salt__} from
        a thread run the command in that thread: the reactor starts no
        process.
        """
        from twisted.internet.threads import deferToThread

        from salttwist.modules import _process
        from salttwist.modules.extmods import SaltFunctions

        started: list[Any] = []
        self.patch(self.reactor, "spawnProcess", lambda *a, **k: started.append(a))
        self.patch(_process.CHDIR_SPAWNER, "spawnProcess", lambda *a, **k: started.append(a))
        context = LoaderContext(
            opts={"id": "m1"}, grains={}, reactor=self.reactor, functions=loadFunctions()
        )
        retcode = SaltFunctions(context)["cmd.retcode"]
        runAll = SaltFunctions(context)["cmd.run_all"]
        codes = await deferToThread(
            lambda: [retcode("exit 4", python_shell=True), retcode("true", cwd="/tmp")]
        )
        self.assertEqual(codes, [4, 0])
        ran = await deferToThread(lambda: runAll("echo o; echo e >&2; exit 2", cwd="/tmp"))
        ran.pop("pid")
        self.assertEqual(ran, {"retcode": 2, "stdout": "o", "stderr": "e"})
        self.assertEqual(started, [])
