# -*- test-case-name: tests.test_local_client,tests.test_direct_client -*-
"""
The root key: the secret a running master writes to C{cachedir/.root_key}
(mode 0600, new at every start) and a local client proves it can read, so
only the master's user (and root) can publish jobs without
C{publisher_acl}.
"""

from __future__ import annotations

import os

__all__ = ["ROOT_KEY_FILE", "readRootKey"]

ROOT_KEY_FILE = ".root_key"


def readRootKey(cachedir: str) -> bytes:
    """
    Read the root key a running master wrote (the local client's side).

    @raise OSError: if it is missing or unreadable (not the master's user).
    @raise ValueError: if it is not hex.
    """
    with open(os.path.join(cachedir, ROOT_KEY_FILE), "rb") as f:
        return bytes.fromhex(f.read().decode("ascii").strip())
