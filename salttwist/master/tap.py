# -*- test-case-name: tests.test_master_service -*-
"""
The twistd plugin's options and service maker for C{salttwist-master}.
"""

from __future__ import annotations

from typing import Any

from twisted.python import usage

from salttwist.cli import defaultConfigDir
from salttwist.config import ConfigError, loadMasterConfig
from salttwist.daemon import StartupError, resolveUser


class Options(usage.Options):
    """
    Options of C{twistd salttwist-master}.
    """

    synopsis = "[-c CONFIG_DIR] [-u USER]"
    longdesc = "Run the salttwist master: the pub and req channels and the event bus."
    optParameters = [
        ["config-dir", "c", defaultConfigDir(), "Directory holding the 'master' config file."],
        ["user", "u", None, "Run as this user once the sockets are bound (the user option)."],
    ]

    def __init__(self) -> None:
        super().__init__()
        # The environment is read when the command runs, not when imported.
        self["config-dir"] = defaultConfigDir()

    def postOptions(self) -> None:
        """
        Load and check the configuration now, so twistd reports errors
        before it daemonizes.
        """
        try:
            overrides = {"user": self["user"]} if self["user"] else None
            self["config"] = loadMasterConfig(self["config-dir"], overrides)
            self["runAs"] = resolveUser(self["config"]["user"])
        except (ConfigError, StartupError) as e:
            raise usage.UsageError(str(e)) from e


def makeService(options: Options, reactor: Any = None) -> Any:
    """
    Build the master's service tree.
    """
    from salttwist.master.service import MasterService

    if reactor is None:
        from twisted.internet import reactor as globalReactor

        reactor = globalReactor
    try:
        service = MasterService(options["config"], reactor)
    except StartupError as e:
        raise SystemExit(f"salttwist-master: {e}") from e
    service.runAs = options.get("runAs")
    return service
