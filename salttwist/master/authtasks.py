# -*- test-case-name: tests.test_authtasks -*-
"""
Authentication as worker tasks (issue 5): each worker process loads the
master's key and key store once (an init task), then checks C{_auth}
requests, so RSA and key-file work never run in the master process. The
private key never crosses the AMP connection.
"""

from __future__ import annotations

import os
from typing import Any

from salttwist.workers.tasks import task

_state: dict[str, Any] = {}


@task(idempotent=True)
def loadAuthenticator(pkiDir: str) -> str:
    """
    Load C{pkiDir/master.pem} and open the key store over C{pkiDir}.

    @return: the master key's fingerprint.
    """
    from salttwist import crypt
    from salttwist.master.keys import MasterKeys
    from salttwist.pki.keystore import FilesystemKeyStore

    with open(os.path.join(pkiDir, "master.pem"), "rb") as f:
        key = crypt.loadPrivateKey(f.read())
    publicPem = crypt.publicKeyToPem(key.public_key())
    _state["keys"] = MasterKeys(key, publicPem, b"")
    _state["store"] = FilesystemKeyStore(pkiDir)
    return crypt.fingerprint(publicPem)


@task(idempotent=True)
def authenticate(
    load: dict[str, Any],
    challenge: bytes,
    peer: str,
    publicationKey: bytes,
    kid: int,
    publishPort: int,
    allowNewPending: bool = True,
) -> dict[str, Any]:
    """
    Check one C{_auth} request (see L{salttwist.master.auth.Authenticator}).
    Idempotent: a retry writes the same key files and makes a new session
    key, which is the one the master uses. C{allowNewPending} is the
    master's C{max_minions_pre} decision: when false an unknown id is
    refused and nothing is written (the master counts the pending keys, so
    the cap holds across every worker).

    @return: the L{AuthOutcome}'s fields as a map.
    """
    from salttwist.master.auth import Authenticator
    from salttwist.master.keys import PublicationKey

    if "keys" not in _state:
        raise RuntimeError("loadAuthenticator has not run in this worker")
    authenticator = Authenticator(
        _state["store"],
        _state["keys"],
        lambda: PublicationKey(publicationKey, kid),
        lambda: publishPort,
    )
    return authenticator.authenticate(load, challenge, peer, allowNewPending).toFields()
