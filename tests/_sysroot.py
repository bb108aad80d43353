"""
A minimal system root for the account tests: a temporary directory with
its own C{etc/passwd}, C{etc/group}, C{etc/shadow}, C{etc/gshadow} and the
machine's C{etc/login.defs}, which the shadow tools change through their
C{--root} instead of the machine's own files.
"""

from __future__ import annotations

import os
import shutil

from twisted.trial.unittest import SynchronousTestCase

_FILES = {
    "etc/passwd": "root:x:0:0:root:/root:/bin/bash\nbin:x:2:2:bin:/bin:/usr/sbin/nologin\n",
    "etc/group": "root:x:0:\nbin:x:2:\nusers:x:100:\n",
    "etc/shadow": "root:*:19000:0:99999:7:::\nbin:*:19000:0:99999:7:::\n",
    "etc/gshadow": "root:*::\nbin:*::\nusers:*::\n",
}


def makeRoot(case: SynchronousTestCase) -> str:
    """
    @return: the path of a new system root for C{case}, removed when the
        test ends (the tools need C{root}, so only root can run these tests:
        C{case} is skipped otherwise).
    """
    if os.geteuid() != 0:
        case.skipTest("the shadow tools' --root needs root")
    for tool in ("useradd", "usermod", "userdel", "groupadd", "groupmod", "groupdel", "gpasswd"):
        if shutil.which(tool) is None:
            case.skipTest(f"{tool} (the shadow tools) is not installed")
    root = os.path.abspath(case.mktemp())
    os.makedirs(os.path.join(root, "etc"))
    os.makedirs(os.path.join(root, "home"))
    for relative, text in _FILES.items():
        with open(os.path.join(root, relative), "w") as f:
            f.write(text)
    for secret in ("etc/shadow", "etc/gshadow"):
        os.chmod(os.path.join(root, secret), 0o640)
    if os.path.exists("/etc/login.defs"):
        shutil.copy("/etc/login.defs", os.path.join(root, "etc/login.defs"))
    case.addCleanup(shutil.rmtree, root, True)
    return root


def readEtc(root: str, name: str) -> list[list[str]]:
    """
    @return: the lines of C{<root>/etc/<name>}, split at colons.
    """
    with open(os.path.join(root, "etc", name)) as f:
        return [line.split(":") for line in f.read().splitlines() if line]


def entry(root: str, name: str, key: str) -> list[str] | None:
    """
    @return: the line of C{<root>/etc/<name>} for C{key}, split, or
        L{None}.
    """
    for cols in readEtc(root, name):
        if cols[0] == key:
            return cols
    return None
