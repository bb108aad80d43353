# -*- test-case-name: tests.test_modules_key -*-
"""
Tests for L{salttwist.modules.key}: the fingerprints of the minion's key
and of its pinned master key, compared with what C{salttwist-key} prints
on the master for the same keys.
"""

from __future__ import annotations

import io
import os
import sys

import yaml
from twisted.internet.task import Clock
from twisted.trial.unittest import SynchronousTestCase

from salttwist.cli.key import main as keyMain
from salttwist.modules import (
    CommandExecutionError,
    LoaderContext,
    SaltInvocationError,
    key,
    loadFunctions,
)
from salttwist.pki.keystore import ACCEPTED, FilesystemKeyStore
from tests.test_cli_key import FINGER_A, FINGER_B, PEM_A, PEM_B


class KeyFingerTests(SynchronousTestCase):
    """
    C{key.finger} and C{key.finger_master} read the minion's C{pki_dir}.
    """

    def setUp(self) -> None:
        """
        A minion C{pki_dir} holding the minion's public key (A) and the
        pinned master key (B).
        """
        self.pkiDir = os.path.abspath(self.mktemp())
        os.makedirs(self.pkiDir)
        self.writeKey("minion.pub", PEM_A)
        self.writeKey("minion_master.pub", PEM_B)
        self.context = LoaderContext(opts={"pki_dir": self.pkiDir}, grains={}, reactor=Clock())

    def writeKey(self, name: str, pem: bytes) -> None:
        """
        Write C{pem} to C{name} in the minion's C{pki_dir}.
        """
        with open(os.path.join(self.pkiDir, name), "wb") as f:
            f.write(pem)

    def keyCommand(self, *args: str) -> str:
        """
        Run C{salttwist-key} on a master whose C{pki_dir} has the minion's
        key accepted as C{m1} and the pinned master key as its own
        C{master.pub}.

        @return: what it printed.
        """
        root = os.path.abspath(self.mktemp())
        configDir = os.path.join(root, "etc")
        masterPki = os.path.join(root, "pki")
        os.makedirs(configDir)
        with open(os.path.join(configDir, "master"), "w") as f:
            yaml.safe_dump({"root_dir": root, "pki_dir": masterPki}, f)
        FilesystemKeyStore(masterPki).putKey(ACCEPTED, "m1", PEM_A)
        with open(os.path.join(masterPki, "master.pub"), "wb") as f:
            f.write(PEM_B)
        out = io.StringIO()
        self.patch(sys, "stdout", out)
        self.assertEqual(keyMain(["-c", configDir, *args]), 0)
        return out.getvalue()

    def test_finger(self) -> None:
        """
        C{key.finger} is the fingerprint of C{minion.pub}, exactly as
        C{salttwist-key -f} prints it on the master for the accepted key.
        """
        self.assertEqual(key.finger(self.context), FINGER_A)
        self.assertIn(f"m1:  {key.finger(self.context)}\n", self.keyCommand("-f", "m1"))

    def test_fingerMaster(self) -> None:
        """
        C{key.finger_master} is the fingerprint of C{minion_master.pub},
        exactly as C{salttwist-key -F} prints the master's C{master.pub}.
        """
        self.assertEqual(key.finger_master(self.context), FINGER_B)
        self.assertIn(f"master.pub:  {key.finger_master(self.context)}\n", self.keyCommand("-F"))

    def test_hashType(self) -> None:
        """
        C{hash_type} may name SHA-256; another hash is refused, since the
        master shows SHA-256 fingerprints only.
        """
        self.assertEqual(key.finger(self.context, hash_type="sha256"), FINGER_A)
        self.assertEqual(key.finger_master(self.context, "SHA256"), FINGER_B)
        error = self.assertRaises(SaltInvocationError, key.finger, self.context, "md5")
        self.assertIn("'md5'", str(error))

    def test_missing(self) -> None:
        """
        A key file that does not exist yet is an error that names it and
        says when it is written.
        """
        os.remove(os.path.join(self.pkiDir, "minion.pub"))
        os.remove(os.path.join(self.pkiDir, "minion_master.pub"))
        error = self.assertRaises(CommandExecutionError, key.finger, self.context)
        self.assertIn(os.path.join(self.pkiDir, "minion.pub"), str(error))
        self.assertIn("first starts", str(error))
        error = self.assertRaises(CommandExecutionError, key.finger_master, self.context)
        self.assertIn(os.path.join(self.pkiDir, "minion_master.pub"), str(error))
        self.assertIn("first authenticates", str(error))

    def test_notAKey(self) -> None:
        """
        A file that does not hold a public key is an error naming it.
        """
        self.writeKey("minion.pub", b"-----BEGIN PUBLIC KEY-----\n@@@\n-----END PUBLIC KEY-----\n")
        error = self.assertRaises(CommandExecutionError, key.finger, self.context)
        self.assertIn(os.path.join(self.pkiDir, "minion.pub"), str(error))
        self.assertIn("does not hold a usable public key", str(error))

    def test_loaded(self) -> None:
        """
        The module is loaded as C{key}: C{key.finger} and
        C{key.finger_master}, taking the context and running in a thread
        (they read files).
        """
        functions = loadFunctions()
        for name in ("key.finger", "key.finger_master"):
            self.assertTrue(getattr(functions[name], "needsContext", False), name)
            self.assertFalse(getattr(functions[name], "runsOnReactor", False), name)
