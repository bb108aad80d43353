# -*- test-case-name: tests.adversarial.test_local -*-
"""
A local unprivileged user: directories others can write to stop the
master from starting, and private files are created private, without
following links planted in their place.
"""

from __future__ import annotations

import os
import stat

from twisted.internet.testing import MemoryReactorClock
from twisted.trial.unittest import SynchronousTestCase

from salttwist.config import loadMasterConfig
from salttwist.daemon import StartupError, ensurePrivateDir
from salttwist.master.keys import ROOT_KEY_FILE, loadMasterKeys
from salttwist.master.service import MasterService


class PrivateDirTests(SynchronousTestCase):
    """
    The master refuses to start on directories writable by others.
    """

    def test_writableByOthersRefused(self) -> None:
        """
        L{ensurePrivateDir} refuses a directory writable by group or others
        (with or without the sticky bit), and a symlink to a private one.
        """
        for mode in (0o777, 0o770, 0o702, 0o720, 0o1777):
            path = os.path.abspath(self.mktemp())
            os.mkdir(path)
            os.chmod(path, mode)
            self.assertRaises(StartupError, ensurePrivateDir, path)
        target = os.path.abspath(self.mktemp())
        os.mkdir(target, 0o700)
        link = os.path.abspath(self.mktemp())
        os.symlink(target, link)
        self.assertRaises(StartupError, ensurePrivateDir, link)

    def test_masterRefusesToStart(self) -> None:
        """
        A L{MasterService} whose C{pki_dir}, C{cachedir} or C{sock_dir} is
        world-writable raises L{StartupError} while it is built, before it
        writes any key.
        """
        for option in ("pki_dir", "cachedir", "sock_dir"):
            root = os.path.abspath(self.mktemp())
            config = loadMasterConfig(root, overrides={"root_dir": root})
            os.makedirs(config[option], mode=0o700)
            os.chmod(config[option], 0o777)
            self.assertRaises(StartupError, MasterService, config, MemoryReactorClock())
            self.assertFalse(os.path.exists(os.path.join(config["pki_dir"], "master.pem")))

    def test_createdPrivate(self) -> None:
        """
        Missing directories, and their missing parents, are created 0700
        even under a permissive umask.
        """
        old = os.umask(0)
        try:
            base = os.path.abspath(self.mktemp())
            path = os.path.join(base, "a", "b")
            ensurePrivateDir(path)
        finally:
            os.umask(old)
        for p in (base, os.path.join(base, "a"), path):
            self.assertEqual(stat.S_IMODE(os.lstat(p).st_mode), 0o700, p)


class PrivateFileTests(SynchronousTestCase):
    """
    The master's private key and root key are 0600 from creation, and a
    symlink planted at their path is replaced, not followed.
    """

    def test_keyFilesPrivate(self) -> None:
        """
        Under umask 0, C{master.pem} and C{.root_key} are created 0600; a
        symlink planted where the root key goes is replaced by a regular
        file and the file it pointed to is untouched.
        """
        base = os.path.abspath(self.mktemp())
        pki, cache = os.path.join(base, "pki"), os.path.join(base, "cache")
        ensurePrivateDir(pki)
        ensurePrivateDir(cache)
        victim = os.path.join(base, "victim")
        with open(victim, "wb") as f:
            f.write(b"keep")
        os.symlink(victim, os.path.join(cache, ROOT_KEY_FILE))
        old = os.umask(0)
        try:
            loadMasterKeys(pki, cache, 2048)
        finally:
            os.umask(old)
        for path in (os.path.join(pki, "master.pem"), os.path.join(cache, ROOT_KEY_FILE)):
            info = os.lstat(path)
            self.assertTrue(stat.S_ISREG(info.st_mode), path)
            self.assertEqual(stat.S_IMODE(info.st_mode), 0o600, path)
        with open(victim, "rb") as f:
            self.assertEqual(f.read(), b"keep")
