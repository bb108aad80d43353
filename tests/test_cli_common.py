# -*- test-case-name: tests.test_cli_common -*-
"""
Tests for what every salttwist command shares (L{salttwist.cli}).
"""

from __future__ import annotations

import argparse
import io
import os
import sys

from twisted.trial.unittest import SynchronousTestCase

import salttwist
from salttwist.cli import CONFIG_DIR_ENV, DEFAULT_CONFIG_DIR, addCommonArguments
from salttwist.master.tap import Options as MasterOptions
from salttwist.minion.tap import Options as MinionOptions


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
