# -*- test-case-name: tests.test_api_service -*-
"""
The C{salttwist-api} command: the API through twistd, with the flags of
C{salttwist-master} (C{-c}, C{-d}, C{-l}, C{--log-file}, C{-u}); it reads
the master's config.
"""

from __future__ import annotations

from typing import Any

__all__ = ["main"]


def _needsTLS(config: dict[str, Any]) -> bool:
    block = config.get("rest_cherrypy") or {}
    return not block.get("disable_ssl", False) or config["transport"] != "tcp"


def main(argv: list[str] | None = None) -> int:
    """
    Entry point of C{salttwist-api}.
    """
    from salttwist.api.tap import loadApiConfig
    from salttwist.cli.daemons import _run

    return _run("salttwist-api", loadApiConfig, argv, _needsTLS)
