# -*- test-case-name: tests.test_states_file_source -*-
"""
Tests for the sources of L{salttwist.states.file}: C{salt://} files from a
local file server over temporary C{file_roots}, local paths, C{file://},
C{http://} from a twisted.web server on 127.0.0.1 with C{source_hash} (a
digest, C{type=digest}, a file of hashes), source lists, Jinja templates,
and C{file.recurse}.
"""

from __future__ import annotations

import hashlib
import os
from typing import Any

from twisted.internet import reactor
from twisted.web.resource import Resource
from twisted.web.server import Site
from twisted.web.static import Data

from salttwist.modules import CommandExecutionError
from salttwist.modules import _filesource as src
from tests.test_states_file import FileStateTestCase, fileMode, readFile, writeFile


def sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


class SaltSourceTests(FileStateTestCase):
    """
    C{salt://} and local sources.
    """

    async def test_saltSource(self) -> None:
        """
        A C{salt://} file is fetched through the minion's file client and
        written; a change shows as a diff.
        """
        url = self.serve("web/motd", "hello\n")
        name = self.path("motd")
        ret = await self.state("managed", name, source=url)
        self.assertIs(ret["result"], True, ret)
        self.assertEqual(ret["changes"]["diff"], "New file")
        self.assertEqual(readFile(name), b"hello\n")
        self.serve("web/motd", "bye\n")
        ret = await self.state("managed", name, source=url)
        self.assertEqual(ret["changes"], {"diff": "--- \n+++ \n@@ -1 +1 @@\n-hello\n+bye\n"})
        self.assertEqual(ret["comment"], f"File {name} updated")

    async def test_missingSaltSource(self) -> None:
        """
        A missing C{salt://} file fails with Salt's words; nothing is made.
        """
        name = self.path("x")
        ret = await self.state("managed", name, source="salt://nope.txt")
        self.assertEqual(
            (ret["result"], ret["comment"]),
            (
                False,
                "Unable to manage file: Source file salt://nope.txt not found in saltenv 'base'",
            ),
        )
        self.assertFalse(os.path.exists(name))

    async def test_sourceList(self) -> None:
        """
        A list of sources: the first that exists is used; none gives Salt's
        error.
        """
        url = self.serve("b.txt", "b\n")
        name = self.path("l")
        ret = await self.state("managed", name, source=["salt://a.txt", url])
        self.assertIs(ret["result"], True, ret)
        self.assertEqual(readFile(name), b"b\n")
        ret = await self.state("managed", name, source=["salt://a.txt", "salt://c.txt"])
        self.assertEqual(
            ret["comment"], "Unable to manage file: none of the specified sources were found"
        )

    async def test_localSources(self) -> None:
        """
        A local path and a C{file://} URL are read in place; a missing one
        fails naming it.
        """
        local = writeFile(os.path.join(self.roots, "..", "local.txt"), "local\n")
        local = os.path.abspath(local)
        for source in (local, f"file://{local}"):
            name = self.path(f"copy{len(source)}")
            ret = await self.state("managed", name, source=source)
            self.assertIs(ret["result"], True, ret)
            self.assertEqual(readFile(name), b"local\n")
        ret = await self.state("managed", self.path("y"), source="/no/such/file")
        self.assertEqual(
            ret["comment"], "Unable to manage file: Local file source /no/such/file does not exist"
        )

    async def test_template(self) -> None:
        """
        C{template: jinja} renders the source with grains, pillar,
        C{salt}, C{context} over C{defaults}, and C{{% include %}} of other
        files on the file server.
        """
        self.serve("tpl/part.j2", "part {{ who }}")
        url = self.serve(
            "tpl/main.j2",
            "{{ grains['id'] }} {{ pillar['role'] }} {{ who }} {{ n }}\n"
            "{% include 'tpl/part.j2' %}\n{{ salt['test.echo']('echoed') }}\n",
        )
        ctx = self.context(grains={"id": "m7"}, pillar={"role": "db"})
        name = self.path("rendered")
        ret = await self.state(
            "managed",
            name,
            source=url,
            template="jinja",
            defaults={"who": "d", "n": 1},
            context={"who": "c"},
            ctx=ctx,
        )
        self.assertIs(ret["result"], True, ret)
        self.assertEqual(readFile(name), b"m7 db c 1\npart c\nechoed\n")

    async def test_templateError(self) -> None:
        """
        A template that fails names the file and line.
        """
        url = self.serve("bad.j2", "line\n{{ nope() }}\n")
        ret = await self.state("managed", self.path("bad"), source=url, template="jinja")
        self.assertIs(ret["result"], False)
        self.assertTrue(ret["comment"].startswith("Unable to manage file: "), ret)
        self.assertIn("salt://bad.j2", ret["comment"])
        self.assertIn("2", ret["comment"])
        unknown = await self.state("managed", self.path("b2"), source=url, template="mako")
        self.assertEqual(
            unknown["comment"],
            "Unable to manage file: Specified template format mako is not supported",
        )

    async def test_keepMode(self) -> None:
        """
        C{mode: keep} takes the source's mode.
        """
        source = writeFile(os.path.join(self.roots, "exec.sh"), "#!/bin/sh\n", 0o750)
        name = self.path("exec.sh")
        ret = await self.state("managed", name, source=source, mode="keep")
        self.assertIs(ret["result"], True, ret)
        self.assertEqual(fileMode(name), "0750")
        url = self.serve("other.sh", "#!/bin/sh\n")
        ret = await self.state("managed", self.path("other.sh"), source=url, mode="keep")
        self.assertIs(ret["result"], True, ret)
        self.assertIn("mode: keep is not supported for salt://other.sh", ret["warnings"][0])


class HashFileTests(FileStateTestCase):
    """
    L{src.sourceSum} and L{src.extractHash}: the forms of C{source_hash}.
    """

    def test_forms(self) -> None:
        """
        A bare digest (its length names the type) and C{type=digest}.
        """
        ctx = self.context()
        digest = "A" * 64
        self.assertEqual(
            src.sourceSum(ctx, "/x", "http://h/f", digest, None, "base"),
            {"hash_type": "sha256", "hsum": "a" * 64},
        )
        self.assertEqual(
            src.sourceSum(ctx, "/x", "http://h/f", "md5=" + "b" * 32, None, "base"),
            {"hash_type": "md5", "hsum": "b" * 32},
        )

    def test_invalid(self) -> None:
        """
        Bad digests and types fail with Salt's words.
        """
        ctx = self.context()
        for bad, words in (
            ("xyz", "Source hash xyz format is invalid."),
            ("sha256=" + "a" * 32, "Invalid length (32) for hash type 'sha256'."),
            ("crc=" + "a" * 32, "Invalid hash type 'crc'."),
        ):
            e = self.assertRaises(
                CommandExecutionError, src.sourceSum, ctx, "/x", "http://h/f", bad, None, "base"
            )
            self.assertTrue(str(e).startswith(words), str(e))

    def test_hashFile(self) -> None:
        """
        A file of hashes: the line naming the source's file wins, then the
        C{source_hash_name}; one bare digest is taken as it is.
        """
        a, b = "1" * 64, "2" * 64
        listing = writeFile(self.path("SHA256SUMS"), f"{a}  other.tar.gz\n{b} *app.tar.gz\n")
        self.assertEqual(
            src.extractHash(listing, "/opt/app.tgz", "http://h/app.tar.gz", None)["hsum"], b
        )
        self.assertEqual(
            src.extractHash(listing, "/opt/x", "http://h/x", "other.tar.gz")["hsum"], a
        )
        bsd = writeFile(self.path("bsd"), f"SHA256 (app.tar.gz) = {b}\n")
        self.assertEqual(
            src.extractHash(bsd, "/opt/x", "http://h/app.tar.gz", None),
            {"hash_type": "sha256", "hsum": b},
        )
        single = writeFile(self.path("one"), "d" * 32 + "\n")
        self.assertEqual(
            src.extractHash(single, "/x", "http://h/y", None),
            {"hash_type": "md5", "hsum": "d" * 32},
        )
        empty = writeFile(self.path("none"), "no hashes here\n")
        self.assertIsNone(src.extractHash(empty, "/x", "http://h/y", None))


class HttpSourceTests(FileStateTestCase):
    """
    C{http://} sources served by twisted.web on 127.0.0.1.
    """

    BODY = b"downloaded contents\n"

    def setUp(self) -> None:
        super().setUp()
        root = Resource()
        root.putChild(b"app.conf", Data(self.BODY, "text/plain"))
        sums = f"{sha256(self.BODY)}  app.conf\n{'0' * 64}  other\n".encode()
        root.putChild(b"SHA256SUMS", Data(sums, "text/plain"))
        self.port = reactor.listenTCP(0, Site(root), interface="127.0.0.1")
        self.addCleanup(self.port.stopListening)
        self.base = f"http://127.0.0.1:{self.port.getHost().port}"

    async def test_sourceHash(self) -> None:
        """
        With the right C{source_hash} the file is downloaded and written;
        run again, the existing file's hash matches and nothing is fetched.
        """
        name = self.path("app.conf")
        url = f"{self.base}/app.conf"
        ret = await self.state("managed", name, source=url, source_hash=sha256(self.BODY))
        self.assertIs(ret["result"], True, ret)
        self.assertEqual(readFile(name), self.BODY)
        self.port.stopListening()
        again = await self.state(
            "managed", name, source=url, source_hash=f"sha256={sha256(self.BODY)}"
        )
        self.assertIs(again["result"], True, again)
        self.assertEqual(again["changes"], {})

    async def test_hashFileUrl(self) -> None:
        """
        C{source_hash} may be the URL of a file of hashes.
        """
        name = self.path("app.conf")
        ret = await self.state(
            "managed",
            name,
            source=f"{self.base}/app.conf",
            source_hash=f"{self.base}/SHA256SUMS",
        )
        self.assertIs(ret["result"], True, ret)
        self.assertEqual(readFile(name), self.BODY)

    async def test_badHash(self) -> None:
        """
        A download whose hash differs fails with Salt's words; the target
        is untouched.
        """
        name = writeFile(self.path("app.conf"), "old\n")
        url = f"{self.base}/app.conf"
        wrong = "f" * 64
        ret = await self.state("managed", name, source=url, source_hash=wrong)
        self.assertIs(ret["result"], False)
        self.assertEqual(
            ret["comment"],
            f"Specified sha256 checksum for {url} ({wrong}) does not match actual checksum "
            f"({sha256(self.BODY)}). If the 'source_hash' value refers to a remote file with "
            "multiple possible matches, then it may be necessary to set 'source_hash_name'.",
        )
        self.assertEqual(readFile(name), b"old\n")

    async def test_noHash(self) -> None:
        """
        Without C{source_hash} an http source fails unless C{skip_verify}.
        """
        name = self.path("app.conf")
        url = f"{self.base}/app.conf"
        ret = await self.state("managed", name, source=url)
        self.assertEqual(
            ret["comment"],
            f"Unable to manage file: Unable to verify upstream hash of source file {url}, "
            "please set source_hash or set skip_verify to True",
        )
        self.assertFalse(os.path.exists(name))
        ret = await self.state("managed", name, source=url, skip_verify=True)
        self.assertIs(ret["result"], True, ret)
        self.assertEqual(readFile(name), self.BODY)

    async def test_missing(self) -> None:
        """
        An HTTP error fails the state naming the status.
        """
        ret = await self.state(
            "managed", self.path("x"), source=f"{self.base}/nope", skip_verify=True
        )
        self.assertIs(ret["result"], False)
        self.assertIn("404", ret["comment"])


class RecurseTests(FileStateTestCase):
    """
    C{file.recurse} from the file server.
    """

    def setUp(self) -> None:
        super().setUp()
        self.serve("site/index.html", "<h1>{{ grains['id'] }}</h1>\n")
        self.serve("site/css/main.css", "body {}\n")
        self.serve("site/skip.tmp", "temp\n")
        os.makedirs(os.path.join(self.roots, "site", "empty"))

    async def test_recurse(self) -> None:
        """
        Every file is managed (templated, with C{file_mode}), each by path
        in the changes; run again, the tree is in the correct state.
        """
        name = self.path("www")
        ctx = self.context(grains={"id": "web9"})
        kwargs: dict[str, Any] = {
            "source": "salt://site",
            "template": "jinja",
            "file_mode": "0640",
            "dir_mode": "0750",
            "exclude_pat": "*.tmp",
        }
        ret = await self.state("recurse", name, ctx=ctx, **kwargs)
        self.assertIs(ret["result"], True, ret)
        self.assertEqual(ret["comment"], f"Recursively updated {name}")
        self.assertEqual(readFile(os.path.join(name, "index.html")), b"<h1>web9</h1>\n")
        self.assertEqual(readFile(os.path.join(name, "css", "main.css")), b"body {}\n")
        self.assertFalse(os.path.exists(os.path.join(name, "skip.tmp")))
        self.assertFalse(os.path.exists(os.path.join(name, "empty")))
        self.assertEqual(fileMode(os.path.join(name, "index.html")), "0640")
        self.assertEqual(fileMode(os.path.join(name, "css")), "0750")
        self.assertEqual(
            ret["changes"][os.path.join(name, "index.html")],
            {"diff": "New file", "mode": "0640"},
        )
        again = await self.state("recurse", name, ctx=ctx, **kwargs)
        self.assertEqual(
            (again["result"], again["changes"], again["comment"]),
            (True, {}, f"The directory {name} is in the correct state"),
        )

    async def test_cleanAndEmpty(self) -> None:
        """
        C{clean} removes what the source lacks; C{include_empty} makes
        empty directories. In test mode nothing changes and removals are
        listed in the comment.
        """
        name = self.path("www")
        writeFile(os.path.join(name, "stale.txt"), "old")
        test = await self.state(
            "recurse",
            name,
            source="salt://site",
            clean=True,
            include_empty=True,
            ctx=self.context(test=True),
        )
        self.assertIsNone(test["result"])
        self.assertIn("stale.txt", test["comment"])
        self.assertTrue(os.path.exists(os.path.join(name, "stale.txt")))
        self.assertFalse(os.path.exists(os.path.join(name, "index.html")))
        ret = await self.state(
            "recurse", name, source="salt://site", clean=True, include_empty=True
        )
        self.assertIs(ret["result"], True, ret)
        self.assertEqual(ret["changes"]["removed"], [os.path.join(name, "stale.txt")])
        self.assertTrue(os.path.isdir(os.path.join(name, "empty")))
        self.assertTrue(os.path.exists(os.path.join(name, "skip.tmp")))

    async def test_badSource(self) -> None:
        """
        A source that is not C{salt://}, or a missing directory, fails.
        """
        ret = await self.state("recurse", self.path("w"), source="/etc")
        self.assertEqual(
            ret["comment"], "Recurse failed: Invalid source '/etc' (must be a salt:// URI)"
        )
        ret = await self.state("recurse", self.path("w"), source="salt://nothing")
        self.assertIs(ret["result"], False)
        self.assertIn("salt://nothing", ret["comment"])
        self.assertFalse(os.path.exists(self.path("w")))


class UrlPartsTests(FileStateTestCase):
    """
    L{src.scheme} and L{src.saltUrl} answer the common URLs without
    C{urlparse}, as C{urlparse} would.
    """

    def test_sameAsUrlparse(self) -> None:
        from urllib.parse import urlparse

        urls = [
            "salt://a/b.txt",
            "salt:///a/b",
            "salt://a",
            "salt://a/b c/d.txt",
            "salt://x/y?saltenv=dev",
            "salt://a#b",
            "salt://a/b;p",
            "/srv/file",
            "file:///srv/file",
            "https://example.invalid/x",
            "relative/path",
        ]
        for url in urls:
            parsed = urlparse(url)
            found = parsed.scheme.lower()
            self.assertEqual(src.scheme(url), found if found in src.PROTOCOLS else "", url)
            if url.startswith("salt://"):
                env = parsed.query.partition("saltenv=")[2] or "base"
                path = (parsed.netloc + parsed.path).lstrip("/")
                self.assertEqual(src.saltUrl(url, "base"), (path, env), url)
