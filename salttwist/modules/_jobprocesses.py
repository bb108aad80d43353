# -*- test-case-name: tests.test_modules_jobprocesses -*-
"""
The commands each job is running, by process group, so that killing a job
(C{saltutil.kill_job}, C{term_job}, C{signal_job}, or the minion stopping)
kills the command it runs now and everything that command started,
whichever way it was started: by the reactor, or in a state run's own
thread (where no L{Deferred <twisted.internet.defer.Deferred>} cancel can
reach it).

Every command starts as the leader of its own process group (its pgid is
its pid), so a grandchild that outlives its parent (C{sleep 300 &} in a
shell) is still in the group and dies with it, as Salt's kill of the job's
whole process tree does.

Nothing here imports the rest of the modules: L{LoaderContext
<salttwist.modules.LoaderContext>} holds one L{JobProcesses}.
"""

from __future__ import annotations

import os
import signal
import threading

#: How many killed jobs a L{JobProcesses} remembers: a command its thread
#: starts after the kill is killed at once.
KILLED_REMEMBERED = 1000


class JobProcesses:
    """
    The process groups of the commands each job runs, by jid; thread-safe
    (state runs add theirs from their threads, the kill comes on the
    reactor's).

    A command is added once started, and L{add} looks, under the same lock
    that L{kill} takes, whether its job was killed meanwhile: either the kill
    sees the command, or the command sees the kill. None started after the
    kill survives it.
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._groups: dict[str, set[int]] = {}
        #: The jobs killed lately, oldest first, with their signal.
        self._killed: dict[str, int] = {}

    def add(self, jid: str | None, group: int) -> bool:
        """
        Note that job C{jid} runs the command whose process group is
        C{group} (L{None}: a call outside a job, nothing noted).

        @return: C{False} if the job was already killed: the group has then
            been sent the job's signal here (and is noted only if that was
            not C{SIGKILL}, see L{kill}).
        """
        if jid is None:
            return True
        with self._lock:
            signum = self._killed.get(jid)
            if signum != signal.SIGKILL:
                self._groups.setdefault(jid, set()).add(group)
            if signum is None:
                return True
        killTree(group, signum)
        return False

    def discard(self, jid: str | None, group: int) -> None:
        """
        Forget C{group}: its command ended (call it once the command's pid
        is reaped, before anything else).
        """
        if jid is None:
            return
        with self._lock:
            groups = self._groups.get(jid)
            if groups is not None:
                groups.discard(group)
                if not groups:
                    del self._groups[jid]

    def kill(self, jid: str, signum: int = signal.SIGKILL) -> list[int]:
        """
        Send C{signum} to every command job C{jid} runs, with everything
        they started, and to any it starts from now on (L{add}).

        After C{SIGKILL} the job's commands are forgotten (they are dead);
        after another signal, which a command may catch or ignore, they
        stay noted until they end (L{discard}), so that a C{SIGKILL} after
        it (C{saltutil.kill_job} after C{term_job}, a stopping minion's
        second step) still reaches them.

        @return: the process groups signalled.
        """
        with self._lock:
            self._killed.pop(jid, None)
            self._killed[jid] = signum
            while len(self._killed) > KILLED_REMEMBERED:
                del self._killed[next(iter(self._killed))]
            if signum == signal.SIGKILL:
                groups = sorted(self._groups.pop(jid, ()))
            else:
                groups = sorted(self._groups.get(jid, ()))
        for group in groups:
            killTree(group, signum)
        return groups

    def groups(self, jid: str) -> list[int]:
        """
        @return: the process groups of the commands job C{jid} runs now.
        """
        with self._lock:
            return sorted(self._groups.get(jid, ()))

    def killed(self, jid: str) -> bool:
        """
        @return: whether job C{jid} was killed (lately: the last
            L{KILLED_REMEMBERED} are remembered).
        """
        with self._lock:
            return jid in self._killed


def killTree(leader: int, signum: int = signal.SIGKILL) -> None:
    """
    Send C{signum} to the process group C{leader} leads and to every
    process below C{leader} (one that left the group, or a command started
    without a group of its own): found first, signalled after, since a
    killed parent's children are moved to another parent at once.
    """
    below = descendants(leader)
    try:
        os.killpg(leader, signum)
    except OSError:  # no such group (any more), or it never was one
        pass
    # The leader first: a shell whose children died first could end on its
    # own (retcode 137) instead of being killed.
    for pid in [leader, *below]:
        try:
            os.kill(pid, signum)
        except OSError:
            pass


def descendants(pid: int) -> list[int]:
    """
    @return: every process below C{pid}, found through C{/proc}.
    """
    children: dict[int, list[int]] = {}
    try:
        entries = os.listdir("/proc")
    except OSError:
        return []
    for entry in entries:
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat", "rb") as f:
                stat = f.read()
        except OSError:
            continue
        # The command name may contain spaces and parentheses: the fields
        # after the last ")" are state, then ppid.
        fields = stat.rpartition(b")")[2].split()
        if len(fields) > 1:
            children.setdefault(int(fields[1]), []).append(int(entry))
    found: list[int] = []
    stack = [pid]
    while stack:
        for child in children.get(stack.pop(), []):
            found.append(child)
            stack.append(child)
    return found
