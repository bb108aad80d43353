# -*- test-case-name: tests.test_id_rules_master -*-
"""
The master and the id rules of issue 22: a master whose key store holds
keys breaking the rules starts and warns of them; the Unicode option needs
PyICU; the auth workers get the option.
"""

from __future__ import annotations

import os
import shutil
import sys
import tempfile
from typing import Any

from twisted.internet.testing import MemoryReactorClock
from twisted.logger import LogLevel, formatEvent, globalLogPublisher
from twisted.trial.unittest import SynchronousTestCase

from salttwist.config import loadMasterConfig
from salttwist.crypt import generatePrivateKey, publicKeyToPem
from salttwist.daemon import StartupError
from salttwist.master.core import runSynchronously
from salttwist.master.service import MasterService
from salttwist.pki import ids
from salttwist.pki.keystore import ACCEPTED, PENDING, FilesystemKeyStore
from tests.test_master_service import _RecordingJobCache

PEM = publicKeyToPem(generatePrivateKey().public_key())


class MasterIdRulesTests(SynchronousTestCase):
    """
    L{MasterService} and C{allow_unicode_minion_ids}.
    """

    def setUp(self) -> None:
        """
        A config under a short temporary root; log events captured.
        """
        self.root = tempfile.mkdtemp(prefix="stid-")
        self.addCleanup(shutil.rmtree, self.root, True)
        self.events: list[dict[str, Any]] = []
        globalLogPublisher.addObserver(self.events.append)
        self.addCleanup(globalLogPublisher.removeObserver, self.events.append)

    def makeService(self, **overrides: Any) -> MasterService:
        """
        Build a master service (no workers) with C{overrides}.
        """
        options = {"root_dir": self.root, "interface": "127.0.0.1", "keysize": 2048}
        options.update(overrides)
        config = loadMasterConfig(self.root, overrides=options)
        self.config = config
        return MasterService(
            config,
            MemoryReactorClock(),
            runBlocking=runSynchronously,
            jobCache=_RecordingJobCache(),
            useWorkers=False,
        )

    def warnings(self) -> list[str]:
        """
        @return: the warnings logged so far, formatted.
        """
        return [formatEvent(e) for e in self.events if e.get("log_level") == LogLevel.warn]

    def test_warnsOfNonconformingKeys(self) -> None:
        """
        Keys whose ids break the rules or clash start fine, and one warning
        lists them escaped with the way to delete them.
        """
        pkiDir = os.path.join(self.root, "pki")
        store = FilesystemKeyStore(pkiDir)
        store.putKey(ACCEPTED, "web1", PEM)
        store.putKey(ACCEPTED, "web1\u3164", PEM)
        store.putKey(PENDING, "WEB1", PEM)
        self.makeService(pki_dir=pkiDir)
        found = [w for w in self.warnings() if "break the id rules" in w]
        self.assertEqual(len(found), 1, self.warnings())
        self.assertIn("3 minion key(s)", found[0])
        self.assertIn("'web1\\u3164' in minions", found[0])
        self.assertIn("'WEB1' in minions_pre", found[0])
        self.assertIn("salttwist-key -d", found[0])
        self.assertNotIn("\u3164", found[0])

    def test_noWarningWhenClean(self) -> None:
        """
        A key store whose ids all follow the rules gives no such warning.
        """
        pkiDir = os.path.join(self.root, "pki")
        FilesystemKeyStore(pkiDir).putKey(ACCEPTED, "web1", PEM)
        self.makeService(pki_dir=pkiDir)
        self.assertEqual([w for w in self.warnings() if "break the id rules" in w], [])

    def test_unicodeOptionReachesStore(self) -> None:
        """
        C{allow_unicode_minion_ids} gives the key store (and the auth
        workers' init task) the Unicode rules; by default the host-name
        rule.
        """
        service = self.makeService()
        self.assertFalse(service.master.keyStore.idRules.unicode)
        try:
            ids.IdRules(unicode=True).require()
        except ids.UnicodeIdsUnavailable:
            return
        service = self.makeService(allow_unicode_minion_ids=True)
        self.assertTrue(service.master.keyStore.idRules.unicode)

    def test_unicodeOptionWithoutIcu(self) -> None:
        """
        Without PyICU, C{allow_unicode_minion_ids: True} stops the master at
        start with a message naming what to install.
        """
        ids._icu.cache_clear()
        self.addCleanup(ids._icu.cache_clear)
        saved = sys.modules.get("icu")
        sys.modules["icu"] = None  # type: ignore[assignment]

        def restore() -> None:
            if saved is None:
                sys.modules.pop("icu", None)
            else:
                sys.modules["icu"] = saved

        self.addCleanup(restore)
        with self.assertRaises(StartupError) as caught:
            self.makeService(allow_unicode_minion_ids=True)
        self.assertIn("libicu-dev", str(caught.exception))

    def test_optionIsBoolean(self) -> None:
        """
        The option is a boolean, default False.
        """
        config = loadMasterConfig(self.root, overrides={"root_dir": self.root})
        self.assertIs(config["allow_unicode_minion_ids"], False)


class MinionToldWhyTests(SynchronousTestCase):
    """
    A minion whose new id is denied for clashing with another is told why.
    """

    def test_deniedReason(self) -> None:
        """
        The minion's L{AuthRefused} carries the master's reason for a
        denial (the id it clashes with).
        """
        from twisted.internet.defer import Deferred, succeed

        from salttwist.pki.credentials import AuthRefused, MinionCredentials, authenticate

        key = generatePrivateKey()
        credentials = MinionCredentials(
            "WEB1", key, publicKeyToPem(key.public_key()), self.mktemp()
        )

        class Req:
            hello = succeed(b"c" * 32)

            def sendClear(self, request: Any) -> Deferred[Any]:
                return succeed(
                    {
                        "ret": "denied",
                        "error": "minion id 'WEB1' is the same regardless of ASCII case "
                        "as the id 'web1'",
                    }
                )

        def runBlocking(f: Any, *args: Any) -> Deferred[Any]:
            return succeed(f(*args))

        d = Deferred.fromCoroutine(authenticate(Req(), credentials, runBlocking))  # type: ignore[arg-type]
        failure = self.failureResultOf(d, AuthRefused)
        self.assertEqual(failure.value.ret, "denied")
        self.assertIn("the master denied this minion's key: minion id 'WEB1'", str(failure.value))
        self.assertIn("'web1'", str(failure.value))
