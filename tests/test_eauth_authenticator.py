# -*- test-case-name: tests.test_eauth_authenticator -*-
"""
Tests for L{salttwist.eauth.authenticator}: logins with a real htpasswd
file (and, as root, a real PAM user), tokens, sessions and their
permissions.
"""

from __future__ import annotations

import os
import secrets
import shutil
import subprocess
import threading
from typing import Any

from passlib.hash import bcrypt
from twisted.internet import reactor
from twisted.internet.defer import Deferred
from twisted.internet.task import Clock
from twisted.trial.unittest import SynchronousTestCase, TestCase

from salttwist.blocking import runSynchronously, threadRunner
from salttwist.eauth.authenticator import (
    MAX_FAILURE_DELAY,
    AuthenticationFailed,
    Authenticator,
    Session,
)
from salttwist.eauth.backends import HtpasswdBackend, PamBackend, makeBackends
from salttwist.eauth.config import ExternalAuth, checkExternalAuthConfig
from salttwist.eauth.engine import AclRefused, Decision
from salttwist.eauth.tokens import MemoryTokenStore

START = 1_700_000_000.0


def writeHtpasswd(path: str, users: dict[str, str]) -> None:
    with open(path, "w") as f:
        for user, password in users.items():
            f.write(f"{user}:{bcrypt.using(rounds=4).hash(password)}\n")


class AuthenticatorTests(SynchronousTestCase):
    """
    L{Authenticator} with the file backend, a memory store and a L{Clock}.
    """

    def setUp(self) -> None:
        self.htpasswd = self.mktemp()
        writeHtpasswd(self.htpasswd, {"dean": "dean-pw", "gene": "gene-pw", "nemo": "nemo-pw"})
        self.config = {
            "external_auth": checkExternalAuthConfig(
                {
                    "file": {
                        "^filename": self.htpasswd,
                        "^filetype": "htpasswd",
                        "dean": ["test.*", {"web*": ["pkg.*"]}, "@jobs"],
                        "gene": [".*", "@runner", "@wheel"],
                    }
                }
            ),
            "token_expire": 3600,
            "token_expire_user_override": {"file": ["gene"]},
            "keep_acl_in_token": False,
        }
        self.clock = Clock()
        self.clock.advance(START)
        self.store = MemoryTokenStore(self.clock)
        self.blockingCalls: list[str] = []
        self.auth = self.makeAuthenticator(self.config)

    def makeAuthenticator(self, config: dict[str, Any]) -> Authenticator:
        def runBlocking(f: Any, *args: Any) -> Deferred:
            self.blockingCalls.append(f.__name__)
            return runSynchronously(f, *args)

        return Authenticator.fromConfig(
            config,
            makeBackends(ExternalAuth.fromConfig(config)),
            self.store,
            self.clock,
            runBlocking,
        )

    def login(self, *args: Any, **kwargs: Any) -> Session:
        return self.successResultOf(self.auth.login(*args, **kwargs))

    def test_login(self) -> None:
        """
        A login checks the password off the reactor thread and makes a
        token valid for C{token_expire}, with the user's permissions.
        """
        session = self.login("file", "dean", "dean-pw")
        self.assertEqual(self.blockingCalls, ["authenticate", "groups"])
        self.assertRegex(session.token, r"\A[0-9a-f]{64}\Z")
        self.assertEqual(
            session.asDict(),
            {
                "token": session.token,
                "start": START,
                "expire": START + 3600,
                "user": "dean",
                "eauth": "file",
                "perms": ["test.*", {"web*": ["pkg.*"]}, "@jobs"],
            },
        )
        self.assertEqual(session.authorize("test.ping", ["db1"]), Decision(False))
        self.assertEqual(session.authorize("pkg.install", ["web1"]), Decision(True))
        self.assertEqual(session.authorize("list_jobs", kind="jobs"), Decision(False))
        e = self.assertRaises(AclRefused, session.authorize, "pkg.install", ["db1"])
        self.assertIn("file user dean is not permitted to run pkg.install on db1", str(e))
        self.assertRaises(AclRefused, session.authorize, "manage.up", kind="runner")

    def test_session(self) -> None:
        """
        The token finds the session, until it expires.
        """
        token = self.login("file", "dean", "dean-pw").token
        session = self.successResultOf(self.auth.session(token))
        self.assertEqual(
            (session.name, session.eauth, session.expire), ("dean", "file", START + 3600)
        )
        self.clock.advance(3600)
        f = self.failureResultOf(self.auth.session(token), AuthenticationFailed)
        self.assertEqual(f.value.name, "TokenAuthenticationError")
        self.assertEqual(str(f.value), 'Authentication failure of type "token" occurred.')

    def test_logout(self) -> None:
        """
        A revoked token finds no session.
        """
        token = self.login("file", "dean", "dean-pw").token
        self.assertTrue(self.successResultOf(self.auth.logout(token)))
        self.failureResultOf(self.auth.session(token), AuthenticationFailed)
        self.assertFalse(self.successResultOf(self.auth.logout(token)))

    def test_refusals(self) -> None:
        """
        A wrong password, an unknown user or backend, or a user the config
        grants nothing are refused with Salt's message; the reason is kept.
        """
        cases = [
            (("file", "dean", "wrong"), "file refused the password of 'dean'"),
            (("file", "nobody", "x"), "file refused the password of 'nobody'"),
            (("pam", "dean", "dean-pw"), "the eauth system 'pam' is not enabled"),
            (("file", "nemo", "nemo-pw"), "grants 'nemo' nothing"),
            (("file", "dean", None), "must be strings"),
        ]
        for args, reason in cases:
            f = self.failureResultOf(self.auth.login(*args), AuthenticationFailed)
            self.assertEqual(f.value.name, "EauthAuthenticationError")
            self.assertEqual(
                str(f.value),
                f'Authentication failure of type "eauth" occurred for user {args[1]}.',
            )
            self.assertIn(reason, f.value.reason)
        self.assertEqual(self.successResultOf(self.store.count()), 0)

    def test_expireOverride(self) -> None:
        """
        Only a user C{token_expire_user_override} names may choose its
        token's lifetime; a bad one is an error.
        """
        self.assertEqual(self.login("file", "gene", "gene-pw", 60).expire, START + 60)
        self.assertEqual(self.login("file", "dean", "dean-pw", 60).expire, START + 3600)
        for bad in (0, -1, "60", True, float("inf")):
            self.failureResultOf(self.auth.login("file", "gene", "gene-pw", bad), ValueError)
        self.auth.userOverride = True
        self.assertEqual(self.login("file", "dean", "dean-pw", 60).expire, START + 60)

    def test_aclFromConfig(self) -> None:
        """
        By default a session's permissions are the config's of now; with
        C{keep_acl_in_token}, those of the login.
        """
        token = self.login("file", "dean", "dean-pw").token
        changed = dict(self.config)
        changed["external_auth"] = checkExternalAuthConfig(
            {"file": {"^filename": self.htpasswd, "^filetype": "htpasswd", "dean": ["grains.*"]}}
        )
        now = self.makeAuthenticator(changed)
        session = self.successResultOf(now.session(token))
        self.assertEqual(session.perms.items, ["grains.*"])
        self.assertRaises(AclRefused, session.authorize, "test.ping")
        kept = self.makeAuthenticator({**changed, "keep_acl_in_token": True})
        session = self.successResultOf(kept.session(token))
        self.assertEqual(session.perms.items, ["test.*", {"web*": ["pkg.*"]}, "@jobs"])

    def test_backendDisabled(self) -> None:
        """
        A token of a backend no longer in external_auth finds no session.
        """
        token = self.login("file", "dean", "dean-pw").token
        other = self.makeAuthenticator(
            {**self.config, "external_auth": checkExternalAuthConfig({"pam": {"x": ["y"]}})}
        )
        f = self.failureResultOf(other.session(token), AuthenticationFailed)
        self.assertIn("no longer enabled", f.value.reason)


class EvenOutTests(SynchronousTestCase):
    """
    A refused login is held back to take about as long as the slowest
    refusal of its backend so far (Salt's C{time_auth}).
    """

    def setUp(self) -> None:
        path = self.mktemp()
        writeHtpasswd(path, {"dean": "dean-pw"})
        config = {"file": {"^filename": path, "^filetype": "htpasswd", "dean": ["test.*"]}}
        self.clock = Clock()
        self.spend = 0.0

        def runBlocking(f: Any, *args: Any) -> Deferred:
            # The backend takes self.spend seconds of the clock.
            self.clock.advance(self.spend)
            return runSynchronously(f, *args)

        self.auth = Authenticator(
            ExternalAuth(checkExternalAuthConfig(config)),
            {"file": HtpasswdBackend(path)},
            MemoryTokenStore(self.clock),
            self.clock,
            runBlocking,
        )

    def test_evenOut(self) -> None:
        """
        After a refusal that took 2 s, a refusal that takes no time is held
        back 1.5 to 2.5 s; a success is not held back.
        """
        self.spend = 2.0
        first = self.auth.login("file", "dean", "wrong")
        self.clock.advance(0.5)
        self.failureResultOf(first, AuthenticationFailed)
        self.spend = 0.0
        second = self.auth.login("file", "nobody", "wrong")
        self.clock.advance(1.49)
        self.assertNoResult(second)
        self.clock.advance(1.02)
        self.failureResultOf(second, AuthenticationFailed)
        self.successResultOf(self.auth.login("file", "dean", "dean-pw"))

    def test_capped(self) -> None:
        """
        The hold-back is at most L{MAX_FAILURE_DELAY} (with its 25%).
        """
        self.spend = 60.0
        self.failureResultOf(self.auth.login("file", "dean", "wrong"), AuthenticationFailed)
        self.spend = 0.0
        d = self.auth.login("file", "dean", "wrong")
        self.clock.advance(MAX_FAILURE_DELAY * 1.25 + 0.01)
        self.failureResultOf(d, AuthenticationFailed)


class ThreadTests(TestCase):
    """
    With L{threadRunner}, the password is checked on a thread, not the
    reactor's.
    """

    def test_thread(self) -> Deferred[None]:
        path = self.mktemp()
        writeHtpasswd(path, {"dean": "dean-pw"})
        threads: list[threading.Thread] = []

        class Recording(HtpasswdBackend):
            def authenticate(self, username: str, password: str) -> bool:
                threads.append(threading.current_thread())
                return super().authenticate(username, password)

        config = {"file": {"^filename": path, "^filetype": "htpasswd", "dean": ["test.*"]}}
        auth = Authenticator(
            ExternalAuth(checkExternalAuthConfig(config)),
            {"file": Recording(path)},
            MemoryTokenStore(reactor),
            reactor,
            threadRunner(reactor),
        )

        def check(session: Session) -> None:
            self.assertEqual(session.name, "dean")
            self.assertEqual(len(threads), 1)
            self.assertIsNot(threads[0], threading.main_thread())

        return auth.login("file", "dean", "dean-pw").addCallback(check)


def _run(*argv: str, stdin: str | None = None) -> None:
    subprocess.run(argv, input=stdin, text=True, check=True, capture_output=True)


class PamGroupTests(SynchronousTestCase):
    """
    A real PAM user gets the items of a C{group%} entry for its real group.
    """

    def setUp(self) -> None:
        if os.geteuid() != 0 or not shutil.which("useradd"):
            raise self.skipTest("needs root and useradd to add a system user")
        suffix = secrets.token_hex(4)
        self.user, self.group = f"stwa{suffix}", f"stwh{suffix}"
        self.password = secrets.token_urlsafe(16)
        _run("groupadd", self.group)
        self.addCleanup(_run, "groupdel", self.group)
        _run("useradd", "-M", "-s", "/usr/sbin/nologin", "-G", self.group, self.user)
        self.addCleanup(_run, "userdel", self.user)
        _run("chpasswd", stdin=f"{self.user}:{self.password}\n")

    def test_group(self) -> None:
        config = checkExternalAuthConfig(
            {"pam": {f"{self.group}%": ["@wheel"], "*": ["test.ping"]}}
        )
        clock = Clock()
        auth = Authenticator(
            ExternalAuth(config),
            {"pam": PamBackend()},
            MemoryTokenStore(clock),
            clock,
            runSynchronously,
        )
        session = self.successResultOf(auth.login("pam", self.user, self.password))
        self.assertIn(self.group, session.groups)
        self.assertEqual(session.perms.items, ["@wheel", "test.ping"])
        session.authorize("key.list_all", kind="wheel")
        session.authorize("test.ping", ["m1"])
