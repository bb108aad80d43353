# -*- test-case-name: tests.test_cli_common -*-
"""
Tests for what every salttwist command shares (L{salttwist.cli}).
"""

from __future__ import annotations

import argparse
import io
import os
import re
import sys

from twisted.trial.unittest import SynchronousTestCase

import salttwist
from salttwist.cli import CONFIG_DIR_ENV, DEFAULT_CONFIG_DIR, addCommonArguments
from salttwist.master.tap import Options as MasterOptions
from salttwist.minion.tap import Options as MinionOptions
from salttwist.version import versionsReport
from tests._fresh import runPython


def _parse(argv: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="x")
    addCommonArguments(parser, "master")
    return parser.parse_args(argv)


class ConfigDirTests(SynchronousTestCase):
    """
    C{-c/--config-dir} defaults to C{$SALTTWIST_CONFIG_DIR}, then
    C{/etc/salttwist}, as Salt's commands honour C{SALT_CONFIG_DIR}.
    """

    def setUp(self) -> None:
        self.saved = os.environ.pop(CONFIG_DIR_ENV, None)

    def tearDown(self) -> None:
        os.environ.pop(CONFIG_DIR_ENV, None)
        if self.saved is not None:
            os.environ[CONFIG_DIR_ENV] = self.saved

    def test_default(self) -> None:
        """
        Without the variable or C{-c}, the directory is C{/etc/salttwist}.
        """
        self.assertEqual(_parse([]).config_dir, DEFAULT_CONFIG_DIR)

    def test_environment(self) -> None:
        """
        The variable names the directory when C{-c} is not given; an empty
        value is ignored.
        """
        os.environ[CONFIG_DIR_ENV] = "/srv/st/etc"
        self.assertEqual(_parse([]).config_dir, "/srv/st/etc")
        os.environ[CONFIG_DIR_ENV] = ""
        self.assertEqual(_parse([]).config_dir, DEFAULT_CONFIG_DIR)

    def test_flagWins(self) -> None:
        """
        C{-c} wins over the variable.
        """
        os.environ[CONFIG_DIR_ENV] = "/srv/st/etc"
        self.assertEqual(_parse(["-c", "/other"]).config_dir, "/other")

    def test_twistdPlugins(self) -> None:
        """
        The twistd plugins' C{--config-dir} default follows the variable too.
        """
        os.environ[CONFIG_DIR_ENV] = "/srv/st/etc"
        self.assertEqual(MasterOptions()["config-dir"], "/srv/st/etc")
        self.assertEqual(MinionOptions()["config-dir"], "/srv/st/etc")

    def test_version(self) -> None:
        """
        C{--version} prints salttwist's version and exits 0.
        """
        out = io.StringIO()
        self.patch(sys, "stdout", out)
        with self.assertRaises(SystemExit) as caught:
            _parse(["--version"])
        self.assertEqual(caught.exception.code, 0)
        self.assertEqual(out.getvalue().strip(), f"salttwist {salttwist.__version__}")


class VersionsReportTests(SynchronousTestCase):
    """
    C{-V}/C{--versions-report} prints Salt's versions report with
    salttwist's version, as Salt's commands do.
    """

    def setUp(self) -> None:
        """
        Capture standard output and error.
        """
        self.stdout = io.StringIO()
        self.stderr = io.StringIO()
        self.patch(sys, "stdout", self.stdout)
        self.patch(sys, "stderr", self.stderr)

    def test_report(self) -> None:
        """
        C{-V} and C{--versions-report} print the report on standard output
        and exit 0 before anything else is checked (no target, no function
        given here).
        """
        for flag in ("-V", "--versions-report"):
            self.stdout.truncate(0)
            self.stdout.seek(0)
            with self.assertRaises(SystemExit) as caught:
                _parse([flag])
            self.assertEqual(caught.exception.code, 0)
            out = self.stdout.getvalue()
            self.assertEqual(out, versionsReport() + "\n")
            self.assertRegex(
                out, rf"^Salttwist Version:\n +Salttwist: {re.escape(salttwist.__version__)}\n"
            )
            for heading in ("Python Version:", "Dependency Versions:", "System Versions:"):
                self.assertIn(f"\n{heading}\n", out)
            self.assertRegex(out, r"\n +cryptography: \d+")
            self.assertRegex(out, r"\n +Twisted: \d+")
            self.assertEqual(self.stderr.getvalue(), "")

    def test_everyCommand(self) -> None:
        """
        Every command has C{-V}: C{salttwist}, C{salttwist-key},
        C{salttwist-call}, C{salttwist-run}, C{salttwist-event} and the
        daemons.
        """
        from salttwist.cli import call, daemons, event, key, run, salt

        parsers = {
            "salttwist": salt.buildParser(),
            "salttwist-call": call.buildParser(),
            "salttwist-run": run.buildParser(),
            "salttwist-event": event.buildParser(),
            "salttwist-key": key._makeParser(),
            "salttwist-master": daemons._parser("salttwist-master"),
            "salttwist-minion": daemons._parser("salttwist-minion"),
        }
        for name, parser in parsers.items():
            self.stdout.truncate(0)
            self.stdout.seek(0)
            with self.assertRaises(SystemExit) as caught:
                parser.parse_args(["-V"])
            self.assertEqual(caught.exception.code, 0, name)
            self.assertEqual(self.stdout.getvalue(), versionsReport() + "\n", name)

    def test_withoutTwisted(self) -> None:
        """
        C{salttwist -V} imports neither Twisted nor zope.interface: the
        plain command runs without them.
        """
        script = (
            "import sys\n"
            "from salttwist.cli import salt\n"
            "try:\n"
            "    salt.main(['-V'])\n"
            "except SystemExit as e:\n"
            "    code = e.code\n"
            "loaded = sorted(m for m in sys.modules if m.split('.')[0] in ('twisted', 'zope'))\n"
            "print(code, loaded, file=sys.stderr)\n"
        )
        result = runPython(script)
        self.assertEqual(result.stderr.split(), ["0", "[]"], result.stderr)
        self.assertIn("Salttwist Version:", result.stdout)
