# -*- test-case-name: tests.test_authtasks -*-
"""
Authentication as worker tasks (issue 5): each worker process loads the
master's key and key store once (an init task), then checks C{_auth}
requests, so RSA and key-file work never run in the master process. The
private key never crosses the AMP connection.

With C{keys.cache_driver: postgres} each worker opens a store of its own
(L{salttwist.pki.stores.openKeyStore}: its own writer and listener
connections and in-memory copy of the keys) rather than asking the master
for each key: reads stay in memory (an auth costs no round trip to the
master or the database), and what a worker writes (a new pending key)
reaches the master's store, and every other master's, by the database's
notifications. A worker's copy may lag the database by the notification
latency (milliseconds): an accepted minion presenting its accepted key is
decided from the copy (the master's key check, which runs on every change
and again a second later, cuts off one that authenticated on a copy that
had not yet seen its key rejected or deleted); every other decision reads
that minion's keys from the database first (L{salttwist.master.auth}), so a
key the master has just autosigned, or another worker has just written, is
never missed.
"""

from __future__ import annotations

import os
from typing import Any

from salttwist.workers.batch import runEach
from salttwist.workers.tasks import task

_state: dict[str, Any] = {}

WORKER_READY_TIMEOUT = 10.0
"""
Seconds a worker waits for a PostgreSQL key store to load its keys before
it starts anyway (less than the pool's start-up step timeout): with the
server down, the worker answers each authentication "master busy: its key
store is unavailable" until its store has loaded, as the master does, and
the pool is not left failing to start.
"""


@task(idempotent=True)
def loadAuthenticator(
    pkiDir: str, unicodeIds: bool = False, keyStore: dict[str, Any] | None = None
) -> str:
    """
    Load C{pkiDir/master.pem} and open the key store: the one C{keyStore}
    describes, else the files under C{pkiDir}.

    @param unicodeIds: the master's C{allow_unicode_minion_ids}: the rules
        new ids must meet (L{salttwist.pki.ids.IdRules}).
    @param keyStore: the master's L{salttwist.pki.stores.KeyStoreSpec}, or
        L{None} for C{pkiDir}'s files.

    @return: the master key's fingerprint.
    @raise salttwist.pki.stores.KeyStoreSetupError: if the key store could
        not be opened (psycopg missing).
    @raise salttwist.pki.keystore_pg.KeyStoreError: if the database's
        schema is refused.
    """
    from salttwist import crypt
    from salttwist.master.keys import MasterKeys
    from salttwist.pki.ids import IdRules
    from salttwist.pki.keystore_pg import KeyStoreUnavailable
    from salttwist.pki.stores import LOCALFS, openKeyStore

    # As the master loads it (no RSA consistency check for a file only
    # this user can write): a worker starts in the middle of an auth storm.
    key = crypt.loadOwnPrivateKey(os.path.join(pkiDir, "master.pem"))
    publicPem = crypt.publicKeyToPem(key.public_key())
    spec: Any = keyStore or {"driver": LOCALFS, "pki_dir": pkiDir}
    store = openKeyStore(spec, IdRules(unicode=unicodeIds))
    waitReady = getattr(store, "waitReady", None)
    if waitReady is not None:
        try:
            waitReady(WORKER_READY_TIMEOUT)
        except KeyStoreUnavailable:
            # Not loaded yet (the server is down): start anyway, it keeps
            # trying; until then authentications are answered "busy".
            pass
        except BaseException:
            store.close()
            raise
    old = _state.get("store")
    _state["keys"] = MasterKeys(key, publicPem, b"")
    _state["store"] = store
    if old is not None and hasattr(old, "close"):
        # Run again (idempotent): one store per worker, not one per run.
        old.close()
    return crypt.fingerprint(publicPem)


@task(idempotent=True)
def authenticateMany(
    requests: list[list[Any]], publicationKey: bytes, kid: int, publishPort: int
) -> list[dict[str, Any]]:
    """
    Check several C{_auth} requests, each C{[load, challenge, peer,
    allowNewPending]}, in order (see L{salttwist.master.auth.Authenticator}):
    what a L{salttwist.workers.batch.TaskBatcher} sends when requests wait
    for a worker, so they cost one task call, not one each, and the accepting
    replies of the minions that check batch signatures one RSA signature
    (L{salttwist.master.auth.Authenticator.signTogether}).

    Idempotent: a retry writes the same key files and makes new session
    keys, which are the ones the master uses. C{allowNewPending} is the
    master's C{max_minions_pre} decision: when false an unknown id is
    refused and nothing is written (the master counts the pending keys, so
    the cap holds across every worker).

    @return: one answer per request (see L{salttwist.workers.batch.runEach}):
        C{{"result": fields}} with the L{AuthOutcome}'s fields, or that
        request's error.
    """
    authenticator = _authenticator(publicationKey, kid, publishPort)
    outcomes: list[Any] = []

    def one(load: dict[str, Any], challenge: bytes, peer: str, allowNewPending: bool = True) -> Any:
        outcome = authenticator.authenticate(load, challenge, peer, allowNewPending, signLater=True)
        outcomes.append(outcome)
        return outcome

    answers = runEach(one, requests)
    # One RSA signature for every accepting reply of the batch whose minion
    # checks batch signatures (see Authenticator.signTogether).
    authenticator.signTogether(outcomes)
    for answer in answers:
        if "result" in answer:
            answer["result"] = answer["result"].toFields()
    return answers


def _authenticator(publicationKey: bytes, kid: int, publishPort: int) -> Any:
    """
    @return: an L{Authenticator} over this worker's keys and key store,
        handing out this publication key and port.
    """
    from salttwist.master.auth import Authenticator
    from salttwist.master.keys import PublicationKey

    if "keys" not in _state:
        raise RuntimeError("loadAuthenticator has not run in this worker")
    publication = PublicationKey(publicationKey, kid)
    return Authenticator(_state["store"], _state["keys"], lambda: publication, lambda: publishPort)
