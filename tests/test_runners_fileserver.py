# -*- test-case-name: tests.test_runners_fileserver -*-
"""
Tests for L{salttwist.runners.fileserver}, the C{fileserver.*} runners.

The master is real (L{tests.test_runners_jobs.makeMaster}, its blocking
calls run synchronously) with C{file_roots} of real temporary directories;
the runners are called as C{salttwist-run} calls them, through
L{Master.clientRunner} with Salt's wire arguments.
"""

from __future__ import annotations

import os
from typing import Any

from twisted.trial.unittest import SynchronousTestCase

from salttwist.runners import loadRunners, workerPlacement
from tests.test_runners_jobs import makeMaster, wireArgs


def writeTree(root: str, files: dict[str, str], dirs: tuple[str, ...] = ()) -> None:
    """
    Write C{files} (relative path to text) and make the empty C{dirs} under
    C{root}.
    """
    for name, text in files.items():
        path = os.path.join(root, *name.split("/"))
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with open(path, "w") as f:
            f.write(text)
    for name in dirs:
        os.makedirs(os.path.join(root, *name.split("/")), exist_ok=True)


class FileserverRunnerTests(SynchronousTestCase):
    """
    The runners against a master serving two saltenvs: C{base} from two
    roots (the first wins) and C{dev}.
    """

    def setUp(self) -> None:
        top = os.path.abspath(self.mktemp())
        self.base1 = os.path.join(top, "base1")
        self.base2 = os.path.join(top, "base2")
        self.dev = os.path.join(top, "dev")
        writeTree(
            self.base1,
            {"top.sls": "base: {}\n", "web/nginx.conf": "one\n", "web/init.sls": "{}\n"},
            dirs=("empty", "web/empty2"),
        )
        writeTree(self.base2, {"web/nginx.conf": "two\n", "only2.txt": "2\n"})
        writeTree(self.dev, {"dev.txt": "dev\n"})
        self.master = makeMaster(
            self,
            file_roots={"base": [self.base1, self.base2], "dev": [self.dev]},
        )

    def run_(self, fun: str, *args: Any, **kwargs: Any) -> Any:
        """
        Run a runner as C{salttwist-run} does.

        @return: its return.
        """
        reply = self.successResultOf(
            self.master.clientRunner(None, {"fun": fun, "arg": wireArgs(args, kwargs)})
        )
        return reply["return"]

    def runFails(self, fun: str, *args: Any, **kwargs: Any) -> str:
        """
        Run a runner that fails.

        @return: its error message.
        """
        d = self.master.clientRunner(None, {"fun": fun, "arg": wireArgs(args, kwargs)})
        return str(self.failureResultOf(d, ValueError).value)

    def test_loaded(self) -> None:
        """
        The runners load as C{fileserver.*} and run in the master process
        (they act on its own backends).
        """
        runners = loadRunners()
        for name in (
            "file_list",
            "dir_list",
            "empty_dir_list",
            "envs",
            "update",
            "clear_cache",
        ):
            function = runners[f"fileserver.{name}"]
            self.assertIsNone(workerPlacement(function))
            self.assertIn("CLI Example:", function.__doc__)

    def test_fileList(self) -> None:
        """
        C{fileserver.file_list} lists every file of a saltenv, sorted, from
        all its roots; another saltenv by name or position.
        """
        self.assertEqual(
            self.run_("fileserver.file_list"),
            ["only2.txt", "top.sls", "web/init.sls", "web/nginx.conf"],
        )
        self.assertEqual(self.run_("fileserver.file_list", saltenv="dev"), ["dev.txt"])
        self.assertEqual(self.run_("fileserver.file_list", "dev"), ["dev.txt"])

    def test_fileListBackend(self) -> None:
        """
        C{backend} narrows the backends: C{roots} lists the same files,
        C{-roots} none (no backend serves the saltenv then), an unknown
        backend fails naming it.
        """
        self.assertEqual(len(self.run_("fileserver.file_list", backend="roots")), 4)
        self.assertIn("'base'", self.runFails("fileserver.file_list", backend="-roots"))
        self.assertIn("'hg'", self.runFails("fileserver.file_list", backend="hg"))

    def test_unknownSaltenv(self) -> None:
        """
        A saltenv the file server does not serve fails the runner naming it.
        """
        self.assertIn("'nope'", self.runFails("fileserver.file_list", saltenv="nope"))
        self.assertIn("'nope'", self.runFails("fileserver.dir_list", saltenv="nope"))

    def test_traversalSaltenv(self) -> None:
        """
        A saltenv that is a path trick is refused.
        """
        self.assertIn("..", self.runFails("fileserver.file_list", saltenv="../etc"))

    def test_dirList(self) -> None:
        """
        C{fileserver.dir_list} lists the directories, empty ones included.
        """
        self.assertEqual(self.run_("fileserver.dir_list"), ["empty", "web", "web/empty2"])
        self.assertEqual(self.run_("fileserver.dir_list", saltenv="dev"), [])

    def test_emptyDirList(self) -> None:
        """
        C{fileserver.empty_dir_list} lists the directories holding nothing.
        """
        self.assertEqual(self.run_("fileserver.empty_dir_list"), ["empty", "web/empty2"])

    def test_envs(self) -> None:
        """
        C{fileserver.envs} lists the saltenvs, sorted; C{-roots} none.
        """
        self.assertEqual(self.run_("fileserver.envs"), ["base", "dev"])
        self.assertEqual(self.run_("fileserver.envs", backend="roots"), ["base", "dev"])
        self.assertEqual(self.run_("fileserver.envs", "-roots"), [])

    def test_envsSeeNewRoot(self) -> None:
        """
        A file added to a root is listed at once (roots reads the disk).
        """
        writeTree(self.dev, {"new/file.txt": "x"})
        self.assertEqual(
            self.run_("fileserver.file_list", saltenv="dev"), ["dev.txt", "new/file.txt"]
        )

    def test_update(self) -> None:
        """
        C{fileserver.update} returns C{True}, as Salt's.
        """
        self.assertIs(self.run_("fileserver.update"), True)
        self.assertIs(self.run_("fileserver.update", backend="roots"), True)
        self.assertIn("'svn'", self.runFails("fileserver.update", backend="svn"))

    def test_clearCache(self) -> None:
        """
        C{fileserver.clear_cache} names the backends cleared; none selected
        gives Salt's C{No cache was cleared}. The hashes are computed
        again afterwards (a file changed in place with the same size and
        mtime is seen after a clear).
        """
        server = self.master.fileServer
        path = os.path.join(self.dev, "dev.txt")
        before = server.hashFile("dev.txt", "dev")["hsum"]
        stat = os.stat(path)
        with open(path, "w") as f:
            f.write("DEV\n")
        os.utime(path, ns=(stat.st_atime_ns, stat.st_mtime_ns))
        self.assertEqual(server.hashFile("dev.txt", "dev")["hsum"], before)
        self.assertEqual(
            self.run_("fileserver.clear_cache"),
            {"cleared": ["The roots fileserver cache was cleared"]},
        )
        self.assertNotEqual(server.hashFile("dev.txt", "dev")["hsum"], before)
        self.assertEqual(self.run_("fileserver.clear_cache", "-roots"), "No cache was cleared")

    def test_blockingInThreads(self) -> None:
        """
        Every backend call goes through the master's C{runBlocking}.
        """
        calls: list[str] = []
        runBlocking = self.master.runBlocking

        def counting(f: Any, *args: Any, **kwargs: Any) -> Any:
            calls.append(getattr(f, "__name__", repr(f)))
            return runBlocking(f, *args, **kwargs)

        self.master.runBlocking = counting
        self.run_("fileserver.file_list")
        self.run_("fileserver.envs")
        self.run_("fileserver.update")
        self.assertEqual(calls, ["fileList", "envs", "update"])
