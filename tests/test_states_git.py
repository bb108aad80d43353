# -*- test-case-name: tests.test_states_git -*-
"""
Tests for L{salttwist.states.git} (Salt's C{git.latest}), against real
repositories made in temporary directories, run as a state run runs
them (in a thread, with the real execution functions).
"""

from __future__ import annotations

import os
from typing import Any

from twisted.internet.defer import inlineCallbacks
from twisted.trial.unittest import TestCase

from tests._gitrepos import Upstream, git
from tests._statectx import makeStateContext, runState


class LatestTests(TestCase):
    """
    C{git.latest}: clone, update, test mode and failures, with Salt's
    comments and changes.
    """

    def setUp(self) -> None:
        self.dir = os.path.abspath(self.mktemp())
        os.makedirs(self.dir)
        self.upstream = Upstream(os.path.join(self.dir, "upstream"))
        self.target = os.path.join(self.dir, "target")

    def latest(self, test: bool = False, **kwargs: Any) -> Any:
        kwargs.setdefault("name", self.upstream.url)
        kwargs.setdefault("target", self.target)
        return runState("git.latest", ctx=makeStateContext(test=test), **kwargs)

    def local(self, *args: str) -> str:
        return git(self.target, *args)

    @inlineCallbacks
    def test_clone(self) -> Any:
        """
        A missing target is cloned: changes C{new} and C{revision}.
        """
        ret = yield self.latest()
        head = self.upstream.head()
        self.assertEqual(
            ret,
            {
                "name": self.upstream.url,
                "result": True,
                "changes": {
                    "new": f"{self.upstream.url} => {self.target}",
                    "revision": {"old": None, "new": head},
                },
                "comment": f"{self.upstream.url} cloned to {self.target}",
            },
        )
        self.assertEqual(self.local("rev-parse", "HEAD"), head)

    @inlineCallbacks
    def test_cloneTestMode(self) -> Any:
        """
        With test=True nothing is cloned; the result is None with Salt's
        comment and the predicted change.
        """
        ret = yield self.latest(test=True)
        self.assertIsNone(ret["result"])
        self.assertEqual(
            ret["comment"], f"Repository {self.upstream.url} would be cloned to {self.target}"
        )
        self.assertEqual(ret["changes"], {"new": f"{self.upstream.url} => {self.target}"})
        self.assertFalse(os.path.exists(self.target))

    @inlineCallbacks
    def test_upToDate(self) -> Any:
        """
        A second run changes nothing.
        """
        yield self.latest()
        ret = yield self.latest()
        self.assertEqual(ret["result"], True)
        self.assertEqual(ret["changes"], {})
        self.assertEqual(ret["comment"], f"Repository {self.target} is up-to-date")
        ret = yield self.latest(test=True)
        self.assertEqual((ret["result"], ret["changes"]), (True, {}))

    @inlineCallbacks
    def test_fastForward(self) -> Any:
        """
        New upstream commits are fetched and fast-forwarded to.
        """
        yield self.latest()
        old = self.upstream.head()
        new = self.upstream.commit("more", "more\n")
        ret = yield self.latest(test=True)
        self.assertIsNone(ret["result"])
        self.assertEqual(ret["changes"], {"revision": {"old": old, "new": new}})
        self.assertEqual(
            ret["comment"],
            f"Remote 'origin' would be fetched. Repository would be updated from "
            f"{old[:7]} to {new[:7]}.",
        )
        self.assertEqual(self.local("rev-parse", "HEAD"), old)
        ret = yield self.latest()
        self.assertEqual(ret["result"], True, ret["comment"])
        self.assertEqual(ret["changes"], {"revision": {"old": old, "new": new}})
        self.assertIn(f"Repository was fast-forwarded to remote HEAD ({new[:7]})", ret["comment"])
        self.assertEqual(self.local("rev-parse", "HEAD"), new)

    @inlineCallbacks
    def test_branchRev(self) -> Any:
        """
        C{rev} naming a branch checks out a tracking branch of that name
        when C{branch} is given.
        """
        self.upstream.branch("dev")
        dev = self.upstream.commit("dev", "dev\n")
        self.upstream.checkout("main")
        ret = yield self.latest(rev="dev", branch="dev")
        self.assertEqual(ret["result"], True, ret["comment"])
        self.assertEqual(ret["changes"]["revision"], {"old": None, "new": dev})
        self.assertIn("Branch 'dev' checked out, with origin/dev", ret["comment"])
        self.assertEqual(self.local("rev-parse", "--abbrev-ref", "HEAD"), "dev")
        self.assertEqual(self.local("rev-parse", "--abbrev-ref", "dev@{upstream}"), "origin/dev")
        self.upstream.checkout("dev")
        dev2 = self.upstream.commit("dev2", "dev2\n")
        ret = yield self.latest(rev="dev", branch="dev")
        self.assertEqual(ret["changes"], {"revision": {"old": dev, "new": dev2}})
        self.assertEqual(self.local("rev-parse", "HEAD"), dev2)

    @inlineCallbacks
    def test_switchBranch(self) -> Any:
        """
        An existing checkout on main moved to another branch.
        """
        yield self.latest()
        self.upstream.branch("release")
        release = self.upstream.commit("r", "r\n")
        self.upstream.checkout("main")
        ret = yield self.latest(rev="release", branch="release")
        self.assertEqual(ret["result"], True, ret["comment"])
        self.assertIn("New branch 'release' was checked out", ret["comment"])
        self.assertEqual(self.local("rev-parse", "--abbrev-ref", "HEAD"), "release")
        self.assertEqual(self.local("rev-parse", "HEAD"), release)

    @inlineCallbacks
    def test_tag(self) -> Any:
        """
        C{rev} naming an annotated tag checks out its commit.
        """
        tagged = self.upstream.head()
        self.upstream.tag("v1.0", "release 1.0")
        self.upstream.commit("after", "after\n")
        ret = yield self.latest(rev="v1.0")
        self.assertEqual(ret["result"], True, ret["comment"])
        self.assertEqual(self.local("rev-parse", "HEAD"), tagged)
        self.assertIn("Repository was reset to v1.0", ret["comment"])

    @inlineCallbacks
    def test_sha(self) -> Any:
        """
        C{rev} as a commit id.
        """
        first = self.upstream.head()
        self.upstream.commit("after", "after\n")
        ret = yield self.latest(rev=first)
        self.assertEqual(ret["result"], True, ret["comment"])
        self.assertEqual(self.local("rev-parse", "HEAD"), first)

    @inlineCallbacks
    def test_missingRev(self) -> Any:
        """
        A rev the remote does not have fails with Salt's comment.
        """
        ret = yield self.latest(rev="nosuchbranch")
        self.assertEqual(ret["result"], False)
        self.assertEqual(
            ret["comment"], "No revision matching 'nosuchbranch' exists in the remote repository"
        )

    @inlineCallbacks
    def test_badRemote(self) -> Any:
        """
        A remote that cannot be read fails, naming the problem.
        """
        ret = yield self.latest(name="file:///nonexistent/repo")
        self.assertEqual(ret["result"], False)
        self.assertTrue(ret["comment"].startswith("Failed to check remote refs: "), ret["comment"])

    @inlineCallbacks
    def test_notFastForward(self) -> Any:
        """
        A rewritten upstream: the fetch is refused without C{force_fetch}
        (as Salt's, the branch refspec does not force), the update without
        C{force_reset}; with both, the checkout is hard-reset.
        """
        yield self.latest()
        self.upstream.commit("c", "c\n")
        yield self.latest()
        old = self.local("rev-parse", "HEAD")
        new = self.upstream.rewrite("c", "other\n")
        ret = yield self.latest()
        self.assertEqual(ret["result"], False)
        self.assertIn("Fetch failed. Set 'force_fetch' to True", ret["comment"])
        self.assertIn("(non-fast-forward)", ret["comment"])
        ret = yield self.latest(force_fetch=True)
        self.assertEqual(ret["result"], False)
        self.assertIn(
            f"Repository would be updated to {new[:7]}, but this is not a fast-forward merge. "
            "Set 'force_reset' to True to force this update.",
            ret["comment"],
        )
        self.assertEqual(self.local("rev-parse", "HEAD"), old)
        ret = yield self.latest(force_reset=True, force_fetch=True)
        self.assertEqual(ret["result"], True, ret["comment"])
        self.assertEqual(
            ret["changes"], {"revision": {"old": old, "new": new}, "forced update": True}
        )
        self.assertIn("Repository was hard-reset to remote HEAD", ret["comment"])
        self.assertEqual(self.local("rev-parse", "HEAD"), new)

    @inlineCallbacks
    def test_localChanges(self) -> Any:
        """
        Uncommitted changes are kept (up-to-date comment warns of them),
        and discarded by C{force_reset=True}.
        """
        yield self.latest()
        readme = os.path.join(self.target, "README")
        with open(readme, "w") as f:
            f.write("local edit\n")
        ret = yield self.latest()
        self.assertEqual(ret["result"], True)
        self.assertEqual(
            ret["comment"],
            f"Repository {self.target} is up-to-date, but with uncommitted changes. "
            "Set 'force_reset' to True to purge uncommitted changes.",
        )
        ret = yield self.latest(force_reset=True, test=True)
        self.assertIsNone(ret["result"])
        self.assertEqual(ret["changes"], {"forced update": True})
        with open(readme) as f:
            self.assertEqual(f.read(), "local edit\n")
        ret = yield self.latest(force_reset=True)
        self.assertEqual(ret["result"], True, ret["comment"])
        with open(readme) as f:
            self.assertEqual(f.read(), "first\n")
        self.assertIn("Uncommitted changes were discarded", ret["comment"])

    @inlineCallbacks
    def test_localChangesBlockUpdate(self) -> Any:
        """
        Uncommitted changes and a new upstream commit: refused, naming them.
        """
        yield self.latest()
        with open(os.path.join(self.target, "README"), "w") as f:
            f.write("local edit\n")
        self.upstream.commit("new", "n\n")
        ret = yield self.latest()
        self.assertEqual(ret["result"], False)
        self.assertIn("there are uncommitted changes", ret["comment"])

    @inlineCallbacks
    def test_nonEmptyTarget(self) -> Any:
        """
        A non-empty directory that is no repository is refused, and
        emptied and cloned into with C{force_clone}.
        """
        os.makedirs(self.target)
        with open(os.path.join(self.target, "junk"), "w") as f:
            f.write("junk")
        ret = yield self.latest()
        self.assertEqual(ret["result"], False)
        self.assertIn("exists, is non-empty and is not a git repository", ret["comment"])
        ret = yield self.latest(force_clone=True, test=True)
        self.assertIsNone(ret["result"])
        self.assertTrue(ret["changes"]["forced clone"])
        self.assertTrue(os.path.exists(os.path.join(self.target, "junk")))
        ret = yield self.latest(force_clone=True)
        self.assertEqual(ret["result"], True, ret["comment"])
        self.assertTrue(ret["changes"]["forced clone"])
        self.assertFalse(os.path.exists(os.path.join(self.target, "junk")))
        self.assertTrue(os.path.isdir(os.path.join(self.target, ".git")))

    @inlineCallbacks
    def test_depth(self) -> Any:
        """
        C{depth} makes a shallow clone of a branch; with C{rev=HEAD} it is
        refused as Salt does.
        """
        self.upstream.commit("second", "2\n")
        ret = yield self.latest(rev="main", depth=1)
        self.assertEqual(ret["result"], True, ret["comment"])
        self.assertEqual(self.local("rev-list", "--count", "HEAD"), "1")
        ret = yield self.latest(target=self.target + "2", depth=1)
        self.assertEqual(ret["result"], False)
        self.assertIn("When 'depth' is used, 'rev' must be set", ret["comment"])

    @inlineCallbacks
    def test_otherRemoteName(self) -> Any:
        """
        C{remote} names the clone's remote.
        """
        ret = yield self.latest(remote="upstream", rev="main", branch="main")
        self.assertEqual(ret["result"], True, ret["comment"])
        self.assertEqual(self.local("remote"), "upstream")

    @inlineCallbacks
    def test_changedUrl(self) -> Any:
        """
        A checkout whose remote points elsewhere gets the new URL.
        """
        yield self.latest()
        other = Upstream(os.path.join(self.dir, "other"))
        ret = yield self.latest(name=other.url, force_reset=True)
        self.assertEqual(ret["result"], True, ret["comment"])
        self.assertIn(
            f"Remote 'origin' changed from {self.upstream.url} to {other.url}", ret["comment"]
        )
        self.assertEqual(self.local("remote", "get-url", "origin"), other.url)
        self.assertEqual(self.local("rev-parse", "HEAD"), other.head())

    @inlineCallbacks
    def test_badArguments(self) -> Any:
        """
        A relative target, a bad force_reset and unknown arguments fail.
        """
        ret = yield self.latest(target="relative")
        self.assertEqual(ret["comment"], "target 'relative' is not an absolute path")
        ret = yield self.latest(force_reset="yes")
        self.assertEqual(
            ret["comment"], "'force_reset' must be one of True, False, or 'remote-changes'"
        )
        ret = yield self.latest(bogus=1)
        self.assertEqual(ret["comment"], "The following keyword arguments are not valid: bogus=1")
        self.assertEqual(ret["result"], False)

    @inlineCallbacks
    def test_submodules(self) -> Any:
        """
        C{submodules=True} initialises submodules; git runs with the
        minion user's own configuration (here one allowing C{file://}
        submodules, which git refuses by default).
        """
        sub = Upstream(os.path.join(self.dir, "sub"))
        git(self.upstream.path, "-c", "protocol.file.allow=always", "submodule", "add", "-q",
            sub.url, "subdir")  # fmt: skip
        git(self.upstream.path, "commit", "-q", "-m", "submodule")
        ret = yield self.latest(submodules=True)
        self.assertEqual(ret["result"], False)
        self.assertIn("Failed to update submodules: ", ret["comment"])
        home = os.path.join(self.dir, "home")
        os.makedirs(home)
        with open(os.path.join(home, ".gitconfig"), "w") as f:
            f.write('[protocol "file"]\n\tallow = always\n')
        self.patch(os, "environ", {**os.environ, "HOME": home})
        ret = yield self.latest(submodules=True)
        self.assertEqual(ret["result"], True, ret["comment"])
        self.assertTrue(os.path.isfile(os.path.join(self.target, "subdir", "README")))
