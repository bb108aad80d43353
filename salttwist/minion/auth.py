# -*- test-case-name: tests.test_minion,tests.test_transient_sessions -*-
"""
The minion's half of authentication moved to ground,
L{salttwist.pki.credentials} (C{salttwist-call} shares it); these names stay
importable from here.
"""

from __future__ import annotations

from salttwist.pki.credentials import (
    MASTER_PUB_FILE,
    NONCE_BYTES,
    AuthRefused,
    AuthReply,
    MasterIdentityError,
    MinionCredentials,
    authenticate,
)

__all__ = [
    "MASTER_PUB_FILE",
    "NONCE_BYTES",
    "AuthRefused",
    "AuthReply",
    "MasterIdentityError",
    "MinionCredentials",
    "authenticate",
]
