# -*- test-case-name: tests.test_minion -*-
"""
The twistd plugin's options and service maker for C{salttwist-minion}.
"""

from __future__ import annotations

from typing import Any

from salttwist.config import loadMinionConfig
from salttwist.daemon import StartupError, exitCleanlyOnSignals
from salttwist.tapoptions import DaemonOptions, daemonParameters


class Options(DaemonOptions):
    """
    Options of C{twistd salttwist-minion}.
    """

    longdesc = "Run a salttwist minion: connect to the master and run its jobs."
    optParameters = daemonParameters("minion")
    loadConfig = staticmethod(loadMinionConfig)


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
    reactor.callWhenRunning(exitCleanlyOnSignals, reactor)
    return service
