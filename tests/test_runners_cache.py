# -*- test-case-name: tests.test_runners_cache -*-
"""
Tests for L{salttwist.runners.cache}: C{cache.grains}, with a real master
(L{tests.test_runners_jobs.makeMaster}).
"""

from __future__ import annotations

from twisted.trial.unittest import SynchronousTestCase

from tests.test_runners_manage import ManageTestCase


class GrainsTests(ManageTestCase):
    """
    C{cache.grains} answers the cached grains of the targeted minions.
    """

    def setUp(self) -> None:
        super().setUp()
        self.master.grainsCache.grains["minion1"] = {"os": "Debian", "id": "minion1"}
        self.master.grainsCache.grains["minion2"] = {"os": "RedHat", "id": "minion2"}

    def test_all(self) -> None:
        """
        Every accepted minion, with C{{}} for one whose grains are not
        cached.
        """
        self.assertEqual(
            self.run_("cache.grains"),
            {
                "minion1": {"os": "Debian", "id": "minion1"},
                "minion2": {"os": "RedHat", "id": "minion2"},
                "minion3": {},
            },
        )

    def test_target(self) -> None:
        """
        C{tgt} and C{tgt_type} select minions as a job's target does: a
        grain target also reaches a minion whose grains are not cached
        (the master cannot rule it out), listed with C{{}}.
        """
        self.assertEqual(list(self.run_("cache.grains", tgt="minion2")), ["minion2"])
        self.assertEqual(
            self.run_("cache.grains", tgt="G@os:Debian", tgt_type="compound"),
            {"minion1": {"os": "Debian", "id": "minion1"}, "minion3": {}},
        )
        self.assertEqual(
            list(self.run_("cache.grains", tgt="odd", tgt_type="nodegroup")), ["minion1", "minion3"]
        )

    def test_badTarget(self) -> None:
        """
        An invalid target fails with a message saying so.
        """
        self.assertIn(
            "invalid target", self.runFails("cache.grains", tgt="G@", tgt_type="compound")
        )


del SynchronousTestCase
