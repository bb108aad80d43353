# -*- test-case-name: tests.test_grains -*-
"""
The core grains moved to ground, L{salttwist.grains} (the client, the
C{salttwist-call} command and execution modules read them too); this name
stays importable for the minion's own modules until they import the new one.
"""

from __future__ import annotations

from salttwist.grains import (
    coreGrains,
    fqdnGrains,
    getFqdn,
    grainsFilePath,
    interfaces,
    ipAddresses,
    networkGrains,
    osGrains,
    readGrainsFile,
)

__all__ = [
    "coreGrains",
    "fqdnGrains",
    "getFqdn",
    "grainsFilePath",
    "interfaces",
    "ipAddresses",
    "networkGrains",
    "osGrains",
    "readGrainsFile",
]
