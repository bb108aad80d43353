# -*- test-case-name: tests.test_states_file -*-
"""
Tests for L{salttwist.states.file}: C{file.managed}.

A state context for the C{file} states' tests: a minion whose file client
is local (L{LocalFileClient}) over temporary C{file_roots}, with its own
cache directory, so that C{salt://} sources are fetched for real.
"""

from __future__ import annotations

import grp
import hashlib
import os
import pwd
from typing import Any

from twisted.trial.unittest import TestCase

from salttwist.blocking import runSynchronously
from salttwist.fileserver.client import LocalFileClient
from salttwist.fileserver.server import FileServer
from salttwist.modules.extmods import SaltFunctions
from salttwist.states import StateContext, loadStates
from salttwist.states._filewrite import defaultFileMode
from tests._statectx import makeLoaderContext, runState


def writeFile(path: str, data: bytes | str, mode: int | None = None) -> str:
    """
    Write C{data} to C{path}, making its parents.

    @return: C{path}.
    """
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "wb") as f:
        f.write(data.encode("utf-8") if isinstance(data, str) else data)
    if mode is not None:
        os.chmod(path, mode)
    return path


def readFile(path: str) -> bytes:
    """
    @return: the bytes of the file C{path}.
    """
    with open(path, "rb") as f:
        return f.read()


def fileMode(path: str) -> str:
    """
    @return: the mode of C{path} as Salt shows it (C{"0644"}).
    """
    return f"{os.stat(path).st_mode & 0o7777:04o}"


class FileStateTestCase(TestCase):
    """
    A temporary C{file_roots} (C{self.roots}, saltenv C{base}), a cache
    directory, and a directory C{self.dir} for the files states manage.
    """

    def setUp(self) -> None:
        """
        Make the temporary directories.
        """
        top = os.path.abspath(self.mktemp())
        self.roots = os.path.join(top, "srv")
        self.cachedir = os.path.join(top, "cache")
        self.dir = os.path.join(top, "managed")
        for directory in (self.roots, self.cachedir, self.dir):
            os.makedirs(directory)

    def path(self, *parts: str) -> str:
        """
        @return: a path under C{self.dir}.
        """
        return os.path.join(self.dir, *parts)

    def serve(self, relative: str, data: bytes | str) -> str:
        """
        Put a file on the file server.

        @return: its C{salt://} URL.
        """
        writeFile(os.path.join(self.roots, relative), data)
        return f"salt://{relative}"

    def context(
        self,
        *,
        test: bool = False,
        pillar: dict[str, Any] | None = None,
        grains: dict[str, Any] | None = None,
        opts: dict[str, Any] | None = None,
        low: dict[str, Any] | None = None,
    ) -> StateContext:
        """
        @return: a state context over the temporary file server.
        """
        allOpts = {
            "file_client": "local",
            "file_roots": {"base": [self.roots]},
            "cachedir": self.cachedir,
            "fileserver_backend": ["roots"],
        }
        allOpts.update(opts or {})
        loader = makeLoaderContext(allOpts, grains, pillar)
        loader.fileClient = LocalFileClient(
            FileServer.fromConfig(loader.opts), self.cachedir, runSynchronously
        )
        return StateContext(
            salt=SaltFunctions(loader),
            opts=loader.opts,
            grains=loader.grains,
            pillar=loader.pillar,
            test=test,
            saltenv="base",
            low=dict(low or {}),
            states=loadStates(),
            reactor=loader.reactor,
        )

    def state(
        self, function: str, *args: Any, ctx: StateContext | None = None, **kwargs: Any
    ) -> Any:
        """
        Run the state function C{file.<function>} in a thread.

        @return: a L{Deferred} firing with its state return.
        """
        return runState(f"file.{function}", *args, ctx=ctx or self.context(), **kwargs)


def sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


class ManagedContentsTests(FileStateTestCase):
    """
    C{file.managed} with C{contents}, C{contents_pillar} and C{contents_grains}.
    """

    async def test_newFile(self) -> None:
        """
        A new file gets the contents, one line each, and the umask's mode,
        with only Salt's C{New file} diff in the changes (no mode: it was
        made with the mode it should have); run again, it is in the
        correct state. With a C{mode}, that is a change too.
        """
        name = self.path("motd")
        ret = await self.state("managed", name, contents=["hello", "world"])
        self.assertEqual(readFile(name), b"hello\nworld\n")
        self.assertEqual(
            ret,
            {
                "name": name,
                "result": True,
                "comment": f"File {name} updated",
                "changes": {"diff": "New file"},
            },
        )
        self.assertEqual(f"{os.stat(name).st_mode & 0o7777:04o}", defaultFileMode())
        private = self.path("private")
        ret = await self.state("managed", private, contents="x", mode="0600")
        self.assertEqual(ret["changes"], {"diff": "New file", "mode": "0600"})
        self.assertEqual(os.stat(private).st_mode & 0o7777, 0o600)
        again = await self.state("managed", name, contents=["hello", "world"])
        self.assertEqual(again["changes"], {})
        self.assertEqual(again["comment"], f"File {name} is in the correct state")
        self.assertIs(again["result"], True)

    async def test_updateDiff(self) -> None:
        """
        Changed contents are written atomically (a new inode, no temporary
        file left) and reported as a unified diff, as Salt's.
        """
        name = writeFile(self.path("conf"), "a\nb\n", 0o600)
        inode = os.stat(name).st_ino
        ret = await self.state("managed", name, contents="a\nc")
        self.assertEqual(readFile(name), b"a\nc\n")
        self.assertEqual(ret["changes"], {"diff": "--- \n+++ \n@@ -1,2 +1,2 @@\n a\n-b\n+c\n"})
        self.assertEqual(ret["comment"], f"File {name} updated")
        self.assertNotEqual(os.stat(name).st_ino, inode)
        self.assertEqual(fileMode(name), "0600")
        self.assertEqual(os.listdir(self.dir), ["conf"])

    async def test_testMode(self) -> None:
        """
        In test mode nothing changes: a change is predicted as a diff with
        Salt's comment and a L{None} result; a new file as C{newfile}.
        """
        name = writeFile(self.path("conf"), "a\n")
        ctx = self.context(test=True)
        ret = await self.state("managed", name, contents="b", mode="0600", ctx=ctx)
        self.assertIsNone(ret["result"])
        self.assertEqual(
            ret["changes"], {"diff": "--- \n+++ \n@@ -1 +1 @@\n-a\n+b\n", "mode": "0600"}
        )
        self.assertEqual(
            ret["comment"],
            f"The file {name} is set to be changed\nNote: No changes made, actual changes may\n"
            "be different due to other states.",
        )
        self.assertEqual(readFile(name), b"a\n")
        new = self.path("new")
        ret = await self.state("managed", new, contents="x", ctx=ctx)
        self.assertIsNone(ret["result"])
        self.assertEqual(ret["changes"], {"newfile": new})
        self.assertFalse(os.path.exists(new))
        same = await self.state("managed", name, contents="a", ctx=ctx)
        self.assertIs(same["result"], True)
        self.assertEqual(same["comment"], f"The file {name} is in the correct state")

    async def test_contentsPillar(self) -> None:
        """
        C{contents_pillar} takes a nested key; a missing one fails naming it.
        """
        ctx = self.context(pillar={"ssh": {"key": "ssh-ed25519 AAAA"}})
        name = self.path("key")
        ret = await self.state("managed", name, contents_pillar="ssh:key", ctx=ctx)
        self.assertIs(ret["result"], True)
        self.assertEqual(readFile(name), b"ssh-ed25519 AAAA\n")
        missing = await self.state("managed", name, contents_pillar="ssh:nope", ctx=ctx)
        self.assertEqual(
            (missing["result"], missing["comment"]), (False, "Pillar ssh:nope does not exist")
        )

    async def test_contentsGrains(self) -> None:
        """
        C{contents_grains} writes a grain.
        """
        ctx = self.context(grains={"id": "m1", "os": "Debian"})
        name = self.path("os")
        ret = await self.state("managed", name, contents_grains="os", ctx=ctx)
        self.assertIs(ret["result"], True)
        self.assertEqual(readFile(name), b"Debian\n")

    async def test_contentsNewline(self) -> None:
        """
        C{contents_newline: False} leaves the last line without a newline.
        """
        name = self.path("n")
        await self.state("managed", name, contents="x", contents_newline=False)
        self.assertEqual(readFile(name), b"x")

    async def test_contentsTemplate(self) -> None:
        """
        C{contents} rendered as Jinja with C{context}, C{defaults} and grains.
        """
        ctx = self.context(grains={"id": "m1", "host": "web1"})
        name = self.path("t")
        ret = await self.state(
            "managed",
            name,
            contents="{{ greeting }} {{ who }} on {{ grains['host'] }}",
            template="jinja",
            defaults={"greeting": "hi", "who": "x"},
            context={"who": "you"},
            ctx=ctx,
        )
        self.assertIs(ret["result"], True, ret)
        self.assertEqual(readFile(name), b"hi you on web1\n")

    async def test_badArguments(self) -> None:
        """
        Salt's words for contradicting arguments, a relative path, a
        directory in the way, an empty contents refused.
        """
        name = self.path("x")
        both = await self.state("managed", name, source="salt://a", contents="b")
        self.assertEqual(
            both["comment"],
            "'source' cannot be used in combination with 'contents', 'contents_pillar', "
            "or 'contents_grains'",
        )
        relative = await self.state("managed", "relative/path", contents="b")
        self.assertEqual(
            relative["comment"], "Specified file relative/path is not an absolute path"
        )
        isdir = await self.state("managed", self.dir, contents="b")
        self.assertEqual(isdir["comment"], f"Specified target {self.dir} is a directory")
        empty = await self.state("managed", name, contents="", allow_empty=False)
        self.assertEqual(
            empty["comment"],
            "'contents' value would result in empty contents. Set allow_empty to True to "
            "allow the managed file to be empty.",
        )
        for ret in (both, relative, isdir, empty):
            self.assertIs(ret["result"], False)
        self.assertFalse(os.path.exists(name))

    async def test_emptyFile(self) -> None:
        """
        Neither source nor contents: an empty file is created
        (C{{"new": "file ... created"}}, C{Empty file}), an existing one is
        left alone.
        """
        name = self.path("empty")
        ret = await self.state("managed", name)
        self.assertEqual(ret["changes"]["new"], f"file {name} created")
        self.assertEqual(ret["comment"], "Empty file")
        self.assertEqual(readFile(name), b"")
        writeFile(name, "keep")
        again = await self.state("managed", name)
        self.assertEqual(
            again["comment"], f"File {name} exists with proper permissions. No changes made."
        )
        self.assertEqual(readFile(name), b"keep")

    async def test_createFalse(self) -> None:
        """
        C{create: False} does nothing when the file is absent.
        """
        name = self.path("absent")
        ret = await self.state("managed", name, contents="x", create=False)
        self.assertEqual(
            (ret["result"], ret["comment"]),
            (True, f"File {name} is not present and is not set for creation"),
        )
        self.assertFalse(os.path.exists(name))

    async def test_replaceFalse(self) -> None:
        """
        C{replace: False} keeps existing contents but manages the mode.
        """
        name = writeFile(self.path("r"), "old\n", 0o644)
        ret = await self.state("managed", name, contents="new", replace=False, mode="0600")
        self.assertEqual(readFile(name), b"old\n")
        self.assertEqual(ret["changes"], {"mode": "0600"})
        self.assertEqual(fileMode(name), "0600")
        test = await self.state(
            "managed",
            name,
            contents="new",
            replace=False,
            mode="0640",
            ctx=self.context(test=True),
        )
        self.assertEqual(
            test["comment"],
            f"File {name} will be updated with permissions 0640 from its current state of 0600",
        )
        self.assertIsNone(test["result"])

    async def test_owner(self) -> None:
        """
        C{user}, C{group} and C{mode} are set for real and reported; a
        missing user fails naming it.
        """
        name = self.path("owned")
        ret = await self.state(
            "managed", name, contents="x", user="nobody", group="nogroup", mode=640
        )
        self.assertIs(ret["result"], True, ret)
        self.assertEqual(
            ret["changes"],
            {"diff": "New file", "user": "nobody", "group": "nogroup", "mode": "0640"},
        )
        st = os.stat(name)
        self.assertEqual(
            (pwd.getpwuid(st.st_uid).pw_name, grp.getgrgid(st.st_gid).gr_name),
            ("nobody", "nogroup"),
        )
        self.assertEqual(fileMode(name), "0640")
        again = await self.state(
            "managed", name, contents="x", user="nobody", group="nogroup", mode="0640"
        )
        self.assertEqual(again["changes"], {})
        bad = await self.state("managed", name, contents="x", user="no-such-user-here")
        self.assertEqual(
            (bad["result"], bad["comment"].strip()),
            (False, "User no-such-user-here is not available"),
        )

    async def test_makedirs(self) -> None:
        """
        A missing parent fails without C{makedirs}; with it, the parents
        are made with C{dir_mode}.
        """
        name = self.path("a", "b", "file")
        ret = await self.state("managed", name, contents="x")
        self.assertEqual((ret["result"], ret["comment"]), (False, "Parent directory not present"))
        self.assertEqual(ret["changes"], {})
        ret = await self.state("managed", name, contents="x", makedirs=True, dir_mode="0700")
        self.assertIs(ret["result"], True, ret)
        self.assertEqual(fileMode(self.path("a")), "0700")
        self.assertEqual(fileMode(self.path("a", "b")), "0700")
        self.assertEqual(readFile(name), b"x\n")

    async def test_backupMinion(self) -> None:
        """
        C{backup: minion} copies the old file under
        C{cachedir/file_backup/<its directory>/<name>_<time stamp>}.
        """
        name = writeFile(self.path("b.conf"), "old\n")
        ret = await self.state("managed", name, contents="new", backup="minion")
        self.assertIs(ret["result"], True)
        backups = os.path.join(self.cachedir, "file_backup", self.dir.lstrip("/"))
        [saved] = os.listdir(backups)
        self.assertTrue(saved.startswith("b.conf_"), saved)
        self.assertEqual(readFile(os.path.join(backups, saved)), b"old\n")

    async def test_showChanges(self) -> None:
        """
        C{show_changes: False} hides the diff.
        """
        name = writeFile(self.path("s"), "a\n")
        ret = await self.state("managed", name, contents="b", show_changes=False)
        self.assertEqual(ret["changes"], {"diff": "<show_changes=False>"})

    async def test_binary(self) -> None:
        """
        Binary contents are not diffed: Salt's words say what happened.
        """
        name = writeFile(self.path("bin"), b"\x00\x01\x02")
        source = writeFile(os.path.join(self.roots, "bin"), b"\x00\x03")
        ret = await self.state("managed", name, source=source)
        self.assertEqual(ret["changes"], {"diff": "Replace binary file"})
        self.assertEqual(readFile(name), b"\x00\x03")
        text = writeFile(self.path("text"), "hello\n")
        ret = await self.state("managed", text, source=source)
        self.assertEqual(ret["changes"], {"diff": "Replace text file with binary file"})

    async def test_followSymlinks(self) -> None:
        """
        A symlink is followed: its target gets the contents. With
        C{follow_symlinks: False} it becomes a regular file.
        """
        target = writeFile(self.path("target"), "a\n")
        link = self.path("link")
        os.symlink(target, link)
        ret = await self.state("managed", link, contents="b")
        self.assertIs(ret["result"], True)
        self.assertTrue(os.path.islink(link))
        self.assertEqual(readFile(target), b"b\n")
        ret = await self.state("managed", link, contents="c", follow_symlinks=False)
        self.assertEqual(ret["changes"]["diff"], "Replace symbolic link with regular file")
        self.assertFalse(os.path.islink(link))
        self.assertEqual((readFile(link), readFile(target)), (b"c\n", b"b\n"))

    async def test_checkCmd(self) -> None:
        """
        C{check_cmd} must accept the new file before it replaces the old.
        """
        name = writeFile(self.path("c"), "good\n")
        ret = await self.state("managed", name, contents="bad", check_cmd="grep -q good")
        self.assertIs(ret["result"], False)
        self.assertTrue(ret["comment"].startswith("check_cmd execution failed"), ret)
        self.assertEqual(readFile(name), b"good\n")
        ret = await self.state("managed", name, contents="good too", check_cmd="grep -q good")
        self.assertIs(ret["result"], True, ret)
        self.assertEqual(readFile(name), b"good too\n")
        self.assertEqual(os.listdir(self.dir), ["c"])

    async def test_cannotWrite(self) -> None:
        """
        A directory where files cannot be created (sysfs refuses even root)
        fails the state naming it; nothing is reported changed.
        """
        name = "/sys/salttwist-file-state-test"
        ret = await self.state("managed", name, contents="x")
        self.assertEqual(
            ret,
            {
                "name": name,
                "result": False,
                "changes": {},
                "comment": "Failed to commit change: cannot write in /sys: Permission denied",
            },
        )
        self.assertFalse(os.path.exists(name))

    async def test_danglingSymlink(self) -> None:
        """
        A dangling symlink is followed: its target is created.
        """
        target = self.path("real")
        link = self.path("dangling")
        os.symlink(target, link)
        ret = await self.state("managed", link, contents="x")
        self.assertIs(ret["result"], True, ret)
        self.assertEqual(ret["changes"]["diff"], "New file")
        self.assertTrue(os.path.islink(link))
        self.assertEqual(readFile(target), b"x\n")
