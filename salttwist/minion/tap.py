# -*- test-case-name: tests.test_minion -*-
"""
The twistd plugin's options and service maker for C{salttwist-minion}.
"""

from __future__ import annotations

from typing import Any

from twisted.python import usage

from salttwist.cli import defaultConfigDir
from salttwist.config import ConfigError, loadMinionConfig
from salttwist.daemon import StartupError, resolveUser


class Options(usage.Options):
    """
    Options of C{twistd salttwist-minion}.
    """

    synopsis = "[-c CONFIG_DIR] [-u USER]"
    longdesc = "Run a salttwist minion: connect to the master and run its jobs."
    optParameters = [
        ["config-dir", "c", defaultConfigDir(), "Directory holding the 'minion' config file."],
        ["user", "u", None, "Run as this user once the sockets are bound (the user option)."],
    ]

    def __init__(self) -> None:
        super().__init__()
        # The environment is read when the command runs, not when imported.
        self["config-dir"] = defaultConfigDir()

    def postOptions(self) -> None:
        """
        Load and check the configuration before twistd daemonizes.
        """
        try:
            overrides = {"user": self["user"]} if self["user"] else None
            self["config"] = loadMinionConfig(self["config-dir"], overrides)
            self["runAs"] = resolveUser(self["config"]["user"])
        except (ConfigError, StartupError) as e:
            raise usage.UsageError(str(e)) from e


def makeService(options: Options, reactor: Any = None) -> Any:
    """
    Build the minion's service.
    """
    from salttwist.minion.service import MinionService, buildMinion

    if reactor is None:
        from twisted.internet import reactor as globalReactor

        reactor = globalReactor
    try:
        service = MinionService(buildMinion(options["config"], reactor))
    except StartupError as e:
        raise SystemExit(f"salttwist-minion: {e}") from e
    service.runAs = options.get("runAs")
    return service
