# -*- test-case-name: tests.test_states_pkg_ranges -*-
"""
Tests for version specifications (C{>=1.2}, C{<2.0}, C{>=1.0,<2.0}) in
L{salttwist.states.pkg} and L{salttwist.modules.pkg}, against a real local
apt repository offering C{salttwist-test-app} 1.0, 1.5 and 2.0.
"""

from __future__ import annotations

from typing import Any

from twisted.trial.unittest import TestCase

from salttwist.modules import loadFunctions
from salttwist.modules.pkg import PackageError
from tests._aptrepo import APP, BASE, OTHER, AptRepoMixin
from tests._statectx import makeLoaderContext, runState


class RangeTestCase(AptRepoMixin, TestCase):
    """
    The test repository with a third version of C{salttwist-test-app}.
    """

    def setUp(self) -> None:
        super().setUp()
        self.repo.build("app", "1.5", depends=BASE, conffile=True)
        self.repo.publish()
        self.repo.activate()

    async def state(self, function: str, *args: Any, **kwargs: Any) -> dict[str, Any]:
        return await runState(f"pkg.{function}", *args, **kwargs)


class InstalledRangeTests(RangeTestCase):
    """
    C{pkg.installed} with version specifications.
    """

    async def test_atLeast(self) -> None:
        """
        C{>=1.0} with nothing installed installs the newest version; once
        installed (or at any version meeting it) nothing changes.
        """
        ret = await self.state("installed", APP, version=">=1.0")
        self.assertIs(ret["result"], True, ret)
        self.assertEqual(ret["changes"][APP], {"old": "", "new": "2.0"})
        self.assertEqual(self.installedVersion(APP), "2.0")
        ret = await self.state("installed", APP, version=">=1.0")
        self.assertEqual(
            (ret["result"], ret["changes"], ret["comment"]),
            (
                True,
                {},
                "All specified packages are already installed and are at the desired version",
            ),
        )

    async def test_below(self) -> None:
        """
        C{<2.0} with 2.0 installed goes down to the newest version below
        (1.5), not to the oldest.
        """
        self.install(f"{APP}=2.0")
        ret = await self.state("installed", APP, version="<2.0")
        self.assertIs(ret["result"], True, ret)
        self.assertEqual(ret["changes"], {APP: {"old": "2.0", "new": "1.5"}})
        self.assertEqual(self.installedVersion(APP), "1.5")

    async def test_rangeMet(self) -> None:
        """
        C{>=1.0,<2.0} with 1.0 installed is met: nothing is installed.
        """
        self.install(f"{APP}=1.0")
        ret = await self.state("installed", APP, version=">=1.0,<2.0")
        self.assertEqual((ret["result"], ret["changes"]), (True, {}))
        self.assertEqual(self.installedVersion(APP), "1.0")

    async def test_pkgs(self) -> None:
        """
        Ranges in C{pkgs}: each package gets the newest version meeting
        its own range, in one installation.
        """
        ret = await self.state(
            "installed", "several", pkgs=[{APP: ">=1.0,<2.0"}, {OTHER: ">=1.0"}, BASE]
        )
        self.assertIs(ret["result"], True, ret)
        self.assertEqual(
            ret["changes"],
            {
                APP: {"old": "", "new": "1.5"},
                BASE: {"old": "", "new": "1.0"},
                OTHER: {"old": "", "new": "1.0"},
            },
        )
        self.assertEqual(ret["comment"], "3 targeted packages were installed/updated.")

    async def test_testMode(self) -> None:
        """
        Test mode installs nothing and gives the version the range would
        install.
        """
        self.install(f"{APP}=2.0")
        ret = await self.state("installed", APP, version="<2.0", test=True)
        self.assertEqual(
            ret,
            {
                "name": APP,
                "result": None,
                "changes": {APP: {"new": "1.5", "old": "2.0"}},
                "comment": f"The following packages would be installed/updated: {APP}",
            },
        )
        self.assertEqual(self.installedVersion(APP), "2.0")

    async def test_noMatch(self) -> None:
        """
        A range no offered version meets fails with Salt's words, naming
        the versions offered; nothing is installed.
        """
        ret = await self.state("installed", APP, version=">=3.0")
        self.assertIs(ret["result"], False)
        self.assertIn(
            f"No version matching '{APP}>=3.0' could be found (available: 2.0, 1.5, 1.0)",
            ret["comment"],
        )
        self.assertIsNone(self.installedVersion(APP))

    async def test_malformed(self) -> None:
        """
        A malformed specification fails before anything is looked up.
        """
        ret = await self.state("installed", APP, version=">>1.0")
        self.assertEqual(
            ret,
            {
                "name": APP,
                "result": False,
                "changes": {},
                "comment": f"{APP}: invalid version specification '>>1.0': the operator '>>' "
                "is not one of ==, !=, <, <=, > and >=",
            },
        )


class RemovedRangeTests(RangeTestCase):
    """
    C{pkg.removed} with a version specification.
    """

    async def test_removed(self) -> None:
        """
        Only an installed version meeting the specification is removed.
        """
        self.install(f"{APP}=1.5")
        ret = await self.state("removed", APP, version=">=2.0")
        self.assertEqual(
            (ret["result"], ret["comment"]),
            (True, "All specified packages (matching specified versions) are already absent"),
        )
        ret = await self.state("removed", APP, version="<2.0")
        self.assertIs(ret["result"], True, ret)
        self.assertIsNone(self.installedVersion(APP))


class LatestRangeTests(RangeTestCase):
    """
    C{pkg.latest} takes only names: versions in C{pkgs} are ignored, as
    Salt's.
    """

    async def test_ignored(self) -> None:
        """
        A range in C{pkgs} does not stop the newest version.
        """
        self.install(f"{APP}=1.0")
        ret = await self.state("latest", "x", pkgs=[{APP: "<2.0"}])
        self.assertIs(ret["result"], True, ret)
        self.assertEqual(self.installedVersion(APP), "2.0")


class ModuleRangeTests(RangeTestCase):
    """
    C{pkg.install} and C{pkg.list_repo_pkgs}.
    """

    def call(self, name: str, *args: Any, **kwargs: Any) -> Any:
        return loadFunctions()[f"pkg.{name}"](makeLoaderContext(), *args, **kwargs)

    def test_listRepoPkgs(self) -> None:
        """
        The versions offered, newest first.
        """
        self.assertEqual(
            self.call("list_repo_pkgs", APP, OTHER), {APP: ["2.0", "1.5", "1.0"], OTHER: ["1.0"]}
        )

    def test_installSomeUnmet(self) -> None:
        """
        A range no version meets is an error after the others are
        installed (Salt's), and the error carries what changed.
        """
        with self.assertRaises(PackageError) as caught:
            self.call("install", pkgs=[{APP: "<1.5"}, {OTHER: ">1.0"}])
        self.assertIn(
            f"No version matching '{OTHER}>1.0' could be found (available: 1.0)",
            str(caught.exception),
        )
        self.assertEqual(caught.exception.changes[APP], {"old": "", "new": "1.0"})
        self.assertEqual(self.installedVersion(APP), "1.0")


class EpochTests(RangeTestCase):
    """
    Epochs, as Salt's C{_check_ignore_epoch}.
    """

    def setUp(self) -> None:
        super().setUp()
        self.repo.build("other", "1:0.5")
        self.repo.publish()
        self.repo.activate()

    async def test_removedIgnoringEpoch(self) -> None:
        """
        A version without an epoch matches an installed one with an epoch
        unless C{ignore_epoch=False}; a range compares epochs.
        """
        self.install(f"{OTHER}=1:0.5")
        ret = await self.state("removed", OTHER, version="0.5", ignore_epoch=False)
        self.assertEqual(
            ret["comment"],
            "All specified packages (matching specified versions) are already absent",
        )
        ret = await self.state("installed", OTHER, version=">=1.0")
        self.assertEqual((ret["result"], ret["changes"]), (True, {}), ret)
        ret = await self.state("removed", OTHER, version="0.5")
        self.assertIs(ret["result"], True, ret)
        self.assertIsNone(self.installedVersion(OTHER))
