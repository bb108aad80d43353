# -*- test-case-name: tests.test_modules_file -*-
"""
Tests for L{salttwist.modules.filemod} (Salt's C{file}), on files in
temporary directories.
"""

from __future__ import annotations

import grp
import hashlib
import os
import pwd
import re
import stat

from twisted.trial.unittest import SynchronousTestCase

from salttwist.modules import CommandExecutionError, SaltInvocationError, filemod, loadFunctions


class FileTests(SynchronousTestCase):
    """
    The C{file} functions, each against a fresh directory.
    """

    def setUp(self) -> None:
        """
        A new empty directory.
        """
        self.dir = os.path.abspath(self.mktemp())
        os.makedirs(self.dir)

    def path(self, *parts: str) -> str:
        """
        @return: a path in the test directory.
        """
        return os.path.join(self.dir, *parts)

    def makeFile(self, name: str, contents: str = "") -> str:
        """
        @return: the path of a new file with C{contents}.
        """
        path = self.path(name)
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with open(path, "w") as f:
            f.write(contents)
        return path

    def test_loadedAsFile(self) -> None:
        """
        The module loads as C{file}, all its functions in threads.
        """
        functions = loadFunctions()
        for name in (
            "read",
            "write",
            "touch",
            "file_exists",
            "directory_exists",
            "stats",
            "remove",
            "mkdir",
            "get_hash",
            "find",
            "replace",
        ):
            self.assertIn(f"file.{name}", functions)
            self.assertFalse(getattr(functions[f"file.{name}"], "runsOnReactor", False))

    def test_writeRead(self) -> None:
        """
        C{file.write} writes each argument as a line and says how many;
        C{file.read} returns the text, or bytes with C{binary=True}.
        """
        path = self.path("motd")
        self.assertEqual(filemod.write(path, "one", "two"), f'Wrote 2 lines to "{path}"')
        self.assertEqual(filemod.read(path), "one\ntwo\n")
        self.assertEqual(filemod.read(path, binary=True), b"one\ntwo\n")
        self.assertEqual(filemod.write(path, args=["x"]), f'Wrote 1 lines to "{path}"')
        self.assertEqual(filemod.read(path), "x\n")
        self.assertRaises(SaltInvocationError, filemod.write, path, "a", mode="w")

    def test_readMissing(self) -> None:
        """
        Reading a missing file is an error naming it.
        """
        error = self.assertRaises(CommandExecutionError, filemod.read, self.path("none"))
        self.assertIn(self.path("none"), str(error))

    def test_touch(self) -> None:
        """
        C{file.touch} creates a missing file and sets its times.
        """
        path = self.path("t")
        self.assertIs(filemod.touch(path), True)
        self.assertTrue(os.path.isfile(path))
        self.assertIs(filemod.touch(path, atime=1000, mtime=2000), True)
        self.assertEqual((os.stat(path).st_atime, os.stat(path).st_mtime), (1000, 2000))
        filemod.touch(path, mtime=3000)
        self.assertEqual(os.stat(path).st_mtime, 3000)
        self.assertRaises(SaltInvocationError, filemod.touch, path, atime="soon")
        self.assertRaises(CommandExecutionError, filemod.touch, self.path("no", "dir", "f"))

    def test_exists(self) -> None:
        """
        C{file.file_exists} and C{file.directory_exists} tell files from
        directories.
        """
        path = self.makeFile("f")
        self.assertTrue(filemod.file_exists(path))
        self.assertFalse(filemod.file_exists(self.dir))
        self.assertTrue(filemod.directory_exists(self.dir))
        self.assertFalse(filemod.directory_exists(path))
        self.assertFalse(filemod.file_exists(self.path("missing")))

    def test_stats(self) -> None:
        """
        C{file.stats} gives Salt's keys: the mode as four octal digits, the
        type, owner names, the real path, and a hash with C{hash_type}.
        """
        path = self.makeFile("s", "abc")
        os.chmod(path, 0o640)
        result = filemod.stats(path, hash_type="md5")
        self.assertEqual(
            sorted(result),
            sorted(
                [
                    "inode",
                    "uid",
                    "gid",
                    "user",
                    "group",
                    "atime",
                    "mtime",
                    "ctime",
                    "size",
                    "mode",
                    "type",
                    "target",
                    "sum",
                ]
            ),
        )
        self.assertEqual((result["mode"], result["type"], result["size"]), ("0640", "file", 3))
        self.assertEqual(result["sum"], hashlib.md5(b"abc").hexdigest())
        self.assertEqual(result["uid"], os.getuid())
        self.assertEqual(filemod.stats(self.dir)["type"], "dir")

    def test_statsLink(self) -> None:
        """
        A symlink is followed unless C{follow_symlinks=False}; a broken one
        still has stats; a missing path is Salt's "Path not found".
        """
        target = self.makeFile("target", "x")
        link = self.path("link")
        os.symlink(target, link)
        self.assertEqual(filemod.stats(link)["type"], "file")
        self.assertEqual(filemod.stats(link, follow_symlinks=False)["type"], "link")
        self.assertEqual(filemod.stats(link)["target"], os.path.realpath(target))
        broken = self.path("broken")
        os.symlink(self.path("nowhere"), broken)
        self.assertEqual(filemod.stats(broken)["type"], "link")
        error = self.assertRaises(CommandExecutionError, filemod.stats, self.path("nope"))
        self.assertEqual(str(error), f"Path not found: {self.path('nope')}")

    def test_remove(self) -> None:
        """
        C{file.remove} removes a file, a symlink or a whole tree, returns
        C{False} when nothing is there, and refuses a relative path.
        """
        path = self.makeFile("d/e/f", "x")
        self.assertIs(filemod.remove(path), True)
        self.assertFalse(os.path.exists(path))
        self.assertIs(filemod.remove(self.path("d")), True)
        self.assertFalse(os.path.exists(self.path("d")))
        self.assertIs(filemod.remove(self.path("d")), False)
        error = self.assertRaises(SaltInvocationError, filemod.remove, "relative")
        self.assertEqual(str(error), "File path must be absolute: relative")

    def test_mkdir(self) -> None:
        """
        C{file.mkdir} creates the directory and its parents with C{mode};
        an existing directory is fine.
        """
        path = self.path("a", "b", "c")
        self.assertIs(filemod.mkdir(path, mode="750"), True)
        self.assertTrue(os.path.isdir(path))
        self.assertEqual(stat.S_IMODE(os.stat(path).st_mode), 0o750)
        self.assertEqual(stat.S_IMODE(os.stat(self.path("a")).st_mode), 0o750)
        self.assertIs(filemod.mkdir(path), True)
        self.assertRaises(SaltInvocationError, filemod.mkdir, "rel/dir")
        self.assertRaises(SaltInvocationError, filemod.mkdir, self.path("x"), mode="rwx")
        self.assertRaises(CommandExecutionError, filemod.mkdir, self.path("y"), user="no-such-u")

    def test_mkdirOwner(self) -> None:
        """
        As root, C{user} and C{group} own the new directories.
        """
        if os.geteuid() != 0:
            raise self.skipTest("needs root")
        path = self.path("owned", "dir")
        filemod.mkdir(path, user="nobody", group="nogroup")
        self.assertEqual(os.stat(path).st_uid, pwd.getpwnam("nobody").pw_uid)
        self.assertEqual(os.stat(path).st_gid, grp.getgrnam("nogroup").gr_gid)

    def test_getHash(self) -> None:
        """
        C{file.get_hash} is SHA-256 by default, or the C{form} asked for;
        an unknown form is refused.
        """
        path = self.makeFile("h", "hello")
        self.assertEqual(filemod.get_hash(path), hashlib.sha256(b"hello").hexdigest())
        for form in ("md5", "sha1", "sha512"):
            self.assertEqual(filemod.get_hash(path, form), hashlib.new(form, b"hello").hexdigest())
        self.assertEqual(filemod.get_hash(path, chunk_size=2), hashlib.sha256(b"hello").hexdigest())
        error = self.assertRaises(SaltInvocationError, filemod.get_hash, path, "crc32")
        self.assertEqual(str(error), "Invalid hash type: crc32")
        self.assertRaises(CommandExecutionError, filemod.get_hash, self.path("none"))

    def test_find(self) -> None:
        """
        C{file.find} matches names by glob, types by letter, limits depth,
        and returns sorted paths; the root itself is depth 0.
        """
        for name in ("a.conf", "sub/b.conf", "sub/c.txt", "sub/deep/d.conf"):
            self.makeFile(name)
        found = filemod.find(self.dir, name="*.conf")
        self.assertEqual(
            found, [self.path("a.conf"), self.path("sub/b.conf"), self.path("sub/deep/d.conf")]
        )
        self.assertEqual(filemod.find(self.dir, name="*.conf", maxdepth=1), [self.path("a.conf")])
        self.assertEqual(
            filemod.find(self.dir, name="*.conf", mindepth=2, maxdepth=2),
            [self.path("sub/b.conf")],
        )
        self.assertEqual(
            filemod.find(self.dir, type="d"), [self.dir, self.path("sub"), self.path("sub/deep")]
        )
        self.assertEqual(
            filemod.find(self.dir, type="d", mindepth=1, maxdepth=1), [self.path("sub")]
        )
        self.assertEqual(filemod.find(self.dir, iname="C.TXT"), [self.path("sub/c.txt")])
        self.assertEqual(
            filemod.find(self.dir, regex=r".*/deep/.*"), [self.path("sub/deep/d.conf")]
        )
        self.assertEqual(filemod.find(self.dir, maxdepth=0), [self.dir])

    def test_findGlobRoot(self) -> None:
        """
        The C{path} of C{file.find} may be a glob.
        """
        self.makeFile("x1/f")
        self.makeFile("x2/f")
        self.assertEqual(
            filemod.find(self.path("x*"), type="f"), [self.path("x1/f"), self.path("x2/f")]
        )

    def test_findBadOptions(self) -> None:
        """
        Unknown options and types are refused, naming what is supported.
        """
        error = self.assertRaises(SaltInvocationError, filemod.find, self.dir, colour="red")
        self.assertIn("colour", str(error))
        self.assertRaises(SaltInvocationError, filemod.find, self.dir, type="z")
        self.assertRaises(SaltInvocationError, filemod.find, self.dir, maxdepth="deep")


class ReplaceTests(SynchronousTestCase):
    """
    C{file.replace} edits a file with a regular expression, as Salt's does.
    """

    def setUp(self) -> None:
        """
        A file with three lines.
        """
        self.path = os.path.abspath(self.mktemp())
        with open(self.path, "w") as f:
            f.write("LogLevel warn\nName web\nLogLevel warn\n")

    def contents(self, path: str | None = None) -> str:
        """
        @return: the text of the file (or of C{path}).
        """
        with open(path or self.path) as f:
            return f.read()

    def test_diff(self) -> None:
        """
        The default return is the unified diff; the original is kept as
        C{.bak}.
        """
        diff = filemod.replace(self.path, "LogLevel warn", "LogLevel info")
        self.assertEqual(self.contents(), "LogLevel info\nName web\nLogLevel info\n")
        self.assertIn("-LogLevel warn\n", diff)
        self.assertIn("+LogLevel info\n", diff)
        self.assertTrue(diff.startswith("--- \n+++ \n@@"), diff)
        self.assertEqual(
            self.contents(self.path + ".bak"), "LogLevel warn\nName web\nLogLevel warn\n"
        )

    def test_noChange(self) -> None:
        """
        A pattern that is not found changes nothing: an empty diff, or
        C{False} without C{show_changes}, and no backup.
        """
        self.assertEqual(filemod.replace(self.path, "absent", "x"), "")
        self.assertIs(filemod.replace(self.path, "absent", "x", show_changes=False), False)
        self.assertFalse(os.path.exists(self.path + ".bak"))

    def test_showChangesFalse(self) -> None:
        """
        With C{show_changes=False} the return is whether the file changed.
        """
        self.assertIs(filemod.replace(self.path, "web", "db", show_changes=False), True)
        self.assertIn("Name db", self.contents())

    def test_count(self) -> None:
        """
        C{count} limits the replacements.
        """
        filemod.replace(self.path, "warn", "info", count=1, backup=False)
        self.assertEqual(self.contents(), "LogLevel info\nName web\nLogLevel warn\n")
        self.assertFalse(os.path.exists(self.path + ".bak"))

    def test_flags(self) -> None:
        """
        C{flags} takes C{re} flag names or a number; the default is
        MULTILINE (8).
        """
        filemod.replace(self.path, "^name", "Host", flags=["IGNORECASE", "MULTILINE"])
        self.assertIn("Host web", self.contents())
        filemod.replace(self.path, "^loglevel", "Level", flags=re.I | re.M)
        self.assertEqual(self.contents().count("Level"), 2)
        self.assertRaises(SaltInvocationError, filemod.replace, self.path, "a", "b", flags=["NOPE"])

    def test_groups(self) -> None:
        """
        The replacement may refer to the pattern's groups.
        """
        filemod.replace(self.path, r"^Name (\w+)$", r"Name \1-1")
        self.assertIn("Name web-1\n", self.contents())

    def test_searchOnly(self) -> None:
        """
        C{search_only=True} says whether the pattern is there and changes
        nothing.
        """
        before = self.contents()
        self.assertIs(filemod.replace(self.path, "web", "x", search_only=True), True)
        self.assertIs(filemod.replace(self.path, "nope", "x", search_only=True), False)
        self.assertEqual(self.contents(), before)

    def test_dryRun(self) -> None:
        """
        C{dry_run=True} returns the diff without writing.
        """
        before = self.contents()
        diff = filemod.replace(self.path, "web", "db", dry_run=True)
        self.assertIn("+Name db", diff)
        self.assertEqual(self.contents(), before)

    def test_appendIfNotFound(self) -> None:
        """
        C{append_if_not_found} adds the content as a last line once, and
        not again on the next run.
        """
        filemod.replace(self.path, "^Port .*", "Port 22", append_if_not_found=True)
        self.assertTrue(self.contents().endswith("LogLevel warn\nPort 22\n"))
        self.assertEqual(
            filemod.replace(self.path, "^Port 2$", "Port 22", append_if_not_found=True), ""
        )
        self.assertEqual(self.contents().count("Port 22"), 1)

    def test_prependIfNotFound(self) -> None:
        """
        C{prepend_if_not_found} puts C{not_found_content} first.
        """
        filemod.replace(
            self.path, "^# x", "unused", prepend_if_not_found=True, not_found_content="# head"
        )
        self.assertTrue(self.contents().startswith("# head\nLogLevel warn\n"))

    def test_keepsInodeAndMode(self) -> None:
        """
        The file is rewritten in place: same inode, same mode.
        """
        os.chmod(self.path, 0o600)
        inode = os.stat(self.path).st_ino
        filemod.replace(self.path, "web", "db")
        self.assertEqual(os.stat(self.path).st_ino, inode)
        self.assertEqual(stat.S_IMODE(os.stat(self.path).st_mode), 0o600)

    def test_errors(self) -> None:
        """
        A missing file is Salt's "File not found" unless
        C{ignore_if_missing}; a binary file and conflicting options are
        refused.
        """
        missing = self.path + ".none"
        error = self.assertRaises(SaltInvocationError, filemod.replace, missing, "a", "b")
        self.assertEqual(str(error), f"File not found: {missing}")
        self.assertIs(filemod.replace(missing, "a", "b", ignore_if_missing=True), False)
        binary = self.path + ".bin"
        with open(binary, "wb") as f:
            f.write(b"\x00\x01abc")
        error = self.assertRaises(SaltInvocationError, filemod.replace, binary, "a", "b")
        self.assertIn("binary file", str(error))
        self.assertRaises(
            SaltInvocationError,
            filemod.replace,
            self.path,
            "a",
            "b",
            append_if_not_found=True,
            prepend_if_not_found=True,
        )
        self.assertRaises(
            SaltInvocationError,
            filemod.replace,
            self.path,
            "a",
            "b",
            search_only=True,
            append_if_not_found=True,
        )
        self.assertRaises(SaltInvocationError, filemod.replace, self.path, "(", "b")
