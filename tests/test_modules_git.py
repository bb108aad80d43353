# -*- test-case-name: tests.test_modules_git -*-
"""
Tests for L{salttwist.modules.git} (Salt's C{git} module), against real
repositories made in temporary directories.
"""

from __future__ import annotations

import os

from twisted.trial.unittest import SynchronousTestCase

from salttwist.modules import CommandExecutionError, SaltInvocationError, loadFunctions
from salttwist.modules import git as gitmod
from tests._gitrepos import Upstream, git


class GitModuleTests(SynchronousTestCase):
    """
    The C{git} functions on an upstream repository and clones of it.
    """

    def setUp(self) -> None:
        self.dir = os.path.abspath(self.mktemp())
        os.makedirs(self.dir)
        self.upstream = Upstream(os.path.join(self.dir, "upstream"))

    def cloneIt(self, name: str = "clone") -> str:
        target = os.path.join(self.dir, name)
        self.assertIs(gitmod.clone(target, self.upstream.url), True)
        return target

    def test_loaded(self) -> None:
        """
        The module loads as C{git} with Salt's function names.
        """
        functions = loadFunctions()
        for name in (
            "clone",
            "fetch",
            "checkout",
            "rev_parse",
            "revision",
            "current_branch",
            "remote_refs",
            "ls_remote",
            "status",
            "init",
            "config_get",
            "config_set",
            "reset",
            "pull",
            "version",
            "list_branches",
            "list_tags",
            "remotes",
        ):
            self.assertIn(f"git.{name}", functions)

    def test_cloneAndRevision(self) -> None:
        """
        C{git.clone} clones; C{git.revision} and C{git.current_branch}
        report the checkout.
        """
        target = self.cloneIt()
        self.assertEqual(gitmod.revision(target), self.upstream.head())
        self.assertEqual(gitmod.revision(target, short=True), self.upstream.head()[:7])
        self.assertEqual(gitmod.current_branch(target), "main")
        self.assertEqual(
            gitmod.remotes(target),
            {"origin": {"fetch": self.upstream.url, "push": self.upstream.url}},
        )

    def test_cloneWithName(self) -> None:
        """
        With C{name}, C{cwd} is the parent directory.
        """
        gitmod.clone(self.dir, self.upstream.url, name="named", opts="--depth 1")
        self.assertTrue(os.path.isdir(os.path.join(self.dir, "named", ".git")))

    def test_cloneFailure(self) -> None:
        """
        A failed clone raises with Salt's C{Command '...' failed: <stderr>}.
        """
        with self.assertRaises(CommandExecutionError) as e:
            gitmod.clone(os.path.join(self.dir, "x"), "file:///nonexistent/repo")
        self.assertIn(
            "Command 'git clone -- file:///nonexistent/repo x' failed: ", str(e.exception)
        )
        self.assertIn("nonexistent", str(e.exception))

    def test_relativeCwd(self) -> None:
        """
        A relative C{cwd} is refused.
        """
        self.assertRaises(SaltInvocationError, gitmod.revision, "relative/path")

    def test_remoteRefs(self) -> None:
        """
        C{git.remote_refs} lists HEAD, branches and tags (annotated ones with
        their peeled C{^{}} entry).
        """
        first = self.upstream.head()
        self.upstream.tag("v1", "version one")
        self.upstream.branch("dev")
        dev = self.upstream.commit("dev.txt", "dev\n")
        self.upstream.checkout("main")
        refs = gitmod.remote_refs(self.upstream.url)
        self.assertEqual(refs["HEAD"], first)
        self.assertEqual(refs["refs/heads/main"], first)
        self.assertEqual(refs["refs/heads/dev"], dev)
        self.assertEqual(refs["refs/tags/v1^{}"], first)
        self.assertIn("refs/tags/v1", refs)
        self.assertEqual(
            set(gitmod.remote_refs(self.upstream.url, heads=True)),
            {"refs/heads/main", "refs/heads/dev"},
        )
        self.assertEqual(
            gitmod.remote_refs(self.upstream.url, filter="dev"), {"refs/heads/dev": dev}
        )

    def test_lsRemote(self) -> None:
        """
        C{git.ls_remote} by remote name from a clone.
        """
        target = self.cloneIt()
        self.assertEqual(
            gitmod.ls_remote(target, "origin", "main"), {"refs/heads/main": self.upstream.head()}
        )

    def test_fetchChanges(self) -> None:
        """
        C{git.fetch} returns the updated and new branches and tags, named
        as the remote has them (as Salt does).
        """
        target = self.cloneIt()
        old = self.upstream.head()
        new = self.upstream.commit("a", "a\n")
        self.upstream.tag("v2")
        self.upstream.branch("feature")
        ret = gitmod.fetch(target)
        self.assertEqual(ret["updated branches"], {"main": {"old": old[:7], "new": new[:7]}})
        self.assertEqual(ret["new branches"], ["feature"])
        self.assertEqual(ret["new tags"], ["v2"])
        self.assertEqual(gitmod.fetch(target), {})

    def test_checkoutResetMergeBase(self) -> None:
        """
        C{git.checkout} with C{-b}, C{git.reset --hard}, C{git.merge_base
        is_ancestor}, C{git.rev_parse}.
        """
        target = self.cloneIt()
        first = self.upstream.head()
        second = self.upstream.commit("b", "b\n")
        gitmod.fetch(target)
        gitmod.checkout(target, "origin/main", opts="-b other")
        self.assertEqual(gitmod.current_branch(target), "other")
        self.assertEqual(gitmod.revision(target), second)
        self.assertIs(gitmod.merge_base(target, refs=[first, second], is_ancestor=True), True)
        self.assertIs(gitmod.merge_base(target, refs=[second, first], is_ancestor=True), False)
        gitmod.reset(target, opts=["--hard", first])
        self.assertEqual(gitmod.rev_parse(target, "HEAD"), first)
        self.assertEqual(gitmod.rev_parse(target, "HEAD", opts="--abbrev-ref"), "other")
        self.assertRaises(CommandExecutionError, gitmod.rev_parse, target, "nosuchref^{commit}")

    def test_status(self) -> None:
        """
        C{git.status} groups files as Salt does.
        """
        target = self.cloneIt()
        with open(os.path.join(target, "README"), "w") as f:
            f.write("changed\n")
        with open(os.path.join(target, "untracked"), "w") as f:
            f.write("x\n")
        self.assertEqual(
            gitmod.status(target), {"modified": ["README"], "untracked": ["untracked"]}
        )
        self.assertTrue(gitmod.diff(target, "HEAD"))
        gitmod.discard_local_changes(target)
        self.assertEqual(gitmod.status(target), {"untracked": ["untracked"]})

    def test_initAndConfig(self) -> None:
        """
        C{git.init} makes a repository; C{git.config_set}/C{config_get} set
        and read its configuration (C{None} for an unset key).
        """
        repo = os.path.join(self.dir, "new")
        gitmod.init(repo)
        self.assertTrue(os.path.isdir(os.path.join(repo, ".git")))
        bare = os.path.join(self.dir, "bare.git")
        gitmod.init(bare, bare=True)
        self.assertTrue(os.path.isfile(os.path.join(bare, "HEAD")))
        self.assertIsNone(gitmod.config_get("user.name", cwd=repo))
        self.assertEqual(gitmod.config_set("user.name", "Someone", cwd=repo), ["Someone"])
        self.assertEqual(gitmod.config_get("user.name", cwd=repo), "Someone")
        self.assertEqual(gitmod.config_set("x.y", multivar=["a", "b"], cwd=repo), ["a", "b"])
        self.assertEqual(gitmod.config_get("x.y", cwd=repo, all=True), ["a", "b"])
        self.assertRaises(SaltInvocationError, gitmod.config_get, "user.name")

    def test_pull(self) -> None:
        """
        C{git.pull} brings new commits.
        """
        target = self.cloneIt()
        new = self.upstream.commit("c", "c\n")
        gitmod.pull(target, opts="--ff-only")
        self.assertEqual(gitmod.revision(target), new)

    def test_branchesTags(self) -> None:
        """
        C{git.list_branches} (local and remote), C{git.list_tags},
        C{git.tag} to make and delete one.
        """
        self.upstream.branch("dev")
        self.upstream.checkout("main")
        target = self.cloneIt()
        self.assertEqual(gitmod.list_branches(target), ["main"])
        self.assertEqual(gitmod.list_branches(target, remote=True), ["origin/dev", "origin/main"])
        gitmod.tag(target, "t1")
        self.assertEqual(gitmod.list_tags(target), ["t1"])
        gitmod.tag(target, "t1", opts="-d")
        self.assertEqual(gitmod.list_tags(target), [])

    def test_version(self) -> None:
        """
        C{git.version} is the binary's version.
        """
        version = gitmod.version()
        self.assertRegex(version, r"^\d+\.\d+")
        self.assertEqual(gitmod.version(versioninfo=True)[0], int(version.split(".")[0]))

    def test_cleanEnvironment(self) -> None:
        """
        A C{GIT_DIR} in the minion's environment does not redirect git.
        """
        target = self.cloneIt()
        self.patch(os, "environ", {**os.environ, "GIT_DIR": self.upstream.path + "/nothere"})
        self.assertEqual(gitmod.revision(target), self.upstream.head())

    def test_httpsAuth(self) -> None:
        """
        C{https_user}/C{https_pass} go in an HTTPS URL only; passwords are
        redacted from messages.
        """
        self.assertEqual(
            gitmod._addHttpBasicAuth("https://example.com/r.git", "me", "p@ss"),
            "https://me:p%40ss@example.com/r.git",
        )
        self.assertRaises(
            SaltInvocationError, gitmod._addHttpBasicAuth, "http://example.com/r", "me", "x"
        )
        self.assertEqual(
            gitmod._redactAuth("fatal: https://me:secret@example.com/r"),
            "fatal: https://me:<redacted>@example.com/r",
        )

    def test_identityMustBeLocal(self) -> None:
        """
        An identity must be a local absolute path.
        """
        self.assertRaises(
            SaltInvocationError,
            gitmod.remote_refs,
            self.upstream.url,
            identity="salt://keys/id_rsa",
        )

    def test_gitInCleanEnv(self) -> None:
        """
        The helper repositories are really repositories (sanity).
        """
        self.assertEqual(git(self.upstream.path, "rev-parse", "--abbrev-ref", "HEAD"), "main")
