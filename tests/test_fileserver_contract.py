# -*- test-case-name: tests.test_fileserver_contract -*-
"""
The contract of L{IFileServerBackend}, run against every backend on real
files: L{RootsBackend} on temp directories and L{GitBackend} on real git
repositories made with the git binary.

L{BackendContractTests} is what each backend must do, alone and behind a
L{FileServer}: provide the interface; list saltenvs, files and
directories; find a file in the first root (directory or remote) holding
it; apply the ignore rules; keep inside its roots (C{..}, absolute paths,
NUL, symlinks out of a root, unknown saltenvs refused); hash files.

Each test describes its trees as I{layers}: a list (one per root, or per
remote) of C{{saltenv: {path: content}}}, a content being text or a
L{Symlink}. For roots, layer I{i} of saltenv I{e} is a directory
C{root<i>/<e>} in C{file_roots[e]}; for git, layer I{i} is repository
I{i} of C{gitfs_remotes} and saltenv I{e} its branch I{e} (C{master} for
C{base}).
"""

from __future__ import annotations

import os
import subprocess
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from twisted.trial.unittest import SynchronousTestCase
from zope.interface.verify import verifyObject

from salttwist.fileserver.gitfs import GitBackend, findGit
from salttwist.fileserver.interfaces import FileServerError, IFileServerBackend
from salttwist.fileserver.roots import RootsBackend
from salttwist.fileserver.server import FileServer


@dataclass(frozen=True)
class Symlink:
    """
    A symlink to C{target} in a layer (C{"{outside}"} in it is replaced by
    the test's directory outside every root).
    """

    target: str


Layers = list[dict[str, dict[str, Any]]]


def writeTree(directory: str, files: dict[str, Any], outside: str) -> None:
    """
    Write C{files} (C{{path: text or Symlink}}) under C{directory}.
    """
    os.makedirs(directory, exist_ok=True)
    for path, content in files.items():
        full = os.path.join(directory, path)
        os.makedirs(os.path.dirname(full), exist_ok=True)
        if isinstance(content, Symlink):
            os.symlink(content.target.replace("{outside}", outside), full)
        elif content is None:
            os.makedirs(full, exist_ok=True)
        else:
            with open(full, "w") as f:
                f.write(content)


class GitRepository:
    """
    A real git repository in a temp directory, driven with the git binary
    (no user or system config).
    """

    def __init__(self, path: str) -> None:
        self.path = path
        os.makedirs(path, exist_ok=True)
        self.git("init", "-q", "-b", "master")

    def git(self, *args: str) -> str:
        """
        Run git in the repository.

        @return: its output.
        """
        env = {
            "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
            "HOME": self.path,
            "GIT_CONFIG_GLOBAL": os.devnull,
            "GIT_CONFIG_NOSYSTEM": "1",
            "GIT_AUTHOR_NAME": "Test",
            "GIT_AUTHOR_EMAIL": "test@example.com",
            "GIT_COMMITTER_NAME": "Test",
            "GIT_COMMITTER_EMAIL": "test@example.com",
        }
        return subprocess.run(
            [findGit(), *args], cwd=self.path, env=env, check=True, capture_output=True, text=True
        ).stdout

    def commitBranch(
        self, branch: str, files: dict[str, Any], outside: str = "", fresh: bool = True
    ) -> str:
        """
        Make C{branch} hold exactly C{files} (a new orphan branch, or a new
        commit on it when it exists and not C{fresh}).

        @return: the new commit.
        """
        branches = self.git("branch", "--list", branch).strip()
        hasCommits = bool(self.git("rev-parse", "--all").strip())
        if branches and not fresh:
            self.git("checkout", "-q", branch)
        elif not hasCommits:
            self.git("checkout", "-q", "-B", branch)
        else:
            self.git("checkout", "-q", "--orphan", branch + "-new")
            if branches:
                self.git("branch", "-q", "-D", branch)
            self.git("branch", "-q", "-m", branch)
        self.git("rm", "-rqf", "--ignore-unmatch", ".")
        self.git("clean", "-qfdx")
        writeTree(self.path, files, outside)
        self.git("add", "-A")
        self.git("commit", "-q", "--allow-empty", "-m", f"{branch} content")
        return self.git("rev-parse", "HEAD").strip()


if TYPE_CHECKING:
    _Mixin = SynchronousTestCase
else:
    _Mixin = object


class BackendContractTests(_Mixin):
    """
    What every L{IFileServerBackend} does. Mixed into a
    L{SynchronousTestCase} that defines L{makeBackend}.
    """

    outside: str

    def makeBackend(self, layers: Layers, **opts: Any) -> IFileServerBackend:
        """
        @return: a backend serving C{layers} with the options C{opts}.
        """
        raise NotImplementedError()

    def setUp(self) -> None:
        self.base = self.mktemp()
        os.makedirs(self.base)
        self.outside = os.path.join(os.path.abspath(self.base), "outside")
        writeTree(self.outside, {"secret": "top secret\n", "dir/x": "x\n"}, self.outside)

    def test_interface(self) -> None:
        """
        The backend provides L{IFileServerBackend}.
        """
        backend = self.makeBackend([{"base": {"a": "a"}}])
        self.assertTrue(verifyObject(IFileServerBackend, backend))
        self.assertIn(backend.name, ("roots", "git"))

    def test_envs(self) -> None:
        """
        Every saltenv of every layer, sorted.
        """
        backend = self.makeBackend([{"base": {"a": "a"}, "dev": {"b": "b"}}, {"qa": {"c": "c"}}])
        self.assertEqual(backend.envs(), ["base", "dev", "qa"])

    def test_fileList(self) -> None:
        """
        Every file of a saltenv, across layers, sorted, once each.
        """
        backend = self.makeBackend(
            [
                {"base": {"top.sls": "t", "web/init.sls": "w", "web/files/a.conf": "a"}},
                {"base": {"web/init.sls": "other", "db/init.sls": "d"}, "dev": {"x": "x"}},
            ]
        )
        self.assertEqual(
            backend.fileList("base"),
            ["db/init.sls", "top.sls", "web/files/a.conf", "web/init.sls"],
        )
        self.assertEqual(backend.fileList("dev"), ["x"])
        self.assertEqual(backend.fileList("nope"), [])

    def test_dirList(self) -> None:
        """
        Every directory of a saltenv, across layers, sorted; the top
        itself is not listed.
        """
        backend = self.makeBackend(
            [{"base": {"top.sls": "t", "web/files/a.conf": "a"}}, {"base": {"db/init.sls": "d"}}]
        )
        self.assertEqual(backend.dirList("base"), ["db", "web", "web/files"])
        self.assertEqual(backend.dirList("nope"), [])

    def test_findFileFirstLayerWins(self) -> None:
        """
        A path in several layers is served from the first; one in a later
        layer only from there.
        """
        backend = self.makeBackend(
            [{"base": {"web/init.sls": "first"}}, {"base": {"web/init.sls": "second", "b": "b"}}]
        )
        found = backend.findFile("web/init.sls", "base")
        self.assertEqual(found.path, "web/init.sls")
        self.assertEqual(found.backend, backend.name)
        with open(found.realPath) as f:
            self.assertEqual(f.read(), "first")
        self.assertEqual(found.size, 5)
        self.assertEqual(found.mtimeNs, os.stat(found.realPath).st_mtime_ns)
        later = backend.findFile("b", "base")
        with open(later.realPath) as f:
            self.assertEqual(f.read(), "b")

    def test_findFileMissing(self) -> None:
        """
        A path no layer holds, a directory, and any path of a saltenv not
        served are not found.
        """
        backend = self.makeBackend([{"base": {"web/init.sls": "w"}}])
        self.assertIsNone(backend.findFile("nothere", "base"))
        self.assertIsNone(backend.findFile("web", "base"))
        self.assertIsNone(backend.findFile("web/init.sls/x", "base"))
        self.assertIsNone(backend.findFile("web/init.sls", "nope"))

    def test_ignoreRegex(self) -> None:
        """
        C{file_ignore_regex} hides what it matches anywhere in the path.
        """
        backend = self.makeBackend(
            [{"base": {"a.sls": "a", "a.sls.bak": "b", "svn/.svn/x": "x"}}],
            file_ignore_regex=[r"\.bak$", "/\\.svn"],
        )
        self.assertEqual(backend.fileList("base"), ["a.sls"])
        self.assertEqual(backend.dirList("base"), ["svn"])
        self.assertIsNone(backend.findFile("a.sls.bak", "base"))
        self.assertIsNotNone(backend.findFile("a.sls", "base"))

    def test_ignoreGlob(self) -> None:
        """
        C{file_ignore_glob} hides whole paths matching it.
        """
        backend = self.makeBackend(
            [{"base": {"a.sls": "a", "a.swp": "s", "d/b.swp": "s", "d/c": "c"}}],
            file_ignore_glob=["*.swp"],
        )
        self.assertEqual(backend.fileList("base"), ["a.sls", "d/c"])
        self.assertIsNone(backend.findFile("d/b.swp", "base"))

    def test_symlinkInside(self) -> None:
        """
        A symlink to a file inside the root is listed and served, its real
        path the target's.
        """
        backend = self.makeBackend([{"base": {"real/a": "a", "link": Symlink("real/a")}}])
        self.assertEqual(backend.fileList("base"), ["link", "real/a"])
        found = backend.findFile("link", "base")
        self.assertTrue(found.realPath.endswith(os.path.join("real", "a")))

    def test_symlinkOutsideRefused(self) -> None:
        """
        A symlink out of the root, to a file or a directory, absolute or
        relative, is not listed, and asking for it is refused with a
        L{FileServerError} naming the path.
        """
        backend = self.makeBackend(
            [
                {
                    "base": {
                        "ok": "ok",
                        "evil": Symlink("{outside}/secret"),
                        "evildir": Symlink("{outside}/dir"),
                        "sub/up": Symlink("../../../../../../../../../../../etc/passwd"),
                    }
                }
            ]
        )
        self.assertEqual(backend.fileList("base"), ["ok"])
        self.assertEqual(backend.dirList("base"), ["sub"])
        for path in ("evil", "evildir/x", "sub/up"):
            e = self.assertRaises(FileServerError, backend.findFile, path, "base")
            self.assertIn(f"salt://{path}", str(e))
            self.assertIn("outside", str(e))

    def test_ignoreSymlinks(self) -> None:
        """
        With C{fileserver_ignoresymlinks}, symlinks are neither listed nor
        served, even inside the root.
        """
        backend = self.makeBackend(
            [{"base": {"real/a": "a", "link": Symlink("real/a"), "ldir": Symlink("real")}}],
            fileserver_ignoresymlinks=True,
        )
        self.assertEqual(backend.fileList("base"), ["real/a"])
        self.assertIsNone(backend.findFile("link", "base"))
        self.assertIsNone(backend.findFile("ldir/a", "base"))

    def test_followSymlinks(self) -> None:
        """
        A symlinked directory inside the root is walked by default; with
        C{fileserver_followsymlinks: False} it is neither walked nor
        served through.
        """
        layers: Layers = [{"base": {"real/a": "a", "ldir": Symlink("real")}}]
        backend = self.makeBackend(layers)
        self.assertEqual(backend.fileList("base"), ["ldir/a", "real/a"])
        self.assertEqual(backend.dirList("base"), ["ldir", "real"])
        self.assertIsNotNone(backend.findFile("ldir/a", "base"))
        self.tearDownBackend()
        noFollow = self.makeBackend(layers, fileserver_followsymlinks=False)
        self.assertEqual(noFollow.fileList("base"), ["real/a"])
        self.assertIsNone(noFollow.findFile("ldir/a", "base"))

    def tearDownBackend(self) -> None:
        """
        Forget the trees made so far (a second L{makeBackend} in one test).
        """

    def test_symlinkLoop(self) -> None:
        """
        A symlink to an ancestor directory is not walked again: the walk
        ends.
        """
        backend = self.makeBackend(
            [{"base": {"d/a": "a", "d/loop": Symlink(".."), "d/me": Symlink(".")}}]
        )
        self.assertEqual(backend.fileList("base"), ["d/a"])

    def test_brokenSymlink(self) -> None:
        """
        A dangling symlink is neither listed nor found.
        """
        backend = self.makeBackend([{"base": {"a": "a", "dangling": Symlink("nothere")}}])
        self.assertEqual(backend.fileList("base"), ["a"])
        self.assertIsNone(backend.findFile("dangling", "base"))

    def test_backslashNamesNotListed(self) -> None:
        """
        A file whose name has a backslash could never be requested: it is
        not listed.
        """
        backend = self.makeBackend([{"base": {"a": "a", "b\\c": "bc"}}])
        self.assertEqual(backend.fileList("base"), ["a"])

    # Behind a FileServer: the checks it makes once for every backend.

    def fileServer(self, layers: Layers, **opts: Any) -> FileServer:
        """
        @return: a L{FileServer} of the one backend of C{layers}.
        """
        backend = self.makeBackend(layers, **opts)
        return FileServer({}, [backend])

    def test_serverTraversalRefused(self) -> None:
        """
        C{..}, absolute paths, NUL and backslashes are refused before any
        backend sees them; so are saltenvs that are not configured or are
        not valid names.
        """
        server = self.fileServer([{"base": {"a": "a"}}])
        for path, why in [
            ("../a", "'..'"),
            ("a/../../outside/secret", "'..'"),
            ("/etc/passwd", "absolute"),
            ("a\x00", "NUL"),
            ("..\\a", "backslash"),
            ("", "empty"),
        ]:
            e = self.assertRaises(FileServerError, server.findFile, path, "base")
            self.assertIn(why, str(e))
            self.assertRaises(FileServerError, server.hashFile, path, "base")
        e = self.assertRaises(FileServerError, server.findFile, "a", "prod")
        self.assertEqual(str(e), "saltenv 'prod' is not configured")
        self.assertRaises(FileServerError, server.fileList, "prod")
        self.assertRaises(FileServerError, server.findFile, "a", "../base")
        self.assertRaises(FileServerError, server.fileList, "base", "../")

    def test_serverListsAndPrefix(self) -> None:
        """
        The server's lists filter on a prefix, as Salt's (the start of the
        path); its envs are the backend's.
        """
        server = self.fileServer(
            [{"base": {"web/a": "a", "web.sls": "w", "webby/b": "b", "db/c": "c"}}]
        )
        self.assertEqual(server.envs(), ["base"])
        self.assertEqual(server.fileList("base", "web/"), ["web/a"])
        self.assertEqual(server.fileList("base", "web"), ["web.sls", "web/a", "webby/b"])
        self.assertEqual(server.dirList("base"), ["db", "web", "webby"])
        self.assertEqual(server.dirList("base", "we"), ["web", "webby"])

    def test_serverHashes(self) -> None:
        """
        C{hashFile} gives Salt's C{hsum} and C{hash_type} (SHA-256) and the
        size; C{{}} for a missing file; C{hashes} maps every file under a
        prefix to its SHA-256.
        """
        import hashlib

        server = self.fileServer([{"base": {"a": "hello", "d/b": "world", "e/c": "!"}}])
        self.assertEqual(
            server.hashFile("a", "base"),
            {"hsum": hashlib.sha256(b"hello").hexdigest(), "hash_type": "sha256", "size": 5},
        )
        self.assertEqual(server.hashFile("nothere", "base"), {})
        self.assertEqual(server.hashes("base", "d/"), {"d/b": hashlib.sha256(b"world").hexdigest()})
        self.assertEqual(sorted(server.hashes("base")), ["a", "d/b", "e/c"])

    def test_serverSymlinkOutRefused(self) -> None:
        """
        Through the server too, a symlink out of a root is refused and
        C{hashes} leaves it out.
        """
        server = self.fileServer([{"base": {"a": "a", "evil": Symlink("{outside}/secret")}}])
        self.assertRaises(FileServerError, server.hashFile, "evil", "base")
        self.assertEqual(sorted(server.hashes("base")), ["a"])


class RootsContractTests(BackendContractTests, SynchronousTestCase):
    """
    L{RootsBackend} on temp directories.
    """

    def makeBackend(self, layers: Layers, **opts: Any) -> IFileServerBackend:
        fileRoots: dict[str, list[str]] = {}
        self.rootCount = getattr(self, "rootCount", 0) + 1
        for index, layer in enumerate(layers):
            for saltenv, files in layer.items():
                directory = os.path.join(
                    os.path.abspath(self.base), f"set{self.rootCount}", f"root{index}", saltenv
                )
                writeTree(directory, files, self.outside)
                fileRoots.setdefault(saltenv, []).append(directory)
        return RootsBackend({"file_roots": fileRoots, **opts})


class GitContractTests(BackendContractTests, SynchronousTestCase):
    """
    L{GitBackend} on real local git repositories: layer I{i} is remote
    I{i}, saltenv I{e} its branch I{e} (C{master} for C{base}).
    """

    def makeBackend(self, layers: Layers, **opts: Any) -> IFileServerBackend:
        self.repoCount = getattr(self, "repoCount", 0) + 1
        remotes = []
        for index, layer in enumerate(layers):
            repo = GitRepository(
                os.path.join(os.path.abspath(self.base), f"set{self.repoCount}", f"repo{index}")
            )
            for saltenv, files in layer.items():
                repo.commitBranch("master" if saltenv == "base" else saltenv, files, self.outside)
            remotes.append(repo.path)
        cachedir = os.path.join(os.path.abspath(self.base), f"cache{self.repoCount}")
        backend = GitBackend({"gitfs_remotes": remotes, **opts}, cachedir)
        self.assertTrue(backend.update())
        self.assertEqual(backend.errors, {})
        return backend
