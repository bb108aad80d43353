# -*- test-case-name: tests.test_vs_salt_table -*-
"""
Tests for C{benchmarks/vs_salt/run.py}: the table it prints, its install of
Salt, and the quiet machine every timed phase waits for.
"""

from __future__ import annotations

import argparse
import io
import json
import os
import re
import sys
from typing import Any

from twisted.trial.unittest import SynchronousTestCase

from tests._scripts import ROOT, loadScript

SALT_ALONE = os.path.join(ROOT, "benchmarks", "results", "2026-11-22-vs-salt-session5-salt.json")


class TableTests(SynchronousTestCase):
    """
    L{table} shows what was measured.
    """

    def test_saltAlone(self) -> None:
        """
        Salt measured alone (C{--systems salt}) still gets its jobs per
        second row, with salttwist's side empty.
        """
        with open(SALT_ALONE) as f:
            results = json.load(f)
        run = loadScript("benchmarks", "vs_salt", "run.py")
        lines = run.table(results).splitlines()
        jobs = [line for line in lines if line.lstrip().startswith("jobs/s")]
        self.assertEqual(len(jobs), 2)
        self.assertIn("5.018", jobs[0])
        self.assertIn("0.407", jobs[1])

    def test_beforeTheQuietRule(self) -> None:
        """
        Results measured before the quiet rule have no quiet figures: the
        table has no row, mark or footnote for them.
        """
        with open(SALT_ALONE) as f:
            results = json.load(f)
        text = loadScript("benchmarks", "vs_salt", "run.py").table(results)
        self.assertNotIn("waited for quiet", text)
        self.assertIsNone(re.search(r"\d\*", text))
        self.assertNotIn("not quiet", text)


class InstallSaltTests(SynchronousTestCase):
    """
    C{run.py} installs Salt into a virtualenv of its own when it has none
    (the install itself, minutes from PyPI, was run by hand: see the
    benchmarks' README).
    """

    def setUp(self) -> None:
        self.run = loadScript("benchmarks", "vs_salt", "run.py")

    def test_steps(self) -> None:
        """
        A new virtualenv made by the given Python, then Salt's series with
        its dependencies, then the release itself without them (a plain
        install of the series may resolve to an older release).
        """
        steps = self.run.saltInstallSteps("/v", "/usr/bin/python3", "3008.5")
        self.assertEqual(steps[0], ["/usr/bin/python3", "-m", "venv", "/v"])
        pip = ["/v/bin/python", "-m", "pip", "install", "-q"]
        self.assertEqual(
            steps[1:],
            [
                [*pip, "--upgrade", "pip"],
                [*pip, "salt==3008.*"],
                [*pip, "--no-deps", "salt==3008.5"],
            ],
        )

    def test_present(self) -> None:
        """
        A virtualenv with C{salt-master} is used as it is.
        """
        venv = self.mktemp()
        os.makedirs(os.path.join(venv, "bin"))
        open(os.path.join(venv, "bin", "salt-master"), "w").close()
        self.assertIsNone(self.run.ensureSalt(venv, install=False))
        self.assertIsNone(self.run.ensureSalt(venv))
        self.assertEqual(os.listdir(venv), ["bin"])

    def test_notInstalling(self) -> None:
        """
        With C{--no-install-salt} a missing Salt is an error that says so,
        and C{main} stops with status 2 before starting anything.
        """
        venv = self.mktemp()
        problem = self.run.ensureSalt(venv, install=False)
        self.assertIn("--no-install-salt", problem)
        self.assertFalse(os.path.exists(venv))
        code = self.run.main(
            ["--systems", "salt", "--salt-venv", venv, "--no-install-salt", "--no-save"]
        )
        self.assertEqual(code, 2)

    def test_failedInstallRemoved(self) -> None:
        """
        A step that fails is named with its exit status and output, and
        the half-made virtualenv is removed, so that a rerun installs again
        instead of refusing a directory that is not a virtualenv with Salt.
        """
        python = os.path.abspath(self.mktemp())
        with open(python, "w") as f:
            f.write('#!/bin/sh\nmkdir -p "$3"\ntouch "$3/half"\necho no room left >&2\nexit 4\n')
        os.chmod(python, 0o755)
        venv = self.mktemp()
        problem = self.run.ensureSalt(venv, python=python)
        self.assertIn(f"{python} -m venv {venv} failed (4)", problem)
        self.assertIn("no room left", problem)
        self.assertFalse(os.path.exists(venv))

    def test_otherDirectoryLeftAlone(self) -> None:
        """
        A directory that exists, holds something and has no Salt is not
        turned into a virtualenv: the message asks for another one.
        """
        venv = self.mktemp()
        os.makedirs(venv)
        open(os.path.join(venv, "notes.txt"), "w").close()
        problem = self.run.ensureSalt(venv)
        self.assertIn("not a virtualenv with Salt", problem)
        self.assertEqual(os.listdir(venv), ["notes.txt"])


class FakeMachine:
    """
    A machine whose C{/proc/stat} and clock move only when L{sleep} is
    called: each sleep is one window with the next of C{rates} cores busy
    (the last one repeats), split between user and steal time, and its
    idle time between idle and iowait.

    @ivar events: C{"window"} for each sleep, shared with whoever else
        records the order of things.
    """

    def __init__(self, rates: list[float], cpus: int = 2, events: list[str] | None = None) -> None:
        self.rates = list(rates)
        self.cpus = cpus
        self.now = 1000.0
        self.user = self.steal = self.idle = self.iowait = 0
        self.events = [] if events is None else events

    def clock(self) -> float:
        """
        @return: the seconds slept so far, from 1000.
        """
        return self.now

    def sleep(self, seconds: float) -> None:
        """
        Pass one window of C{seconds}, at 100 jiffies a second per core.
        """
        self.events.append("window")
        cores = self.rates.pop(0) if len(self.rates) > 1 else self.rates[0]
        total = round(seconds * 100 * self.cpus)
        busy = round(seconds * 100 * cores)
        self.user += busy - busy // 4
        self.steal += busy // 4
        self.idle += (total - busy) - (total - busy) // 3
        self.iowait += (total - busy) // 3
        self.now += seconds

    def readStat(self) -> str:
        """
        @return: C{/proc/stat} now (its first lines).
        """
        return (
            f"cpu  {self.user} 0 0 {self.idle} {self.iowait} 0 0 {self.steal} 0 0\n"
            "cpu0 1 2 3 4 5 6 7 8 9 10\n"
        )


class QuietWaitTests(SynchronousTestCase):
    """
    L{QuietWait} waits, window after window, until all CPUs are busy
    less than the limit, for at most its timeout.
    """

    def setUp(self) -> None:
        self.run = loadScript("benchmarks", "vs_salt", "run.py")

    def quiet(self, machine: FakeMachine, **kwargs: Any) -> Any:
        """
        @return: a L{QuietWait} of C{machine}, with 5 s windows, 0.2 cores
            plus 0.01 per minion, and 120 s at most unless C{kwargs} say
            otherwise.
        """
        rule: dict[str, Any] = {"cores": 0.2, "window": 5.0, "timeout": 120.0, "perMinion": 0.01}
        rule.update(kwargs)
        return self.run.QuietWait(
            cpus=machine.cpus,
            readStat=machine.readStat,
            clock=machine.clock,
            sleep=machine.sleep,
            **rule,
        )

    def test_machineCpu(self) -> None:
        """
        Busy jiffies are user, nice, system, irq, softirq and steal; the
        total adds idle and iowait; guest time (already in user) is not
        counted again.
        """
        busy, total = self.run.machineCpu(lambda: "cpu  10 1 2 100 7 3 4 5 6 9\ncpu0 1\n")
        self.assertEqual((busy, total), (25, 132))

    def test_quietAtOnce(self) -> None:
        """
        A machine quiet in the first window is waited for one window.
        """
        machine = FakeMachine([0.05])
        found = self.quiet(machine).wait()
        self.assertEqual(
            found,
            {
                "quiet": True,
                "quiet_wait_s": 5.0,
                "quiet_busy_cores": 0.05,
                "quiet_limit_cores": 0.2,
                "quiet_windows": 1,
            },
        )
        self.assertEqual(machine.events, ["window"])

    def test_quietAfterWindows(self) -> None:
        """
        A machine busy finishing a start is waited for until a window is
        quiet; the busy figure is that window's, not the whole wait's.
        """
        machine = FakeMachine([1.9, 1.2, 0.6, 0.21, 0.15, 0.0])
        found = self.quiet(machine).wait()
        self.assertTrue(found["quiet"])
        self.assertEqual(found["quiet_windows"], 5)
        self.assertEqual(found["quiet_wait_s"], 25.0)
        self.assertEqual(found["quiet_busy_cores"], 0.15)
        self.assertEqual(machine.rates, [0.0])

    def test_neverQuiet(self) -> None:
        """
        A machine never quiet is waited for until the timeout, no longer;
        the result says it was not quiet, and how busy it was last.
        """
        machine = FakeMachine([1.2, 1.4])
        found = self.quiet(machine, timeout=30.0).wait()
        self.assertEqual(
            found,
            {
                "quiet": False,
                "quiet_wait_s": 30.0,
                "quiet_busy_cores": 1.4,
                "quiet_limit_cores": 0.2,
                "quiet_windows": 6,
            },
        )

    def test_atTheLimit(self) -> None:
        """
        Quiet is strictly under the limit.
        """
        found = self.quiet(FakeMachine([0.2]), timeout=10.0).wait()
        self.assertFalse(found["quiet"])
        self.assertEqual(found["quiet_busy_cores"], 0.2)

    def test_perMinion(self) -> None:
        """
        The limit grows with the minion daemons running: 50 idle minions'
        0.45 cores are quiet with 50 minions up, and not with none.
        """
        found = self.quiet(FakeMachine([0.45])).wait(50)
        self.assertTrue(found["quiet"])
        self.assertEqual(found["quiet_limit_cores"], 0.7)
        found = self.quiet(FakeMachine([0.45]), timeout=10.0).wait()
        self.assertFalse(found["quiet"])
        self.assertEqual(found["quiet_limit_cores"], 0.2)

    def test_options(self) -> None:
        """
        The rule's options and their defaults; the fixed wait after a
        cluster start is gone unless asked for.
        """
        options = self.run.parser().parse_args([])
        self.assertEqual(
            (
                options.quiet_cores,
                options.quiet_per_minion,
                options.quiet_window,
                options.quiet_timeout,
                options.settle,
            ),
            (0.2, 0.01, 5.0, 120.0, 0.0),
        )
        quiet = self.run.QuietWait.fromOptions(
            self.run.parser().parse_args(
                ["--quiet-cores", "0.3", "--quiet-per-minion", "0", "--quiet-window", "2"]
                + ["--quiet-timeout", "60"]
            )
        )
        self.assertEqual(
            (quiet.cores, quiet.perMinion, quiet.window, quiet.timeout), (0.3, 0.0, 2.0, 60.0)
        )

    def test_noWindow(self) -> None:
        """
        A window of no time is refused before anything starts.
        """
        self.patch(sys, "stderr", io.StringIO())
        self.assertEqual(self.run.main(["--quiet-window", "0", "--no-save"]), 2)
        self.assertIn("--quiet-window", sys.stderr.getvalue())


class FakeCluster:
    """
    A cluster whose C{'*' test.ping} takes C{elapsed} seconds and is
    recorded in C{events}.
    """

    def __init__(self, name: str, n: int, elapsed: float, events: list[str]) -> None:
        self.name = name
        self.n = n
        self.elapsed = elapsed
        self.events = events

    def ping(self, timeout: float, out: str) -> dict[str, Any]:
        """
        @return: every minion returned, after C{elapsed} seconds.
        """
        self.events.append(f"ping {self.name}")
        return {"elapsed": self.elapsed, "code": 0, "returned": self.n}


class QuietPhaseTests(SynchronousTestCase):
    """
    A timed phase starts once the machine is quiet, or after the
    timeout; its figures say which, in the JSON and in the table.
    """

    def setUp(self) -> None:
        self.run = loadScript("benchmarks", "vs_salt", "run.py")
        self.output = io.StringIO()
        self.patch(sys, "stdout", self.output)
        self.events: list[str] = []
        self.options = argparse.Namespace(timeout=10.0, cli_out="json", repeats=3)

    def measurePing(self, name: str, elapsed: float, rates: list[float]) -> dict[str, Any]:
        """
        Measure C{'*' test.ping} of one 20-minion cluster of system
        C{name} on a machine busy at C{rates}, with 5 s windows for at
        most 30 s.

        @return: the results of that phase, as they are saved.
        """
        machine = FakeMachine(rates, events=self.events)
        quiet = self.run.QuietWait(
            cores=0.2,
            perMinion=0.01,
            window=5.0,
            timeout=30.0,
            cpus=2,
            readStat=machine.readStat,
            clock=machine.clock,
            sleep=machine.sleep,
        )
        clusters = {name: FakeCluster(name, 20, elapsed, self.events)}
        results = self.run.measureCliPing(clusters, self.options, quiet)
        return json.loads(json.dumps(results))

    def test_waitBeforeSamples(self) -> None:
        """
        The wait comes after the untimed first ping and before the timed
        ones: none of those runs on a machine found busy.
        """
        self.measurePing("salt", 5.0, [1.9, 0.1])
        self.assertEqual(
            self.events, ["ping salt", "window", "window", "ping salt", "ping salt", "ping salt"]
        )
        self.assertIn("quiet after 10 s: 0.10 cores busy (limit 0.4)", self.output.getvalue())

    def test_jsonQuiet(self) -> None:
        """
        A phase that found the machine quiet carries, beside its figures,
        the seconds it waited and the cores busy in its last window.
        """
        results = self.measurePing("salttwist", 0.12, [0.9, 0.03])
        self.assertEqual(results["salttwist"]["median_s"], 0.12)
        self.assertEqual(
            {k: v for k, v in results["salttwist"].items() if k.startswith("quiet")},
            {
                "quiet": True,
                "quiet_wait_s": 10.0,
                "quiet_busy_cores": 0.03,
                "quiet_limit_cores": 0.4,
                "quiet_windows": 2,
            },
        )

    def test_jsonNotQuiet(self) -> None:
        """
        A phase that never found the machine quiet still runs, and says
        so: C{quiet} false, with the busy figure of its last window.
        """
        results = self.measurePing("salt", 5.0, [1.4])
        self.assertEqual(results["salt"]["samples_s"], [5.0, 5.0, 5.0])
        self.assertIs(results["salt"]["quiet"], False)
        self.assertEqual(results["salt"]["quiet_busy_cores"], 1.4)
        self.assertEqual(results["salt"]["quiet_wait_s"], 30.0)
        self.assertIn("NOT quiet (running anyway) after 30 s: 1.40 cores", self.output.getvalue())

    def test_tableMarks(self) -> None:
        """
        The table shows under each phase how long each system waited and
        how busy the machine was; the figures of a phase that was not
        quiet are marked C{*}, and a footnote names it with its busy
        figure. The other system's figures are not marked.
        """
        salt = self.measurePing("salt", 5.0, [1.4])
        twist = self.measurePing("salttwist", 0.12, [0.9, 0.03])
        results = {
            "versions": {"salt": "salt 3008.5"},
            "date": "2026-11-26",
            "cpus": 2,
            "load_at_start": [0.1, 0.1, 0.1],
            "options": vars(self.run.parser().parse_args([])),
            "cli": {},
            "runs": {"20": {"cli_ping": {**salt, **twist}}},
        }
        self.run.addRatios(results)
        lines = self.run.table(results).splitlines()
        self.assertIn(
            "each phase waited for quiet: all CPUs busy under 0.2 cores + 0.01 per minion "
            "over 5 s, at most 120 s",
            lines,
        )
        ping = lines.index(next(line for line in lines if "CLI '*' test.ping" in line))
        self.assertEqual(lines[ping].split()[-4:], ["5.000*", "0.120", "41.7", "0/0"])
        self.assertEqual(
            lines[ping + 1].split(),
            ["waited", "for", "quiet", "(s,", "busy", "cores)"] + ["30s", "1.40*", "10s", "0.03"],
        )
        footnote = lines.index(
            "* not quiet: no window was quiet within --quiet-timeout; the phase ran anyway:"
        )
        self.assertEqual(
            lines[footnote + 1 :],
            ["  salt, 20 minion(s), CLI '*' test.ping: 1.40 cores busy (limit 0.4) after 30 s"],
        )

    def test_tableAllQuiet(self) -> None:
        """
        When every phase was quiet, nothing is marked and there is no
        footnote.
        """
        twist = self.measurePing("salttwist", 0.12, [0.03])
        results = {
            "versions": {},
            "date": "2026-11-26",
            "cpus": 2,
            "load_at_start": [0.1, 0.1, 0.1],
            "runs": {"20": {"cli_ping": twist}},
        }
        text = self.run.table(results)
        self.assertIn("5s 0.03", text)
        self.assertIsNone(re.search(r"\d\*", text))
        self.assertNotIn("not quiet", text)
