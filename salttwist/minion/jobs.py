# -*- test-case-name: tests.test_modules_saltutil -*-
"""
The jobs a minion is running (Salt's proc dir, kept in memory: jobs run
inside the minion process).
"""

from __future__ import annotations

import os
import signal
from dataclasses import dataclass, field
from typing import Any

from twisted.internet.defer import Deferred


@dataclass
class RunningJob:
    """
    One job being run.

    @ivar load: the publication's load (jid, fun, arg, tgt, tgt_type, user).
    @ivar deferred: fires with the job's result; cancelling it stops the job.
    @ivar killedBy: the signal name the job was stopped with, if it was.
    @ivar processes: the minion's
        L{JobProcesses <salttwist.modules._jobprocesses.JobProcesses>}:
        the commands the job runs (from the reactor or from a state run's
        thread), which L{cancel} kills; L{None}: none known.
    """

    load: dict[str, Any]
    deferred: Deferred[Any]
    started: float
    killedBy: str | None = field(default=None)
    processes: Any = field(default=None)

    @property
    def fun(self) -> str:
        """
        The job's function.
        """
        return str(self.load.get("fun", ""))

    def info(self) -> dict[str, Any]:
        """
        The job's data as Salt's C{saltutil.running} shows it.
        """
        load = self.load
        return {
            "jid": load.get("jid"),
            "fun": load.get("fun"),
            "arg": load.get("arg", []),
            "tgt": load.get("tgt"),
            "tgt_type": load.get("tgt_type", "glob"),
            "user": load.get("user"),
            "pid": os.getpid(),
            "ret": "",
        }

    def cancel(self, signalName: str) -> None:
        """
        Stop the job: the commands it runs get C{signalName} (a name of
        L{signal.Signals}), with everything they started, as do any it
        starts from now on; it returns that it was killed.

        C{SIGKILL} also cancels the job's L{Deferred} at once. Another
        signal (C{SIGTERM}: C{saltutil.term_job}, or a stopping minion)
        leaves a job that runs commands to end when they do, as a process
        that got it may first clean up (a shell's C{trap}), or ignore it
        (then only C{SIGKILL} ends the job, as in Salt); a job running no
        command (Python code: C{test.sleep}, a state run between two
        commands) has no process to signal, and is cancelled at once.
        """
        self.killedBy = signalName
        signum = signal.Signals[signalName]
        jid = self.load.get("jid")
        groups: list[int] = []
        if self.processes is not None and jid is not None:
            groups = self.processes.kill(str(jid), signum)
        if signum == signal.SIGKILL or not groups:
            self.deferred.cancel()


#: How many killed jobs a minion remembers (L{remember}).
KILLED_REMEMBERED = 1000


def remember(killed: dict[str, str], jid: str, signalName: str) -> None:
    """
    Note that job C{jid} was killed with C{signalName}, forgetting the
    oldest once more than L{KILLED_REMEMBERED} are noted.
    """
    killed[jid] = signalName
    while len(killed) > KILLED_REMEMBERED:
        del killed[next(iter(killed))]
