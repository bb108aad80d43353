# -*- test-case-name: tests.integration.test_gitfs -*-
"""
Integration tests of gitfs (issue 20): a real master with
C{fileserver_backend: [roots, git]} serving a real local git repository,
a real minion fetching its files with C{cp.*} over its session, and
C{salttwist-run fileserver.*} driving the master's file server.
"""

from __future__ import annotations

import json
import os
from typing import Any

from twisted.trial.unittest import TestCase

from tests.integration.harness import Cluster, CommandResult, runCommand
from tests.test_fileserver_contract import GitRepository

MINION = "minion1"


class GitfsTests(TestCase):
    """
    A master serving C{file_roots} and a git repository (mounted under
    C{formulas/}), and one minion.
    """

    timeout = 180

    async def setUp(self) -> None:
        self.cluster = Cluster(self)
        self.repo = GitRepository(os.path.join(self.cluster.baseDir, "repo"))
        self.repo.commitBranch("master", {"web/index.html": "v1\n", "top.sls": "git top\n"})
        self.repo.commitBranch("dev", {"web/index.html": "dev\n"})
        self.roots = os.path.join(self.cluster.baseDir, "srv", "salt")
        os.makedirs(self.roots)
        with open(os.path.join(self.roots, "top.sls"), "w") as f:
            f.write("roots top\n")
        self.cluster.writeMasterConfig(
            fileserver_backend=["roots", "git"],
            file_roots={"base": [self.roots]},
            gitfs_remotes=[{self.repo.path: [{"mountpoint": "salt://formulas"}]}],
            gitfs_update_interval=3600,
        )
        await self.cluster.startReady((MINION,))

    async def tearDown(self) -> None:
        await self.cluster.stopAll()

    async def run_(self, *args: str) -> Any:
        """
        Run C{salttwist-run ARGS --out json}, which must succeed.

        @return: the printed return.
        """
        result = await runCommand(
            ["salttwist-run", "-c", self.cluster.masterDir, *args, "--out", "json"],
            cwd=self.cluster.baseDir,
        )
        self.assertEqual(result.code, 0, self.cluster.explain(result))
        return json.loads(result.out)

    async def salt(self, *args: str) -> Any:
        """
        Run C{salttwist minion1 ARGS --out json}, which must succeed.

        @return: the minion's return.
        """
        result: CommandResult = await self.cluster.salt(MINION, *args, "--out", "json")
        self.assertEqual(result.code, 0, self.cluster.explain(result))
        return json.loads(result.out)[MINION]

    async def getFile(self, url: str) -> str:
        """
        Fetch C{url} with C{cp.get_file} into a new file.

        @return: its content.
        """
        self.getCount = getattr(self, "getCount", 0) + 1
        dest = os.path.join(self.cluster.baseDir, "got", str(self.getCount))
        got = await self.salt("cp.get_file", url, dest, "makedirs=True")
        self.assertEqual(got, dest, self.cluster.logs())
        with open(dest) as f:
            return f.read()

    async def test_branchesServed(self) -> None:
        """
        The repository's branches are saltenvs beside C{file_roots}';
        roots wins for a path both hold; the minion fetches from both.
        """
        self.assertEqual(await self.run_("fileserver.envs"), ["base", "dev"])
        self.assertEqual(
            await self.run_("fileserver.file_list", "saltenv=base"),
            ["formulas/top.sls", "formulas/web/index.html", "top.sls"],
        )
        self.assertEqual(
            await self.salt("cp.list_master", "saltenv=dev"), ["formulas/web/index.html"]
        )
        self.assertEqual(await self.getFile("salt://top.sls"), "roots top\n")
        self.assertEqual(await self.getFile("salt://formulas/top.sls"), "git top\n")
        self.assertEqual(await self.getFile("salt://formulas/web/index.html?saltenv=dev"), "dev\n")
        cachedir = self.cluster.masterConfig()["cachedir"]
        self.assertEqual(len(os.listdir(os.path.join(cachedir, "gitfs"))), 1)

    async def test_updateAndFailedFetch(self) -> None:
        """
        A new commit is served after C{fileserver.update}; when the remote
        is gone, the update fails quietly and the last good files are
        still served.
        """
        self.assertEqual(await self.getFile("salt://formulas/web/index.html"), "v1\n")
        self.repo.commitBranch("master", {"web/index.html": "v2\n"}, fresh=False)
        await self.run_("fileserver.update")
        self.assertEqual(await self.getFile("salt://formulas/web/index.html"), "v2\n")
        os.rename(self.repo.path, self.repo.path + "-gone")
        await self.run_("fileserver.update", "backend=git")
        self.assertEqual(await self.getFile("salt://formulas/web/index.html"), "v2\n")
        assert self.cluster.master is not None
        self.assertIn("gitfs: updating", self.cluster.master.output())
