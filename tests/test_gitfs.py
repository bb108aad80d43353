# -*- test-case-name: tests.test_gitfs -*-
"""
Tests for L{salttwist.fileserver.gitfs}: what only the git backend does
(its shared contract with C{roots} is in L{tests.test_fileserver_contract}).
Every test uses real repositories made with the git binary in temp
directories, cloned and fetched by the backend as on a master.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import stat
import tempfile

from twisted.trial.unittest import SynchronousTestCase

from salttwist.fileserver.gitfs import (
    GitBackend,
    GitError,
    gitEnvironment,
    parseRemotes,
    redactUrl,
)
from salttwist.fileserver.interfaces import FileServerError
from salttwist.fileserver.server import FileServer
from tests.test_fileserver_contract import GitRepository, Symlink


def read(path: str) -> str:
    """
    @return: the text of C{path}.
    """
    with open(path) as f:
        return f.read()


class GitTestCase(SynchronousTestCase):
    """
    A temp directory with a repository C{self.repo} (branch C{master}
    holding C{top.sls}) and a cachedir.
    """

    def setUp(self) -> None:
        self.base = os.path.abspath(self.mktemp())
        os.makedirs(self.base)
        self.cachedir = os.path.join(self.base, "cache")
        self.repo = GitRepository(os.path.join(self.base, "repo"))
        self.repo.commitBranch("master", {"top.sls": "base: {}\n"})

    def backend(self, **opts: object) -> GitBackend:
        """
        @return: a backend of C{self.repo} (unless C{gitfs_remotes} is
            given) with C{opts}.
        """
        config: dict[str, object] = {"gitfs_remotes": [self.repo.path]}
        config.update(opts)
        return GitBackend(config, self.cachedir)

    def content(self, backend: GitBackend, path: str, saltenv: str = "base") -> str | None:
        """
        @return: the text the backend serves for C{path}, or L{None}.
        """
        found = backend.findFile(path, saltenv)
        return None if found is None else read(found.realPath)


class SaltenvTests(GitTestCase):
    """
    Branches and tags are saltenvs; C{gitfs_base} is C{base}.
    """

    def test_branchesAndTags(self) -> None:
        """
        Every branch and tag (lightweight or annotated) is a saltenv of its
        name, C{master} being C{base}; a tag keeps its commit's files when
        the branch moves on.
        """
        self.repo.commitBranch("dev", {"top.sls": "dev\n"})
        self.repo.git("checkout", "-q", "master")
        self.repo.git("tag", "v1")
        self.repo.git("tag", "-a", "v2", "-m", "release 2")
        self.repo.commitBranch("feature/x", {"f": "x"})
        self.repo.commitBranch("master", {"top.sls": "newer\n"}, fresh=False)
        backend = self.backend()
        self.assertTrue(backend.update())
        self.assertEqual(backend.envs(), ["base", "dev", "feature/x", "v1", "v2"])
        self.assertEqual(self.content(backend, "top.sls"), "newer\n")
        self.assertEqual(self.content(backend, "top.sls", "dev"), "dev\n")
        self.assertEqual(self.content(backend, "top.sls", "v1"), "base: {}\n")
        self.assertEqual(self.content(backend, "top.sls", "v2"), "base: {}\n")
        self.assertEqual(backend.fileList("feature/x"), ["f"])

    def test_gitfsBase(self) -> None:
        """
        C{gitfs_base} names the branch served as C{base}; C{master} is then
        a saltenv of its own name.
        """
        self.repo.commitBranch("production", {"top.sls": "prod\n"})
        backend = self.backend(gitfs_base="production")
        backend.update()
        self.assertEqual(backend.envs(), ["base", "master"])
        self.assertEqual(self.content(backend, "top.sls"), "prod\n")
        self.assertEqual(self.content(backend, "top.sls", "master"), "base: {}\n")

    def test_noBaseBranch(self) -> None:
        """
        A repository without the C{gitfs_base} branch has no C{base}.
        """
        backend = self.backend(gitfs_base="main")
        backend.update()
        self.assertEqual(backend.envs(), ["master"])

    def test_perRemoteBase(self) -> None:
        """
        A remote's own C{base} overrides C{gitfs_base}.
        """
        other = GitRepository(os.path.join(self.base, "other"))
        other.commitBranch("stable", {"o.sls": "o"})
        backend = self.backend(gitfs_remotes=[self.repo.path, {other.path: [{"base": "stable"}]}])
        backend.update()
        self.assertEqual(backend.envs(), ["base"])
        self.assertEqual(backend.fileList("base"), ["o.sls", "top.sls"])

    def test_whitelistBlacklist(self) -> None:
        """
        C{gitfs_env_whitelist} and C{gitfs_env_blacklist} take names, globs
        and regular expressions, as Salt's.
        """
        for name in ("dev", "qa", "feature-1", "feature-2", "release-3"):
            self.repo.commitBranch(name, {"x": name})
        backend = self.backend(
            gitfs_env_whitelist=["base", "feature-*", "release-[0-9]+", "dev"],
            gitfs_env_blacklist=["feature-2", "d.v"],
        )
        backend.update()
        self.assertEqual(backend.envs(), ["base", "feature-1", "release-3"])
        self.assertIsNone(backend.findFile("x", "qa"))


class RootAndMountpointTests(GitTestCase):
    """
    C{gitfs_root} serves a subdirectory; C{gitfs_mountpoint} prefixes the
    paths.
    """

    def setUp(self) -> None:
        super().setUp()
        self.repo.commitBranch(
            "master",
            {
                "README": "not served",
                "salt/top.sls": "top",
                "salt/nginx/init.sls": "nginx",
                "salt/up": Symlink("../README"),
            },
        )

    def test_root(self) -> None:
        """
        Only the root's files are served, at the top; a symlink leaving the
        root (into the repository) is refused.
        """
        backend = self.backend(gitfs_root="salt")
        backend.update()
        self.assertEqual(backend.fileList("base"), ["nginx/init.sls", "top.sls"])
        self.assertEqual(backend.dirList("base"), ["nginx"])
        self.assertIsNone(backend.findFile("README", "base"))
        self.assertRaises(FileServerError, backend.findFile, "up", "base")

    def test_mountpoint(self) -> None:
        """
        With C{gitfs_mountpoint: salt://formulas}, files appear under
        C{formulas/}.
        """
        backend = self.backend(gitfs_root="/salt/", gitfs_mountpoint="salt://formulas")
        backend.update()
        self.assertEqual(backend.fileList("base"), ["formulas/nginx/init.sls", "formulas/top.sls"])
        self.assertEqual(backend.dirList("base"), ["formulas", "formulas/nginx"])
        self.assertEqual(self.content(backend, "formulas/nginx/init.sls"), "nginx")
        self.assertIsNone(backend.findFile("nginx/init.sls", "base"))

    def test_perRemote(self) -> None:
        """
        Salt's per-remote options (a list of single-key mappings) override
        the global ones for that remote only; remotes merge in order.
        """
        other = GitRepository(os.path.join(self.base, "other"))
        other.commitBranch("master", {"top.sls": "other top", "mysql/init.sls": "m"})
        backend = self.backend(
            gitfs_remotes=[
                {self.repo.path: [{"root": "salt"}, {"name": "states"}]},
                {other.path: [{"mountpoint": "formulas"}]},
            ]
        )
        backend.update()
        self.assertEqual(
            backend.fileList("base"),
            ["formulas/mysql/init.sls", "formulas/top.sls", "nginx/init.sls", "top.sls"],
        )
        self.assertEqual(self.content(backend, "top.sls"), "top")

    def test_firstRemoteWins(self) -> None:
        """
        A path both remotes hold is served from the first.
        """
        other = GitRepository(os.path.join(self.base, "other"))
        other.commitBranch("master", {"top.sls": "other"})
        backend = self.backend(
            gitfs_remotes=[{other.path: [{"root": ""}]}, {self.repo.path: [{"root": "salt"}]}]
        )
        backend.update()
        self.assertEqual(self.content(backend, "top.sls"), "other")
        self.assertEqual(self.content(backend, "nginx/init.sls"), "nginx")

    def test_rootMissingInRef(self) -> None:
        """
        A ref whose commit has no C{root} is a saltenv with no files from
        that remote.
        """
        self.repo.commitBranch("bare", {"elsewhere": "e"})
        backend = self.backend(gitfs_root="salt")
        backend.update()
        self.assertEqual(backend.envs(), ["bare", "base"])
        self.assertEqual(backend.fileList("bare"), [])


class UpdateTests(GitTestCase):
    """
    L{GitBackend.update} fetches: new commits and branches appear, deleted
    ones go, a failed fetch keeps the last good trees.
    """

    def test_newCommit(self) -> None:
        """
        A new commit is served after an update, which reports a change;
        an update with nothing new reports none.
        """
        backend = self.backend()
        self.assertTrue(backend.update())
        self.assertFalse(backend.update())
        self.repo.commitBranch("master", {"top.sls": "v2\n", "new.sls": "n"}, fresh=False)
        self.assertEqual(self.content(backend, "top.sls"), "base: {}\n")
        self.assertTrue(backend.update())
        self.assertEqual(self.content(backend, "top.sls"), "v2\n")
        self.assertEqual(backend.fileList("base"), ["new.sls", "top.sls"])
        self.assertFalse(backend.update())

    def test_newAndDeletedBranch(self) -> None:
        """
        A branch pushed upstream appears at the next update; one deleted
        upstream (and a deleted tag) disappears.
        """
        backend = self.backend()
        backend.update()
        self.repo.commitBranch("dev", {"d": "d"})
        self.repo.git("tag", "v1")
        self.assertTrue(backend.update())
        self.assertEqual(backend.envs(), ["base", "dev", "v1"])
        self.repo.git("checkout", "-q", "master")
        self.repo.git("branch", "-q", "-D", "dev")
        self.repo.git("tag", "-d", "v1")
        self.assertTrue(backend.update())
        self.assertEqual(backend.envs(), ["base"])
        self.assertEqual(backend.fileList("dev"), [])
        self.assertIsNone(backend.findFile("d", "dev"))

    def test_failedFetchKeepsLastGood(self) -> None:
        """
        When the remote cannot be fetched, the update reports no change,
        logs and keeps the error, and the last good trees are still
        served; a later good fetch clears the error.
        """
        backend = self.backend()
        backend.update()
        moved = self.repo.path + "-away"
        os.rename(self.repo.path, moved)
        self.assertFalse(backend.update())
        self.assertEqual(list(backend.errors), [self.repo.path])
        self.assertIn("fetch", backend.errors[self.repo.path])
        self.assertEqual(len(self.flushLoggedErrors()), 0)
        self.assertEqual(backend.envs(), ["base"])
        self.assertEqual(self.content(backend, "top.sls"), "base: {}\n")
        os.rename(moved, self.repo.path)
        self.assertFalse(backend.update())
        self.assertEqual(backend.errors, {})

    def test_cloneFailure(self) -> None:
        """
        A remote that cannot be cloned serves nothing, keeps its error,
        and does not stop the other remotes.
        """
        backend = self.backend(gitfs_remotes=[os.path.join(self.base, "nothere"), self.repo.path])
        self.assertTrue(backend.update())
        self.assertEqual(backend.envs(), ["base"])
        self.assertIn("clone", backend.errors[os.path.join(self.base, "nothere")])
        self.assertEqual(backend.fileList("base"), ["top.sls"])

    def test_oldTreesRemovedOneUpdateLater(self) -> None:
        """
        A replaced tree stays for one more update (a transfer reading it
        finishes), then goes.
        """
        backend = self.backend()
        backend.update()
        first = backend.findFile("top.sls", "base").realPath
        self.repo.commitBranch("master", {"top.sls": "2"}, fresh=False)
        backend.update()
        self.assertTrue(os.path.exists(first))
        self.repo.commitBranch("master", {"top.sls": "3"}, fresh=False)
        backend.update()
        self.assertFalse(os.path.exists(first))
        self.assertEqual(self.content(backend, "top.sls"), "3")

    def test_sharedTrees(self) -> None:
        """
        Refs at the same commit share one exported tree.
        """
        self.repo.git("tag", "v1")
        self.repo.git("branch", "copy")
        backend = self.backend()
        backend.update()
        trees = {backend.findFile("top.sls", env).realPath for env in ("base", "v1", "copy")}
        self.assertEqual(len(trees), 1)

    def test_treesExportedAtFirstUse(self) -> None:
        """
        Only C{base}'s tree is exported by an update; another ref's at its
        first use, after which it is kept and, when its ref moves,
        exported again by the update; refs never used cost no export.
        """
        for n in range(5):
            self.repo.commitBranch("master", {"top.sls": f"{n}"}, fresh=False)
            self.repo.git("tag", f"v{n}")
        self.repo.commitBranch("dev", {"d": "1"})
        self.repo.git("checkout", "-q", "master")
        backend = self.backend()
        backend.update()
        trees = backend.remotes[0].trees
        self.assertEqual(len(os.listdir(trees)), 1)
        self.assertEqual(self.content(backend, "top.sls", "v2"), "2")
        self.assertEqual(self.content(backend, "d", "dev"), "1")
        self.assertEqual(len(os.listdir(trees)), 3)
        self.assertFalse(backend.update())
        self.assertEqual(len(os.listdir(trees)), 3)
        self.repo.commitBranch("dev", {"d": "2"}, fresh=False)
        self.assertTrue(backend.update())
        # dev's new tree is exported by the update; its old one stays one
        # more update.
        self.assertEqual(len(os.listdir(trees)), 4)
        self.assertEqual(self.content(backend, "d", "dev"), "2")
        backend.update()
        self.assertEqual(len(os.listdir(trees)), 3)

    def test_lazyFirstUse(self) -> None:
        """
        A backend never updated fetches at its first use.
        """
        backend = self.backend()
        self.assertEqual(backend.fileList("base"), ["top.sls"])

    def test_stateKeptAcrossRestarts(self) -> None:
        """
        A new backend on the same cachedir serves the last good trees at
        once, without fetching (the remote may be down at start).
        """
        self.backend().update()
        os.rename(self.repo.path, self.repo.path + "-away")
        backend = self.backend()
        self.assertEqual(backend.envs(), ["base"])
        self.assertEqual(self.content(backend, "top.sls"), "base: {}\n")
        self.assertEqual(backend.errors, {})

    def test_corruptStateIgnored(self) -> None:
        """
        A state file that is not what the backend wrote is ignored: the
        first use fetches again.
        """
        backend = self.backend()
        backend.update()
        with open(backend.remotes[0].stateFile, "w") as f:
            json.dump({"refs": {"../x": ["abc", "../../etc"]}}, f)
        again = self.backend()
        self.assertEqual(again.envs(), ["base"])

    def test_clearCache(self) -> None:
        """
        L{GitBackend.clearCache} removes the mirrors and trees; the next
        use clones again.
        """
        backend = self.backend()
        backend.update()
        directory = backend.remotes[0].directory
        backend.clearCache()
        self.assertFalse(os.path.exists(directory))
        self.assertEqual(backend.fileList("base"), ["top.sls"])
        self.assertTrue(os.path.isdir(directory))

    def test_cacheLayout(self) -> None:
        """
        The mirror is under C{cachedir/gitfs/<sha256 of the URL>}, private
        to the master's user.
        """
        backend = self.backend()
        backend.update()
        directory = os.path.join(
            self.cachedir, "gitfs", hashlib.sha256(self.repo.path.encode()).hexdigest()
        )
        self.assertTrue(os.path.isdir(os.path.join(directory, "mirror.git")))
        self.assertEqual(stat.S_IMODE(os.stat(os.path.join(directory, "trees")).st_mode), 0o700)

    def test_timeout(self) -> None:
        """
        A git command that runs past the timeout is killed with its
        process group and reported.
        """
        script = os.path.join(self.base, "slowgit")
        with open(script, "w") as f:
            f.write("#!/bin/sh\nsleep 30 &\nwait\n")
        os.chmod(script, 0o755)
        backend = self.backend()
        backend.git = script
        backend.timeout = 0.3
        self.assertRaises(GitError, backend._git, ["fetch"])
        self.assertFalse(backend.update())
        self.assertIn("timed out", backend.errors[self.repo.path])

    def test_cleanEnvironment(self) -> None:
        """
        git runs without the user's config or the master's C{GIT_*}
        variables: a C{~/.gitconfig} redirecting the URL and a C{GIT_DIR}
        have no effect.
        """
        home = os.path.join(self.base, "home")
        os.makedirs(home)
        with open(os.path.join(home, ".gitconfig"), "w") as f:
            f.write(f'[url "/nonexistent/"]\n\tinsteadOf = {self.repo.path}\n')
        self.patch(os, "environ", {**os.environ, "HOME": home, "GIT_DIR": "/nonexistent"})
        env = gitEnvironment()
        self.assertNotIn("GIT_DIR", env)
        self.assertEqual(env["GIT_TERMINAL_PROMPT"], "0")
        backend = self.backend()
        self.assertTrue(backend.update())
        self.assertEqual(backend.errors, {})

    def test_extTransportRefused(self) -> None:
        """
        An C{ext::} remote (a command line as a URL) is refused by git: the
        command never runs.
        """
        marker = os.path.join(self.base, "pwned")
        backend = self.backend(gitfs_remotes=[f"ext::touch {marker}"])
        self.assertFalse(backend.update())
        self.assertFalse(os.path.exists(marker))
        self.assertIn("transport 'ext' not allowed", backend.errors[f"ext::touch {marker}"])


class ConfigTests(SynchronousTestCase):
    """
    C{gitfs_remotes} is checked at start, naming the remote.
    """

    def test_shapes(self) -> None:
        """
        A URL, or C{{url: [single-key mappings]}} or C{{url: mapping}}.
        """
        remotes = parseRemotes(
            {
                "gitfs_remotes": [
                    "https://example.com/a.git",
                    {"https://example.com/b.git": [{"root": "salt"}, {"mountpoint": "m"}]},
                    {"https://example.com/c.git": {"base": "main", "name": "c"}},
                ],
                "gitfs_root": "top",
            },
            "/cache",
        )
        self.assertEqual([r.root for r in remotes], ["top", "salt", "top"])
        self.assertEqual([r.mountpoint for r in remotes], ["", "m", ""])
        self.assertEqual([r.base for r in remotes], ["master", "master", "main"])
        self.assertEqual(remotes[2].label, "c")

    def test_refused(self) -> None:
        """
        Unsupported options, bad shapes and roots leaving the repository
        are refused with the remote's URL (its password hidden).
        """
        cases = [
            ([{"https://u:pw@example.com/a": [{"password": "x"}]}], "option(s) password"),
            ([{"https://example.com/a": [{"root": "../x"}]}], "root"),
            ([{"https://example.com/a": ["root"]}], "single-key mappings"),
            ([42], "neither a URL"),
            ([{"https://example.com/a": [{"base": ""}]}], "base"),
        ]
        for remotes, why in cases:
            e = self.assertRaises(
                FileServerError, parseRemotes, {"gitfs_remotes": remotes}, "/cache"
            )
            self.assertIn(why, str(e))
            self.assertNotIn("pw@", str(e))

    def test_redactUrl(self) -> None:
        """
        A password in a URL is hidden; the rest stays.
        """
        self.assertEqual(
            redactUrl("https://user:token@example.com:8443/r.git"),
            "https://user:***@example.com:8443/r.git",
        )
        self.assertEqual(redactUrl("git@github.com:o/r.git"), "git@github.com:o/r.git")
        self.assertEqual(redactUrl("/srv/repo"), "/srv/repo")


class FileServerWithGitTests(GitTestCase):
    """
    C{fileserver_backend: [roots, git]} through L{FileServer.fromConfig}.
    """

    def test_rootsThenGit(self) -> None:
        """
        Both backends are built in order; the first holding a path wins;
        saltenvs merge; C{gitfs} is an alias of C{git}; C{update} reports
        per backend.
        """
        roots = os.path.join(self.base, "roots")
        os.makedirs(roots)
        with open(os.path.join(roots, "top.sls"), "w") as f:
            f.write("from roots")
        self.repo.commitBranch("dev", {"d.sls": "d"})
        server = FileServer.fromConfig(
            {
                "fileserver_backend": ["roots", "gitfs"],
                "file_roots": {"base": [roots]},
                "gitfs_remotes": [self.repo.path],
                "cachedir": self.cachedir,
            }
        )
        self.assertEqual([b.name for b in server.backends], ["roots", "git"])
        self.assertEqual(server.update(), {"roots": False, "git": True})
        self.assertEqual(server.envs(), ["base", "dev"])
        self.assertEqual(server.findFile("top.sls", "base").backend, "roots")
        self.assertEqual(server.findFile("d.sls", "dev").backend, "git")
        self.assertEqual(server.envs(backend="roots"), ["base"])
        self.assertEqual(server.update(backend="git"), {"git": False})


class MasterGitfsUpdateTests(GitTestCase):
    """
    The master fetches its gitfs remotes at start and every
    C{gitfs_update_interval} seconds, in a thread (here: synchronously).
    """

    def makeService(self, **overrides: object) -> object:
        """
        @return: a L{MasterService} on a L{MemoryReactorClock} whose
            C{file_roots} is empty and C{gitfs_remotes} C{self.repo}.
        """
        from twisted.internet.testing import MemoryReactorClock

        from salttwist.config import loadMasterConfig
        from salttwist.master.core import runSynchronously
        from salttwist.master.service import MasterService
        from tests.test_master_service import _RecordingJobCache

        # A short root: UNIX socket paths are short.
        root = tempfile.mkdtemp(prefix="stg-")
        self.addCleanup(shutil.rmtree, root, True)
        roots = os.path.join(self.base, "roots")
        os.makedirs(roots, exist_ok=True)
        self.reactor = MemoryReactorClock()
        options: dict[str, object] = {
            "root_dir": root,
            "interface": "127.0.0.1",
            "file_roots": {"base": [roots]},
            "gitfs_remotes": [self.repo.path],
            "gitfs_update_interval": 30,
        }
        options.update(overrides)
        config = loadMasterConfig(root, overrides=options)
        return MasterService(
            config,
            self.reactor,
            runBlocking=runSynchronously,
            jobCache=_RecordingJobCache(),
            useWorkers=False,
        )

    def gitfsTimers(self, service: object) -> list[object]:
        """
        @return: the periodic services of C{service} calling the gitfs
            update.
        """
        return [
            child
            for child in service  # type: ignore[attr-defined]
            if getattr(child, "_f", None) == service._updateGitfs  # type: ignore[attr-defined]
        ]

    def test_periodicUpdate(self) -> None:
        """
        With C{git} in C{fileserver_backend}, the remotes are fetched when
        the service starts and again every C{gitfs_update_interval}.
        """
        service = self.makeService(fileserver_backend=["roots", "git"])
        [timer] = self.gitfsTimers(service)
        self.assertEqual(timer.step, 30.0)  # type: ignore[attr-defined]
        fileServer = service.master.fileServer  # type: ignore[attr-defined]
        git = fileServer.backends[1]
        timer.startService()  # type: ignore[attr-defined]
        self.addCleanup(timer.stopService)  # type: ignore[attr-defined]
        self.assertTrue(git._ready)
        self.assertEqual(fileServer.fileList("base"), ["top.sls"])
        self.repo.commitBranch("master", {"top.sls": "x", "new.sls": "n"}, fresh=False)
        self.reactor.advance(29)
        self.assertEqual(fileServer.fileList("base"), ["top.sls"])
        self.reactor.advance(1)
        self.assertEqual(fileServer.fileList("base"), ["new.sls", "top.sls"])

    def test_noGitNoTimer(self) -> None:
        """
        Without C{git} in C{fileserver_backend}, nothing is fetched.
        """
        self.assertEqual(self.gitfsTimers(self.makeService()), [])

    def test_badConfigStopsStart(self) -> None:
        """
        A file-server option that is wrong stops the master at start with
        a L{StartupError} naming it (no traceback; raised by the file
        room, L{salttwist.master.fileserving.FileRequests}).
        """
        from salttwist.daemon import StartupError

        cases = [
            (
                {
                    "fileserver_backend": ["git"],
                    "gitfs_remotes": [{self.repo.path: [{"password": "x"}]}],
                },
                "password",
            ),
            ({"fileserver_backend": ["roots", "hgfs"]}, "unknown backend 'hgfs'"),
            ({"file_ignore_regex": ["(unclosed"]}, "file_ignore_regex"),
        ]
        for overrides, why in cases:
            e = self.assertRaises(StartupError, self.makeService, **overrides)
            self.assertIn(why, str(e))
