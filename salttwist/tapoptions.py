# -*- test-case-name: tests.test_tapoptions -*-
"""
What C{twistd salttwist-master} and C{twistd salttwist-minion} share: the
options (C{-c}, C{-u}), the configuration loaded and checked before twistd
daemonizes, and the daemons' logging.

The commands C{salttwist-master} and C{salttwist-minion} run twistd with
C{--logger salttwist.logs.observerFactory}. Started as plain C{twistd -n
salttwist-master}, twistd would log with its own observer: every level,
whatever C{log_level} says. So when no logger was chosen (neither
C{--logger} nor C{--syslog}), the options choose that observer with
the config's levels and format, and its C{log_file} when twistd
daemonizes (C{--logfile} wins over it, C{-} for standard output): both
ways of starting log the same.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from typing import Any, ClassVar

from twisted.python import usage

from salttwist.config import ConfigError, defaultConfigDir
from salttwist.daemon import StartupError, resolveUser
from salttwist.logs import logEnvironment

#: The log observer factory the daemons use (twistd's C{--logger}).
OBSERVER_FACTORY = "salttwist.logs.observerFactory"


def daemonParameters(configName: str) -> list[list[Any]]:
    """
    @return: the C{optParameters} of a daemon whose config file is
        C{configName}: C{-c} and C{-u}.
    """
    return [
        [
            "config-dir",
            "c",
            defaultConfigDir(),
            f"Directory holding the '{configName}' config file.",
        ],
        ["user", "u", None, "Run as this user once the sockets are bound (the user option)."],
    ]


class DaemonOptions(usage.Options):
    """
    Options of a salttwist daemon's twistd plugin; a subclass sets
    C{optParameters} (L{daemonParameters}) and C{loadConfig}.

    @cvar loadConfig: loads the config: C{(configDir, overrides)}.
    """

    loadConfig: ClassVar[Callable[[str, dict[str, Any] | None], dict[str, Any]]]
    synopsis = "[-c CONFIG_DIR] [-u USER]"

    def __init__(self) -> None:
        super().__init__()
        # The environment is read when the command runs, not when imported.
        self["config-dir"] = defaultConfigDir()

    def postOptions(self) -> None:
        """
        Load and check the configuration now, so twistd reports errors
        before it daemonizes; under plain twistd, log as the config says.
        """
        try:
            overrides = {"user": self["user"]} if self["user"] else None
            self["config"] = type(self).loadConfig(self["config-dir"], overrides)
            self["runAs"] = resolveUser(self["config"]["user"])
        except (ConfigError, StartupError) as e:
            raise usage.UsageError(str(e)) from e
        parent = getattr(self, "parent", None)
        if parent is not None:
            useConfiguredLogging(parent, self["config"])


def useConfiguredLogging(twistdOptions: Any, config: dict[str, Any]) -> None:
    """
    Make twistd log through L{salttwist.logs.observerFactory} as C{config} says, unless
    its command line chose a logger (C{--logger}, as the salttwist
    commands pass, or C{--syslog}).

    @param twistdOptions: twistd's parsed C{ServerOptions}.
    """
    if twistdOptions.get("logger") or twistdOptions.get("syslog"):
        return
    daemon = not twistdOptions.get("nodaemon")
    logFile = twistdOptions.get("logfile") or (config["log_file"] if daemon else None)
    os.environ.update(logEnvironment(config, logFile=logFile, daemon=daemon))
    # A name: twistd imports it once all options are parsed.
    twistdOptions["logger"] = OBSERVER_FACTORY
