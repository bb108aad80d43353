# -*- test-case-name: tests.test_eauth_service -*-
"""
External authentication as a service of a master (or the API): it opens
the token store (C{cachedir/tokens.sqlite}), prunes expired tokens every
minute, and hands out the L{Authenticator} once the store is open.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import Any

from twisted.application.service import Service
from twisted.internet.defer import Deferred, fail, succeed
from twisted.internet.threads import deferToThreadPool
from twisted.logger import Logger
from twisted.python.failure import Failure
from twisted.python.threadpool import ThreadPool

from salttwist.eauth.authenticator import Authenticator
from salttwist.eauth.backends import DEFAULT_PAM_SERVICE, makeBackends
from salttwist.eauth.config import ExternalAuth
from salttwist.eauth.interfaces import IAuthBackend
from salttwist.eauth.tokens import DATABASE_NAME, SQLiteTokenStore, TokenPruner

__all__ = ["LOGIN_THREADS", "PRUNE_INTERVAL", "EauthService"]

_log = Logger()

#: How often expired tokens are removed, in seconds.
PRUNE_INTERVAL = 60.0
#: How many logins are checked at once by default: PAM holds a refused one
#: for seconds (pam_faildelay), so they get threads of their own rather
#: than the reactor's pool, which the rest of the master needs.
LOGIN_THREADS = 4


class EauthService(Service):
    """
    Opens the token store at start and closes it at stop.

    @ivar authenticator: the L{Authenticator} once the store is open, else
        L{None}.
    """

    name = "eauth"

    def __init__(
        self,
        config: Mapping[str, Any],
        reactor: Any,
        runBlocking: Any = None,
        backends: Mapping[str, IAuthBackend] | None = None,
        storeRunBlocking: Any = None,
    ) -> None:
        """
        @param config: the master's config (C{external_auth},
            C{token_expire}, ..., C{cachedir}).
        @param reactor: the clock, and where the store's thread runs.
        @param runBlocking: runs the backends' blocking calls; by default
            a pool of L{LOGIN_THREADS} threads of the service's own.
        @param backends: the backends; by default those the config names.
        @param storeRunBlocking: runs the store's database calls; by
            default a thread of the store's own.
        @raise ValueError: a target of external_auth is invalid.
        """
        self.config = config
        self.reactor = reactor
        self._pool: ThreadPool | None = None
        if runBlocking is None:
            pool = self._pool = ThreadPool(0, LOGIN_THREADS, "salttwist-eauth")

            def runBlocking(f: Any, *args: Any) -> Deferred:
                return deferToThreadPool(reactor, pool, f, *args)

        self.runBlocking = runBlocking
        self.externalAuth = ExternalAuth.fromConfig(config)
        if backends is None:
            backends = makeBackends(
                self.externalAuth, config.get("auth.pam.service", DEFAULT_PAM_SERVICE)
            )
        self.backends = dict(backends)
        self.storeRunBlocking = storeRunBlocking
        self.path = os.path.join(config["cachedir"], DATABASE_NAME)
        self.authenticator: Authenticator | None = None
        self._store: SQLiteTokenStore | None = None
        self._pruner: TokenPruner | None = None
        self._opening: Deferred[Any] | None = None
        self._failure: Failure | None = None
        self._waiting: list[Deferred[Authenticator]] = []

    def startService(self) -> None:
        super().startService()
        if self._pool is not None:
            self._pool.start()
        self._opening = SQLiteTokenStore.open(self.path, self.reactor, self.storeRunBlocking)
        self._opening.addCallbacks(self._opened, self._openFailed)

    def _opened(self, store: SQLiteTokenStore) -> None:
        self._opening = None
        if not self.running:
            store.close()
            return
        self._store = store
        self.authenticator = Authenticator.fromConfig(
            self.config, self.backends, store, self.reactor, self.runBlocking
        )
        self._pruner = TokenPruner(store, self.reactor, PRUNE_INTERVAL)
        self._pruner.start()
        waiting, self._waiting = self._waiting, []
        for d in waiting:
            d.callback(self.authenticator)

    def _openFailed(self, failure: Failure) -> None:
        self._opening = None
        self._failure = failure
        _log.failure("eauth: cannot open the token store {path}", failure, path=self.path)
        waiting, self._waiting = self._waiting, []
        for d in waiting:
            d.errback(failure)

    def whenReady(self) -> Deferred[Authenticator]:
        """
        @return: a L{Deferred} firing with the L{Authenticator} once the
            token store is open, or failing if it cannot be opened.
        """
        if self.authenticator is not None:
            return succeed(self.authenticator)
        if self._failure is not None:
            return fail(self._failure)
        d: Deferred[Authenticator] = Deferred()
        self._waiting.append(d)
        return d

    def stopService(self) -> Deferred[None] | None:
        super().stopService()
        if self._pruner is not None:
            self._pruner.stop()
            self._pruner = None
        self.authenticator = None
        if self._pool is not None:
            self._pool.stop()
        store, self._store = self._store, None
        if store is None:
            return None
        return store.close()
