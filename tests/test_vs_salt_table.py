# -*- test-case-name: tests.test_vs_salt_table -*-
"""
Tests for the table C{benchmarks/vs_salt/run.py} prints.
"""

from __future__ import annotations

import json
import os

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
