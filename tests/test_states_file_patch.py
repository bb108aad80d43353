# -*- test-case-name: tests.test_states_file_patch -*-
"""
Tests for C{file.patch} (the state, L{salttwist.states._filepatch}) and
the C{file.patch} execution function, with the real C{patch} program on
files in temporary directories and patches from a local file server. The
comments are those C{salt-call --local state.single file.patch} (Salt
3008.5) gave for the same files.
"""

from __future__ import annotations

import os
import shutil
from typing import Any

from twisted.internet.defer import Deferred
from twisted.internet.threads import deferToThread
from twisted.trial.unittest import SynchronousTestCase, TestCase

from salttwist.modules import CommandExecutionError
from salttwist.modules import filemod as fm
from salttwist.states import _filepatch as patching
from tests._statectx import makeLoaderContext
from tests.test_states_file import FileStateTestCase, readFile, writeFile

PATCH = """\
--- orig.txt
+++ new.txt
@@ -1,3 +1,3 @@
 one
-two
+TWO
 three
"""

TREE_PATCH = """\
--- a/one.txt
+++ b/one.txt
@@ -1 +1 @@
-1
+one
--- a/sub/two.txt
+++ b/sub/two.txt
@@ -1 +1 @@
-2
+two
"""


class OptionsTests(SynchronousTestCase):
    """
    L{patching.splitOptions} checks C{options} as Salt does.
    """

    def test_passed(self) -> None:
        """
        Options are split as a shell would, or taken as a list; the strip
        level is kept.
        """
        self.assertEqual(
            patching.splitOptions("--binary -l '--ignore-whitespace'", 2),
            (["--binary", "-l", "--ignore-whitespace"], 2),
        )
        self.assertEqual(patching.splitOptions(["-l", 3], None), (["-l", "3"], None))
        self.assertEqual(patching.splitOptions(None, None), ([], None))

    def test_strip(self) -> None:
        """
        C{-pN}, C{--strip=N} and C{--strip N} become the strip level.
        """
        for options in ("-p3", "--strip=3", "--strip 3"):
            self.assertEqual(patching.splitOptions(f"-l {options}", 1), (["-l"], 3))

    def test_refused(self) -> None:
        """
        The options the state passes itself are refused, all named; a
        malformed strip is refused with Salt's words.
        """
        cases = {
            "-N -o x": "The following CLI options are not allowed: -N, -o",
            "--forward --reject-file=r -r r --output=o": (
                "The following CLI options are not allowed: --forward, --reject-file=r, -r, "
                "--output=o"
            ),
            "-px": (
                "Invalid format for '-p' CLI option. Consider using the 'strip' option for "
                "this state."
            ),
            "--strip": (
                "Invalid format for '-strip' CLI option. Consider using the 'strip' option "
                "for this state."
            ),
            "'unclosed": 'Invalid options "\'unclosed": No closing quotation',
        }
        for options, message in cases.items():
            with self.assertRaises(patching.PatchOptionsError) as caught:
                patching.splitOptions(options, None)
            self.assertEqual(str(caught.exception), message)

    def test_nested(self) -> None:
        """
        A dry run's result is laid out as Salt's C{nested} outputter with
        C{nested_indent=14} (the text Salt's printed for this data).
        """
        self.assertEqual(
            patching.nestedResult(
                {
                    "pid": 4107,
                    "retcode": 1,
                    "stdout": "patching file x\nHunk #1 FAILED at 1.",
                    "stderr": "",
                }
            ),
            "              ----------\n              pid:\n                  4107\n"
            "              retcode:\n                  1\n              stderr:\n"
            "              stdout:\n                  patching file x\n"
            "                  Hunk #1 FAILED at 1.",
        )


class PatchFunctionTests(TestCase):
    """
    The execution function C{file.patch}, called in a thread as the
    minion calls it.
    """

    def setUp(self) -> None:
        self.top = os.path.abspath(self.mktemp())
        self.target = writeFile(os.path.join(self.top, "t.txt"), "one\ntwo\nthree\n")
        self.patch = writeFile(os.path.join(self.top, "fix.patch"), PATCH)

    def test_command(self) -> None:
        """
        The command line: options, C{--forward} and C{--reject-file=-}
        unless given, the patch file, then the file, or the directory with
        C{--strip=0} unless a strip is given.
        """
        binary = shutil.which("patch")
        self.assertEqual(
            fm._patchCommand(self.target, self.patch, "-l", True),
            [
                binary,
                "-l",
                "--dry-run",
                "--forward",
                "--reject-file=-",
                "-i",
                self.patch,
                self.target,
            ],
        )
        self.assertEqual(
            fm._patchCommand(self.top, self.patch, ["-N", "-r", "/r"], False),
            [binary, "-N", "-r", "/r", "-i", self.patch, "-d", self.top, "--strip=0"],
        )
        stripped = fm._patchCommand(self.top, self.patch, "-p1", False)
        self.assertEqual(stripped[1], "-p1")
        self.assertEqual(stripped[-2:], ["-d", self.top])
        self.assertNotIn("--strip=0", stripped)

    async def test_dryRunThenApply(self) -> None:
        """
        A dry run changes nothing; then the patch is applied. The result is
        C{cmd.run_all}'s.
        """
        context = makeLoaderContext()

        def call(*args: Any, **kwargs: Any) -> Deferred[dict[str, Any]]:
            return deferToThread(context.functions["file.patch"], context, *args, **kwargs)

        dry = await call(self.target, self.patch, dry_run=True)
        self.assertEqual(sorted(dry), ["pid", "retcode", "stderr", "stdout"])
        self.assertEqual(dry["retcode"], 0, dry)
        self.assertEqual(readFile(self.target), b"one\ntwo\nthree\n")
        done = await call(self.target, self.patch)
        self.assertEqual((done["retcode"], done["stdout"]), (0, f"patching file {self.target}"))
        self.assertEqual(readFile(self.target), b"one\nTWO\nthree\n")
        again = await call(self.target, self.patch)
        self.assertEqual(again["retcode"], 1)
        self.assertFalse(os.path.exists(self.target + ".rej"))

    def test_noPatchProgram(self) -> None:
        """
        Without the C{patch} program the call fails naming the package.
        """
        path = os.environ.get("PATH", "")
        self.addCleanup(os.environ.__setitem__, "PATH", path)
        os.environ["PATH"] = self.top
        with self.assertRaises(CommandExecutionError) as caught:
            fm._patchCommand(self.target, self.patch, "", False)
        self.assertEqual(
            str(caught.exception),
            "patch executable not found. Is the distribution's patch package installed?",
        )


class PatchStateTests(FileStateTestCase):
    """
    The state C{file.patch}.
    """

    def setUp(self) -> None:
        super().setUp()
        self.url = self.serve("fix.patch", PATCH)
        self.target = writeFile(self.path("target.txt"), "one\ntwo\nthree\n")

    async def test_testMode(self) -> None:
        """
        In test mode the changes are the dry run's result; nothing changes.
        """
        ret = await self.state("patch", self.target, source=self.url, ctx=self.context(test=True))
        self.assertEqual((ret["result"], ret["comment"]), (None, "The patch would be applied"))
        self.assertEqual(sorted(ret["changes"]), ["pid", "retcode", "stderr", "stdout"])
        self.assertEqual(ret["changes"]["retcode"], 0)
        self.assertIn(f"(read from {self.target})", ret["changes"]["stdout"])
        self.assertEqual(readFile(self.target), b"one\ntwo\nthree\n")

    async def test_apply(self) -> None:
        """
        The patch is applied; run again (in test mode too), Salt's "already
        applied", without changes. No temporary file is left behind.
        """
        before = set(os.listdir("/tmp"))
        ret = await self.state("patch", self.target, source=self.url)
        self.assertEqual((ret["result"], ret["comment"]), (True, "Patch successfully applied"))
        self.assertEqual(ret["changes"]["retcode"], 0)
        self.assertEqual(ret["changes"]["stdout"], f"patching file {self.target}")
        self.assertEqual(readFile(self.target), b"one\nTWO\nthree\n")
        for test in (False, True):
            again = await self.state(
                "patch", self.target, source=self.url, ctx=self.context(test=test)
            )
            self.assertEqual(
                again,
                {
                    "name": self.target,
                    "result": True,
                    "changes": {},
                    "comment": "Patch was already applied",
                },
            )
        self.assertEqual(
            [n for n in set(os.listdir("/tmp")) - before if n.startswith("__salttwist.tmp.")], []
        )
        self.assertEqual(sorted(os.listdir(self.dir)), ["target.txt"])

    async def test_conflict(self) -> None:
        """
        A patch that does not apply fails with the dry run's output;
        nothing changes. With C{reject_file} the rejected hunks are kept
        there.
        """
        writeFile(self.target, "zzz\n")
        ret = await self.state("patch", self.target, source=self.url)
        self.assertIs(ret["result"], False)
        self.assertEqual(ret["changes"], {})
        self.assertTrue(
            ret["comment"].startswith(
                "Patch would not apply cleanly, no changes made. Results of dry-run are below. "
                "Run state again using the reject_file option to save rejects to a persistent "
                "file.\n\n              ----------\n              pid:\n"
            ),
            ret["comment"],
        )
        self.assertIn("              retcode:\n                  1\n", ret["comment"])
        self.assertIn("Hunk #1 FAILED at 1.", ret["comment"])
        self.assertEqual(readFile(self.target), b"zzz\n")
        rejects = self.path("fix.rej")
        ret = await self.state("patch", self.target, source=self.url, reject_file=rejects)
        self.assertTrue(
            ret["comment"].startswith(
                "Patch would not apply cleanly, no changes made. Results of dry-run are below.\n\n"
            ),
            ret["comment"],
        )
        self.assertIn(b"-two", readFile(rejects))

    async def test_directory(self) -> None:
        """
        A patch of several files applies to a directory with C{strip}.
        """
        tree = self.path("tree")
        writeFile(os.path.join(tree, "one.txt"), "1\n")
        writeFile(os.path.join(tree, "sub", "two.txt"), "2\n")
        url = self.serve("tree.patch", TREE_PATCH)
        dry = await self.state("patch", tree, source=url, strip=1, ctx=self.context(test=True))
        self.assertIs(dry["result"], None, dry)
        ret = await self.state("patch", tree, source=url, options="-p1")
        self.assertEqual((ret["result"], ret["comment"]), (True, "Patch successfully applied"))
        self.assertEqual(readFile(os.path.join(tree, "one.txt")), b"one\n")
        self.assertEqual(readFile(os.path.join(tree, "sub", "two.txt")), b"two\n")
        again = await self.state("patch", tree, source=url, strip=1)
        self.assertEqual((again["result"], again["comment"]), (True, "Patch was already applied"))

    async def test_localTemplate(self) -> None:
        """
        The patch may be a local file, rendered as a template.
        """
        local = writeFile(
            os.path.join(self.roots, "..", "p.patch"),
            PATCH.replace("+TWO", "+{{ word }}"),
        )
        ret = await self.state(
            "patch",
            self.target,
            source=os.path.abspath(local),
            template="jinja",
            context={"word": "deux"},
        )
        self.assertIs(ret["result"], True, ret)
        self.assertEqual(readFile(self.target), b"one\ndeux\nthree\n")

    async def test_failures(self) -> None:
        """
        What cannot be done fails with Salt's words (a missing source:
        with this project's); the file is untouched.
        """
        cases = [
            ("", {"source": self.url}, "A file/directory to be patched is required"),
            ("rel", {"source": self.url}, "rel is not an absolute path"),
            (self.path("no"), {"source": self.url}, f"{self.path('no')} does not exist"),
            (
                self.target,
                {"source": self.url, "reject_file": "/nodir/x.rej"},
                "Parent directory for reject_file '/nodir/x.rej' either does not exist, or is "
                "not a directory",
            ),
            (
                self.target,
                {"source": self.url, "reject_file": "x.rej"},
                "'x.rej' is not an absolute path",
            ),
            (
                self.target,
                {"source": self.url, "options": "-N -o x"},
                "The following CLI options are not allowed: -N, -o",
            ),
            (self.target, {}, "A patch source is required"),
            (
                self.target,
                {"source": "salt://nope.patch"},
                "Unable to manage file: Source file salt://nope.patch not found in saltenv 'base'",
            ),
        ]
        for name, kwargs, comment in cases:
            ret = await self.state("patch", name, **kwargs)
            self.assertEqual(
                (ret["result"], ret["comment"], ret["changes"]), (False, comment, {}), name
            )
        self.assertEqual(readFile(self.target), b"one\ntwo\nthree\n")

    async def test_warnings(self) -> None:
        """
        Salt's retired C{hash} and C{dry_run_first} arguments give its
        warnings.
        """
        ret = await self.state("patch", self.target, source=self.url, hash="abc")
        self.assertEqual(
            ret["warnings"], ["The 'hash' argument is no longer used and has been ignored."]
        )
        self.assertIs(ret["result"], True)
