# -*- test-case-name: tests.test_modules_pkg -*-
"""
Tests for L{salttwist.modules.pkg}: parsing C{dpkg-query}, and the real
package database where there is one.
"""

from __future__ import annotations

import os
import shutil

from twisted.trial.unittest import SynchronousTestCase, TestCase

from salttwist.modules import CommandExecutionError, LoaderContext, pkg

DPKG_OUTPUT = """\
install ok installed bash 5.2.15-2+b8 amd64
install ok installed libc6 2.36-9 amd64
install ok installed libc6 2.36-9 i386
install ok installed tzdata 2024a-0 all
deinstall ok config-files mc 3:4.8.1-2 amd64
hold ok installed zsh 5.9-4 amd64
deinstall ok installed vim 2:9.0-1 amd64
install ok half-installed broken 1.0 amd64
garbage
"""


class ParseTests(SynchronousTestCase):
    """
    L{pkg._parseDpkgQuery} sorts C{dpkg-query} lines as Salt does.
    """

    def test_parse(self) -> None:
        """
        Installed packages (held, or selected for removal but still there)
        and removed ones with their config files left are told apart; a
        foreign architecture is C{name:arch}; other states (a
        half-installed package) and garbage are skipped.
        """
        parsed = pkg._parseDpkgQuery(DPKG_OUTPUT, "amd64")
        self.assertEqual(
            parsed["installed"],
            {
                "bash": ["5.2.15-2+b8"],
                "libc6": ["2.36-9"],
                "libc6:i386": ["2.36-9"],
                "tzdata": ["2024a-0"],
                "zsh": ["5.9-4"],
                "vim": ["2:9.0-1"],
            },
        )
        self.assertEqual(parsed["removed"], {"mc": ["3:4.8.1-2"]})

    def test_shape(self) -> None:
        """
        Versions are joined with commas unless kept as lists.
        """
        packages = {"b": ["2", "1"], "a": ["1"]}
        self.assertEqual(pkg._shape(packages, False), {"a": "1", "b": "1,2"})
        self.assertEqual(pkg._shape(packages, True), {"a": ["1"], "b": ["1", "2"]})


class DpkgTests(TestCase):
    """
    C{pkg.list_pkgs} and C{pkg.version} ask the real C{dpkg-query}.
    """

    def setUp(self) -> None:
        """
        A context on the real reactor; skip where there is no dpkg.
        """
        from twisted.internet import reactor

        if shutil.which("dpkg-query") is None:
            raise self.skipTest("no dpkg-query here")
        self.context = LoaderContext(opts={}, grains={}, reactor=reactor)

    async def test_listPkgs(self) -> None:
        """
        C{pkg.list_pkgs} includes C{bash} with a version string.
        """
        packages = await pkg.list_pkgs(self.context)
        self.assertIsInstance(packages["bash"], str)
        self.assertTrue(packages["bash"])
        listed = await pkg.list_pkgs(self.context, versions_as_list=True)
        self.assertEqual(listed["bash"], [packages["bash"]])

    async def test_version(self) -> None:
        """
        C{pkg.version} of one package is its version, of a missing one the
        empty string, of several or a glob a map.
        """
        bash = await pkg.version(self.context, "bash")
        self.assertTrue(bash)
        self.assertEqual(await pkg.version(self.context, "no-such-package-xyz"), "")
        both = await pkg.version(self.context, "bash", "no-such-package-xyz")
        self.assertEqual(both, {"bash": bash, "no-such-package-xyz": ""})
        globbed = await pkg.version(self.context, "bas*")
        self.assertEqual(globbed["bash"], bash)

    def test_versionBadKeyword(self) -> None:
        """
        An unknown keyword is invalid arguments.
        """
        self.assertRaises(TypeError, pkg.version, self.context, "bash", colour="red")


class NoDpkgTests(SynchronousTestCase):
    """
    Where there is no C{dpkg-query}, C{pkg} says so.
    """

    def test_missing(self) -> None:
        """
        Both functions raise an error naming C{dpkg-query} and Debian.
        """
        self.patch(os, "environ", {"PATH": os.path.abspath(self.mktemp())})
        context = LoaderContext(opts={}, grains={}, reactor=None)
        for call in (lambda: pkg.list_pkgs(context), lambda: pkg.version(context, "bash")):
            error = self.assertRaises(CommandExecutionError, call)
            self.assertIn("dpkg-query", str(error))
            self.assertIn("Debian", str(error))
