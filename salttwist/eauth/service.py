# -*- test-case-name: tests.test_eauth_service -*-
"""
External authentication as a service of a master (or the API): it opens
the token store (C{cachedir/tokens.sqlite}), prunes expired tokens every
minute, and hands out the L{Authenticator} once the store is open.

A store that cannot be opened (a full disk, a cachedir not yet mounted or
of the wrong owner) is tried again with back-off (L{RETRY_FIRST} seconds,
doubled after each failure up to L{RETRY_MAX}) until it opens or the
service stops; meanwhile L{EauthService.whenReady} fails at once with the
last error (the API answers 503), and logins work again as soon as a try
succeeds, without a restart.
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

__all__ = ["LOGIN_THREADS", "PRUNE_INTERVAL", "RETRY_FIRST", "RETRY_MAX", "EauthService"]

_log = Logger()

#: How often expired tokens are removed, in seconds.
PRUNE_INTERVAL = 60.0
#: How many logins are checked at once by default: PAM holds a refused one
#: for seconds (pam_faildelay), so they get threads of their own rather
#: than the reactor's pool, which the rest of the master needs.
LOGIN_THREADS = 4
#: Seconds before the first new try to open a store that could not be opened.
RETRY_FIRST = 1.0
#: The longest wait between two tries, in seconds.
RETRY_MAX = 60.0


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
        self._retryDelay = RETRY_FIRST
        self._retry: Any = None

    def startService(self) -> None:
        super().startService()
        if self._pool is not None:
            self._pool.start()
        self._retryDelay = RETRY_FIRST
        self._open()

    def _open(self) -> None:
        self._retry = None
        self._opening = SQLiteTokenStore.open(self.path, self.reactor, self.storeRunBlocking)
        self._opening.addCallbacks(self._opened, self._openFailed)

    def _opened(self, store: SQLiteTokenStore) -> None:
        self._opening = None
        if not self.running:
            store.close()
            return
        if self._failure is not None:
            _log.info("eauth: the token store {path} is open", path=self.path)
        self._failure = None
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
        if not self.running:
            waiting, self._waiting = self._waiting, []
            for d in waiting:
                d.errback(failure)
            return
        delay = self._retryDelay
        if self._failure is None:
            _log.failure(
                "eauth: cannot open the token store {path}; trying again in {delay} s",
                failure,
                path=self.path,
                delay=delay,
            )
        else:
            _log.warn(
                "eauth: cannot open the token store {path} ({error}); trying again in {delay} s",
                path=self.path,
                error=failure.value,
                delay=delay,
            )
        self._failure = failure
        self._retryDelay = min(delay * 2, RETRY_MAX)
        self._retry = self.reactor.callLater(delay, self._open)
        waiting, self._waiting = self._waiting, []
        for d in waiting:
            d.errback(failure)

    def whenReady(self) -> Deferred[Authenticator]:
        """
        @return: a L{Deferred} firing with the L{Authenticator} once the
            token store is open, or failing with the last error while it
            cannot be opened (it is tried again meanwhile).
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
        if self._retry is not None and self._retry.active():
            self._retry.cancel()
        self._retry = None
        self._failure = None
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
