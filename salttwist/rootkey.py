# -*- test-case-name: tests.test_local_client,tests.test_direct_client -*-
"""
The root key: the secret a running master writes to C{cachedir/.root_key}
(mode 0600, new at every start) and a local client proves it can read, so
only the master's user (and root) can publish jobs without
C{publisher_acl}.

The user keys: the same for each user C{publisher_acl} names,
C{cachedir/.<user>_key} (the master writes them, L{salttwist.master.acl}).
"""

from __future__ import annotations

import os
import re

__all__ = ["ROOT_KEY_FILE", "USER_NAME", "readRootKey", "readUserKey", "userKeyFile"]

ROOT_KEY_FILE = ".root_key"
#: User names a key file may be named after: POSIX portable names, plus
#: upper case and a trailing C{$} (Samba machine accounts). No C{/}, no
#: leading dot, so a name can never leave C{cachedir}.
USER_NAME = re.compile(r"\A[A-Za-z0-9_][A-Za-z0-9_.-]{0,254}\$?\Z")


def readRootKey(cachedir: str) -> bytes:
    """
    Read the root key a running master wrote (the local client's side).

    @raise OSError: if it is missing or unreadable (not the master's user).
    @raise ValueError: if it is not hex.
    """
    with open(os.path.join(cachedir, ROOT_KEY_FILE), "rb") as f:
        return bytes.fromhex(f.read().decode("ascii").strip())


def userKeyFile(cachedir: str, user: str) -> str:
    """
    The path of C{user}'s key file, C{cachedir/.<user>_key}.

    @raise ValueError: C{user} is not a name a key file may carry.
    """
    if not isinstance(user, str) or not USER_NAME.match(user):
        raise ValueError(f"{user!r} is not a valid user name for a key file")
    return os.path.join(cachedir, f".{user}_key")


def readUserKey(cachedir: str, user: str) -> bytes:
    """
    Read C{user}'s key (the local client's side).

    @raise OSError: it is missing or unreadable.
    @raise ValueError: the name is invalid or the file is not a key.
    """
    with open(userKeyFile(cachedir, user), "rb") as f:
        return bytes.fromhex(f.read().decode("ascii").strip())
