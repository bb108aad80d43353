# -*- test-case-name: tests.test_config_return_retry -*-
"""
The minion's back-off for returns the master refused for now, under Salt's
option names (C{return_retry_timer}, C{return_retry_timer_max},
C{return_retry_tries}): their defaults and how bad values are refused.
"""

from __future__ import annotations

import os

from twisted.trial.unittest import SynchronousTestCase

from salttwist.config import MINION_DEFAULTS, ConfigError, loadMinionConfig
from salttwist.minion.returns import ERROR_TRIES, RETRY_FIRST, RETRY_MAX
from tests.test_config import _ConfigDirMixin


class ReturnRetryOptionTests(_ConfigDirMixin, SynchronousTestCase):
    """
    C{return_retry_timer}, C{return_retry_timer_max} and
    C{return_retry_tries} in the minion's config.
    """

    def refused(self, text: str, dropIn: str | None = None) -> str:
        """
        Load a minion config whose file holds C{text} (and a drop-in file
        holding C{dropIn}) and return the message of the L{ConfigError}.
        """
        files = {"minion": text}
        if dropIn is not None:
            files["minion.d/50.conf"] = dropIn
        configDir = self.makeConfigDir(**files)
        self.configDir = configDir
        return str(self.assertRaises(ConfigError, loadMinionConfig, configDir))

    def test_defaults(self) -> None:
        """
        The defaults are the back-off the minion had before the options
        (5 s doubling to 60 s, 5 internal errors), not Salt's 5, 10 and 3.
        """
        self.assertEqual(MINION_DEFAULTS["return_retry_timer"], 5)
        self.assertEqual(MINION_DEFAULTS["return_retry_timer_max"], 60)
        self.assertEqual(MINION_DEFAULTS["return_retry_tries"], 5)
        self.assertEqual(
            (RETRY_FIRST, RETRY_MAX, ERROR_TRIES),
            (
                MINION_DEFAULTS["return_retry_timer"],
                MINION_DEFAULTS["return_retry_timer_max"],
                MINION_DEFAULTS["return_retry_tries"],
            ),
        )

    def test_set(self) -> None:
        """
        Numbers (a fraction too for the waits) are taken as they are.
        """
        config = loadMinionConfig(
            self.makeConfigDir(
                minion=(
                    "return_retry_timer: 2.5\nreturn_retry_timer_max: 30\nreturn_retry_tries: 1\n"
                )
            )
        )
        self.assertEqual(config["return_retry_timer"], 2.5)
        self.assertEqual(config["return_retry_timer_max"], 30)
        self.assertEqual(config["return_retry_tries"], 1)

    def test_maxEqualToTimer(self) -> None:
        """
        The longest wait may be the first one: the wait does not grow.
        """
        config = loadMinionConfig(
            self.makeConfigDir(minion="return_retry_timer: 10\nreturn_retry_timer_max: 10\n")
        )
        self.assertEqual(config["return_retry_timer_max"], 10)

    def test_notPositive(self) -> None:
        """
        Each of the three must be a number above 0 (the tries an integer);
        the message names the file and the option.
        """
        for text, option in (
            ("return_retry_timer: 0\n", "return_retry_timer"),
            ("return_retry_timer: -1\n", "return_retry_timer"),
            ("return_retry_timer: '5'\n", "return_retry_timer"),
            ("return_retry_timer_max: -3\n", "return_retry_timer_max"),
            ("return_retry_timer_max: .inf\n", "return_retry_timer_max"),
            ("return_retry_tries: 0\n", "return_retry_tries"),
            ("return_retry_tries: 2.5\n", "return_retry_tries"),
            ("return_retry_tries: true\n", "return_retry_tries"),
        ):
            message = self.refused(text)
            self.assertIn(os.path.join(self.configDir, "minion"), message)
            self.assertIn(f"option {option!r} must be", message)

    def test_saltZeroMax(self) -> None:
        """
        Salt's C{return_retry_timer_max: 0} (not randomised) is refused, and
        the message says what to set instead.
        """
        message = self.refused("return_retry_timer_max: 0\n")
        self.assertIn("option 'return_retry_timer_max' must be a finite number > 0", message)
        self.assertIn("set it to return_retry_timer", message)

    def test_maxBelowTimer(self) -> None:
        """
        A longest wait below the first is refused; the message names the
        file, both options and their values.
        """
        message = self.refused("return_retry_timer: 20\nreturn_retry_timer_max: 10\n")
        path = os.path.join(self.configDir, "minion")
        self.assertEqual(
            message,
            f"{path}: option 'return_retry_timer_max' (10, from {path}) must be >= "
            f"option 'return_retry_timer' (20, from {path})",
        )

    def test_timerAboveDefaultMax(self) -> None:
        """
        A first wait above the default longest (60 s) is refused unless the
        longest is raised too: the message says the longest is the default.
        """
        message = self.refused("return_retry_timer: 90\n")
        path = os.path.join(self.configDir, "minion")
        self.assertEqual(
            message,
            f"{path}: option 'return_retry_timer_max' (60, from its default) must be >= "
            f"option 'return_retry_timer' (90, from {path})",
        )
        config = loadMinionConfig(
            self.makeConfigDir(minion="return_retry_timer: 90\nreturn_retry_timer_max: 90\n")
        )
        self.assertEqual(config["return_retry_timer"], 90)

    def test_acrossLayers(self) -> None:
        """
        The two are compared once every layer is merged: a drop-in file may
        raise the first wait the main file's longest then stands below; the
        message names the layer that set each. Overrides count too.
        """
        message = self.refused("return_retry_timer_max: 10\n", dropIn="return_retry_timer: 15\n")
        main = os.path.join(self.configDir, "minion")
        dropIn = os.path.join(self.configDir, "minion.d", "50.conf")
        self.assertEqual(
            message,
            f"{main}: option 'return_retry_timer_max' (10, from {main}) must be >= "
            f"option 'return_retry_timer' (15, from {dropIn})",
        )
        configDir = self.makeConfigDir(minion="return_retry_timer_max: 10\n")
        message = str(
            self.assertRaises(
                ConfigError, loadMinionConfig, configDir, {"return_retry_timer_max": 3}
            )
        )
        self.assertTrue(message.startswith("<overrides>: option 'return_retry_timer_max'"), message)
        config = loadMinionConfig(configDir, {"return_retry_timer": 3})
        self.assertEqual((config["return_retry_timer"], config["return_retry_timer_max"]), (3, 10))
