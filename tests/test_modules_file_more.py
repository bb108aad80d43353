# -*- test-case-name: tests.test_modules_file_more -*-
"""
Tests for the functions of L{salttwist.modules.filemod} (Salt's C{file})
the file states use: owners and modes, C{check_perms}, hashes, diffs,
searching, links and copies, directories, and line editing, on real files
in temporary directories (owners changed for real: the tests run as root).
"""

from __future__ import annotations

import grp
import hashlib
import os
import pwd

from twisted.trial.unittest import SynchronousTestCase

from salttwist.modules import CommandExecutionError, SaltInvocationError, filemod, loadFunctions
from salttwist.modules.extmods import SaltFunctions
from tests._statectx import makeLoaderContext


class FileModuleTestCase(SynchronousTestCase):
    """
    A fresh directory for each test.
    """

    def setUp(self) -> None:
        self.dir = os.path.abspath(self.mktemp())
        os.makedirs(self.dir)

    def make(self, name: str, data: str = "", mode: int | None = None) -> str:
        path = os.path.join(self.dir, name)
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with open(path, "w") as f:
            f.write(data)
        if mode is not None:
            os.chmod(path, mode)
        return path

    def read(self, path: str) -> str:
        with open(path) as f:
            return f.read()


class LoadedTests(SynchronousTestCase):
    """
    The new functions load under Salt's names.
    """

    def test_names(self) -> None:
        """
        C{file.check_perms}, C{file.makedirs} (from C{makedirs_}) and the
        others are there; private helpers are not.
        """
        functions = loadFunctions()
        for name in (
            "check_perms",
            "get_diff",
            "line",
            "blockreplace",
            "comment_line",
            "append",
            "prepend",
            "symlink",
            "copy",
            "chown",
            "set_mode",
            "get_mode",
            "get_user",
            "get_group",
            "user_to_uid",
            "group_to_gid",
            "check_hash",
            "makedirs",
            "search",
            "contains",
            "readlink",
            "is_link",
            "rmdir",
            "lstat",
        ):
            self.assertIn(f"file.{name}", functions)
        self.assertNotIn("file._checkPerms", functions)


class OwnerModeTests(FileModuleTestCase):
    """
    Users, groups and modes.
    """

    def test_ids(self) -> None:
        """
        Names to ids and back; a missing name is C{''}, as Salt's.
        """
        self.assertEqual(filemod.user_to_uid("nobody"), pwd.getpwnam("nobody").pw_uid)
        self.assertEqual(filemod.group_to_gid("nogroup"), grp.getgrnam("nogroup").gr_gid)
        self.assertEqual(filemod.user_to_uid("no-such-user-x"), "")
        self.assertEqual(filemod.group_to_gid("no-such-group-x"), "")
        self.assertEqual(filemod.uid_to_user(0), "root")
        self.assertEqual(filemod.gid_to_group(0), "root")

    def test_chownAndMode(self) -> None:
        """
        C{chown}, C{set_mode} and the getters on a real file.
        """
        path = self.make("f", "x", 0o600)
        self.assertIsNone(filemod.chown(path, "nobody", "nogroup"))
        self.assertEqual((filemod.get_user(path), filemod.get_group(path)), ("nobody", "nogroup"))
        self.assertEqual(filemod.set_mode(path, 755), "0755")
        self.assertEqual(filemod.get_mode(path), "0755")
        self.assertEqual(filemod.chown(path, "no-such-user-x", None), "User does not exist")
        self.assertEqual(filemod.get_mode(os.path.join(self.dir, "none")), "")
        self.assertIs(filemod.get_user(os.path.join(self.dir, "none")), False)

    def test_checkPerms(self) -> None:
        """
        C{check_perms} changes owner and mode and reports it; with the
        C{test} option it only reports (result L{None}).
        """
        path = self.make("f", "x", 0o644)
        test = makeLoaderContext(opts={"test": True})
        ret, perms = filemod.check_perms(test, path, None, "nobody", None, "0600")
        self.assertEqual(ret["changes"], {"user": "nobody", "mode": "0600"})
        self.assertIsNone(ret["result"])
        self.assertEqual(perms["lmode"], "0644")
        self.assertEqual(filemod.get_mode(path), "0644")
        real = makeLoaderContext()
        ret, _ = filemod.check_perms(real, path, None, "nobody", "nogroup", 600)
        self.assertEqual(
            ret,
            {
                "name": path,
                "changes": {"user": "nobody", "group": "nogroup", "mode": "0600"},
                "comment": "",
                "result": True,
            },
        )
        self.assertEqual(filemod.get_mode(path), "0600")
        self.assertEqual(filemod.get_user(path), "nobody")
        self.assertRaises(
            CommandExecutionError,
            filemod.check_perms,
            real,
            os.path.join(self.dir, "none"),
            None,
            None,
            None,
            None,
        )


class HashDiffSearchTests(FileModuleTestCase):
    """
    Hashes, diffs and searches.
    """

    def test_checkHash(self) -> None:
        """
        C{check_hash} takes C{type=hex}, C{type:hex} or a bare digest.
        """
        path = self.make("f", "data")
        digest = hashlib.sha256(b"data").hexdigest()
        self.assertTrue(filemod.check_hash(path, f"sha256={digest}"))
        self.assertTrue(filemod.check_hash(path, f"sha256:{digest}"))
        self.assertTrue(filemod.check_hash(path, digest))
        self.assertTrue(filemod.check_hash(path, hashlib.md5(b"data").hexdigest()))
        self.assertFalse(filemod.check_hash(path, "0" * 64))
        self.assertRaises(SaltInvocationError, filemod.check_hash, path, "abc")

    def test_getDiff(self) -> None:
        """
        C{get_diff} gives a unified diff naming the files, Salt's words for
        binary files, C{''} for equal files; missing files fail.
        """
        a = self.make("a", "1\n2\n")
        b = self.make("b", "1\n3\n")
        self.assertEqual(filemod.get_diff(a, b), f"--- {a}\n+++ {b}\n@@ -1,2 +1,2 @@\n 1\n-2\n+3\n")
        self.assertEqual(filemod.get_diff(a, b, show_filenames=False)[:8], "--- \n+++")
        self.assertEqual(filemod.get_diff(a, a), "")
        binary = os.path.join(self.dir, "bin")
        with open(binary, "wb") as f:
            f.write(b"\x00\x01")
        self.assertEqual(filemod.get_diff(a, binary), "Replace text file with binary file")
        self.assertRaises(CommandExecutionError, filemod.get_diff, a, "/no/such")

    def test_search(self) -> None:
        """
        C{search}, C{contains}, C{contains_regex}, C{contains_glob}.
        """
        path = self.make("f", "alpha\nbeta gamma\n")
        self.assertTrue(filemod.search(path, "^beta"))
        self.assertFalse(filemod.search(path, "^gamma"))
        self.assertTrue(filemod.search(path, "alpha.beta", multiline=True))
        self.assertTrue(filemod.contains(path, "a gam"))
        self.assertTrue(filemod.contains_regex(path, "^be"))
        self.assertTrue(filemod.contains_glob(path, "*gamma*"))
        self.assertFalse(filemod.contains(os.path.join(self.dir, "none"), "x"))


class LinkCopyDirTests(FileModuleTestCase):
    """
    Links, copies and directories.
    """

    def test_symlink(self) -> None:
        """
        C{symlink}, C{is_link}, C{readlink}; an existing link to another
        target needs C{force}.
        """
        link = os.path.join(self.dir, "l")
        self.assertTrue(filemod.symlink("/etc", link))
        self.assertTrue(filemod.is_link(link))
        self.assertEqual(filemod.readlink(link), "/etc")
        self.assertRaises(CommandExecutionError, filemod.symlink, "/tmp", link)
        self.assertTrue(filemod.symlink("/tmp", link, force=True))
        self.assertEqual(os.readlink(link), "/tmp")
        self.assertRaises(SaltInvocationError, filemod.readlink, self.make("plain"))

    def test_copyRmdirLstat(self) -> None:
        """
        C{copy} (a file, a tree with C{recurse}), C{rmdir} of empty
        directories, C{lstat}, C{makedirs}.
        """
        src = self.make("tree/a", "a", 0o640)
        dst = os.path.join(self.dir, "copy")
        self.assertTrue(filemod.copy(src, dst))
        self.assertEqual((self.read(dst), filemod.get_mode(dst)), ("a", "0640"))
        self.assertRaises(SaltInvocationError, filemod.copy, os.path.dirname(src), dst + "2")
        self.assertTrue(filemod.copy(os.path.dirname(src), dst + "2", recurse=True))
        self.assertEqual(self.read(os.path.join(dst + "2", "a")), "a")
        self.assertEqual(filemod.lstat(src)["st_size"], 1)
        deep = os.path.join(self.dir, "x", "y", "z") + "/"
        self.assertTrue(filemod.makedirs_(deep))
        self.assertTrue(os.path.isdir(deep))
        self.assertEqual(filemod.makedirs_(deep), f"Directory '{deep.rstrip('/')}' already exists")
        self.assertTrue(filemod.rmdir(os.path.join(self.dir, "x"), recurse=True))
        self.assertFalse(os.path.exists(os.path.join(self.dir, "x")))


class LineEditTests(FileModuleTestCase):
    """
    C{line}, C{blockreplace}, C{comment_line}, C{append}, C{prepend}.
    """

    def test_line(self) -> None:
        """
        C{line} returns the diff; with the C{test} option it writes nothing.
        """
        path = self.make("f", "a\nb\n")
        test = makeLoaderContext(opts={"test": True})
        diff = filemod.line(test, path, "c", mode="insert", location="end")
        self.assertEqual(diff, "--- \n+++ \n@@ -1,2 +1,3 @@\n a\n b\n+c\n")
        self.assertEqual(self.read(path), "a\nb\n")
        real = makeLoaderContext()
        filemod.line(real, path, "c", mode="ensure", before="^b")
        self.assertEqual(self.read(path), "a\nc\nb\n")
        self.assertIs(filemod.line(real, path, "c", mode="ensure", before="^b"), False)
        self.assertRaises(CommandExecutionError, filemod.line, real, path, "c", mode="bogus")

    def test_blockreplace(self) -> None:
        """
        C{blockreplace} with C{dry_run}, C{prepend_if_not_found}, and the
        unterminated-block error.
        """
        path = self.make("f", "x\n")
        diff = filemod.blockreplace(
            path, "#S", "#E", "v=1\n", prepend_if_not_found=True, dry_run=True
        )
        self.assertEqual(diff, "--- \n+++ \n@@ -1 +1,4 @@\n+#S\n+v=1\n+#E\n x\n")
        self.assertEqual(self.read(path), "x\n")
        filemod.blockreplace(path, "#S", "#E", "v=1\n", prepend_if_not_found=True, backup=False)
        self.assertEqual(self.read(path), "#S\nv=1\n#E\nx\n")
        broken = self.make("g", "#S\nv\n")
        self.assertRaises(CommandExecutionError, filemod.blockreplace, broken, "#S", "#E", "w")

    def test_commentAppendPrepend(self) -> None:
        """
        C{comment_line} both ways; C{append} adds a missing final newline
        first; C{prepend}.
        """
        path = self.make("f", "a=1\nb=2")
        self.assertEqual(
            filemod.comment_line(path, "^a=", backup=False),
            "--- \n+++ \n@@ -1 +1 @@\n-a=1\n+#a=1\n",
        )
        self.assertIs(filemod.comment_line(path, "^zzz"), False)
        filemod.comment_line(path, "a=", cmnt=False, backup=False)
        self.assertEqual(self.read(path), "a=1\nb=2")
        filemod.append(path, "c=3")
        filemod.prepend(path, args=["# top"])
        self.assertEqual(self.read(path), "# top\na=1\nb=2\nc=3\n")


class BackupTests(FileModuleTestCase):
    """
    C{list_backups}, C{restore_backup} and C{delete_backup} over the
    backups C{file.managed} makes with C{backup: minion}.
    """

    def test_backups(self) -> None:
        """
        Backups are listed newest first, restored (the current file backed
        up first) and deleted.
        """
        cachedir = os.path.join(self.dir, "cache")
        context = makeLoaderContext(opts={"cachedir": cachedir})
        path = self.make("etc/motd", "one")
        root = os.path.join(cachedir, "file_backup")
        filemod._backupMinion(path, root)
        with open(path, "w") as f:
            f.write("two")
        backups = filemod.list_backups(context, path)
        self.assertEqual(list(backups), [0])
        self.assertEqual(backups[0]["Size"], 3)
        self.assertTrue(backups[0]["Location"].startswith(os.path.join(root, self.dir.lstrip("/"))))
        ret = filemod.restore_backup(context, path, 0)
        self.assertIs(ret["result"], True, ret)
        self.assertEqual(self.read(path), "one")
        self.assertEqual(len(filemod.list_backups(context, path)), 2)
        self.assertEqual(
            filemod.restore_backup(context, path, "x"),
            {"result": False, "comment": "Invalid backup_id 'x'"},
        )
        self.assertEqual(
            filemod.delete_backup(context, path, 7)["comment"],
            f"backup_id '7' does not exist for {path}",
        )
        self.assertIs(filemod.delete_backup(context, path, 0)["result"], True)
        self.assertEqual(len(filemod.list_backups(context, path)), 1)
        self.assertIn("file.list_backup", loadFunctions())


class SourceFunctionTests(FileModuleTestCase):
    """
    C{source_list}, C{get_source_sum} and C{apply_template_on_contents}.
    """

    def test_sources(self) -> None:
        """
        The first existing local source is chosen; hashes are parsed from a
        digest or a local file of hashes.
        """
        context = makeLoaderContext()
        present = self.make("present", "x")
        self.assertEqual(
            filemod.source_list(context, ["/no/such", {present: "md5=" + "a" * 32}], "", "base"),
            [present, "md5=" + "a" * 32],
        )
        self.assertRaises(
            CommandExecutionError, filemod.source_list, context, ["/no/such"], "", "base"
        )
        sums = self.make("SUMS", f"{'b' * 64}  app.tgz\n")
        self.assertEqual(
            filemod.get_source_sum(context, "/opt/app.tgz", "http://h/app.tgz", sums),
            {"hash_type": "sha256", "hsum": "b" * 64},
        )

    def test_template(self) -> None:
        """
        Contents rendered with grains and the caller's context over defaults.
        """
        context = makeLoaderContext(grains={"id": "m5"})
        self.assertEqual(
            filemod.apply_template_on_contents(
                context,
                "{{ grains['id'] }} {{ a }} {{ b }}",
                "jinja",
                context={"a": 1},
                defaults={"a": 0, "b": 2},
            ),
            "m5 1 2",
        )
        self.assertRaises(
            CommandExecutionError, filemod.apply_template_on_contents, context, "{{ x( }}", "jinja"
        )
        self.assertEqual(
            filemod.apply_template_on_contents(context, "{{ a }}", "jinja", {"a": 3}, None, "base"),
            "3",
        )
        salt = SaltFunctions(context)
        context.functions = loadFunctions()
        self.assertEqual(
            salt["file.apply_template_on_contents"]("{{ a }}", "jinja", context={"a": 4}), "4"
        )
