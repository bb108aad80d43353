# -*- test-case-name: tests.test_states_git_more -*-
"""
Tests for L{salttwist.states.git}'s C{git.present}, C{git.cloned},
C{git.config_set} and C{git.config_unset}, and the execution functions
they use (C{git.config_get_regexp}, C{git.config_unset},
C{git.is_worktree}), against real repositories in temporary directories,
run as a state run runs them.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from typing import Any

from twisted.internet.defer import inlineCallbacks
from twisted.trial.unittest import SynchronousTestCase, TestCase

from salttwist.modules import CommandExecutionError
from salttwist.modules import git as gitmod
from tests._gitrepos import Upstream, git
from tests._statectx import makeStateContext, runState


class GitStateTestCase(TestCase):
    """
    A temporary directory with an upstream repository.
    """

    def setUp(self) -> None:
        self.dir = os.path.abspath(self.mktemp())
        os.makedirs(self.dir)
        self.upstream = Upstream(os.path.join(self.dir, "upstream"))

    def state(self, function: str, test: bool = False, **kwargs: Any) -> Any:
        return runState(f"git.{function}", ctx=makeStateContext(test=test), **kwargs)


class PresentTests(GitStateTestCase):
    """
    C{git.present}.
    """

    @inlineCallbacks
    def test_bare(self) -> Any:
        """
        A missing directory becomes a bare repository; then it is left
        alone. Test mode makes nothing.
        """
        path = os.path.join(self.dir, "r.git")
        ret = yield self.state("present", test=True, name=path)
        self.assertEqual(
            ret,
            {
                "name": path,
                "result": None,
                "changes": {"new": path},
                "comment": "New bare repository would be created",
            },
        )
        self.assertFalse(os.path.exists(path))
        ret = yield self.state("present", name=path)
        self.assertEqual(ret["result"], True)
        self.assertEqual(ret["changes"], {"new": path})
        self.assertEqual(ret["comment"], f"Initialized bare repository in {path}")
        self.assertEqual(git(path, "rev-parse", "--is-bare-repository"), "true")
        ret = yield self.state("present", name=path)
        self.assertEqual((ret["result"], ret["changes"], ret["comment"]), (True, {}, ""))

    @inlineCallbacks
    def test_nonBareAndWorktree(self) -> Any:
        """
        C{bare=False} makes a repository with a work tree; a worktree made
        by C{git worktree add} counts as one.
        """
        path = os.path.join(self.dir, "work")
        ret = yield self.state("present", name=path, bare=False)
        self.assertEqual(ret["comment"], f"Initialized repository in {path}")
        self.assertTrue(os.path.isdir(os.path.join(path, ".git")))
        tree = os.path.join(self.dir, "tree")
        git(self.upstream.path, "worktree", "add", "-q", tree)
        self.assertTrue(gitmod.is_worktree(tree))
        self.assertFalse(gitmod.is_worktree(self.upstream.path))
        ret = yield self.state("present", name=tree, bare=False)
        self.assertEqual((ret["result"], ret["changes"]), (True, {}))

    @inlineCallbacks
    def test_nonEmpty(self) -> Any:
        """
        A non-empty directory that is no repository fails unless
        C{force=True}, which (outside test mode) replaces its contents.
        """
        path = os.path.join(self.dir, "full")
        os.makedirs(path)
        with open(os.path.join(path, "keep"), "w") as f:
            f.write("x")
        ret = yield self.state("present", name=path)
        self.assertIs(ret["result"], False)
        self.assertTrue(ret["comment"].startswith(f"Target '{path}' exists, is non-empty"))
        ret = yield self.state("present", test=True, name=path, force=True)
        self.assertEqual(ret["result"], None)
        self.assertEqual(ret["changes"], {"new": path, "forced init": True})
        self.assertTrue(os.path.exists(os.path.join(path, "keep")))
        ret = yield self.state("present", name=path, force=True)
        self.assertIs(ret["result"], True, ret)
        self.assertEqual(ret["changes"], {"forced init": True, "new": path})
        self.assertFalse(os.path.exists(os.path.join(path, "keep")))
        self.assertTrue(os.path.isfile(os.path.join(path, "HEAD")))


class ClonedTests(GitStateTestCase):
    """
    C{git.cloned}.
    """

    def setUp(self) -> None:
        super().setUp()
        self.upstream.branch("dev")
        self.devHead = self.upstream.commit("dev.txt", "dev\n")
        self.upstream.checkout("main")
        self.target = os.path.join(self.dir, "clone")

    @inlineCallbacks
    def test_clone(self) -> Any:
        """
        A missing target is cloned (test mode says so first); then it is
        already there, and is not updated.
        """
        url = self.upstream.url
        ret = yield self.state("cloned", test=True, name=url, target=self.target)
        self.assertEqual(
            ret,
            {
                "name": url,
                "result": None,
                "changes": {"new": f"{url} => {self.target}"},
                "comment": f"{url} would be cloned to {self.target}",
            },
        )
        self.assertFalse(os.path.exists(self.target))
        ret = yield self.state("cloned", name=url, target=self.target)
        self.assertEqual((ret["result"], ret["comment"]), (True, f"{url} cloned to {self.target}"))
        self.assertEqual(git(self.target, "rev-parse", "HEAD"), self.upstream.head("main"))
        self.upstream.commit("later.txt", "later\n")
        ret = yield self.state("cloned", name=url, target=self.target)
        self.assertEqual(
            (ret["result"], ret["changes"], ret["comment"]),
            (True, {}, f"Repository already exists at {self.target}"),
        )
        self.assertFalse(os.path.exists(os.path.join(self.target, "later.txt")))

    @inlineCallbacks
    def test_branch(self) -> Any:
        """
        With C{branch}, a clone checks it out; an existing clone on another
        branch is switched (a local branch made from C{origin/<branch>}).
        """
        url = self.upstream.url
        ret = yield self.state("cloned", name=url, target=self.target)
        self.assertEqual(git(self.target, "rev-parse", "--abbrev-ref", "HEAD"), "main")
        ret = yield self.state("cloned", test=True, name=url, target=self.target, branch="dev")
        self.assertEqual(
            (ret["result"], ret["changes"], ret["comment"]),
            (None, {"branch": {"old": "main", "new": "dev"}}, "Branch would be changed to 'dev'"),
        )
        ret = yield self.state("cloned", name=url, target=self.target, branch="dev")
        self.assertEqual(
            (ret["result"], ret["changes"], ret["comment"]),
            (True, {"branch": {"old": "main", "new": "dev"}}, "Branch changed to 'dev'"),
        )
        self.assertEqual(git(self.target, "rev-parse", "HEAD"), self.devHead)
        ret = yield self.state("cloned", name=url, target=self.target, branch="dev")
        self.assertEqual(
            ret["comment"],
            f"Repository already exists at {self.target} and is checked out to branch 'dev'",
        )
        other = os.path.join(self.dir, "other")
        ret = yield self.state("cloned", name=url, target=other, branch="dev")
        self.assertEqual(ret["comment"], f"{url} cloned to {other} with branch 'dev'")
        self.assertEqual(git(other, "rev-parse", "HEAD"), self.devHead)

    @inlineCallbacks
    def test_failures(self) -> Any:
        """
        A relative target, a missing remote, a target that is no
        repository and a missing branch fail, saying so.
        """
        ret = yield self.state("cloned", name=self.upstream.url, target="rel/path")
        self.assertEqual((ret["result"], ret["comment"]), (False, "'target' path must be absolute"))
        ret = yield self.state("cloned", name="file:///nonexistent/repo", target=self.target)
        self.assertIs(ret["result"], False)
        self.assertTrue(ret["comment"].startswith("Clone failed: "), ret["comment"])
        # Outside the checkout: a directory under it is in its repository.
        plain = tempfile.mkdtemp()
        self.addCleanup(shutil.rmtree, plain)
        ret = yield self.state("cloned", name=self.upstream.url, target=plain)
        self.assertIs(ret["result"], False)
        self.assertIn("not a git repository", ret["comment"])
        yield self.state("cloned", name=self.upstream.url, target=self.target)
        ret = yield self.state(
            "cloned", name=self.upstream.url, target=self.target, branch="nosuch"
        )
        self.assertIs(ret["result"], False)
        self.assertTrue(
            ret["comment"].startswith("Failed to change branch to 'nosuch': "), ret["comment"]
        )


class ConfigStateTests(GitStateTestCase):
    """
    C{git.config_set} and C{git.config_unset} on a repository's
    configuration.
    """

    def setUp(self) -> None:
        super().setUp()
        self.repo = self.upstream.path

    def config(self, *args: str) -> str:
        try:
            return git(self.repo, "config", "--local", *args)
        except AssertionError:
            return ""

    @inlineCallbacks
    def test_set(self) -> Any:
        """
        A key not set is added (test mode first), then it is already set;
        another value replaces it.
        """
        ret = yield self.state("config_set", test=True, name="foo.bar", value="baz", repo=self.repo)
        self.assertEqual(
            ret,
            {
                "name": "foo.bar",
                "result": None,
                "changes": {"old": None, "new": ["baz"]},
                "comment": "'foo.bar' would be added as 'baz'",
            },
        )
        self.assertEqual(self.config("--get", "foo.bar"), "")
        ret = yield self.state("config_set", name="foo.bar", value="baz", repo=self.repo)
        self.assertEqual(
            (ret["result"], ret["changes"], ret["comment"]),
            (True, {"foo.bar": {"old": None, "new": ["baz"]}}, "'foo.bar' was added as 'baz'"),
        )
        ret = yield self.state("config_set", name="foo.bar", value="baz", repo=self.repo)
        self.assertEqual(
            (ret["result"], ret["changes"], ret["comment"]),
            (True, {}, "'foo.bar' is already set to 'baz'"),
        )
        ret = yield self.state("config_set", name="foo.bar", value=2, repo=self.repo)
        self.assertEqual(ret["comment"], "'foo.bar' was set to '2'")
        self.assertEqual(self.config("--get", "foo.bar"), "2")

    @inlineCallbacks
    def test_multivar(self) -> Any:
        """
        C{multivar} sets exactly those values, in order.
        """
        ret = yield self.state(
            "config_set", name="foo.many", multivar=["a", "b", 3], repo=self.repo
        )
        self.assertIs(ret["result"], True, ret)
        self.assertEqual(ret["changes"], {"foo.many": {"old": None, "new": ["a", "b", "3"]}})
        self.assertEqual(self.config("--get-all", "foo.many").splitlines(), ["a", "b", "3"])
        ret = yield self.state("config_set", name="foo.many", multivar="a,b,3", repo=self.repo)
        self.assertEqual((ret["result"], ret["changes"]), (True, {}))

    @inlineCallbacks
    def test_setBadArguments(self) -> Any:
        """
        Both C{value} and C{multivar}, no C{repo} without C{global}, an
        unknown argument: each fails, saying so.
        """
        ret = yield self.state("config_set", name="a.b", value="1", multivar=["2"], repo=self.repo)
        self.assertEqual(ret["comment"], "Only one of 'value' and 'multivar' is permitted")
        ret = yield self.state("config_set", name="a.b", value="1")
        self.assertEqual(
            ret["comment"], "Non-global config options require the 'repo' argument to be set"
        )
        ret = yield self.state("config_set", name="a.b", value="1", repo=self.repo, bogus=1)
        self.assertEqual(ret["comment"], "The following keyword arguments are not valid: bogus=1")
        self.assertIs(ret["result"], False)

    @inlineCallbacks
    def test_unset(self) -> Any:
        """
        A key set is unset (test mode first); then nothing matches.
        """
        git(self.repo, "config", "foo.bar", "baz")
        ret = yield self.state("config_unset", test=True, name="foo.bar", repo=self.repo)
        self.assertEqual(
            (ret["result"], ret["changes"], ret["comment"]),
            (None, {"foo.bar": ["baz"]}, "1 key(s) would have value(s) unset"),
        )
        self.assertEqual(self.config("--get", "foo.bar"), "baz")
        ret = yield self.state("config_unset", name="foo.bar", repo=self.repo)
        self.assertEqual(
            (ret["result"], ret["changes"], ret["comment"]),
            (True, {"foo.bar": ["baz"]}, "Value(s) successfully unset"),
        )
        self.assertEqual(self.config("--get", "foo.bar"), "")
        ret = yield self.state("config_unset", name="foo.bar", repo=self.repo)
        self.assertEqual((ret["result"], ret["comment"]), (True, "No matching keys are set"))

    @inlineCallbacks
    def test_unsetMultivar(self) -> Any:
        """
        A key with several values needs C{all=True}; C{value_regex}
        unsets only the values it matches.
        """
        for value in ("one", "two", "three"):
            git(self.repo, "config", "--add", "foo.many", value)
        ret = yield self.state("config_unset", name="foo.many", repo=self.repo)
        self.assertIs(ret["result"], False)
        self.assertEqual(
            ret["comment"],
            "Multivar(s) matched by the key expression (set 'all' to True to force removal): "
            "foo.many (one, two, three)",
        )
        ret = yield self.state("config_unset", name="foo.many", value_regex="^t", repo=self.repo)
        self.assertIs(ret["result"], False)
        self.assertIn("Multiple values are matched by value_regex", ret["comment"])
        ret = yield self.state(
            "config_unset", name="foo.many", value_regex="^t", all=True, repo=self.repo
        )
        self.assertEqual(
            (ret["result"], ret["changes"]), (True, {"foo.many": ["two", "three"]}), ret
        )
        self.assertEqual(self.config("--get-all", "foo.many"), "one")


class ConfigFunctionTests(SynchronousTestCase):
    """
    C{git.config_get_regexp} and C{git.config_unset}.
    """

    def setUp(self) -> None:
        self.repo = Upstream(os.path.abspath(self.mktemp())).path
        git(self.repo, "config", "x.a", "1")
        git(self.repo, "config", "--add", "x.b", "2")
        git(self.repo, "config", "--add", "x.b", "3")

    def test_getRegexp(self) -> None:
        """
        Keys matching the expression with their values; C{{}} for none.
        """
        self.assertEqual(
            gitmod.config_get_regexp(r"^x\.", cwd=self.repo), {"x.a": ["1"], "x.b": ["2", "3"]}
        )
        self.assertEqual(gitmod.config_get_regexp(r"^x\.", "^3$", cwd=self.repo), {"x.b": ["3"]})
        self.assertEqual(gitmod.config_get_regexp(r"^nothing\.", cwd=self.repo), {})
        self.assertIs(gitmod.config_get_regex, gitmod.config_get_regexp)

    def test_unset(self) -> None:
        """
        git's exit codes become Salt's words.
        """
        self.assertIs(gitmod.config_unset("x.a", cwd=self.repo), True)
        with self.assertRaises(CommandExecutionError) as caught:
            gitmod.config_unset("x.a", cwd=self.repo)
        self.assertEqual(str(caught.exception), "Key 'x.a' does not exist")
        with self.assertRaises(CommandExecutionError) as caught:
            gitmod.config_unset("x.b", cwd=self.repo)
        self.assertEqual(str(caught.exception), "Multiple values exist for key 'x.b'")
        with self.assertRaises(CommandExecutionError) as caught:
            gitmod.config_unset("x.b", "[", cwd=self.repo)
        self.assertEqual(str(caught.exception), "The value_regex is invalid")
        self.assertIs(gitmod.config_unset("x.b", cwd=self.repo, all=True), True)
        self.assertIsNone(gitmod.config_get("x.b", cwd=self.repo))

    def test_allowedFailure(self) -> None:
        """
        Another exit code than those that answer raises with Salt's words
        (the helper shared by config_get and merge_base).
        """
        with open(os.path.join(self.repo, ".git", "config"), "a") as f:
            f.write("[broken\n")
        with self.assertRaises(CommandExecutionError) as caught:
            gitmod.config_get("x.a", cwd=self.repo)
        self.assertTrue(
            str(caught.exception).startswith("Command 'git config --local --get-all x.a' failed: "),
            str(caught.exception),
        )
        with self.assertRaises(CommandExecutionError) as caught:
            gitmod.config_get_regexp("x", cwd=self.repo)
        self.assertIn("failed: ", str(caught.exception))


class DetachedTests(GitStateTestCase):
    """
    C{git.detached}.
    """

    def setUp(self) -> None:
        super().setUp()
        self.first = self.upstream.head()
        self.upstream.tag("v1", message="version 1")
        self.second = self.upstream.commit("two.txt", "two\n")
        self.target = os.path.join(self.dir, "detached")

    def detached(self, test: bool = False, **kwargs: Any) -> Any:
        kwargs.setdefault("name", self.upstream.url)
        kwargs.setdefault("target", self.target)
        return self.state("detached", test=test, **kwargs)

    def head(self) -> str:
        return git(self.target, "rev-parse", "HEAD")

    @inlineCallbacks
    def test_branch(self) -> Any:
        """
        A missing target is cloned and the branch's commit checked out,
        detached (test mode first); then it is already there.
        """
        ret = yield self.detached(test=True, rev="main")
        self.assertEqual(
            (ret["result"], ret["comment"]),
            (None, f"Repository {self.upstream.url} would be cloned to {self.target}"),
        )
        self.assertFalse(os.path.exists(self.target))
        ret = yield self.detached(rev="main")
        self.assertIs(ret["result"], True, ret)
        self.assertEqual(ret["changes"], {"HEAD": {"old": None, "new": self.second}})
        self.assertEqual(
            ret["comment"],
            f"{self.upstream.url} cloned to {self.target}. Commit ID {self.second} was checked "
            f"out at {self.target}.",
        )
        self.assertEqual(self.head(), self.second)
        self.assertEqual(git(self.target, "rev-parse", "--abbrev-ref", "HEAD"), "HEAD")
        ret = yield self.detached(rev="main", fetch_remote=False)
        self.assertEqual(
            (ret["result"], ret["changes"], ret["comment"]),
            (True, {}, "Already checked out at correct revision"),
        )

    @inlineCallbacks
    def test_tagAndHash(self) -> Any:
        """
        An annotated tag checks out its commit; a (short) commit id
        already fetched is checked out without fetching; test mode says
        which commit would be.
        """
        yield self.detached(rev="main")
        ret = yield self.detached(rev="v1")
        self.assertEqual(ret["changes"], {"HEAD": {"old": self.second, "new": self.first}})
        self.assertEqual(self.head(), self.first)
        ret = yield self.detached(test=True, rev=self.second[:10].upper())
        self.assertEqual(
            (ret["result"], ret["changes"], ret["comment"]),
            (
                None,
                {"HEAD": {"old": self.first, "new": self.second}},
                f"Commit ID {self.second} would be checked out at {self.target}",
            ),
        )
        self.assertEqual(self.head(), self.first)
        ret = yield self.detached(rev=self.second[:10])
        self.assertEqual(ret["changes"], {"HEAD": {"old": self.first, "new": self.second}})

    @inlineCallbacks
    def test_newCommitFetched(self) -> Any:
        """
        A branch that moved upstream is fetched and its new commit checked
        out.
        """
        yield self.detached(rev="main")
        third = self.upstream.commit("three.txt", "three\n")
        ret = yield self.detached(test=True, rev="main")
        self.assertEqual(
            (ret["result"], ret["comment"]), (None, "Repository remote origin would be fetched")
        )
        ret = yield self.detached(rev="main")
        self.assertEqual(ret["changes"], {"HEAD": {"old": self.second, "new": third}})
        self.assertIn("Remote origin was fetched, resulting in updated refs", ret["comment"])

    @inlineCallbacks
    def test_failures(self) -> Any:
        """
        A missing revision, a relative target, a regular file as target
        and a non-empty directory without C{force_clone} fail, saying so.
        """
        ret = yield self.detached(rev="nosuch")
        self.assertIs(ret["result"], False)
        self.assertTrue(ret["comment"].startswith("Revision 'nosuch' does not exist"), ret)
        ret = yield self.detached(rev="main", target="rel")
        self.assertEqual(ret["comment"], "Target 'rel' is not an absolute path")
        ret = yield self.detached(rev="")
        self.assertEqual(ret["comment"], "'' is not a valid value for the 'rev' argument")
        path = os.path.join(self.dir, "file")
        with open(path, "w") as f:
            f.write("x")
        ret = yield self.detached(rev="main", target=path)
        self.assertEqual(
            ret["comment"], f"Target '{path}' exists and is a regular file, cannot proceed"
        )
        full = tempfile.mkdtemp()
        self.addCleanup(shutil.rmtree, full)
        with open(os.path.join(full, "keep"), "w") as f:
            f.write("x")
        ret = yield self.detached(rev="main", target=full)
        self.assertIs(ret["result"], False)
        self.assertIn("is non-empty and is not a git repository", ret["comment"])
        ret = yield self.detached(rev="main", target=full, force_clone=True)
        self.assertIs(ret["result"], True, ret)
        self.assertEqual(ret["changes"]["forced clone"], True)
        self.assertFalse(os.path.exists(os.path.join(full, "keep")))
        ret = yield self.detached(rev="main", bogus=1)
        self.assertEqual(ret["comment"], "The following keyword arguments are not valid: bogus=1")
