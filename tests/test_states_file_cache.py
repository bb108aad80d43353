# -*- test-case-name: tests.test_states_file_cache -*-
"""
Tests for C{file.cached} and C{file.not_cached}: C{salt://} files from a
local file server over temporary C{file_roots} into a temporary cache,
C{http://} files from a twisted.web server on 127.0.0.1, local paths. The
comments and changes are those C{salt-call --local state.single} (Salt
3008.5) gave for the same calls.
"""

from __future__ import annotations

import hashlib
import os

from twisted.internet import reactor
from twisted.web.resource import Resource
from twisted.web.server import Site
from twisted.web.static import Data

from tests.test_states_file import FileStateTestCase, readFile, writeFile


def sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


class CachedSaltTests(FileStateTestCase):
    """
    C{file.cached} of C{salt://} files.
    """

    def setUp(self) -> None:
        super().setUp()
        self.url = self.serve("c.txt", "hello\n")
        self.copy = os.path.join(self.cachedir, "files", "base", "c.txt")

    async def test_cache(self) -> None:
        """
        The file is fetched into the cache; its hash is the change. Run
        again with nothing new, no change; after the file server's copy
        changed, the new hash.
        """
        ret = await self.state("cached", self.url)
        self.assertEqual(
            ret,
            {
                "name": self.url,
                "result": True,
                "changes": {"hash": {"old": None, "new": sha256(b"hello\n")}},
                "comment": f"File is cached to {self.copy}",
            },
        )
        self.assertEqual(readFile(self.copy), b"hello\n")
        again = await self.state("cached", self.url)
        self.assertEqual((again["result"], again["changes"]), (True, {}))
        self.serve("c.txt", "changed\n")
        changed = await self.state("cached", self.url)
        self.assertEqual(
            changed["changes"],
            {"hash": {"old": sha256(b"hello\n"), "new": sha256(b"changed\n")}},
        )

    async def test_sourceHash(self) -> None:
        """
        With the right C{source_hash}, Salt's "already cached" words; with
        a wrong one the state fails naming both hashes.
        """
        good = sha256(b"hello\n")
        ret = await self.state("cached", self.url, source_hash=good)
        self.assertEqual(ret["result"], True)
        self.assertEqual(ret["comment"], f"File is already cached to {self.copy} with hash {good}")
        wrong = "a" * 64
        ret = await self.state("cached", self.url, source_hash=wrong)
        self.assertEqual(
            (ret["result"], ret["comment"]),
            (
                False,
                f"File is cached to {self.copy}, but the hash ({good}) does not match the "
                f"specified hash ({wrong})",
            ),
        )
        bad = await self.state("cached", self.url, source_hash="zz")
        self.assertIs(bad["result"], False)
        self.assertTrue(bad["comment"].startswith("Source hash zz format is invalid."))

    async def test_testMode(self) -> None:
        """
        In test mode nothing is fetched: the comment says what would be
        done, by whether a copy is cached and has the hash.
        """
        ctx = self.context(test=True)
        ret = await self.state("cached", self.url, ctx=ctx)
        self.assertEqual(
            ret,
            {
                "name": self.url,
                "result": None,
                "changes": {},
                "comment": f"File will be cached: {self.url}",
            },
        )
        self.assertFalse(os.path.exists(self.copy))
        await self.state("cached", self.url)
        for kwargs, comment in (
            ({}, f"No hash found. File will be cached: {self.url}"),
            ({"source_hash": sha256(b"hello\n")}, f"File already cached: {self.url}"),
            ({"source_hash": "a" * 64}, f"Hashes don't match.\nFile will be cached: {self.url}"),
        ):
            ret = await self.state("cached", self.url, ctx=ctx, **kwargs)
            self.assertEqual((ret["result"], ret["comment"], ret["changes"]), (None, comment, {}))

    async def test_missing(self) -> None:
        """
        A file the file server does not have fails with Salt's words.
        """
        ret = await self.state("cached", "salt://nope.txt")
        self.assertEqual(
            (ret["result"], ret["comment"]),
            (False, "Failed to cache salt://nope.txt, check minion log for more information"),
        )

    async def test_saltenv(self) -> None:
        """
        C{saltenv} picks the file server's environment.
        """
        other = os.path.join(self.roots, "..", "dev")
        writeFile(os.path.join(other, "c.txt"), "dev\n")
        ctx = self.context(
            opts={"file_roots": {"base": [self.roots], "dev": [os.path.abspath(other)]}}
        )
        ret = await self.state("cached", self.url, saltenv="dev", ctx=ctx)
        self.assertIs(ret["result"], True, ret)
        self.assertEqual(readFile(os.path.join(self.cachedir, "files", "dev", "c.txt")), b"dev\n")

    async def test_notCached(self) -> None:
        """
        C{file.not_cached} deletes the cached copy (in test mode it only
        says it would); a file not cached is fine as it is.
        """
        await self.state("cached", self.url)
        dry = await self.state("not_cached", self.url, ctx=self.context(test=True))
        self.assertEqual(
            dry,
            {
                "name": self.url,
                "result": None,
                "changes": {"deleted": True},
                "comment": f"{self.copy} would be deleted",
            },
        )
        self.assertTrue(os.path.exists(self.copy))
        ret = await self.state("not_cached", self.url)
        self.assertEqual(
            ret,
            {
                "name": self.url,
                "result": True,
                "changes": {"deleted": True},
                "comment": f"{self.copy} was deleted",
            },
        )
        self.assertFalse(os.path.exists(self.copy))
        for test in (False, True):
            again = await self.state("not_cached", self.url, ctx=self.context(test=test))
            self.assertEqual(
                again,
                {
                    "name": self.url,
                    "result": True,
                    "changes": {},
                    "comment": f"{self.url} is not cached",
                },
            )


class CachedLocalTests(FileStateTestCase):
    """
    C{file.cached} and C{file.not_cached} of paths on the minion.
    """

    async def test_local(self) -> None:
        """
        A local path (or C{file://} URL) is only checked: present, with
        the hash if one is given.
        """
        path = writeFile(self.path("local.txt"), "loc\n")
        have = sha256(b"loc\n")
        for name in (path, f"file://{path}"):
            ret = await self.state("cached", name)
            self.assertEqual(
                (ret["result"], ret["comment"]), (True, f"File {path} is present on the minion")
            )
        ret = await self.state("cached", path, source_hash=have)
        self.assertEqual(
            ret["comment"], f"File {path} is present on the minion and has hash {have}"
        )
        wrong = "b" * 64
        ret = await self.state("cached", path, source_hash=wrong)
        self.assertEqual(
            (ret["result"], ret["comment"]),
            (
                False,
                f"File {path} is present on the minion, but the hash ({have}) does not match "
                f"the specified hash ({wrong})",
            ),
        )
        missing = self.path("none.txt")
        ret = await self.state("cached", missing)
        self.assertEqual(
            (ret["result"], ret["comment"]),
            (False, f"File {missing} is not present on the minion"),
        )
        dry = await self.state("cached", path, ctx=self.context(test=True))
        self.assertEqual((dry["result"], dry["comment"]), (None, f"File will be cached: {path}"))

    async def test_notCachedLocal(self) -> None:
        """
        C{file.not_cached} leaves a local path alone.
        """
        path = writeFile(self.path("local.txt"), "loc\n")
        ret = await self.state("not_cached", path)
        self.assertEqual(
            (ret["result"], ret["comment"], ret["changes"]),
            (True, f"File {path} is a local path, no action taken", {}),
        )
        self.assertTrue(os.path.exists(path))

    async def test_badName(self) -> None:
        """
        A scheme that is not supported fails naming it.
        """
        ret = await self.state("cached", "ftp://example.com/x")
        self.assertEqual(
            (ret["result"], ret["comment"]),
            (
                False,
                "Unsupported URL scheme 'ftp' in ftp://example.com/x: salt, http, https, file "
                "or a local path",
            ),
        )


class CachedHttpTests(FileStateTestCase):
    """
    C{file.cached} of C{http://} files served by twisted.web on 127.0.0.1.
    """

    BODY = b"downloaded\n"

    def setUp(self) -> None:
        super().setUp()
        root = Resource()
        root.putChild(b"f.conf", Data(self.BODY, "text/plain"))
        self.port = reactor.listenTCP(0, Site(root), interface="127.0.0.1")
        self.addCleanup(self.port.stopListening)
        self.url = f"http://127.0.0.1:{self.port.getHost().port}/f.conf"

    async def test_needsHash(self) -> None:
        """
        Without C{source_hash} (or C{skip_verify}) a web file is refused
        with Salt's words; with C{skip_verify} it is fetched.
        """
        ret = await self.state("cached", self.url)
        self.assertEqual(
            (ret["result"], ret["comment"]),
            (
                False,
                f"Unable to verify upstream hash of source file {self.url}, please set "
                "source_hash or set skip_verify or use_etag to True",
            ),
        )
        ret = await self.state("cached", self.url, skip_verify=True)
        self.assertIs(ret["result"], True, ret)
        self.assertEqual(ret["changes"], {"hash": {"old": None, "new": sha256(self.BODY)}})
        self.assertEqual(readFile(ret["comment"].split(" to ", 1)[1]), self.BODY)

    async def test_sourceHash(self) -> None:
        """
        With its hash the file is fetched once: run again with the server
        gone, the cached copy has the hash and nothing is fetched.
        """
        good = sha256(self.BODY)
        ret = await self.state("cached", self.url, source_hash=f"sha256={good}")
        self.assertIs(ret["result"], True, ret)
        self.assertEqual(ret["changes"], {"hash": {"old": None, "new": good}})
        await self.port.stopListening()
        again = await self.state("cached", self.url, source_hash=good)
        self.assertEqual((again["result"], again["changes"]), (True, {}))
        self.assertIn(f"with hash {good}", again["comment"])
        gone = await self.state("not_cached", self.url)
        self.assertEqual((gone["result"], gone["changes"]), (True, {"deleted": True}))
