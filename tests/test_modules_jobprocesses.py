# -*- test-case-name: tests.test_modules_jobprocesses -*-
"""
Tests for L{salttwist.modules._jobprocesses}: killing a job kills the
commands it runs, with everything they started, whichever way they were
started (real processes: C{sh} and C{sleep}).
"""

from __future__ import annotations

import dataclasses
import os
import select
import signal
import subprocess
from typing import Any

from twisted.internet.defer import Deferred
from twisted.internet.task import deferLater
from twisted.internet.threads import deferToThread
from twisted.trial.unittest import SkipTest, TestCase

from salttwist.minion.jobs import RunningJob
from salttwist.modules import LoaderContext, _process, saltutil
from salttwist.modules._jobprocesses import KILLED_REMEMBERED, JobProcesses
from salttwist.modules._process import CHDIR_SPAWNER, runCommand, runCommandHere

JID = "20261127010203123456"

#: A shell leading two C{sleep 300}, each started in the background, whose
#: pids it writes (one a line) to the file C{$PIDS} names, then waits.
TWO_SLEEPS = 'sleep 300 & echo $! > "$PIDS"; sleep 300 & echo $! >> "$PIDS"; wait'


def gone(pid: int, bound: float = 10.0) -> bool:
    """
    Wait, at most C{bound} seconds, for process C{pid} to end.

    @return: whether it ended (a zombie counts: it no longer runs).
    """
    try:
        pidfd = os.pidfd_open(pid)
    except ProcessLookupError:
        return True
    try:
        select.select([pidfd], [], [], bound)
    finally:
        os.close(pidfd)
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            state = f.read().rpartition(b")")[2].split()[0]
    except OSError:
        return True
    return state in (b"Z", b"X")


class RegistryTests(TestCase):
    """
    L{JobProcesses} notes the process groups of a job's commands and kills
    them.
    """

    def spawnGroup(self, ignoreTerm: bool = False) -> tuple[subprocess.Popen[bytes], list[int]]:
        """
        @param ignoreTerm: whether the shell and its sleeps ignore
            C{SIGTERM}.
        @return: a C{sh} leading a process group of its own, with two
            C{sleep 300} below it, and the pids of those.
        """
        pids = os.path.abspath(self.mktemp())
        script = TWO_SLEEPS.replace("wait", "echo; wait")
        if ignoreTerm:
            script = f"trap '' TERM; {script}"
        shell = subprocess.Popen(
            ["/bin/sh", "-c", script],
            env={**os.environ, "PIDS": pids},
            stdout=subprocess.PIPE,
            process_group=0,
        )
        self.addCleanup(self.reap, shell)
        assert shell.stdout is not None
        shell.stdout.readline()  # the shell has written both pids
        with open(pids) as f:
            sleeps = [int(line) for line in f]
        return shell, sleeps

    def reap(self, shell: subprocess.Popen[bytes]) -> None:
        """
        Kill what is left of C{shell}'s group, and reap it.
        """
        try:
            os.killpg(shell.pid, signal.SIGKILL)
        except OSError:
            pass
        shell.wait()
        if shell.stdout is not None:
            shell.stdout.close()

    def test_addAndDiscard(self) -> None:
        """
        L{JobProcesses.groups} lists what L{JobProcesses.add} noted and
        L{JobProcesses.discard} did not forget; a call outside a job
        (jid L{None}) notes nothing.
        """
        processes = JobProcesses()
        self.assertTrue(processes.add(JID, 101))
        self.assertTrue(processes.add(JID, 102))
        self.assertTrue(processes.add(None, 103))
        self.assertEqual(processes.groups(JID), [101, 102])
        processes.discard(JID, 101)
        processes.discard(None, 103)
        self.assertEqual(processes.groups(JID), [102])
        processes.discard(JID, 102)
        self.assertEqual(processes.groups(JID), [])
        self.assertFalse(processes.killed(JID))

    def test_killKillsTheGroup(self) -> None:
        """
        L{JobProcesses.kill} kills the groups of the job's commands whole:
        the shell and both its background children.
        """
        shell, sleeps = self.spawnGroup()
        processes = JobProcesses()
        processes.add(JID, shell.pid)
        processes.add("other", 1)  # another job's: left alone
        self.assertEqual(processes.kill(JID), [shell.pid])
        self.assertEqual(shell.wait(), -signal.SIGKILL)
        for pid in sleeps:
            self.assertTrue(gone(pid), f"sleep {pid} still runs")
        self.assertTrue(processes.killed(JID))
        self.assertEqual(processes.groups(JID), [])
        self.assertEqual(processes.groups("other"), [1])

    def test_addAfterKill(self) -> None:
        """
        A command noted after its job was killed (it started while the kill
        went on) gets the job's signal at once, and is not noted.
        """
        processes = JobProcesses()
        processes.kill(JID, signal.SIGKILL)
        shell, sleeps = self.spawnGroup()
        self.assertFalse(processes.add(JID, shell.pid))
        self.assertEqual(shell.wait(), -signal.SIGKILL)
        for pid in sleeps:
            self.assertTrue(gone(pid), f"sleep {pid} still runs")
        self.assertEqual(processes.groups(JID), [])

    def test_addAfterTerm(self) -> None:
        """
        A command noted after its job got C{SIGTERM} gets C{SIGTERM} at
        once, and stays noted, so that a C{SIGKILL} after it reaches it.
        """
        processes = JobProcesses()
        processes.kill(JID, signal.SIGTERM)
        shell, sleeps = self.spawnGroup()
        self.assertFalse(processes.add(JID, shell.pid))
        self.assertEqual(shell.wait(), -signal.SIGTERM)
        for pid in sleeps:
            self.assertTrue(gone(pid), f"sleep {pid} still runs")
        self.assertEqual(processes.groups(JID), [shell.pid])

    def test_termKeepsGroupsForKill(self) -> None:
        """
        L{JobProcesses.kill} with C{SIGTERM} signals the job's groups and
        keeps them noted: a command that ignores C{SIGTERM} still runs,
        and the C{SIGKILL} after it kills it and forgets the groups.
        """
        shell, sleeps = self.spawnGroup(ignoreTerm=True)
        processes = JobProcesses()
        processes.add(JID, shell.pid)
        self.assertEqual(processes.kill(JID, signal.SIGTERM), [shell.pid])
        self.assertEqual(processes.groups(JID), [shell.pid])
        self.assertIsNone(shell.poll())
        self.assertEqual(processes.kill(JID, signal.SIGKILL), [shell.pid])
        self.assertEqual(shell.wait(), -signal.SIGKILL)
        for pid in sleeps:
            self.assertTrue(gone(pid), f"sleep {pid} still runs")
        self.assertEqual(processes.groups(JID), [])

    def test_killedBounded(self) -> None:
        """
        Only the last L{KILLED_REMEMBERED} killed jobs are remembered.
        """
        processes = JobProcesses()
        for n in range(KILLED_REMEMBERED + 1):
            processes.kill(str(n))
        self.assertFalse(processes.killed("0"))
        self.assertTrue(processes.killed("1"))
        self.assertTrue(processes.killed(str(KILLED_REMEMBERED)))

    def test_runningJobCancel(self) -> None:
        """
        L{RunningJob.cancel} with C{SIGKILL} kills the job's commands, then
        cancels its L{Deferred}.
        """
        shell, sleeps = self.spawnGroup()
        processes = JobProcesses()
        processes.add(JID, shell.pid)
        d: Deferred[Any] = Deferred()
        job = RunningJob({"jid": JID, "fun": "state.apply"}, d, 0.0, processes=processes)
        job.cancel("SIGKILL")
        self.failureResultOf(d)
        self.assertEqual(shell.wait(), -signal.SIGKILL)
        for pid in sleeps:
            self.assertTrue(gone(pid), f"sleep {pid} still runs")
        self.assertTrue(processes.killed(JID))
        self.assertEqual(job.killedBy, "SIGKILL")

    def test_runningJobTerm(self) -> None:
        """
        L{RunningJob.cancel} with C{SIGTERM} sends C{SIGTERM} to the job's
        commands and leaves its L{Deferred} to fire when they end (they may
        clean up first): the job is marked stopped by C{SIGTERM}.
        """
        shell, sleeps = self.spawnGroup()
        processes = JobProcesses()
        processes.add(JID, shell.pid)
        d: Deferred[Any] = Deferred()
        job = RunningJob({"jid": JID, "fun": "cmd.run"}, d, 0.0, processes=processes)
        job.cancel("SIGTERM")
        self.assertNoResult(d)
        self.assertEqual(shell.wait(), -signal.SIGTERM)
        for pid in sleeps:
            self.assertTrue(gone(pid), f"sleep {pid} still runs")
        self.assertTrue(processes.killed(JID))
        self.assertEqual(job.killedBy, "SIGTERM")

    def test_runningJobTermWithoutCommand(self) -> None:
        """
        A job running no command (Python code) has no process to send
        C{SIGTERM} to: L{RunningJob.cancel} cancels it at once.
        """
        processes = JobProcesses()
        d: Deferred[Any] = Deferred()
        job = RunningJob({"jid": JID, "fun": "test.sleep"}, d, 0.0, processes=processes)
        job.cancel("SIGTERM")
        self.failureResultOf(d)
        self.assertEqual(job.killedBy, "SIGTERM")


class KillRunningCommandTests(TestCase):
    """
    Killing a job kills the command it runs now, started in a state run's
    thread (L{runCommandHere}) or by the reactor (L{runCommand}), with
    everything it started.
    """

    timeout = 60

    def setUp(self) -> None:
        """
        A job's context (its jid set, as a state run's is) on the real
        reactor.
        """
        from twisted.internet import reactor

        self.reactor = reactor
        self.context = LoaderContext(opts={"id": "m1"}, grains={}, reactor=reactor, jid=JID)
        self.pids = os.path.abspath(self.mktemp())
        # As in a daemon (no controlling terminal), whatever runs the tests.
        self.patch(_process, "NEW_GROUPS", True)

    async def started(self, count: int) -> list[int]:
        """
        @return: the C{count} pids the command wrote to C{self.pids}, once
            it wrote them and its group is noted (polled, within a bound).
        """
        for _ in range(500):
            if self.context.processes.groups(JID) and os.path.exists(self.pids):
                with open(self.pids) as f:
                    lines = f.read().split()
                if len(lines) == count:
                    return [int(line) for line in lines]
            await deferLater(self.reactor, 0.01, lambda: None)
        self.fail("the command did not start")

    async def test_inThreadCommandKilled(self) -> None:
        """
        A command run in a state run's thread is killed with its children
        when the job is killed: the thread gets its end at once.
        """
        if not CHDIR_SPAWNER.available:
            raise SkipTest("no posix_spawn with a change of directory here")
        d = deferToThread(runCommandHere, self.context, TWO_SLEEPS, env={"PIDS": self.pids})
        sleeps = await self.started(2)
        [group] = self.context.processes.groups(JID)
        self.assertEqual(os.getpgid(group), group)
        self.assertEqual([os.getpgid(pid) for pid in sleeps], [group, group])
        self.context.processes.kill(JID)
        result = await d
        self.assertEqual(result["retcode"], -signal.SIGKILL)
        self.assertEqual(result["pid"], group)
        for pid in [group, *sleeps]:
            self.assertTrue(gone(pid), f"{pid} still runs")
        self.assertEqual(self.context.processes.groups(JID), [])

    async def test_inThreadCommandAfterKill(self) -> None:
        """
        A command a killed job's thread starts after the kill dies at once.
        """
        if not CHDIR_SPAWNER.available:
            raise SkipTest("no posix_spawn with a change of directory here")
        self.context.processes.kill(JID)
        result = await deferToThread(runCommandHere, self.context, "sleep 300")
        self.assertEqual(result["retcode"], -signal.SIGKILL)
        self.assertTrue(gone(result["pid"]))

    async def test_reactorCommandKilled(self) -> None:
        """
        A command of the job started by the reactor (a C{runas} command of a
        state run is) is killed with its children too.
        """
        d = runCommand(self.context, TWO_SLEEPS, env={"PIDS": self.pids})
        sleeps = await self.started(2)
        [group] = self.context.processes.groups(JID)
        self.assertEqual(os.getpgid(group), group)
        self.context.processes.kill(JID)
        result = await d
        self.assertEqual(result["retcode"], -signal.SIGKILL)
        for pid in [group, *sleeps]:
            self.assertTrue(gone(pid), f"{pid} still runs")
        self.assertEqual(self.context.processes.groups(JID), [])

    async def termJob(self, d: Deferred[Any]) -> tuple[str, Any]:
        """
        Note C{d} as the running job C{JID} of the context, as the minion
        does, and stop it with C{saltutil.term_job}.

        @return: what C{term_job} answered, and what C{d} gave.
        """
        job = RunningJob({"jid": JID, "fun": "cmd.run"}, d, 0.0, processes=self.context.processes)
        self.context.running[JID] = job
        answer = saltutil.term_job(self.context, JID)
        return answer, await d

    async def test_termJobSendsTerm(self) -> None:
        """
        C{saltutil.term_job} on a C{cmd.run} job sends C{SIGTERM}, not
        C{SIGKILL}, to its command's process group: the shell's C{trap} on
        C{TERM} runs (it writes a marker and exits 3), and the job ends
        with the command.
        """
        marker = os.path.abspath(self.mktemp())
        script = f"trap 'echo term > {marker}; exit 3' TERM; sleep 300 & echo $! > \"$PIDS\"; wait"
        d = runCommand(self.context, script, env={"PIDS": self.pids})
        [sleep] = await self.started(1)
        [group] = self.context.processes.groups(JID)
        answer, result = await self.termJob(d)
        self.assertEqual(answer, f"Signal 15 sent to job {JID} at pid {os.getpid()}")
        self.assertEqual(result["retcode"], 3)
        with open(marker) as f:
            self.assertEqual(f.read(), "term\n")
        for pid in (group, sleep):
            self.assertTrue(gone(pid), f"{pid} still runs")

    async def test_termJobIgnoredThenKillJob(self) -> None:
        """
        A command that ignores C{SIGTERM} outlives C{saltutil.term_job}
        (as in Salt); C{saltutil.kill_job} after it kills it.
        """
        script = "trap '' TERM; sleep 300 & echo $! > \"$PIDS\"; wait"
        d = runCommand(self.context, script, env={"PIDS": self.pids})
        [sleep] = await self.started(1)
        job = RunningJob({"jid": JID, "fun": "cmd.run"}, d, 0.0, processes=self.context.processes)
        self.context.running[JID] = job
        saltutil.term_job(self.context, JID)
        self.assertNoResult(d)
        self.assertFalse(gone(sleep, bound=0.2), "the command did not ignore SIGTERM")
        self.assertEqual(
            saltutil.kill_job(self.context, JID), f"Signal 9 sent to job {JID} at pid {os.getpid()}"
        )
        self.failureResultOf(d)
        self.assertTrue(gone(sleep), f"{sleep} still runs")

    async def test_runasCommandKilled(self) -> None:
        """
        A C{runas} command (forked: another user to become) leads a group
        of its own too, and is killed with its children with its job.
        """
        import pwd
        import shutil
        import tempfile

        if os.geteuid() != 0:
            raise SkipTest("runas needs root")
        try:
            pwd.getpwnam("nobody")
        except KeyError:
            raise SkipTest("no user nobody") from None
        directory = tempfile.mkdtemp()
        self.addCleanup(shutil.rmtree, directory, True)
        os.chmod(directory, 0o777)
        self.pids = os.path.join(directory, "pids")
        d = runCommand(
            self.context, TWO_SLEEPS, runas="nobody", cwd=directory, env={"PIDS": self.pids}
        )
        sleeps = await self.started(2)
        [group] = self.context.processes.groups(JID)
        self.assertEqual(os.getpgid(group), group)
        self.context.processes.kill(JID)
        result = await d
        self.assertEqual(result["retcode"], -signal.SIGKILL)
        for pid in [group, *sleeps]:
            self.assertTrue(gone(pid), f"{pid} still runs")

    async def test_commandsLeadGroups(self) -> None:
        """
        Every way a command starts makes it the leader of its own process
        group: by the reactor in the minion's directory (Python's
        C{posix_spawnp}) or in another (L{ChdirSpawner}), and in a thread.
        """
        command = "cut -d' ' -f5 /proc/$$/stat"  # the shell's process group
        here = os.getcwd()
        for cwd in (here, "/"):
            ret = await runCommand(self.context, command, cwd=cwd)
            self.assertEqual(int(ret["stdout"]), ret["pid"], cwd)
        if CHDIR_SPAWNER.available:
            ret = await deferToThread(runCommandHere, self.context, command, cwd=here)
            self.assertEqual(int(ret["stdout"]), ret["pid"])
        self.assertEqual(self.context.processes.groups(JID), [])

    async def test_orphanedGrandchildKilled(self) -> None:
        """
        Cancelling a plain C{cmd.run} job kills a grandchild whose parent
        already ended (no longer below the command: it is in its group).
        """
        context = dataclasses.replace(self.context, jid=None)
        d = runCommand(
            context, '(sleep 300 & echo $! > "$PIDS"); sleep 300', env={"PIDS": self.pids}
        )
        for _ in range(500):
            if os.path.exists(self.pids) and open(self.pids).read().strip():
                break
            await deferLater(self.reactor, 0.01, lambda: None)
        with open(self.pids) as f:
            orphan = int(f.read())
        d.cancel()
        self.failureResultOf(d)
        self.assertTrue(gone(orphan), f"{orphan} still runs")

    async def test_noGroupInTerminalForeground(self) -> None:
        """
        Where the minion runs in the foreground of its terminal
        (L{_process.newGroups} false), its commands stay in its process
        group (one reading the terminal is not stopped); a killed job still
        kills them and what is below them.
        """
        self.patch(_process, "NEW_GROUPS", False)
        d = deferToThread(runCommandHere, self.context, TWO_SLEEPS, env={"PIDS": self.pids})
        sleeps = await self.started(2)
        [shell] = self.context.processes.groups(JID)
        self.assertEqual(os.getpgid(shell), os.getpgrp())
        self.context.processes.kill(JID)
        result = await d
        self.assertEqual(result["retcode"], -signal.SIGKILL)
        for pid in [shell, *sleeps]:
            self.assertTrue(gone(pid), f"{pid} still runs")


class NewGroupsTests(TestCase):
    """
    L{_process.newGroups} keeps commands in the minion's process group only
    where it runs in the foreground of its terminal.
    """

    def newGroupsIn(self, inTerminal: bool) -> str:
        """
        @return: what L{_process.newGroups} says in a new Python process,
            run in the foreground of a new terminal (a pty) or without one.
        """
        import pty
        import sys

        code = "from salttwist.modules._process import newGroups; print(newGroups())"
        if not inTerminal:
            return subprocess.run(
                [sys.executable, "-c", code],
                capture_output=True,
                text=True,
                start_new_session=True,
                check=True,
            ).stdout.strip()
        pid, terminal = pty.fork()
        if pid == 0:  # the child: exec at once
            try:
                os.execv(sys.executable, [sys.executable, "-c", code])
            finally:
                os._exit(127)
        chunks = []
        try:
            while True:
                try:
                    data = os.read(terminal, 1024)
                except OSError:  # EIO: the child closed its side
                    break
                if not data:
                    break
                chunks.append(data)
        finally:
            os.close(terminal)
            os.waitpid(pid, 0)
        return b"".join(chunks).decode().strip()

    def test_daemon(self) -> None:
        """
        Without a controlling terminal, commands get groups of their own.
        """
        self.assertEqual(self.newGroupsIn(False), "True")

    def test_terminalForeground(self) -> None:
        """
        In the foreground of its terminal, they do not.
        """
        self.assertEqual(self.newGroupsIn(True), "False")
