# -*- test-case-name: tests.test_cli_common,tests.test_modules_test -*-
"""
The versions report: what C{test.versions_report} returns and every
command's C{--versions-report} (C{-V}) prints, in the layout of Salt's
(C{salt.version.versions_report}), with salttwist's version where Salt
shows its own.

Standard library only, and package versions read with
L{importlib.metadata} (nothing imported): the C{salttwist} command prints
the report without importing Twisted.
"""

from __future__ import annotations

import platform
import sys

import salttwist

#: Distributions named in the report: salttwist's requirements, what
#: Twisted needs, and the optional TLS transport's libraries.
DEPENDENCIES = (
    "attrs",
    "Automat",
    "constantly",
    "cryptography",
    "incremental",
    "Jinja2",
    "msgpack",
    "pyOpenSSL",
    "PyYAML",
    "service-identity",
    "treq",
    "Twisted",
    "zope.interface",
)


def distributionVersion(name: str) -> str:
    """
    @return: the installed version of distribution C{name}, or C{"Not
        Installed"} (Salt's words).
    """
    # Imported here: importlib.metadata costs ~50 ms, and a minion imports
    # this module only for test.versions_report.
    from importlib import metadata

    try:
        return metadata.version(name)
    except metadata.PackageNotFoundError:
        return "Not Installed"


def versionsReport() -> str:
    """
    @return: the versions of salttwist, Python, the libraries it uses and
        the system, as text: Salt's sections (C{Salt Version} is
        C{Salttwist Version}), names right-aligned, one section after the
        other, separated by a line holding one space.
    """
    sections = [
        ("Salttwist Version", [("Salttwist", salttwist.__version__)]),
        ("Python Version", [("Python", sys.version.replace("\n", " "))]),
        ("Dependency Versions", [(name, distributionVersion(name)) for name in DEPENDENCIES]),
        (
            "System Versions",
            [
                ("dist", _dist()),
                ("locale", sys.getdefaultencoding()),
                ("machine", platform.machine()),
                ("release", platform.release()),
                ("system", platform.system()),
                ("version", _dist(pretty=True)),
            ],
        ),
    ]
    width = max(len(key) for _, rows in sections for key, _ in rows)
    lines: list[str] = []
    for title, rows in sections:
        if lines:
            lines.append(" ")
        lines.append(f"{title}:")
        lines.extend(f"{key.rjust(width + 2)}: {value}" for key, value in rows)
    return "\n".join(lines)


def _dist(pretty: bool = False) -> str:
    """
    @return: the distribution from C{os-release}: C{"ID VERSION_ID
        CODENAME"}, or with C{pretty} its C{PRETTY_NAME}; C{"Not
        Installed"} without C{os-release}.
    """
    try:
        release = platform.freedesktop_os_release()
    except OSError:
        return "Not Installed"
    if pretty:
        return release.get("PRETTY_NAME", release.get("NAME", ""))
    return " ".join(
        v
        for v in (
            release.get("ID", ""),
            release.get("VERSION_ID", ""),
            release.get("VERSION_CODENAME", ""),
        )
        if v
    )
