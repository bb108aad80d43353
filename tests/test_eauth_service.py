# -*- test-case-name: tests.test_eauth_service -*-
"""
Tests for L{salttwist.eauth.service}.
"""

from __future__ import annotations

import os
import stat
import threading

from passlib.hash import bcrypt
from twisted.internet import reactor
from twisted.internet.defer import Deferred
from twisted.internet.task import Clock
from twisted.trial.unittest import SynchronousTestCase, TestCase

from salttwist.blocking import runSynchronously, threadRunner
from salttwist.eauth.authenticator import AuthenticationFailed
from salttwist.eauth.backends import HtpasswdBackend, PamBackend
from salttwist.eauth.config import checkExternalAuthConfig
from salttwist.eauth.interfaces import TokenData
from salttwist.eauth.service import PRUNE_INTERVAL, RETRY_FIRST, RETRY_MAX, EauthService
from salttwist.eauth.tokens import DATABASE_NAME


def makeConfig(testCase: SynchronousTestCase) -> dict:
    cachedir = testCase.mktemp()
    os.makedirs(cachedir)
    htpasswd = os.path.join(cachedir, "htpasswd")
    with open(htpasswd, "w") as f:
        f.write(f"dean:{bcrypt.using(rounds=4).hash('dean-pw')}\n")
    return {
        "cachedir": cachedir,
        "external_auth": checkExternalAuthConfig(
            {
                "file": {"^filename": htpasswd, "^filetype": "htpasswd", "dean": ["test.*"]},
                "pam": {"root": [".*"]},
            }
        ),
        "token_expire": 600,
    }


class EauthServiceTests(SynchronousTestCase):
    """
    L{EauthService} with a L{Clock} and synchronous calls.
    """

    def setUp(self) -> None:
        self.config = makeConfig(self)
        self.clock = Clock()
        self.service = EauthService(
            self.config, self.clock, runSynchronously, storeRunBlocking=runSynchronously
        )

    def test_backends(self) -> None:
        """
        The backends are those the config names.
        """
        self.assertIsInstance(self.service.backends["file"], HtpasswdBackend)
        self.assertIsInstance(self.service.backends["pam"], PamBackend)
        self.assertEqual(self.service.backends["pam"].service, "login")  # type: ignore[attr-defined]
        service = EauthService({**self.config, "auth.pam.service": "other"}, self.clock)
        self.assertEqual(service.backends["pam"].service, "other")  # type: ignore[attr-defined]

    def test_lifecycle(self) -> None:
        """
        The store opens at start (a 0600 file in the cachedir), the
        authenticator logs users in, expired tokens are pruned every
        minute, and stop closes the store.
        """
        waiting = self.service.whenReady()
        self.assertNoResult(waiting)
        self.service.startService()
        auth = self.successResultOf(waiting)
        self.assertIs(self.successResultOf(self.service.whenReady()), auth)
        path = os.path.join(self.config["cachedir"], DATABASE_NAME)
        self.assertEqual(stat.S_IMODE(os.stat(path).st_mode), 0o600)
        session = self.successResultOf(auth.login("file", "dean", "dean-pw"))
        self.successResultOf(auth.store.create(TokenData("x", "file", 0, 30)))
        self.assertEqual(self.successResultOf(auth.store.count()), 2)
        self.clock.advance(PRUNE_INTERVAL)
        self.assertEqual(self.successResultOf(auth.store.count()), 1)
        self.successResultOf(auth.session(session.token))
        self.clock.advance(600)
        self.failureResultOf(auth.session(session.token), AuthenticationFailed)
        self.successResultOf(self.service.stopService())
        self.assertIsNone(self.service.authenticator)
        self.assertEqual(self.clock.getDelayedCalls(), [])

    def test_openFails(self) -> None:
        """
        A store that cannot be opened fails L{EauthService.whenReady}.
        """
        self.config["cachedir"] = os.path.join(self.config["cachedir"], "missing")
        service = EauthService(
            self.config, self.clock, runSynchronously, storeRunBlocking=runSynchronously
        )
        waiting = service.whenReady()
        service.startService()
        self.failureResultOf(waiting, OSError)
        self.failureResultOf(service.whenReady(), OSError)
        self.assertEqual(len(self.flushLoggedErrors(OSError)), 1)
        self.assertIsNone(service.stopService())
        # Stopped, it tries no more.
        self.assertEqual(self.clock.getDelayedCalls(), [])

    def test_openRetried(self) -> None:
        """
        A store that cannot be opened is tried again with back-off (doubled
        up to L{RETRY_MAX}); once it opens, logins work without a restart.
        """
        cachedir = self.config["cachedir"]
        self.config["cachedir"] = os.path.join(cachedir, "later")
        service = EauthService(
            self.config, self.clock, runSynchronously, storeRunBlocking=runSynchronously
        )
        service.startService()
        self.failureResultOf(service.whenReady(), OSError)
        delays = []
        for _ in range(8):
            (retry,) = self.clock.getDelayedCalls()
            delays.append(retry.getTime() - self.clock.seconds())
            self.clock.advance(delays[-1])
            self.failureResultOf(service.whenReady(), OSError)
        self.assertEqual(delays[:3], [RETRY_FIRST, RETRY_FIRST * 2, RETRY_FIRST * 4])
        self.assertEqual(delays[-1], RETRY_MAX)
        self.assertEqual(len(self.flushLoggedErrors(OSError)), 1)
        os.makedirs(self.config["cachedir"])
        self.clock.advance(RETRY_MAX)
        auth = self.successResultOf(service.whenReady())
        self.successResultOf(auth.login("file", "dean", "dean-pw"))
        # Only the pruner is left.
        (pruner,) = self.clock.getDelayedCalls()
        self.assertEqual(pruner.getTime() - self.clock.seconds(), PRUNE_INTERVAL)
        self.successResultOf(service.stopService())
        self.assertEqual(self.clock.getDelayedCalls(), [])


class RestartTests(TestCase):
    """
    Under the real reactor, with the store's own thread: a token outlives
    a restart of the service.
    """

    async def _restart(self) -> None:
        config = makeConfig(self)
        first = EauthService(config, reactor)
        threads = []

        class Recording(HtpasswdBackend):
            def authenticate(self, username: str, password: str) -> bool:
                threads.append(threading.current_thread().name)
                return super().authenticate(username, password)

        first.backends["file"] = Recording(first.backends["file"].filename)  # type: ignore[attr-defined]
        first.startService()
        auth = await first.whenReady()
        session = await auth.login("file", "dean", "dean-pw")
        await first.stopService()
        # The login ran on the service's own pool, now stopped.
        self.assertEqual(len(threads), 1)
        self.assertIn("salttwist-eauth", threads[0])
        self.assertFalse(first._pool.started)  # type: ignore[union-attr]
        second = EauthService(config, reactor, threadRunner(reactor))
        second.startService()
        self.addCleanup(second.stopService)
        auth = await second.whenReady()
        again = await auth.session(session.token)
        self.assertEqual((again.name, again.eauth), ("dean", "file"))

    def test_restart(self) -> Deferred[None]:
        return Deferred.fromCoroutine(self._restart())
