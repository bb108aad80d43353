# -*- test-case-name: tests.test_fileserver_paths -*-
"""
Tests for L{salttwist.fileserver.paths}: C{salt://} URLs, relative paths
and saltenv names.
"""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st
from twisted.trial.unittest import SynchronousTestCase

from salttwist.fileserver.interfaces import FileServerError
from salttwist.fileserver.paths import (
    checkPrefix,
    checkRelativePath,
    checkSaltenv,
    isServableName,
    parseSaltUrl,
)


class ParseSaltUrlTests(SynchronousTestCase):
    """
    L{parseSaltUrl} splits a C{salt://} URL into path and saltenv.
    """

    def test_withSaltenv(self) -> None:
        """
        C{?saltenv=} names the saltenv.
        """
        self.assertEqual(parseSaltUrl("salt://a/b?saltenv=dev"), ("a/b", "dev"))

    def test_oldEnvKey(self) -> None:
        """
        Salt's older C{?env=} means the same.
        """
        self.assertEqual(parseSaltUrl("salt://a/b?env=qa"), ("a/b", "qa"))

    def test_withoutSaltenv(self) -> None:
        """
        A URL without a query has no saltenv.
        """
        self.assertEqual(parseSaltUrl("salt://web/nginx.conf"), ("web/nginx.conf", None))

    def test_plainPath(self) -> None:
        """
        A plain relative path is returned as it is.
        """
        self.assertEqual(parseSaltUrl("web/nginx.conf"), ("web/nginx.conf", None))

    def test_leadingSlashes(self) -> None:
        """
        C{salt:///a} is C{a}.
        """
        self.assertEqual(parseSaltUrl("salt:///top.sls"), ("top.sls", None))

    def test_otherScheme(self) -> None:
        """
        Another scheme is refused, naming the URL.
        """
        e = self.assertRaises(FileServerError, parseSaltUrl, "http://example.com/x")
        self.assertIn("'http://example.com/x' is not a salt:// URL", str(e))

    def test_unknownQuery(self) -> None:
        """
        A query key other than C{saltenv} is refused.
        """
        e = self.assertRaises(FileServerError, parseSaltUrl, "salt://a?foo=bar")
        self.assertIn("unknown query key 'foo'", str(e))

    def test_malformedQuery(self) -> None:
        """
        A query that is not C{key=value} pairs is refused.
        """
        e = self.assertRaises(FileServerError, parseSaltUrl, "salt://a?saltenv")
        self.assertIn("malformed query", str(e))

    def test_twoSaltenvs(self) -> None:
        """
        Two different saltenvs are refused.
        """
        e = self.assertRaises(FileServerError, parseSaltUrl, "salt://a?saltenv=x&saltenv=y")
        self.assertIn("two saltenvs", str(e))

    def test_badSaltenv(self) -> None:
        """
        A saltenv that is a path trick is refused.
        """
        e = self.assertRaises(FileServerError, parseSaltUrl, "salt://a?saltenv=../x")
        self.assertIn("'../x'", str(e))

    def test_nul(self) -> None:
        """
        A NUL anywhere is refused.
        """
        self.assertRaises(FileServerError, parseSaltUrl, "salt://a\x00b")

    def test_notString(self) -> None:
        """
        A URL that is not a string is refused.
        """
        e = self.assertRaises(FileServerError, parseSaltUrl, b"salt://a")
        self.assertIn("must be a string", str(e))


class CheckRelativePathTests(SynchronousTestCase):
    """
    L{checkRelativePath} refuses paths that would leave the roots and
    normalises the others.
    """

    def test_normalises(self) -> None:
        """
        Empty and C{.} components and a trailing C{/} go.
        """
        self.assertEqual(checkRelativePath("a//b"), "a/b")
        self.assertEqual(checkRelativePath("./a/./b/"), "a/b")
        self.assertEqual(checkRelativePath("top.sls"), "top.sls")

    def test_refusals(self) -> None:
        """
        Each trick is refused with a message naming the path and why.
        """
        cases = {
            "../etc/passwd": "'..' component",
            "a/../../b": "'..' component",
            "a/..": "'..' component",
            "/etc/passwd": "is absolute",
            "a\x00b": "NUL",
            "a\\..\\b": "backslash",
            "": "empty",
            "./": "names no file",
        }
        for path, why in cases.items():
            e = self.assertRaises(FileServerError, checkRelativePath, path)
            self.assertIn(why, str(e))
            if path:
                self.assertIn(repr(path), str(e))

    def test_notString(self) -> None:
        """
        A path that is not a string is refused.
        """
        self.assertRaises(FileServerError, checkRelativePath, None)

    def test_dotsInNamesAllowed(self) -> None:
        """
        C{..} inside a name is not a component.
        """
        self.assertEqual(checkRelativePath("a..b/..c"), "a..b/..c")

    @given(st.lists(st.sampled_from(["a", "b", ".", "..", "", "c.d"]), min_size=1, max_size=8))
    def test_neverLeaves(self, parts: list[str]) -> None:
        """
        Whatever is accepted has no C{..} component and is not absolute.
        """
        path = "/".join(parts)
        try:
            checked = checkRelativePath(path)
        except FileServerError:
            return
        self.assertNotIn("..", checked.split("/"))
        self.assertFalse(checked.startswith("/"))
        self.assertEqual(checkRelativePath(checked), checked)


class CheckPrefixTests(SynchronousTestCase):
    """
    L{checkPrefix} is L{checkRelativePath} allowing the empty prefix.
    """

    def test_empty(self) -> None:
        """
        C{""} and C{"."} are every file.
        """
        self.assertEqual(checkPrefix(""), "")
        self.assertEqual(checkPrefix("."), "")

    def test_trailingSlashKept(self) -> None:
        """
        C{web/} stays C{web/}; C{web} stays C{web}.
        """
        self.assertEqual(checkPrefix("web/"), "web/")
        self.assertEqual(checkPrefix("./web//"), "web/")
        self.assertEqual(checkPrefix("web"), "web")

    def test_refused(self) -> None:
        """
        Tricks are refused as in paths.
        """
        for prefix in ("..", "/etc", "a/../..", "a\x00"):
            self.assertRaises(FileServerError, checkPrefix, prefix)


class CheckSaltenvTests(SynchronousTestCase):
    """
    L{checkSaltenv} accepts saltenv names, git branch names included, and
    refuses path tricks.
    """

    def test_accepted(self) -> None:
        """
        Ordinary names and branch names with C{/} are accepted unchanged.
        """
        for name in ("base", "dev", "feature/x", "v1.0", "release-2024.01"):
            self.assertEqual(checkSaltenv(name), name)

    def test_refused(self) -> None:
        """
        Empty names, C{.} and C{..} components, slashes at either end,
        backslashes and control characters are refused, naming the saltenv.
        """
        for name in ("", ".", "..", "../base", "a/../b", "/base", "base/", "a//b", "a\\b", "a\nb"):
            e = self.assertRaises(FileServerError, checkSaltenv, name)
            if name:
                self.assertIn(repr(name), str(e))

    def test_notString(self) -> None:
        """
        A saltenv that is not a string is refused.
        """
        self.assertRaises(FileServerError, checkSaltenv, ["base"])


class IsServableNameTests(SynchronousTestCase):
    """
    L{isServableName} tells which names found on disk may be listed.
    """

    def test_names(self) -> None:
        """
        Backslashes and names that are not UTF-8 are not servable.
        """
        self.assertTrue(isServableName("a/b.sls"))
        self.assertTrue(isServableName("é/ü"))
        self.assertFalse(isServableName("a\\b"))
        self.assertFalse(isServableName("bad\udcff"))
