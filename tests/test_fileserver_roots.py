# -*- test-case-name: tests.test_fileserver_roots -*-
"""
Tests for L{salttwist.fileserver.roots} and L{salttwist.fileserver.server}
beyond the backends' shared contract (L{tests.test_fileserver_contract}):
C{file_roots} details, speed on big trees, the hash cache, and how
L{FileServer} builds and combines backends.
"""

from __future__ import annotations

import hashlib
import os
import tracemalloc

from twisted.trial.unittest import SynchronousTestCase
from zope.interface import implementer

from salttwist.fileserver.interfaces import FileServerError, FoundFile, IFileServerBackend
from salttwist.fileserver.roots import IgnoreRules, RootsBackend
from salttwist.fileserver.server import HASH_CHUNK, FileServer
from tests.test_fileserver_contract import writeTree


class RootsTestCase(SynchronousTestCase):
    """
    A temp directory C{self.base}.
    """

    def setUp(self) -> None:
        self.base = os.path.abspath(self.mktemp())
        os.makedirs(self.base)

    def root(self, name: str, files: dict[str, object]) -> str:
        """
        @return: a new directory C{name} holding C{files}.
        """
        directory = os.path.join(self.base, name)
        writeTree(directory, files, self.base)
        return directory


class RootsBackendTests(RootsTestCase):
    """
    L{RootsBackend}'s handling of C{file_roots}.
    """

    def test_missingRootSkipped(self) -> None:
        """
        A root that does not exist (or is a file) is skipped; the others
        still serve.
        """
        good = self.root("good", {"a": "a"})
        backend = RootsBackend(
            {"file_roots": {"base": [os.path.join(self.base, "nothere"), good + "/a", good]}}
        )
        self.assertEqual(backend.fileList("base"), ["a"])
        self.assertEqual(backend.findFile("a", "base").realPath, os.path.join(good, "a"))

    def test_stringRoot(self) -> None:
        """
        A saltenv may name one directory instead of a list; relative roots
        are made absolute.
        """
        good = self.root("good", {"a": "a"})
        backend = RootsBackend({"file_roots": {"base": good}})
        self.assertEqual(backend.roots("base"), [good])
        self.assertEqual(backend.fileList("base"), ["a"])

    def test_rootIsSymlink(self) -> None:
        """
        A root that is itself a symlink serves its target; confinement is
        to the target.
        """
        real = self.root("real", {"a": "a", "l": "x"})
        os.symlink(real, os.path.join(self.base, "srv"))
        backend = RootsBackend({"file_roots": {"base": [os.path.join(self.base, "srv")]}})
        self.assertEqual(backend.fileList("base"), ["a", "l"])
        self.assertEqual(backend.findFile("a", "base").realPath, os.path.join(real, "a"))

    def test_realRootRemembered(self) -> None:
        """
        Finding files resolves a root's real path once, while the root
        still leads to the same directory; a root symlink pointed
        elsewhere is resolved again at once, and confinement follows it.
        """
        first = self.root("first", {"a": "first"})
        second = self.root("second", {"a": "second", "b": "b"})
        outside = self.root("outside", {"secret": "s"})
        link = os.path.join(self.base, "srv")
        os.symlink(first, link)
        backend = RootsBackend({"file_roots": {"base": [link]}})
        resolved: list[str] = []
        realpath = os.path.realpath

        def counting(path: str) -> str:
            resolved.append(path)
            return realpath(path)

        self.patch(os.path, "realpath", counting)
        for _ in range(3):
            self.assertEqual(backend.findFile("a", "base").realPath, os.path.join(first, "a"))
        self.assertEqual(resolved, [link])
        os.remove(link)
        os.symlink(second, link)
        self.assertEqual(backend.findFile("a", "base").realPath, os.path.join(second, "a"))
        self.assertEqual(backend.findFile("b", "base").realPath, os.path.join(second, "b"))
        self.assertEqual(resolved, [link, link])
        # A symlink inside the new root that leaves it is refused: the
        # boundary is the new real path.
        os.symlink(os.path.join(outside, "secret"), os.path.join(second, "s"))
        self.assertRaises(FileServerError, backend.findFile, "s", "base")
        os.symlink(os.path.join(first, "a"), os.path.join(second, "f"))
        self.assertRaises(FileServerError, backend.findFile, "f", "base")

    def test_symlinkBetweenRoots(self) -> None:
        """
        A symlink from one root into another root of the same saltenv
        still leaves its own root: refused.
        """
        other = self.root("other", {"secret": "s"})
        first = self.root("first", {})
        os.symlink(os.path.join(other, "secret"), os.path.join(first, "s"))
        backend = RootsBackend({"file_roots": {"base": [first, other]}})
        self.assertRaises(FileServerError, backend.findFile, "s", "base")
        self.assertEqual(backend.fileList("base"), ["secret"])

    def test_unnormalisedPathRefused(self) -> None:
        """
        The backend refuses a path that was not checked first.
        """
        backend = RootsBackend({"file_roots": {"base": [self.root("r", {"a": "a"})]}})
        self.assertRaises(FileServerError, backend.findFile, "./a", "base")
        self.assertRaises(FileServerError, backend.findFile, "../r/a", "base")

    def test_badSaltenvName(self) -> None:
        """
        A saltenv of C{file_roots} that is a path trick is refused at
        start, naming the option.
        """
        e = self.assertRaises(FileServerError, RootsBackend, {"file_roots": {"../x": ["/srv"]}})
        self.assertIn("file_roots", str(e))
        self.assertIn("'../x'", str(e))

    def test_badIgnoreRegex(self) -> None:
        """
        A C{file_ignore_regex} that does not compile is refused at start,
        naming the option and the pattern.
        """
        e = self.assertRaises(FileServerError, RootsBackend, {"file_ignore_regex": ["(unclosed"]})
        self.assertIn("file_ignore_regex: '(unclosed'", str(e))

    def test_ignoreRules(self) -> None:
        """
        Salt's semantics: regexes are searched, globs match the whole path.
        """
        rules = IgnoreRules([r"\.git/"], ["*.pyc", "tmp"])
        self.assertTrue(rules.ignored("a/.git/config"))
        self.assertTrue(rules.ignored("a/b.pyc"))
        self.assertTrue(rules.ignored("tmp"))
        self.assertFalse(rules.ignored("a/tmp"))
        self.assertFalse(rules.ignored("a/b.py"))
        self.assertFalse(IgnoreRules([], []))

    def test_updateAndClearCache(self) -> None:
        """
        Roots has nothing to update or forget.
        """
        backend = RootsBackend({})
        self.assertFalse(backend.update())
        self.assertIsNone(backend.clearCache())
        self.assertEqual(backend.envs(), [])

    def test_specialFilesNotListed(self) -> None:
        """
        A FIFO is neither a file nor a directory: not listed, not found.
        """
        root = self.root("r", {"a": "a"})
        os.mkfifo(os.path.join(root, "fifo"))
        backend = RootsBackend({"file_roots": {"base": [root]}})
        self.assertEqual(backend.fileList("base"), ["a"])
        self.assertIsNone(backend.findFile("fifo", "base"))


class SpeedTests(RootsTestCase):
    """
    Big trees list fast; cached hashes re-check fast. (Generous bounds:
    the machine is shared; the figures measured are in the report.)
    """

    def test_tenThousandFiles(self) -> None:
        """
        10,000 files in 100 directories are all listed (how fast is
        benchmarks/vs_salt/states.py's unrelated-files phase, not asserted).
        """
        root = os.path.join(self.base, "big")
        for d in range(100):
            directory = os.path.join(root, f"d{d:03}")
            os.makedirs(directory)
            for n in range(100):
                with open(os.path.join(directory, f"f{n:03}.sls"), "w") as f:
                    f.write("x")
        backend = RootsBackend({"file_roots": {"base": [root]}, "file_ignore_glob": ["*.swp"]})
        files = backend.fileList("base")
        self.assertEqual(len(files), 10_000)

    def test_thousandHashesCached(self) -> None:
        """
        C{hashes} of 1,000 unchanged files, asked twice, gives the same
        answer the second time (from its stat-checked cache).
        """
        root = os.path.join(self.base, "k")
        writeTree(root, {f"d{n % 10}/f{n}": "y" * 4096 for n in range(1000)}, self.base)
        server = FileServer({"file_roots": {"base": [root]}})
        first = server.hashes("base")
        self.assertEqual(len(first), 1000)
        second = server.hashes("base")
        self.assertEqual(first, second)


class HashTests(RootsTestCase):
    """
    L{FileServer}'s hashes: SHA-256, streamed, cached on (real path, size,
    mtime).
    """

    def setUp(self) -> None:
        super().setUp()
        self.rootDir = self.root("r", {"a": "hello"})
        self.server = FileServer({"file_roots": {"base": [self.rootDir]}})
        self.path = os.path.join(self.rootDir, "a")

    def test_cachedOnStat(self) -> None:
        """
        A file rewritten with the same size and mtime keeps its cached
        hash (proof that it was not read again); a new mtime is hashed
        again.
        """
        old = hashlib.sha256(b"hello").hexdigest()
        self.assertEqual(self.server.hashFile("a", "base")["hsum"], old)
        st = os.stat(self.path)
        with open(self.path, "w") as f:
            f.write("HELLO")
        os.utime(self.path, ns=(st.st_atime_ns, st.st_mtime_ns))
        self.assertEqual(self.server.hashFile("a", "base")["hsum"], old)
        os.utime(self.path, ns=(st.st_atime_ns, st.st_mtime_ns + 1000))
        self.assertEqual(
            self.server.hashFile("a", "base")["hsum"], hashlib.sha256(b"HELLO").hexdigest()
        )

    def test_clearCache(self) -> None:
        """
        L{FileServer.clearCache} forgets the cached hashes.
        """
        self.server.hashFile("a", "base")
        st = os.stat(self.path)
        with open(self.path, "w") as f:
            f.write("HELLO")
        os.utime(self.path, ns=(st.st_atime_ns, st.st_mtime_ns))
        self.server.clearCache()
        self.assertEqual(
            self.server.hashFile("a", "base")["hsum"], hashlib.sha256(b"HELLO").hexdigest()
        )

    def test_streamed(self) -> None:
        """
        A 32 MiB file is hashed with a few chunks' worth of memory.
        """
        big = os.path.join(self.rootDir, "big")
        chunk = os.urandom(1 << 20)
        digest = hashlib.sha256()
        with open(big, "wb") as f:
            for _ in range(32):
                f.write(chunk)
                digest.update(chunk)
        tracemalloc.start()
        try:
            result = self.server.hashFile("big", "base")
            _, peak = tracemalloc.get_traced_memory()
        finally:
            tracemalloc.stop()
        self.assertEqual(result["hsum"], digest.hexdigest())
        self.assertEqual(result["size"], 32 << 20)
        self.assertLess(peak, 4 * HASH_CHUNK)

    def test_unreadable(self) -> None:
        """
        A file that vanished between finding and hashing has no hash.
        """
        found = self.server.findFile("a", "base")
        os.unlink(self.path)
        self.assertIsNone(self.server.hashOf(found))


@implementer(IFileServerBackend)
class BrokenBackend:
    """
    A backend whose update fails, and which serves saltenv C{other}.
    """

    name = "git"

    def envs(self) -> list[str]:
        return ["other"]

    def fileList(self, saltenv: str) -> list[str]:
        return []

    def dirList(self, saltenv: str) -> list[str]:
        return []

    def findFile(self, path: str, saltenv: str) -> FoundFile | None:
        return None

    def update(self) -> bool:
        raise RuntimeError("remote unreachable")

    def clearCache(self) -> None:
        pass


class FileServerTests(RootsTestCase):
    """
    L{FileServer} builds its backends from C{fileserver_backend} and
    combines them.
    """

    def test_fromConfigDefault(self) -> None:
        """
        Without C{fileserver_backend}, roots alone.
        """
        server = FileServer.fromConfig({"file_roots": {"base": [self.base]}})
        self.assertEqual([b.name for b in server.backends], ["roots"])
        self.assertEqual([b.name for b in FileServer({}).backends], ["roots"])

    def test_fromConfigUnknown(self) -> None:
        """
        An unknown backend is a L{ValueError} naming it.
        """
        e = self.assertRaises(
            ValueError, FileServer.fromConfig, {"fileserver_backend": ["roots", "hgfs"]}
        )
        self.assertIn("unknown backend 'hgfs'", str(e))

    def test_fromConfigOnce(self) -> None:
        """
        A backend named twice (C{git} and C{gitfs}) is built once.
        """
        server = FileServer.fromConfig(
            {"fileserver_backend": ["git", "gitfs", "roots"], "cachedir": self.base}
        )
        self.assertEqual([b.name for b in server.backends], ["git", "roots"])

    def test_selectBackends(self) -> None:
        """
        Salt's C{backend} argument: names, a comma list, exclusions.
        """
        server = FileServer.fromConfig(
            {"fileserver_backend": ["roots", "git"], "cachedir": self.base}
        )
        names = lambda arg: [b.name for b in server.selectBackends(arg)]  # noqa: E731
        self.assertEqual(names(None), ["roots", "git"])
        self.assertEqual(names("gitfs"), ["git"])
        self.assertEqual(names("git,roots"), ["roots", "git"])
        self.assertEqual(names(["roots"]), ["roots"])
        self.assertEqual(names("-git"), ["roots"])
        self.assertRaises(ValueError, server.selectBackends, "minionfs")

    def test_combined(self) -> None:
        """
        Saltenvs are the union of the backends'; a saltenv only the second
        backend serves is configured; a failing update is logged and
        reported unchanged while the others update.
        """
        root = self.root("r", {"a": "a"})
        server = FileServer({}, [RootsBackend({"file_roots": {"base": [root]}}), BrokenBackend()])
        self.assertEqual(server.envs(), ["base", "other"])
        self.assertEqual(server.fileList("other"), [])
        self.assertIsNone(server.findFile("a", "other"))
        self.assertEqual(server.update(), {"roots": False, "git": False})
        self.assertEqual(len(self.flushLoggedErrors(RuntimeError)), 1)
