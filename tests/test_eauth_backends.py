# -*- test-case-name: tests.test_eauth_backends -*-
"""
Tests for L{salttwist.eauth.backends}: the htpasswd file backend on real
files, and the PAM backend with a real system user made for the test.
"""

from __future__ import annotations

import os
import secrets
import shutil
import subprocess
from typing import Any

from passlib.hash import apr_md5_crypt, argon2, bcrypt, ldap_sha1, sha256_crypt, sha512_crypt
from twisted.trial.unittest import SynchronousTestCase
from zope.interface.verify import verifyObject

from salttwist.eauth.backends import (
    HtpasswdBackend,
    PamBackend,
    makeBackends,
    systemGroups,
)
from salttwist.eauth.config import ExternalAuth, checkExternalAuthConfig
from salttwist.eauth.interfaces import IAuthBackend

# Cheap parameters: these tests check verification, not strength.
HASHES = {
    "bea": bcrypt.using(rounds=4).hash("bea-pw"),
    "ari": argon2.using(memory_cost=64, rounds=1, parallelism=1).hash("ari-pw"),
    "sam": sha512_crypt.using(rounds=1000).hash("sam-pw"),
    "sid": sha256_crypt.using(rounds=1000).hash("sid-pw"),
    "old": apr_md5_crypt.hash("old-pw"),
    "sha": ldap_sha1.hash("sha-pw"),
    "txt": "txt-pw",
}


class HtpasswdBackendTests(SynchronousTestCase):
    """
    L{HtpasswdBackend} checks passwords against an htpasswd file.
    """

    def setUp(self) -> None:
        self.path = self.mktemp()
        lines = ["# users", ""] + [f"{user}:{hashed}" for user, hashed in HASHES.items()]
        with open(self.path, "w") as f:
            f.write("\n".join(lines) + "\n")
        self.backend = HtpasswdBackend(self.path)

    def test_interface(self) -> None:
        """
        It is an L{IAuthBackend} named C{file}.
        """
        self.assertTrue(verifyObject(IAuthBackend, self.backend))
        self.assertEqual(self.backend.name, "file")

    def test_strongHashes(self) -> None:
        """
        bcrypt, argon2 and SHA-crypt hashes are verified.
        """
        for user in ("bea", "ari", "sam", "sid"):
            self.assertTrue(self.backend.authenticate(user, f"{user}-pw"), user)
            self.assertFalse(self.backend.authenticate(user, "wrong"), user)
            self.assertFalse(self.backend.authenticate(user, f"{user}-pw "), user)

    def test_weakHashesRefused(self) -> None:
        """
        Apache MD5, SHA1 and plain text entries are refused even with the
        right password.
        """
        for user in ("old", "sha", "txt"):
            self.assertFalse(self.backend.authenticate(user, f"{user}-pw"), user)

    def test_unknownAndMalformed(self) -> None:
        """
        An unknown user, an empty password, a NUL or a non-string are
        refusals, not errors.
        """
        self.assertFalse(self.backend.authenticate("nobody", "bea-pw"))
        self.assertFalse(self.backend.authenticate("bea", ""))
        self.assertFalse(self.backend.authenticate("bea", "bea-pw\0x"))
        self.assertFalse(self.backend.authenticate("bea\0", "bea-pw"))
        self.assertFalse(self.backend.authenticate("bea", None))  # type: ignore[arg-type]

    def test_unknownUserSpends(self) -> None:
        """
        Refusing an unknown user verifies the password against another
        user's (supported) hash, so that it takes as long as a wrong
        password does.
        """
        verified: list[str] = []
        context = self.backend._cryptContext()

        class Recording:
            def identify(self, hashed: str, required: bool = True) -> Any:
                return context.identify(hashed, required=required)

            def verify(self, password: str, hashed: str) -> bool:
                verified.append(hashed)
                return bool(context.verify(password, hashed))

        self.backend._context = Recording()
        self.assertFalse(self.backend.authenticate("nobody", "bea-pw"))
        self.assertEqual(verified, [HASHES["bea"]])

    def test_longPassword(self) -> None:
        """
        A password longer than bcrypt's 72 bytes is refused, not an error.
        """
        self.assertFalse(self.backend.authenticate("bea", "bea-pw" + "x" * 100))

    def test_readEachTime(self) -> None:
        """
        The file is read at each login: an edit takes effect at once, and a
        missing file refuses everyone.
        """
        with open(self.path, "a") as f:
            f.write(f"new:{bcrypt.using(rounds=4).hash('new-pw')}\n")
        self.assertTrue(self.backend.authenticate("new", "new-pw"))
        os.unlink(self.path)
        self.assertFalse(self.backend.authenticate("bea", "bea-pw"))

    def test_noGroups(self) -> None:
        """
        The file has no groups.
        """
        self.assertEqual(self.backend.groups("bea"), [])


class MakeBackendsTests(SynchronousTestCase):
    """
    L{makeBackends} builds the configured backends.
    """

    def test_both(self) -> None:
        config = checkExternalAuthConfig(
            {
                "pam": {"fred": ["test.*"]},
                "file": {"^filename": "/etc/h", "^filetype": "htpasswd", "x": ["test.*"]},
            }
        )
        backends = makeBackends(ExternalAuth(config), "other")
        self.assertIsInstance(backends["file"], HtpasswdBackend)
        self.assertEqual(backends["file"].filename, "/etc/h")  # type: ignore[attr-defined]
        self.assertIsInstance(backends["pam"], PamBackend)
        self.assertEqual(backends["pam"].service, "other")  # type: ignore[attr-defined]


def _run(*argv: str, stdin: str | None = None) -> None:
    subprocess.run(argv, input=stdin, text=True, check=True, capture_output=True)


class PamBackendTests(SynchronousTestCase):
    """
    L{PamBackend} with a real user of this host, made for the test (with a
    random name and password) and removed after it. Needs root, useradd and
    PAM's C{login} service.
    """

    def setUp(self) -> None:
        if os.geteuid() != 0:
            raise self.skipTest("needs root to add a system user")
        if not shutil.which("useradd") or not os.path.exists("/etc/pam.d/login"):
            raise self.skipTest("needs useradd and /etc/pam.d/login")
        suffix = secrets.token_hex(4)
        self.user = f"stwe{suffix}"
        self.group = f"stwg{suffix}"
        self.password = secrets.token_urlsafe(16)
        _run("groupadd", self.group)
        self.addCleanup(_run, "groupdel", self.group)
        _run("useradd", "-M", "-s", "/usr/sbin/nologin", "-G", self.group, self.user)
        self.addCleanup(_run, "userdel", self.user)
        _run("chpasswd", stdin=f"{self.user}:{self.password}\n")
        self.backend = PamBackend()

    def test_interface(self) -> None:
        """
        It is an L{IAuthBackend} named C{pam}.
        """
        self.assertTrue(verifyObject(IAuthBackend, self.backend))
        self.assertEqual(self.backend.name, "pam")

    def test_password(self) -> None:
        """
        The user's password is accepted; a wrong one (PAM makes this take a
        couple of seconds), or another user's name, is refused.
        """
        self.assertTrue(self.backend.authenticate(self.user, self.password))
        self.assertFalse(self.backend.authenticate(self.user, self.password + "x"))

    def test_lockedAccount(self) -> None:
        """
        A locked account is refused even with its password.
        """
        _run("usermod", "-L", self.user)
        self.assertFalse(self.backend.authenticate(self.user, self.password))

    def test_malformed(self) -> None:
        """
        NUL bytes and empty passwords never reach PAM.
        """
        self.assertFalse(self.backend.authenticate(self.user, ""))
        self.assertFalse(self.backend.authenticate(self.user + "\0", self.password))

    def test_groups(self) -> None:
        """
        The user's groups: its primary group and the one it was added to.
        """
        groups = self.backend.groups(self.user)
        self.assertIn(self.group, groups)
        self.assertEqual(groups, systemGroups(self.user))
        self.assertEqual(self.backend.groups("no-such-user-" + self.group), [])
