# -*- test-case-name: tests.test_states_pkg_refresh -*-
"""
Tests for Salt's C{pkg.mod_init} and refresh tag
(L{salttwist.states.pkg.mod_init}, L{salttwist.modules._pkgrefresh}): a
state run that installs packages refreshes the package database once,
with its first C{pkg.installed}/C{pkg.latest} whose C{refresh} is not
given, however long the minion has run. The runs are real state runs
against the local test apt repository (L{tests._aptrepo}).
"""

from __future__ import annotations

import dataclasses
import os
from typing import Any

from twisted.internet.threads import deferToThread
from twisted.trial.unittest import SynchronousTestCase, TestCase

from salttwist.modules._pkgrefresh import (
    checkRefresh,
    clearRefreshTag,
    refreshTag,
    writeRefreshTag,
)
from salttwist.state.runner import StateRunner
from salttwist.states import StateContext, loadStates, pkg
from tests._aptrepo import APP, OTHER, PREFIX, AptRepoMixin
from tests._statectx import makeStateContext
from tests.test_state_runner import chunk

FRESH = PREFIX + "fresh"
LATE = PREFIX + "late"


class RefreshTagTests(SynchronousTestCase):
    """
    The refresh tag and C{pkg.mod_init}, in a temporary C{cachedir}.
    """

    def setUp(self) -> None:
        self.opts = {"cachedir": os.path.abspath(self.mktemp())}

    def test_checkRefresh(self) -> None:
        """
        C{refresh} given decides; not given, the tag does.
        """
        self.assertFalse(checkRefresh(self.opts, None))
        self.assertTrue(checkRefresh(self.opts, True))
        self.assertTrue(checkRefresh(self.opts, "True"))
        writeRefreshTag(self.opts)
        self.assertTrue(os.path.isfile(refreshTag(self.opts)))
        self.assertTrue(checkRefresh(self.opts, None))
        self.assertFalse(checkRefresh(self.opts, False))
        self.assertFalse(checkRefresh(self.opts, "false"))
        clearRefreshTag(self.opts)
        clearRefreshTag(self.opts)
        self.assertFalse(checkRefresh(self.opts, None))

    def test_modInit(self) -> None:
        """
        C{mod_init} writes the tag before C{pkg.installed} and
        C{pkg.latest} (and is done for the run), not before the others
        (it is asked again at the next C{pkg} state).
        """
        ctx = StateContext(salt={}, opts=self.opts)
        for fun in ("removed", "purged", "uptodate"):
            self.assertFalse(pkg.mod_init(ctx, {"state": "pkg", "fun": fun, "name": "x"}))
        self.assertFalse(os.path.exists(refreshTag(self.opts)))
        self.assertTrue(pkg.mod_init(ctx, {"state": "pkg", "fun": "latest", "name": "x"}))
        self.assertTrue(os.path.isfile(refreshTag(self.opts)))
        clearRefreshTag(self.opts)
        self.assertTrue(pkg.mod_init(ctx, {"state": "pkg", "fun": "installed", "name": "x"}))
        self.assertTrue(os.path.isfile(refreshTag(self.opts)))


class RunRefreshTests(AptRepoMixin, TestCase):
    """
    State runs on a minion that refreshed its package lists long ago (the
    test repository gains packages after that refresh).
    """

    def setUp(self) -> None:
        super().setUp()
        self.repo.build("fresh", "1.0")
        self.repo.build("late", "1.0")
        self.repo.publish()
        self.cachedir = os.path.abspath(self.mktemp())
        os.makedirs(self.cachedir)

    async def run_(self, chunks: list[dict[str, Any]]) -> dict[str, Any]:
        ctx = makeStateContext(opts={"cachedir": self.cachedir})
        runner = StateRunner(loadStates(("pkg",)), lambda low: dataclasses.replace(ctx, low=low))
        ret = await deferToThread(runner.run, chunks)
        return {v["__id__"]: v for v in ret.values()}

    async def test_firstInstallRefreshes(self) -> None:
        """
        The run's first C{pkg.installed} refreshes (the package new in the
        repository is found and installed) and the tag is gone after it.
        """
        ret = await self.run_(
            [
                chunk("pkg", "installed", "fresh", name=FRESH),
                chunk("pkg", "installed", "other", name=OTHER),
            ]
        )
        self.assertIs(ret["fresh"]["result"], True, ret)
        self.assertEqual(set(ret["fresh"]["changes"]), {FRESH})
        self.assertIs(ret["other"]["result"], True, ret)
        self.assertEqual(self.installedVersion(FRESH), "1.0")
        self.assertFalse(os.path.exists(os.path.join(self.cachedir, "pkg_refresh")))

    async def test_latestRefreshes(self) -> None:
        """
        C{pkg.latest} first in the run: it refreshes too.
        """
        ret = await self.run_([chunk("pkg", "latest", "late", name=LATE)])
        self.assertIs(ret["late"]["result"], True, ret)
        self.assertEqual(self.installedVersion(LATE), "1.0")

    async def test_refreshFalse(self) -> None:
        """
        C{refresh: False} does not refresh, tag or not: the new package is
        unknown, and the tag stays for the next state that installs.
        """
        ret = await self.run_([chunk("pkg", "installed", "fresh", name=FRESH, refresh=False)])
        self.assertIs(ret["fresh"]["result"], False, ret)
        self.assertIsNone(self.installedVersion(FRESH))
        self.assertTrue(os.path.isfile(os.path.join(self.cachedir, "pkg_refresh")))

    async def test_removalOnly(self) -> None:
        """
        A run that only removes packages writes no tag.
        """
        ret = await self.run_([chunk("pkg", "removed", "gone", name=APP)])
        self.assertIs(ret["gone"]["result"], True, ret)
        self.assertFalse(os.path.exists(os.path.join(self.cachedir, "pkg_refresh")))
