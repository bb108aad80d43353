"""
Tests for C{state_aggregate} with the real C{pkg} states: a state run of
several C{pkg.installed} states against the local test apt repository
(L{tests._aptrepo}) installs their packages in the first one.
"""

from __future__ import annotations

import dataclasses
from typing import Any

from twisted.internet.threads import deferToThread
from twisted.trial.unittest import TestCase

from salttwist.state.runner import StateRunner
from salttwist.states import loadStates
from tests._aptrepo import APP, BASE, OTHER, AptRepoMixin
from tests._statectx import makeStateContext
from tests.test_state_runner import chunk


class AggregatePkgTests(AptRepoMixin, TestCase):
    """
    C{pkg.installed} states with C{state_aggregate}.
    """

    async def run_(self, chunks: list[dict[str, Any]], **opts: Any) -> dict[str, Any]:
        ctx = makeStateContext(opts=opts)
        states = loadStates(("pkg",))
        runner = StateRunner(states, lambda low: dataclasses.replace(ctx, low=low))
        ret = await deferToThread(runner.run, chunks)
        return {v["__id__"]: v for v in ret.values()}

    async def test_oneInstallation(self) -> None:
        """
        The first state installs every package; the others find theirs
        installed.
        """
        ret = await self.run_(
            [
                chunk("pkg", "installed", "app", name=APP),
                chunk("pkg", "installed", "other", name=OTHER),
            ],
            state_aggregate=True,
        )
        self.assertIs(ret["app"]["result"], True, ret)
        self.assertEqual(set(ret["app"]["changes"]), {APP, BASE, OTHER})
        self.assertEqual(ret["other"]["changes"], {})
        self.assertEqual(ret["other"]["comment"], "All specified packages are already installed")
        self.assertEqual(self.installedVersion(OTHER), "1.0")

    async def test_off(self) -> None:
        """
        Without the option, each state installs its own package.
        """
        ret = await self.run_(
            [
                chunk("pkg", "installed", "app", name=APP),
                chunk("pkg", "installed", "other", name=OTHER),
            ]
        )
        self.assertEqual(set(ret["app"]["changes"]), {APP, BASE})
        self.assertEqual(set(ret["other"]["changes"]), {OTHER})
