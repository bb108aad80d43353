# -*- test-case-name: tests.test_master_service -*-
"""
The twistd plugin's options and service maker for C{salttwist-master}.
"""

from __future__ import annotations

from typing import Any

from salttwist.config import loadMasterConfig
from salttwist.daemon import StartupError, exitCleanlyOnSignals
from salttwist.tapoptions import DaemonOptions, daemonParameters


class Options(DaemonOptions):
    """
    Options of C{twistd salttwist-master}.
    """

    longdesc = "Run the salttwist master: the pub and req channels and the event bus."
    optParameters = daemonParameters("master")
    loadConfig = staticmethod(loadMasterConfig)


def makeService(options: Options, reactor: Any = None) -> Any:
    """
    Build the master's service tree: a L{MasterService} whose children are
    the job cache, the worker pool, Salt's reactor, the periodic work
    (L{TimerService}s) and the sockets (L{StreamServerEndpointService}s,
    bound before privileges drop); see L{salttwist.master.service}.
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
    reactor.callWhenRunning(exitCleanlyOnSignals, reactor)
    return service
