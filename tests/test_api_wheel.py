# -*- test-case-name: tests.test_api_wheel -*-
"""
Tests for L{salttwist.api.wheel}: Salt's wheel C{key} functions on a key
store.
"""

from __future__ import annotations

from twisted.trial.unittest import SynchronousTestCase

from salttwist.api.wheel import KeyWheel
from salttwist.crypt import generatePrivateKey, publicKeyToPem
from salttwist.pki.keystore import ACCEPTED, DENIED, PENDING, REJECTED, InMemoryKeyStore

PEM = publicKeyToPem(generatePrivateKey(2048).public_key())


class KeyWheelTests(SynchronousTestCase):
    """
    web1 accepted, new1 and new2 pending, old1 rejected.
    """

    def setUp(self) -> None:
        self.store = InMemoryKeyStore()
        self.store.putKey(ACCEPTED, "web1", PEM)
        self.store.putKey(PENDING, "new1", PEM)
        self.store.putKey(PENDING, "new2", PEM)
        self.store.putKey(REJECTED, "old1", PEM)
        self.events: list[tuple[str, str]] = []
        self.wheel = KeyWheel(self.store, lambda act, m: self.events.append((act, m)))

    def test_listAll(self) -> None:
        """
        C{key.list_all} has Salt's keys.
        """
        self.assertEqual(
            self.wheel.call("key.list_all", {}),
            {
                "local": ["master.pem", "master.pub"],
                "minions": ["web1"],
                "minions_pre": ["new1", "new2"],
                "minions_rejected": ["old1"],
                "minions_denied": [],
            },
        )

    def test_accept(self) -> None:
        """
        C{key.accept} moves the matching pending keys only (rejected ones
        with C{include_rejected}), fires an event for each.
        """
        self.assertEqual(
            self.wheel.call("key.accept", {"match": "new1,old*"}), {"minions": ["new1"]}
        )
        self.assertEqual(self.events, [("accept", "new1")])
        self.assertEqual(
            self.wheel.call("key.accept", {"match": "old*", "include_rejected": True}),
            {"minions": ["old1"]},
        )
        self.assertEqual(self.wheel.call("key.accept", {"match": "nothing"}), {})

    def test_rejectAndDelete(self) -> None:
        """
        C{key.reject} and C{key.delete} (positional C{match} too).
        """
        self.assertEqual(
            self.wheel.call("key.reject", {"__positional__": ["new2"]}),
            {"minions_rejected": ["new2"]},
        )
        self.assertEqual(
            self.wheel.call("key.delete", {"match": "*1"}),
            {"minions": ["web1"], "minions_pre": ["new1"], "minions_rejected": ["old1"]},
        )
        self.assertEqual(self.store.listKeys(PENDING), [])
        self.assertIn(("delete", "web1"), self.events)

    def test_errors(self) -> None:
        """
        An unknown function or argument is a L{ValueError} naming it.
        """
        with self.assertRaises(ValueError) as caught:
            self.wheel.call("key.nope", {})
        self.assertIn("key.nope", str(caught.exception))
        with self.assertRaises(ValueError) as caught:
            self.wheel.call("key.accept", {"pattern": "x"})
        self.assertIn("key.accept", str(caught.exception))
        with self.assertRaises(ValueError):
            self.wheel.call("key.gen", {"keysize": 1024})

    def test_genAcceptForce(self) -> None:
        """
        C{key.gen_accept} does not replace an accepted key without C{force}.
        """
        self.assertEqual(self.wheel.call("key.gen_accept", {"id_": "web1"}), {})
        pair = self.wheel.call("key.gen_accept", {"id_": "web1", "force": True})
        self.assertEqual(self.store.getKey(ACCEPTED, "web1"), pair["pub"].encode())
        self.assertEqual(self.store.listKeys(DENIED), [])
