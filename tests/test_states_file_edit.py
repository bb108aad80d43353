# -*- test-case-name: tests.test_states_file_edit -*-
"""
Tests for L{salttwist.states.file}'s edits in place: C{file.line},
C{file.replace}, C{file.blockreplace}, C{file.append}, C{file.prepend},
C{file.comment} and C{file.uncomment}, on real files, with Salt's
comments and diffs (as Salt 3008 prints them).
"""

from __future__ import annotations

import os

from tests.test_states_file import FileStateTestCase, readFile, writeFile


class LineTests(FileStateTestCase):
    """
    C{file.line}.
    """

    async def test_ensureAfter(self) -> None:
        """
        C{ensure} with C{after} puts the line after the match once.
        """
        name = writeFile(self.path("f"), "one\ntwo\nthree\n")
        ret = await self.state("line", name, content="four", after="one", mode="ensure")
        self.assertEqual(
            ret["changes"], {"diff": "--- \n+++ \n@@ -1,3 +1,4 @@\n one\n+four\n two\n three\n"}
        )
        self.assertEqual(ret["comment"], "Changes were made")
        self.assertEqual(readFile(name), b"one\nfour\ntwo\nthree\n")
        again = await self.state("line", name, content="four", after="one", mode="ensure")
        self.assertEqual(
            (again["result"], again["comment"], again["changes"]),
            (True, "No changes needed to be made", {}),
        )

    async def test_modes(self) -> None:
        """
        C{replace} keeps the indentation, C{delete} removes matches,
        C{insert} at C{location} C{start} and C{end}, before a match.
        """
        name = writeFile(self.path("f"), "a\n  key=1\nb\n")
        await self.state("line", name, content="key=2", match="key=", mode="replace")
        self.assertEqual(readFile(name), b"a\n  key=2\nb\n")
        await self.state("line", name, match="^b", mode="delete")
        self.assertEqual(readFile(name), b"a\n  key=2\n")
        await self.state("line", name, content="first", mode="insert", location="start")
        await self.state("line", name, content="last", mode="insert", location="end")
        await self.state("line", name, content="before-a", mode="insert", before="^a$")
        self.assertEqual(readFile(name), b"first\nbefore-a\na\n  key=2\nlast\n")

    async def test_testModeAndErrors(self) -> None:
        """
        Test mode predicts the diff and writes nothing; a missing file, a
        missing mode and an ambiguous anchor fail with Salt's words.
        """
        name = writeFile(self.path("f"), "x\nx\n")
        ret = await self.state(
            "line", name, content="y", mode="insert", location="end", ctx=self.context(test=True)
        )
        self.assertEqual((ret["result"], ret["comment"]), (None, "Changes would be made"))
        self.assertIn("+y\n", ret["changes"]["diff"])
        self.assertEqual(readFile(name), b"x\nx\n")
        ret = await self.state("line", name, content="y", after="x", mode="ensure")
        self.assertEqual(
            (ret["result"], ret["comment"]),
            (False, 'Found more than expected occurrences in "after" expression'),
        )
        ret = await self.state("line", name, content="y")
        self.assertEqual(ret["comment"], "Mode was not defined. How to process the file?")
        missing = self.path("missing")
        ret = await self.state("line", missing, content="y", mode="ensure", after="x")
        self.assertEqual(ret["comment"], f"{missing}: file not found")
        ret = await self.state(
            "line", missing, content="y", mode="insert", location="end", create=True
        )
        self.assertIs(ret["result"], True, ret)
        self.assertEqual(readFile(missing), b"y\n")


class ReplaceTests(FileStateTestCase):
    """
    C{file.replace}.
    """

    async def test_replace(self) -> None:
        """
        The pattern is replaced, the original kept as C{.bak}; test mode
        says what would change.
        """
        name = writeFile(self.path("c"), "LogLevel warn\nother\n")
        test = await self.state(
            "replace", name, pattern="warn", repl="info", ctx=self.context(test=True)
        )
        self.assertEqual((test["result"], test["comment"]), (None, "Changes would have been made"))
        self.assertEqual(readFile(name), b"LogLevel warn\nother\n")
        ret = await self.state("replace", name, pattern="warn", repl="info")
        self.assertEqual(
            ret["changes"],
            {"diff": "--- \n+++ \n@@ -1,2 +1,2 @@\n-LogLevel warn\n+LogLevel info\n other\n"},
        )
        self.assertEqual(ret["comment"], "Changes were made")
        self.assertEqual(readFile(name + ".bak"), b"LogLevel warn\nother\n")
        again = await self.state("replace", name, pattern="warn", repl="info")
        self.assertEqual(again["comment"], "No changes needed to be made")

    async def test_appendIfNotFound(self) -> None:
        """
        C{append_if_not_found} adds C{not_found_content} once.
        """
        name = writeFile(self.path("c"), "a\n")
        for _ in range(2):
            await self.state(
                "replace",
                name,
                pattern="^key=.*",
                repl="key=1",
                append_if_not_found=True,
                backup=False,
            )
        self.assertEqual(readFile(name), b"a\nkey=1\n")
        self.assertFalse(os.path.exists(name + ".bak"))

    async def test_missing(self) -> None:
        """
        A missing file fails, unless C{ignore_if_missing}.
        """
        name = self.path("none")
        ret = await self.state("replace", name, pattern="a", repl="b")
        self.assertEqual((ret["result"], ret["comment"]), (False, f"{name}: file not found"))
        ret = await self.state("replace", name, pattern="a", repl="b", ignore_if_missing=True)
        self.assertEqual((ret["result"], ret["comment"]), (True, "No changes needed to be made"))


class BlockReplaceTests(FileStateTestCase):
    """
    C{file.blockreplace}.
    """

    async def test_block(self) -> None:
        """
        The lines between the markers are replaced.
        """
        name = writeFile(
            self.path("b"), "a\n#-- start managed zone --\nold\n#-- end managed zone --\nz\n"
        )
        ret = await self.state("blockreplace", name, content="new")
        self.assertEqual(
            ret["changes"],
            {
                "diff": "--- \n+++ \n@@ -1,5 +1,5 @@\n a\n #-- start managed zone --\n-old\n"
                "+new\n #-- end managed zone --\n z\n"
            },
        )
        self.assertEqual((ret["result"], ret["comment"]), (True, "Changes were made"))
        again = await self.state("blockreplace", name, content="new")
        self.assertEqual(again["comment"], "No changes needed to be made")

    async def test_appendAndErrors(self) -> None:
        """
        Missing markers fail, unless C{append_if_not_found} adds the block;
        test mode writes nothing.
        """
        name = writeFile(self.path("b"), "a\n")
        ret = await self.state("blockreplace", name, marker_start="# BEGIN", marker_end="# END")
        self.assertIs(ret["result"], False)
        self.assertEqual(
            ret["comment"],
            "Encountered error managing block: Cannot edit marked block. Markers were not "
            "found in file.. See the log for details.",
        )
        kwargs = {
            "marker_start": "# BEGIN",
            "marker_end": "# END",
            "content": "x=1\ny=2\n",
            "append_if_not_found": True,
        }
        test = await self.state("blockreplace", name, ctx=self.context(test=True), **kwargs)
        self.assertEqual((test["result"], test["comment"]), (None, "Changes would be made"))
        self.assertEqual(readFile(name), b"a\n")
        await self.state("blockreplace", name, **kwargs)
        self.assertEqual(readFile(name), b"a\n# BEGIN\nx=1\ny=2\n# END\n")

    async def test_source(self) -> None:
        """
        The block's content may come from a rendered C{salt://} source.
        """
        url = self.serve("block.j2", "host={{ grains['id'] }}\n")
        name = writeFile(self.path("b"), "#-- start managed zone --\n#-- end managed zone --\n")
        ctx = self.context(grains={"id": "m3"})
        ret = await self.state("blockreplace", name, source=url, ctx=ctx)
        self.assertIs(ret["result"], True, ret)
        self.assertEqual(
            readFile(name), b"#-- start managed zone --\nhost=m3\n#-- end managed zone --\n"
        )


class AppendPrependTests(FileStateTestCase):
    """
    C{file.append} and C{file.prepend}.
    """

    async def test_append(self) -> None:
        """
        Texts not in the file are appended (whitespace aside); Salt's
        diff of lines joined by newlines.
        """
        name = writeFile(self.path("a"), "one\ntwo\n")
        ret = await self.state("append", name, text=["three", "two"])
        self.assertEqual(
            ret["changes"], {"diff": "--- \n\n+++ \n\n@@ -1,2 +1,3 @@\n\n one\n two\n+three"}
        )
        self.assertEqual(ret["comment"], "Appended 1 lines")
        self.assertEqual(readFile(name), b"one\ntwo\nthree\n")
        again = await self.state("append", name, text="  three  ")
        self.assertEqual(again["comment"], f"File {name} is in correct state")

    async def test_appendCreates(self) -> None:
        """
        A missing file is created (its parents with C{makedirs}).
        """
        name = self.path("d", "new")
        ret = await self.state("append", name, text="x", makedirs=True)
        self.assertIs(ret["result"], True, ret)
        self.assertEqual(readFile(name), b"x\n")

    async def test_prepend(self) -> None:
        """
        Texts are put first; Salt's diff of whole lines.
        """
        name = writeFile(self.path("p"), "a\nb\nc\n")
        ret = await self.state("prepend", name, text="first")
        self.assertEqual(
            ret["changes"], {"diff": "--- \n+++ \n@@ -1,3 +1,4 @@\n+first\n a\n b\n c\n"}
        )
        self.assertEqual(ret["comment"], "Prepended 1 lines")
        self.assertEqual(readFile(name), b"first\na\nb\nc\n")


class CommentTests(FileStateTestCase):
    """
    C{file.comment} and C{file.uncomment}.
    """

    async def test_commentUncomment(self) -> None:
        """
        Matching lines are commented and uncommented, with Salt's words.
        """
        name = writeFile(self.path("ssh"), "#PermitRootLogin yes\nPort 22\n")
        ret = await self.state("uncomment", name, regex="PermitRootLogin")
        self.assertEqual(
            ret["changes"],
            {
                "diff": "--- \n+++ \n@@ -1,2 +1,2 @@\n-#PermitRootLogin yes\n"
                "+PermitRootLogin yes\n Port 22\n"
            },
        )
        self.assertEqual(ret["comment"], "Uncommented lines successfully")
        ret = await self.state("comment", name, regex="^Port")
        self.assertEqual(ret["comment"], "Commented lines successfully")
        self.assertEqual(readFile(name), b"PermitRootLogin yes\n#Port 22\n")
        again = await self.state("comment", name, regex="^Port")
        self.assertEqual((again["result"], again["comment"]), (True, "Pattern already commented"))
        missing = await self.state("comment", name, regex="^Nope")
        self.assertEqual(
            (missing["result"], missing["comment"]), (False, "Nope: Pattern not found")
        )
        test = await self.state("uncomment", name, regex="Port", ctx=self.context(test=True))
        self.assertEqual((test["result"], test["changes"]), (None, {name: "updated"}))
        self.assertEqual(readFile(name), b"PermitRootLogin yes\n#Port 22\n")


class KeyValueTests(FileStateTestCase):
    """
    C{file.keyvalue}.
    """

    async def test_keyvalue(self) -> None:
        """
        A commented key is uncommented and set, a missing one appended;
        Salt's diff and comments; run again, nothing changes.
        """
        name = writeFile(self.path("sshd"), "#PermitRootLogin yes\nPort 22\n")
        kwargs = {
            "key_values": {"PermitRootLogin": "no", "Banner": "none"},
            "separator": " ",
            "uncomment": "#",
            "append_if_not_found": True,
        }
        test = await self.state("keyvalue", name, ctx=self.context(test=True), **kwargs)
        self.assertIsNone(test["result"])
        self.assertTrue(
            test["comment"].startswith(
                f"File {name} is set to be changed (2 lines modified, 0 deleted)"
            )
        )
        self.assertEqual(readFile(name), b"#PermitRootLogin yes\nPort 22\n")
        ret = await self.state("keyvalue", name, **kwargs)
        self.assertEqual(
            ret["changes"],
            {
                "diff": "- #PermitRootLogin yes\n+ PermitRootLogin no\n- <EOF>\n"
                "+ Banner none\n+ <EOF>\n"
            },
        )
        self.assertEqual((ret["result"], ret["comment"]), (True, "Changed 2, deleted 0 lines"))
        self.assertEqual(readFile(name), b"PermitRootLogin no\nPort 22\nBanner none\n")
        again = await self.state("keyvalue", name, **kwargs)
        self.assertEqual((again["result"], again["changes"]), (True, {}))

    async def test_missingAndPrune(self) -> None:
        """
        A missing file fails unless C{create_if_missing}; C{prune} drops
        other keys.
        """
        missing = self.path("none")
        ret = await self.state("keyvalue", missing, key="a", value=1)
        self.assertEqual((ret["result"], ret["comment"]), (False, f"unable to open {missing}"))
        ret = await self.state("keyvalue", missing, key="a", value=1, create_if_missing=True)
        self.assertIs(ret["result"], True, ret)
        self.assertEqual(readFile(missing), b"a=1\n")
        writeFile(missing, "a=1\nb=2\n")
        ret = await self.state("keyvalue", missing, key="a", value=1, prune=True)
        self.assertEqual(ret["comment"], "Changed 0, deleted 1 lines")
        self.assertEqual(readFile(missing), b"a=1\n")
