# -*- test-case-name: tests.test_modules_file_lines -*-
"""
Tests for the line editors of L{salttwist.modules.filemod} (Salt's
C{file.replace}, C{comment_line}, C{blockreplace}, C{line}): what they
share, editor by editor: the backup beside the file, the rewrite in place
(inode and mode kept), the file's own line ends, the refusal of binary and
missing files, and C{line}'s C{insert} and C{ensure} next to a line that
is already there; on real files in a temporary directory.
"""

from __future__ import annotations

import os
import stat
from collections.abc import Callable
from typing import Any

from twisted.trial.unittest import SynchronousTestCase

from salttwist.modules import CommandExecutionError, SaltInvocationError, filemod
from tests._statectx import makeLoaderContext

#: Each editor that keeps a backup as C{path + backup}, as called on a file
#: holding C{"a=1\nb=2\n"} to change it.
EDITORS: dict[str, Callable[..., Any]] = {
    "replace": lambda path, **kw: filemod.replace(path, "^a=1$", "a=2", **kw),
    "comment_line": lambda path, **kw: filemod.comment_line(path, "^a=", **kw),
    "blockreplace": lambda path, **kw: filemod.blockreplace(
        path, "#S", "#E", "v=1", append_if_not_found=True, **kw
    ),
}


class LineEditorTests(SynchronousTestCase):
    """
    What the editors share.
    """

    def setUp(self) -> None:
        self.dir = os.path.abspath(self.mktemp())
        os.makedirs(self.dir)

    def make(self, name: str, data: bytes) -> str:
        path = os.path.join(self.dir, name)
        with open(path, "wb") as f:
            f.write(data)
        return path

    def read(self, path: str) -> bytes:
        with open(path, "rb") as f:
            return f.read()

    def test_backup(self) -> None:
        """
        Each editor keeps the original as C{path + backup} (C{.bak} by
        default, any suffix given) and none with C{backup=False}; an edit
        that changes nothing keeps none.
        """
        for name, edit in EDITORS.items():
            path = self.make(f"{name}-default", b"a=1\nb=2\n")
            edit(path)
            self.assertEqual(self.read(path + ".bak"), b"a=1\nb=2\n", name)
            self.assertNotEqual(self.read(path), b"a=1\nb=2\n", name)
            path = self.make(f"{name}-suffix", b"a=1\nb=2\n")
            edit(path, backup=".orig")
            self.assertEqual(self.read(path + ".orig"), b"a=1\nb=2\n", name)
            self.assertFalse(os.path.exists(path + ".bak"), name)
            path = self.make(f"{name}-none", b"a=1\nb=2\n")
            edit(path, backup=False)
            self.assertEqual(
                sorted(n for n in os.listdir(self.dir) if n.startswith(f"{name}-none")),
                [f"{name}-none"],
            )
        same = self.make("same", b"x\n")
        filemod.replace(same, "^nothing$", "y")
        filemod.comment_line(same, "^nothing")
        self.assertFalse(os.path.exists(same + ".bak"))

    def test_inPlace(self) -> None:
        """
        Each editor rewrites the file in place: its inode, hard links and
        mode stay.
        """
        editors: dict[str, Callable[[str], Any]] = {
            **EDITORS,
            "line": lambda path: filemod.line(
                makeLoaderContext(), path, "c=3", mode="insert", location="end"
            ),
        }
        for name, edit in editors.items():
            path = self.make(name, b"a=1\nb=2\n")
            os.chmod(path, 0o640)
            os.link(path, path + ".link")
            inode = os.stat(path).st_ino
            edit(path)
            self.assertEqual(os.stat(path).st_ino, inode, name)
            self.assertEqual(stat.S_IMODE(os.stat(path).st_mode), 0o640, name)
            self.assertEqual(self.read(path + ".link"), self.read(path), name)
            self.assertNotEqual(self.read(path), b"a=1\nb=2\n", name)

    def test_lineEnds(self) -> None:
        """
        C{line} and C{blockreplace} write new lines with the file's own
        line end (its first), C{\\n} in a file without one.
        """
        context = makeLoaderContext()
        path = self.make("crlf", b"a=1\r\nb=2\r\n")
        filemod.line(context, path, "c=3", mode="ensure", after="^a=")
        self.assertEqual(self.read(path), b"a=1\r\nc=3\r\nb=2\r\n")
        filemod.blockreplace(path, "#S", "#E", "v=1", append_if_not_found=True, backup=False)
        self.assertEqual(self.read(path), b"a=1\r\nc=3\r\nb=2\r\n#S\r\nv=1#E\r\n")
        path = self.make("cr", b"a=1\rb=2")
        filemod.line(context, path, "c=3", mode="insert", location="start")
        self.assertEqual(self.read(path), b"c=3\ra=1\rb=2")
        path = self.make("bare", b"a=1")
        filemod.blockreplace(
            path, "#S", "#E", "v=1", append_if_not_found=True, append_newline=True, backup=False
        )
        self.assertEqual(self.read(path), b"a=1\n#S\nv=1\n#E\n")

    def test_refused(self) -> None:
        """
        A binary file is refused by each editor with Salt's words; a
        missing one is named.
        """
        binary = self.make("bin", b"\x00\x01a=1\n")
        for name, edit in EDITORS.items():
            error = self.assertRaises(SaltInvocationError, edit, binary)
            self.assertEqual(
                str(error), f"Cannot perform string replacements on a binary file: {binary}", name
            )
            missing = os.path.join(self.dir, "none")
            error = self.assertRaises(SaltInvocationError, edit, missing)
            self.assertEqual(str(error), f"File not found: {missing}", name)
        self.assertEqual(self.read(binary), b"\x00\x01a=1\n")
        error = self.assertRaises(
            CommandExecutionError,
            filemod.line,
            makeLoaderContext(),
            os.path.join(self.dir, "none"),
            "x",
            mode="ensure",
        )
        self.assertEqual(
            str(error), f'File "{os.path.join(self.dir, "none")}" does not exists or is not a file.'
        )

    def test_nextToSame(self) -> None:
        """
        C{line}'s C{insert} and C{ensure} after or before a line add the
        content only when the line next to it is not already the content
        (indented as the line they go by).
        """
        context = makeLoaderContext()
        path = self.make("f", b"[s]\n  a=1\nb=2\n")
        for mode, where in [
            ("insert", {"after": "a=1"}),
            ("ensure", {"after": "a=1"}),
            ("insert", {"before": "b=2"}),
        ]:
            filemod.line(context, path, "c=3", mode=mode, **where)
        self.assertEqual(self.read(path), b"[s]\n  a=1\n  c=3\nb=2\n")
        filemod.line(context, path, "d=4", mode="insert", before="b=2")
        filemod.line(context, path, "d=4", mode="insert", before="b=2")
        self.assertEqual(self.read(path), b"[s]\n  a=1\n  c=3\nd=4\nb=2\n")
        filemod.line(context, path, "e=5", mode="ensure", before="^b=2")
        filemod.line(context, path, "e=5", mode="ensure", before="^b=2")
        self.assertEqual(self.read(path), b"[s]\n  a=1\n  c=3\nd=4\ne=5\nb=2\n")
        filemod.line(context, path, "f=6", mode="ensure", before=r"^\[s\]")
        self.assertEqual(self.read(path), b"f=6\n[s]\n  a=1\n  c=3\nd=4\ne=5\nb=2\n")
