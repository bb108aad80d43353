# -*- test-case-name: tests.test_api_service -*-
"""
The twistd plugin's options and service maker for C{salttwist-api}: the
master's config (its C{rest_cherrypy} block, C{external_auth}, and
C{api_pidfile}, C{api_logfile}).
"""

from __future__ import annotations

from typing import Any

from salttwist.config import loadApiConfig
from salttwist.daemon import StartupError, exitCleanlyOnSignals
from salttwist.tapoptions import DaemonOptions, daemonParameters

__all__ = ["Options", "loadApiConfig", "makeService"]


class Options(DaemonOptions):
    """
    Options of C{twistd salttwist-api}.
    """

    longdesc = "Run salttwist-api: Salt's REST API (rest_cherrypy) for the master on this host."
    optParameters = daemonParameters("master")
    loadConfig = staticmethod(loadApiConfig)


def makeService(options: Options, reactor: Any = None) -> Any:
    """
    Build the API's service (L{salttwist.api.service.ApiService}).
    """
    from salttwist.api.service import ApiService

    if reactor is None:
        from twisted.internet import reactor as globalReactor

        reactor = globalReactor
    try:
        service = ApiService(options["config"], reactor)
    except StartupError as e:
        raise SystemExit(f"salttwist-api: {e}") from e
    service.runAs = options.get("runAs")
    try:
        # Now, before twistd daemonizes and sets its owner-only umask.
        service.makeCachedir()
    except StartupError as e:
        raise SystemExit(f"salttwist-api: {e}") from e
    reactor.callWhenRunning(exitCleanlyOnSignals, reactor)
    return service
