# -*- test-case-name: tests.test_modules_cp -*-
"""
Tests for L{salttwist.modules.cp}, Salt's C{cp} module.

The file server is real: a master's file room (L{FileRequests}) over
temporary C{file_roots}, reached by a minion's L{RemoteFileClient} through
L{tests.test_fileclient.RoomRequests} (the room's methods called as a
session request would), with a real cache directory. Blocking work runs
synchronously (the loader context's reactor is a L{Clock}, which has no
thread pool), so every function completes before it returns.

C{cp.get_url} of C{http://} URLs runs against a real twisted.web server on
127.0.0.1 (an OS-chosen port) with the real reactor and its threads.
"""

from __future__ import annotations

import base64
import gzip
import hashlib
import os
import stat
from typing import Any

from twisted.internet import reactor
from twisted.internet.defer import CancelledError, Deferred, inlineCallbacks
from twisted.internet.task import Clock, deferLater
from twisted.trial.unittest import SynchronousTestCase, TestCase
from twisted.web.resource import Resource
from twisted.web.server import Site

from salttwist.blocking import runSynchronously
from salttwist.fileserver.client import LocalFileClient, RemoteFileClient
from salttwist.fileserver.server import FileServer
from salttwist.modules import (
    CommandExecutionError,
    LoaderContext,
    Retcode,
    SaltInvocationError,
    cp,
    loadFunctions,
)
from tests.test_fileclient import RoomRequests
from tests.test_master_fileserving import CONTENT, FakeSession, RoomTestCase, writeFile

ASYNC = (
    "get_file",
    "get_dir",
    "get_template",
    "get_url",
    "get_file_str",
    "cache_file",
    "cache_files",
    "cache_dir",
    "cache_master",
    "is_cached",
    "list_minion",
    "list_master",
    "list_master_dirs",
    "list_states",
    "envs",
    "hash_file",
    "push",
    "push_dir",
)


def sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def readBytes(path: str) -> bytes:
    with open(path, "rb") as f:
        return f.read()


class CpTestCase(RoomTestCase):
    """
    A file room over C{base} (C{top.sls}, C{web/init.sls},
    C{web/files/big.txt}, a symlink C{escape} out of the root, an empty
    directory C{web/empty}, a template) and C{dev}; a minion context whose
    file client is a L{RemoteFileClient} talking to it.
    """

    def setUp(self) -> None:
        self.room = self.makeRoom(file_recv=True)
        writeFile(
            self.base,
            "templates/motd.j2",
            b"host {{ grains.id }} role {{ pillar.role }} env {{ saltenv }} x {{ x }}\n",
        )
        writeFile(self.base, "templates/bad.j2", b"line one\n{{ nope(\n")
        writeFile(self.base, "web/files/sub/deep.txt", b"deep\n")
        os.makedirs(os.path.join(self.base, "web", "empty"))
        self.requests = RoomRequests(self.room, FakeSession("m1"))
        self.cachedir = os.path.abspath(self.mktemp())
        self.client = RemoteFileClient(self.requests, self.cachedir, runSynchronously, "m1")
        self.context = LoaderContext(
            {"cachedir": self.cachedir, "id": "m1"},
            {"id": "m1", "os": "Debian"},
            Clock(),
            loadFunctions(),
            fileClient=self.client,
            pillar={"role": "web"},
        )
        self.dest = os.path.abspath(self.mktemp())
        os.makedirs(self.dest)

    def cp(self, name: str, *args: Any, **kwargs: Any) -> Any:
        """
        Call C{cp.<name>} as the minion does.

        @return: its value.
        """
        function = loadFunctions()[f"cp.{name}"]
        return self.successResultOf(Deferred.fromCoroutine(function(self.context, *args, **kwargs)))

    def fails(
        self, name: str, *args: Any, error: type = CommandExecutionError, **kwargs: Any
    ) -> str:
        """
        Call C{cp.<name>}, which must fail with C{error}.

        @return: the error's message.
        """
        function = loadFunctions()[f"cp.{name}"]
        d = Deferred.fromCoroutine(function(self.context, *args, **kwargs))
        return str(self.failureResultOf(d, error).value)

    def served(self) -> int:
        """
        @return: how many chunks the room has served.
        """
        return len(self.requests.commands("_serve_file"))


class LoadingTests(SynchronousTestCase):
    """
    How the module loads.
    """

    def test_loaded(self) -> None:
        """
        The functions load as C{cp.*}: those reaching the file server run
        on the reactor with the loader context; C{recv} and
        C{recv_chunked} in a thread. Each docstring has a CLI example.
        """
        functions = loadFunctions()
        for name in ASYNC:
            function = functions[f"cp.{name}"]
            self.assertTrue(getattr(function, "runsOnReactor", False), name)
            self.assertTrue(getattr(function, "needsContext", False), name)
            self.assertIn("CLI Example:", function.__doc__)
        for name in ("recv", "recv_chunked"):
            function = functions[f"cp.{name}"]
            self.assertFalse(getattr(function, "runsOnReactor", False))
            self.assertIn("CLI Example:", function.__doc__)

    def test_noFileClient(self) -> None:
        """
        Without a file client, the functions fail saying so.
        """
        context = LoaderContext({"cachedir": "/nonexistent"}, {}, Clock())
        d = Deferred.fromCoroutine(cp.list_master(context))
        self.assertIn("no file client", str(self.failureResultOf(d, CommandExecutionError).value))


class GetFileTests(CpTestCase):
    """
    C{cp.get_file}.
    """

    def test_toFile(self) -> None:
        """
        The file is written at C{dest}, which is returned.
        """
        target = os.path.join(self.dest, "big.copy")
        self.assertEqual(self.cp("get_file", "salt://web/files/big.txt", target), target)
        self.assertEqual(readBytes(target), CONTENT)

    def test_toDirectory(self) -> None:
        """
        A directory C{dest} receives the file under its own name.
        """
        result = self.cp("get_file", "salt://web/files/big.txt", self.dest)
        self.assertEqual(result, os.path.join(self.dest, "big.txt"))
        self.assertEqual(readBytes(result), CONTENT)

    def test_makedirs(self) -> None:
        """
        A missing parent is made with C{makedirs=True}; without it the
        call returns C{False}, as Salt's, and writes nothing.
        """
        target = os.path.join(self.dest, "a", "b", "top.sls")
        self.assertIs(self.cp("get_file", "salt://top.sls", target), False)
        self.assertFalse(os.path.exists(os.path.dirname(target)))
        self.assertEqual(self.cp("get_file", "salt://top.sls", target, makedirs=True), target)
        self.assertTrue(os.path.isfile(target))
        # A dest ending in "/" is a directory, made too.
        self.assertEqual(
            self.cp("get_file", "salt://top.sls", self.dest + "/new/", makedirs=True),
            os.path.join(self.dest, "new", "top.sls"),
        )

    def test_missing(self) -> None:
        """
        A file the file server does not have gives C{''}.
        """
        self.assertEqual(self.cp("get_file", "salt://nothing", self.dest), "")
        self.assertEqual(os.listdir(self.dest), [])

    def test_refused(self) -> None:
        """
        Paths out of the roots and unknown saltenvs fail in the file
        server's words; nothing is written.
        """
        self.assertIn("..", self.fails("get_file", "salt://../etc/passwd", self.dest))
        self.assertIn("'nope'", self.fails("get_file", "salt://top.sls?saltenv=nope", self.dest))
        self.assertIn("escape", self.fails("get_file", "salt://escape", self.dest))
        self.assertEqual(os.listdir(self.dest), [])

    def test_relativeDest(self) -> None:
        """
        A relative C{dest} is refused.
        """
        message = self.fails("get_file", "salt://top.sls", "rel/path", error=SaltInvocationError)
        self.assertIn("absolute", message)

    def test_saltenv(self) -> None:
        """
        A saltenv in the URL or as an argument picks the roots.
        """
        first = self.cp("get_file", "salt://dev.sls?saltenv=dev", self.dest)
        self.assertEqual(readBytes(first), b"dev: true\n")
        os.remove(first)
        self.assertEqual(self.cp("get_file", "salt://dev.sls", self.dest, saltenv="dev"), first)
        self.assertEqual(self.cp("get_file", "salt://dev.sls", self.dest), "")

    def test_unchangedNotFetched(self) -> None:
        """
        A second get of an unchanged file transfers nothing and leaves the
        destination alone; a changed file is fetched and rewritten.
        """
        target = self.cp("get_file", "salt://web/files/big.txt", self.dest)
        served = self.served()
        self.assertGreater(served, 0)
        mtime = os.stat(target).st_mtime_ns
        self.cp("get_file", "salt://web/files/big.txt", self.dest)
        self.assertEqual(self.served(), served)
        self.assertEqual(os.stat(target).st_mtime_ns, mtime)
        writeFile(self.base, "web/files/big.txt", b"changed\n")
        self.cp("get_file", "salt://web/files/big.txt", self.dest)
        self.assertGreater(self.served(), served)
        self.assertEqual(readBytes(target), b"changed\n")

    def test_coldWritesDestWithTheTransfer(self) -> None:
        """
        A file not cached is written to the destination by its transfer,
        not copied from the cache afterwards (one pass over its bytes);
        a destination removed later is copied from the cache, without a
        transfer.
        """
        copies: list[tuple[str, str]] = []
        copyInto = cp._copyInto
        self.patch(cp, "_copyInto", lambda *a: (copies.append(a), copyInto(*a))[1])
        target = self.cp("get_file", "salt://web/files/big.txt", self.dest)
        self.assertEqual(readBytes(target), CONTENT)
        self.assertEqual(readBytes(self.client.cachedPath("web/files/big.txt")), CONTENT)
        self.assertEqual(copies, [])
        served = self.served()
        mtime = os.stat(target).st_mtime_ns
        self.cp("get_file", "salt://web/files/big.txt", self.dest)
        self.assertEqual((copies, os.stat(target).st_mtime_ns), ([], mtime))
        os.remove(target)
        self.cp("get_file", "salt://web/files/big.txt", self.dest)
        self.assertEqual(readBytes(target), CONTENT)
        self.assertEqual(len(copies), 1)
        self.assertEqual(self.served(), served)

    def test_destChangedRewritten(self) -> None:
        """
        A destination changed since it was written (same size, other
        bytes) is written again from the cache, without a transfer.
        """
        target = self.cp("get_file", "salt://web/files/big.txt", self.dest)
        served = self.served()
        with open(target, "r+b") as f:
            f.write(b"X")
        self.cp("get_file", "salt://web/files/big.txt", self.dest)
        self.assertEqual(readBytes(target), CONTENT)
        self.assertEqual(self.served(), served)

    def test_getFileStr(self) -> None:
        """
        C{get_file_str} gives the contents, C{False} for a missing file.
        """
        self.assertEqual(self.cp("get_file_str", "salt://top.sls"), "base:\n  '*': [web]\n")
        self.assertIs(self.cp("get_file_str", "salt://nothing"), False)

    def test_keepsMode(self) -> None:
        """
        An existing destination keeps its mode.
        """
        target = os.path.join(self.dest, "top.sls")
        with open(target, "w") as f:
            f.write("old")
        os.chmod(target, 0o600)
        self.cp("get_file", "salt://top.sls", target)
        self.assertEqual(stat.S_IMODE(os.stat(target).st_mode), 0o600)
        self.assertEqual(readBytes(target), b"base:\n  '*': [web]\n")

    def test_template(self) -> None:
        """
        C{template=jinja} renders the path and destination with the grains.
        """
        writeFile(self.base, "Debian/vimrc", b"set nu\n")
        result = self.cp(
            "get_file",
            "salt://{{ grains.os }}/vimrc",
            self.dest + "/{{ grains.id }}.vimrc",
            template="jinja",
        )
        self.assertEqual(result, os.path.join(self.dest, "m1.vimrc"))
        self.assertEqual(readBytes(result), b"set nu\n")
        self.assertIn(
            "unavailable engine mako",
            self.fails("get_file", "salt://top.sls", self.dest, template="mako"),
        )

    def test_noDest(self) -> None:
        """
        Without a destination the file is cached and its cached path given.
        """
        self.assertEqual(
            self.cp("get_file", "salt://top.sls", ""), self.client.cachedPath("top.sls")
        )


class GetDirTests(CpTestCase):
    """
    C{cp.get_dir}.
    """

    def test_directory(self) -> None:
        """
        C{salt://web/files} lands in C{dest/files/...}.
        """
        result = self.cp("get_dir", "salt://web/files", self.dest)
        self.assertEqual(
            result,
            [
                os.path.join(self.dest, "files", "big.txt"),
                os.path.join(self.dest, "files", "sub", "deep.txt"),
            ],
        )
        self.assertEqual(readBytes(result[0]), CONTENT)

    def test_contents(self) -> None:
        """
        A trailing slash copies the directory's contents into C{dest}; its
        empty directories are made and listed.
        """
        result = self.cp("get_dir", "salt://web/", self.dest)
        self.assertIn(os.path.join(self.dest, "init.sls"), result)
        self.assertIn(os.path.join(self.dest, "files", "big.txt"), result)
        self.assertIn(os.path.join(self.dest, "empty"), result)
        self.assertTrue(os.path.isdir(os.path.join(self.dest, "empty")))
        self.assertEqual(result, sorted(result))

    def test_missing(self) -> None:
        """
        A directory the file server does not have gives C{[]}; a path
        trick is refused.
        """
        self.assertEqual(self.cp("get_dir", "salt://nothing", self.dest), [])
        self.assertIn("..", self.fails("get_dir", "salt://../x", self.dest))

    def test_changedDestRewritten(self) -> None:
        """
        A copied file changed on the minion is copied again.
        """
        [big, _] = self.cp("get_dir", "salt://web/files", self.dest)
        with open(big, "r+b") as f:
            f.write(b"X")
        self.cp("get_dir", "salt://web/files", self.dest)
        self.assertEqual(readBytes(big), CONTENT)

    def test_oneFetchPerFile(self) -> None:
        """
        A second copy of an unchanged directory transfers nothing.
        """
        self.cp("get_dir", "salt://web", self.dest)
        served = self.served()
        self.cp("get_dir", "salt://web", self.dest)
        self.assertEqual(self.served(), served)


class GetTemplateTests(CpTestCase):
    """
    C{cp.get_template}.
    """

    def test_render(self) -> None:
        """
        The file is rendered with grains, pillar, saltenv and the keyword
        arguments.
        """
        target = os.path.join(self.dest, "motd")
        self.assertEqual(
            self.cp("get_template", "salt://templates/motd.j2", target, x="42"), target
        )
        self.assertEqual(readBytes(target), b"host m1 role web env base x 42\n")

    def test_saltFunctions(self) -> None:
        """
        C{salt[...]} calls execution functions, those taking the loader
        context and those running on the reactor too.
        """
        writeFile(
            self.base,
            "templates/calls.j2",
            b"{{ salt['test.echo']('hi') }} {{ salt['grains.get']('os') }} "
            b"{{ salt['saltutil.running']() | length }}\n",
        )
        target = os.path.join(self.dest, "calls")
        self.cp("get_template", "salt://templates/calls.j2", target)
        self.assertEqual(readBytes(target), b"hi Debian 0\n")

    def test_includesFromFileServer(self) -> None:
        """
        A template's C{{% from ... import %}}, C{{% include %}} and
        C{import_yaml} (relative to the root or, with C{./}, to the
        template's directory) are fetched through the file client; a
        missing one fails naming it.
        """
        writeFile(self.base, "templates/map.jinja", b"{% set port = 8080 %}")
        writeFile(self.base, "templates/part.txt", b"part {{ grains['id'] }}")
        writeFile(self.base, "templates/data.yaml", b"user: www\n")
        writeFile(
            self.base,
            "templates/site.j2",
            b'{% from "templates/map.jinja" import port with context %}'
            b'{% import_yaml "./data.yaml" as data %}'
            b'{{ port }} {{ data.user }} {% include "templates/part.txt" %}\n',
        )
        target = os.path.join(self.dest, "site")
        self.cp("get_template", "salt://templates/site.j2", target)
        self.assertEqual(readBytes(target), b"8080 www part m1\n")
        writeFile(self.base, "templates/broken.j2", b'{% include "templates/none.txt" %}')
        self.assertIn(
            "templates/none.txt",
            self.fails("get_template", "salt://templates/broken.j2", self.dest),
        )

    def test_noDest(self) -> None:
        """
        Without C{dest} the result goes to the C{extrn_files} cache.
        """
        result = self.cp("get_template", "salt://templates/motd.j2", "", x=1)
        self.assertTrue(result.startswith(os.path.join(self.cachedir, "extrn_files", "base")))
        self.assertEqual(readBytes(result), b"host m1 role web env base x 1\n")

    def test_renderError(self) -> None:
        """
        A template that does not render fails naming the file and line.
        """
        message = self.fails("get_template", "salt://templates/bad.j2", self.dest)
        self.assertIn("templates/bad.j2", message)
        self.assertIn("line 2", message)
        self.assertEqual(os.listdir(self.dest), [])

    def test_missing(self) -> None:
        """
        A missing file gives C{''}; an unknown engine fails.
        """
        self.assertEqual(self.cp("get_template", "salt://nothing", self.dest), "")
        self.assertIn(
            "unavailable engine",
            self.fails("get_template", "salt://top.sls", self.dest, template="cheetah"),
        )


class CacheTests(CpTestCase):
    """
    C{cp.cache_*}, C{cp.is_cached}, C{cp.list_minion}.
    """

    def test_cacheFile(self) -> None:
        """
        C{cache_file} gives the cached path; a second call transfers
        nothing; a missing file is C{False}, as Salt's.
        """
        path = self.cp("cache_file", "salt://web/files/big.txt")
        self.assertEqual(path, os.path.join(self.cachedir, "files", "base", "web/files/big.txt"))
        self.assertEqual(readBytes(path), CONTENT)
        served = self.served()
        self.assertEqual(self.cp("cache_file", "salt://web/files/big.txt"), path)
        self.assertEqual(self.served(), served)
        self.assertIs(self.cp("cache_file", "salt://nothing"), False)
        self.assertIn("..", self.fails("cache_file", "salt://../../etc/passwd"))

    def test_cacheFiles(self) -> None:
        """
        C{cache_files} takes a list or a comma-separated string, each with
        its own saltenv.
        """
        result = self.cp("cache_files", "salt://top.sls,salt://dev.sls?saltenv=dev,salt://no")
        self.assertEqual(
            result,
            [self.client.cachedPath("top.sls"), self.client.cachedPath("dev.sls", "dev"), False],
        )

    def test_cacheDir(self) -> None:
        """
        C{cache_dir} caches a directory; patterns narrow it (globs, C{E@}
        regular expressions); C{include_empty} makes empty directories.
        """
        everything = self.cp("cache_dir", "salt://web")
        self.assertEqual(
            sorted(everything),
            sorted(
                self.client.cachedPath(p)
                for p in ("web/init.sls", "web/files/big.txt", "web/files/sub/deep.txt")
            ),
        )
        self.assertEqual(
            self.cp("cache_dir", "salt://web", include_pat="*.sls"),
            [self.client.cachedPath("web/init.sls")],
        )
        self.assertEqual(
            self.cp("cache_dir", "salt://web", include_pat="E@\\.txt$", exclude_pat="*deep*"),
            [self.client.cachedPath("web/files/big.txt")],
        )
        withEmpty = self.cp("cache_dir", "salt://web", include_empty=True)
        self.assertTrue(os.path.isdir(self.client.cachedPath("web/empty")))
        self.assertEqual(len(withEmpty), 3)
        self.assertIn(
            "regular expression",
            self.fails("cache_dir", "salt://web", include_pat="E@(", error=SaltInvocationError),
        )

    def test_cacheMaster(self) -> None:
        """
        C{cache_master} caches every file of a saltenv.
        """
        result = self.cp("cache_master", saltenv="dev")
        self.assertEqual(result, [self.client.cachedPath("dev.sls", "dev")])
        self.assertEqual(len(self.cp("cache_master")), 6)

    def test_isCached(self) -> None:
        """
        C{is_cached} gives the cached path, or C{''}.
        """
        self.assertEqual(self.cp("is_cached", "salt://top.sls"), "")
        path = self.cp("cache_file", "salt://top.sls")
        self.assertEqual(self.cp("is_cached", "salt://top.sls"), path)
        self.assertEqual(self.cp("is_cached", "salt://top.sls?saltenv=dev"), "")
        self.assertEqual(self.cp("is_cached", "http://example.com/x"), "")

    def test_listMinion(self) -> None:
        """
        C{list_minion} lists the cached files of a saltenv (absolute
        paths); a saltenv that is a path is refused.
        """
        self.assertEqual(self.cp("list_minion"), [])
        self.cp("cache_file", "salt://top.sls")
        self.cp("cache_file", "salt://dev.sls", saltenv="dev")
        self.assertEqual(self.cp("list_minion"), [self.client.cachedPath("top.sls")])
        self.assertEqual(
            self.cp("list_minion", saltenv="dev"), [self.client.cachedPath("dev.sls", "dev")]
        )
        self.fails("list_minion", saltenv="../x", error=SaltInvocationError)


class ListingTests(CpTestCase):
    """
    C{cp.list_master}, C{list_master_dirs}, C{list_states}, C{envs},
    C{hash_file}.
    """

    def test_listMaster(self) -> None:
        """
        The files of a saltenv, under a prefix if given.
        """
        self.assertEqual(
            self.cp("list_master"),
            [
                "templates/bad.j2",
                "templates/motd.j2",
                "top.sls",
                "web/files/big.txt",
                "web/files/sub/deep.txt",
                "web/init.sls",
            ],
        )
        self.assertEqual(self.cp("list_master", prefix="web/files/sub"), ["web/files/sub/deep.txt"])
        self.assertEqual(self.cp("list_master", "dev"), ["dev.sls"])
        self.assertIn("'nope'", self.fails("list_master", saltenv="nope"))

    def test_listMasterDirs(self) -> None:
        """
        The directories of a saltenv.
        """
        self.assertEqual(
            self.cp("list_master_dirs"),
            ["templates", "web", "web/empty", "web/files", "web/files/sub"],
        )
        self.assertEqual(
            self.cp("list_master_dirs", prefix="web/f"), ["web/files", "web/files/sub"]
        )

    def test_listStates(self) -> None:
        """
        SLS files as state names: C{web/init.sls} is C{web}.
        """
        self.assertEqual(self.cp("list_states"), ["top", "web"])
        self.assertEqual(self.cp("list_states", saltenv="dev"), ["dev"])

    def test_envs(self) -> None:
        """
        C{cp.envs} lists the saltenvs.
        """
        self.assertEqual(self.cp("envs"), ["base", "dev"])

    def test_hashFile(self) -> None:
        """
        C{salt://} asks the master; an absolute path hashes the minion's
        file; a missing file is C{{}}.
        """
        self.assertEqual(
            self.cp("hash_file", "salt://web/files/big.txt"),
            {"hsum": sha256(CONTENT), "hash_type": "sha256"},
        )
        self.assertEqual(self.cp("hash_file", "salt://nothing"), {})
        local = writeFile(self.dest, "local.txt", b"local")
        self.assertEqual(
            self.cp("hash_file", local), {"hsum": sha256(b"local"), "hash_type": "sha256"}
        )
        self.assertEqual(
            self.cp("hash_file", "file://" + local),
            {"hsum": sha256(b"local"), "hash_type": "sha256"},
        )
        self.assertEqual(self.cp("hash_file", local + ".missing"), {})
        self.assertIn("..", self.fails("hash_file", "salt://a/../../x"))


class PushTests(CpTestCase):
    """
    C{cp.push} to the room.
    """

    def stored(self, *parts: str) -> str:
        return os.path.join(self.config["cachedir"], "minions", "m1", "files", *parts)

    def test_push(self) -> None:
        """
        The file is stored under the minion's files on the master, at its
        own path or C{upload_path}.
        """
        local = writeFile(self.dest, "report.txt", b"report" * 5000)
        self.assertIs(self.cp("push", local), True)
        self.assertEqual(readBytes(self.stored(*local.lstrip("/").split("/"))), b"report" * 5000)
        self.assertIs(self.cp("push", local, upload_path="/reports/today.txt"), True)
        self.assertEqual(readBytes(self.stored("reports", "today.txt")), b"report" * 5000)

    def test_pushDir(self) -> None:
        """
        C{push_dir} pushes the files of a directory (those matching
        C{glob}), under C{upload_path}; an empty match is C{False}.
        """
        writeFile(self.dest, "conf/a.conf", b"a")
        writeFile(self.dest, "conf/sub/b.conf", b"b")
        writeFile(self.dest, "conf/c.txt", b"c")
        conf = os.path.join(self.dest, "conf")
        self.assertIs(self.cp("push_dir", conf, glob="*.conf", upload_path="/up"), True)
        self.assertEqual(readBytes(self.stored("up", "a.conf")), b"a")
        self.assertEqual(readBytes(self.stored("up", "sub", "b.conf")), b"b")
        self.assertFalse(os.path.exists(self.stored("up", "c.txt")))
        self.assertIs(self.cp("push_dir", conf, glob="*.nothing"), False)
        self.assertIs(self.cp("push_dir", "relative"), False)

    def test_removeSource(self) -> None:
        """
        C{remove_source=True} deletes the file once pushed.
        """
        local = writeFile(self.dest, "gone.txt", b"x")
        self.assertIs(self.cp("push", local, upload_path="gone.txt", remove_source=True), True)
        self.assertFalse(os.path.exists(local))
        self.assertEqual(readBytes(self.stored("gone.txt")), b"x")

    def test_refusedLocally(self) -> None:
        """
        A relative path, C{..}, a missing file or a bad C{upload_path}
        give C{False} and push nothing.
        """
        local = writeFile(self.dest, "f.txt", b"x")
        self.assertIs(self.cp("push", "f.txt"), False)
        self.assertIs(self.cp("push", self.dest + "/../x"), False)
        self.assertIs(self.cp("push", local + ".missing"), False)
        self.assertIs(self.cp("push", local, upload_path="../../etc/x"), False)
        self.assertEqual(self.requests.commands("_file_recv"), [])

    def test_masterRefuses(self) -> None:
        """
        Without C{file_recv} the master refuses: C{False}.
        """
        self.room.config["file_recv"] = False
        local = writeFile(self.dest, "f.txt", b"x")
        self.assertIs(self.cp("push", local), False)
        self.assertFalse(os.path.exists(self.stored()))

    def test_localClient(self) -> None:
        """
        A masterless minion cannot push: C{False}.
        """
        self.context.fileClient = LocalFileClient(
            FileServer.fromConfig(self.config), self.cachedir, runSynchronously
        )
        local = writeFile(self.dest, "f.txt", b"x")
        self.assertIs(self.cp("push", local), False)


class LocalClientTests(CpTestCase):
    """
    The same functions over a L{LocalFileClient} (C{file_client: local}).
    """

    def setUp(self) -> None:
        super().setUp()
        self.context.fileClient = self.client = LocalFileClient(
            FileServer.fromConfig(self.config), self.cachedir, runSynchronously
        )

    def test_getFile(self) -> None:
        """
        C{get_file} and C{list_master} read the local roots.
        """
        result = self.cp("get_file", "salt://web/files/big.txt", self.dest)
        self.assertEqual(readBytes(result), CONTENT)
        self.assertIn("top.sls", self.cp("list_master"))
        self.assertIn("escape", self.fails("cache_file", "salt://escape"))


class GetUrlLocalTests(CpTestCase):
    """
    C{cp.get_url} of C{salt://} and C{file://} URLs.
    """

    def test_salt(self) -> None:
        """
        C{salt://}: written to C{dest}, cached with C{''}, the contents
        with C{None}; a missing file is C{False}.
        """
        target = os.path.join(self.dest, "t")
        self.assertEqual(self.cp("get_url", "salt://top.sls", target), target)
        self.assertEqual(self.cp("get_url", "salt://top.sls"), self.client.cachedPath("top.sls"))
        self.assertEqual(self.cp("get_url", "salt://top.sls", None), "base:\n  '*': [web]\n")
        self.assertIs(self.cp("get_url", "salt://nothing", target), False)
        self.assertIs(self.cp("get_url", "salt://nothing", None), False)

    def test_file(self) -> None:
        """
        C{file://}: the path itself with C{''}, a copy with C{dest}, the
        contents with C{None}; relative or missing paths fail.
        """
        source = writeFile(self.dest, "src.txt", b"source")
        url = "file://" + source
        self.assertEqual(self.cp("get_url", url), source)
        copy = os.path.join(self.dest, "sub", "copy.txt")
        self.assertEqual(self.cp("get_url", url, copy), "")
        self.assertEqual(self.cp("get_url", url, copy, makedirs=True), copy)
        self.assertEqual(readBytes(copy), b"source")
        self.assertEqual(self.cp("get_url", url, None), "source")
        self.assertEqual(self.cp("get_url", source, None), "source")
        self.assertIn("not absolute", self.fails("get_url", "relative/path"))
        self.assertIn("does not exist", self.fails("get_url", url + ".missing", None))

    def test_unsupported(self) -> None:
        """
        Other schemes fail naming the scheme, without a password.
        """
        message = self.fails("get_url", "ftp://user:secret@host/file", "")
        self.assertIn("'ftp'", message)
        self.assertNotIn("secret", message)


class RecvTests(SynchronousTestCase):
    """
    C{cp.recv} and C{cp.recv_chunked}, the receiving end of
    C{salttwist-cp}.
    """

    def setUp(self) -> None:
        self.dir = os.path.abspath(self.mktemp())
        os.makedirs(self.dir)

    def chunk(self, data: bytes, compressed: bool = True) -> str:
        return base64.b64encode(gzip.compress(data) if compressed else data).decode()

    def test_chunked(self) -> None:
        """
        Chunks are written then appended; the mode is set after the first;
        missing directories are made.
        """
        dest = os.path.join(self.dir, "a", "b", "file.bin")
        self.assertIs(cp.recv_chunked(dest, self.chunk(b"one-"), False, True, 0o640), True)
        self.assertIs(cp.recv_chunked(dest, self.chunk(b"two"), True, True, 0o640), True)
        self.assertEqual(readBytes(dest), b"one-two")
        self.assertEqual(stat.S_IMODE(os.stat(dest).st_mode), 0o640)
        self.assertIs(cp.recv_chunked(dest, self.chunk(b"new", False), False, False), True)
        self.assertEqual(readBytes(dest), b"new")

    def test_chunkedDirectory(self) -> None:
        """
        A C{None} chunk makes a directory; over a file it says so.
        """
        target = os.path.join(self.dir, "d", "e")
        self.assertIs(cp.recv_chunked(target, None), True)
        self.assertTrue(os.path.isdir(target))
        self.assertIs(cp.recv_chunked(target, None), True)
        afile = writeFile(self.dir, "f", b"")
        self.assertEqual(cp.recv_chunked(afile, None), "Path exists and is a file")

    def test_chunkedErrors(self) -> None:
        """
        A relative destination, a bad chunk or a failed write are errors
        with retcode 1.
        """
        result = cp.recv_chunked("relative/x", self.chunk(b"x"))
        self.assertIsInstance(result, Retcode)
        self.assertIn("absolute", result.value)
        result = cp.recv_chunked(os.path.join(self.dir, "x"), "!!!not base64")
        self.assertEqual(result.retcode, 1)
        result = cp.recv_chunked(os.path.join(self.dir, "x"), self.chunk(b"x", False), False, True)
        self.assertEqual(result.retcode, 1)
        afile = writeFile(self.dir, "plain", b"")
        result = cp.recv_chunked(os.path.join(afile, "below"), self.chunk(b"x"))
        self.assertEqual(result.retcode, 1)

    def test_recv(self) -> None:
        """
        C{recv} writes each file at C{dest} or inside it when it is a
        directory; a missing parent is Salt's C{Destination unavailable}.
        """
        self.assertEqual(
            cp.recv({"/src/motd": "hello"}, self.dir), {os.path.join(self.dir, "motd"): True}
        )
        self.assertEqual(readBytes(os.path.join(self.dir, "motd")), b"hello")
        target = os.path.join(self.dir, "other")
        self.assertEqual(cp.recv({"/src/motd": b"bytes"}, target), {target: True})
        self.assertEqual(readBytes(target), b"bytes")
        self.assertEqual(
            cp.recv({"/src/motd": "x"}, os.path.join(self.dir, "no", "where")),
            "Destination unavailable",
        )
        self.assertRaises(SaltInvocationError, cp.recv, {"/src/motd": "x"}, "relative")


class _Counting(Resource):
    """
    A web resource serving C{body} at every path, counting requests;
    C{/missing} is a 404.
    """

    isLeaf = True

    def __init__(self, body: bytes) -> None:
        super().__init__()
        self.body = body
        self.requests: list[bytes] = []

    def render_GET(self, request: Any) -> bytes:
        self.requests.append(request.uri)
        if request.path == b"/missing":
            request.setResponseCode(404)
            return b"no such page"
        return self.body


class _Stalling(Resource):
    """
    A web resource that sends the start of a body and never the rest.

    @ivar lost: fires when the client drops the connection.
    """

    isLeaf = True

    def __init__(self) -> None:
        super().__init__()
        self.started: Deferred[None] = Deferred()
        self.lost: Deferred[None] = Deferred()

    def render_GET(self, request: Any) -> Any:
        from twisted.web.server import NOT_DONE_YET

        request.setHeader(b"content-length", b"1000000")
        request.write(b"x" * 1000)
        request.notifyFinish().addBoth(lambda _: self.lost.callback(None))
        self.started.callback(None)
        return NOT_DONE_YET


class GetUrlHttpTests(TestCase):
    """
    C{cp.get_url} and C{cp.cache_file} of C{http://} URLs, against a real
    web server on 127.0.0.1 with the real reactor.
    """

    def setUp(self) -> None:
        self.body = os.urandom(3 << 20) + b"end"
        self.resource = _Counting(self.body)
        self.cachedir = os.path.abspath(self.mktemp())
        self.dest = os.path.abspath(self.mktemp())
        os.makedirs(self.dest)
        self.context = LoaderContext({"cachedir": self.cachedir, "id": "m1"}, {"id": "m1"}, reactor)
        port = reactor.listenTCP(0, Site(self.resource), interface="127.0.0.1")
        self.addCleanup(port.stopListening)
        self.base = f"http://127.0.0.1:{port.getHost().port}"

    def cp(self, name: str, *args: Any, **kwargs: Any) -> Deferred[Any]:
        function = loadFunctions()[f"cp.{name}"]
        return Deferred.fromCoroutine(function(self.context, *args, **kwargs))

    @inlineCallbacks
    def test_toDest(self) -> Any:
        """
        The body is written to C{dest}; a directory C{dest} keeps the
        URL's file name.
        """
        target = os.path.join(self.dest, "file.bin")
        result = yield self.cp("get_url", f"{self.base}/a/file.tgz", target)
        self.assertEqual(result, target)
        self.assertEqual(readBytes(target), self.body)
        result = yield self.cp("get_url", f"{self.base}/a/file.tgz", self.dest)
        self.assertEqual(result, os.path.join(self.dest, "file.tgz"))
        self.assertEqual(readBytes(result), self.body)
        self.assertEqual(
            [n for n in os.listdir(self.dest) if n.startswith(".cp-")], [], "no temporary files"
        )

    @inlineCallbacks
    def test_backPressure(self) -> Any:
        """
        With small water marks the connection is paused and resumed many
        times while the writes catch up; the file still arrives whole.
        """
        self.patch(cp, "_HIGH_WATER", 64 * 1024)
        self.patch(cp, "_LOW_WATER", 16 * 1024)
        pauses: list[int] = []
        original = cp._BodyToFile.dataReceived

        def dataReceived(protocol: Any, data: bytes) -> None:
            wasPaused = protocol.paused
            original(protocol, data)
            if protocol.paused and not wasPaused:
                pauses.append(protocol.pendingBytes)

        self.patch(cp._BodyToFile, "dataReceived", dataReceived)
        target = os.path.join(self.dest, "slow.bin")
        result = yield self.cp("get_url", f"{self.base}/slow.bin", target)
        self.assertEqual(readBytes(result), self.body)
        self.assertTrue(pauses, "the connection was never paused")

    @inlineCallbacks
    def test_cached(self) -> Any:
        """
        Without C{dest} the file goes to C{extrn_files}; C{source_hash}
        matching the cached copy skips the download; C{cp.cache_file} of
        the URL does the same, and C{is_cached} finds it.
        """
        url = f"{self.base}/dl/pkg.tgz?v=1"
        result = yield self.cp("get_url", url)
        host = self.base.split("://")[1].replace(":", "")
        self.assertEqual(
            result, os.path.join(self.cachedir, "extrn_files", "base", host, "dl", "pkg.tgz-v=1")
        )
        self.assertEqual(readBytes(result), self.body)
        self.assertEqual(len(self.resource.requests), 1)
        digest = sha256(self.body)
        again = yield self.cp("cache_file", url, source_hash=f"sha256={digest}")
        self.assertEqual(again, result)
        self.assertEqual(len(self.resource.requests), 1)
        yield self.cp("cache_file", url, source_hash="0" * 64)
        self.assertEqual(len(self.resource.requests), 2)
        cached = yield self.cp("is_cached", url)
        self.assertEqual(cached, result)

    @inlineCallbacks
    def test_contents(self) -> Any:
        """
        C{dest=None} returns the body as text and caches nothing.
        """
        self.resource.body = "héllo".encode()
        result = yield self.cp("get_url", f"{self.base}/x", None)
        self.assertEqual(result, "héllo")
        self.assertFalse(os.path.exists(self.cachedir))

    @inlineCallbacks
    def test_httpError(self) -> Any:
        """
        An error status fails with Salt's words and writes nothing.
        """
        target = os.path.join(self.dest, "f")
        d = self.cp("get_url", f"{self.base}/missing", target)
        failure = yield self.assertFailure(d, CommandExecutionError)
        self.assertIn("HTTP error 404 reading", str(failure))
        self.assertEqual(os.listdir(self.dest), [])

    @inlineCallbacks
    def test_missingDirectory(self) -> Any:
        """
        A missing parent gives C{''} unless C{makedirs=True}.
        """
        target = os.path.join(self.dest, "a", "b", "f")
        result = yield self.cp("get_url", f"{self.base}/f", target)
        self.assertEqual(result, "")
        self.assertEqual(self.resource.requests, [])
        result = yield self.cp("get_url", f"{self.base}/f", target, makedirs=True)
        self.assertEqual(readBytes(result), self.body)

    @inlineCallbacks
    def test_cancelled(self) -> Any:
        """
        A download cancelled (C{saltutil.kill_job}) drops the connection
        and leaves no partial file.
        """
        stalling = _Stalling()
        port = reactor.listenTCP(0, Site(stalling), interface="127.0.0.1")
        self.addCleanup(port.stopListening)
        url = f"http://127.0.0.1:{port.getHost().port}/stall"
        for stage in ("headers", "body"):
            d = self.cp("get_url", url, os.path.join(self.dest, "stalled"))
            yield stalling.started
            if stage == "body":
                # Wait until the body is being written to its temporary file.
                for _ in range(500):
                    if os.listdir(self.dest):
                        break
                    yield deferLater(reactor, 0.01, lambda: None)
                self.assertTrue(os.listdir(self.dest), "the download never started")
            d.cancel()
            yield self.assertFailure(d, CancelledError)
            yield stalling.lost
            self.assertEqual(os.listdir(self.dest), [], stage)
            stalling.started = Deferred()
            stalling.lost = Deferred()

    @inlineCallbacks
    def test_refused(self) -> Any:
        """
        A connection refused fails the call saying so.
        """
        port = reactor.listenTCP(0, Site(self.resource), interface="127.0.0.1")
        number = port.getHost().port
        yield port.stopListening()
        d = self.cp("get_url", f"http://127.0.0.1:{number}/f", os.path.join(self.dest, "f"))
        failure = yield self.assertFailure(d, CommandExecutionError)
        self.assertIn("Error reading", str(failure))
