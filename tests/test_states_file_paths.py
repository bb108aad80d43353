# -*- test-case-name: tests.test_states_file_paths -*-
"""
Tests for L{salttwist.states.file}'s states on paths: C{file.directory},
C{file.symlink}, C{file.absent}, C{file.touch}, C{file.copy},
C{file.exists} and C{file.missing}, on real files in temporary
directories (owners changed for real: the tests run as root).
"""

from __future__ import annotations

import dataclasses
import grp
import json
import os
import pwd

from tests.test_states_file import FileStateTestCase, fileMode, readFile, writeFile


def owner(path: str, follow: bool = True) -> tuple[str, str]:
    st = os.stat(path) if follow else os.lstat(path)
    return pwd.getpwuid(st.st_uid).pw_name, grp.getgrgid(st.st_gid).gr_name


class DirectoryTests(FileStateTestCase):
    """
    C{file.directory}.
    """

    async def test_create(self) -> None:
        """
        A new directory is reported as Salt does; a missing parent fails
        without C{makedirs}; run again, it is in the correct state.
        """
        name = self.path("a", "b")
        ret = await self.state("directory", name)
        self.assertEqual(
            (ret["result"], ret["comment"]), (False, f"No directory to create {name} in")
        )
        ret = await self.state("directory", name, makedirs=True, dir_mode=750, user="nobody")
        self.assertEqual(
            ret,
            {"name": name, "result": True, "comment": "", "changes": {name: {"directory": "new"}}},
        )
        self.assertEqual(fileMode(name), "0750")
        self.assertEqual(owner(name)[0], "nobody")
        again = await self.state("directory", name, dir_mode="0750", user="nobody")
        self.assertEqual(
            (again["result"], again["changes"], again["comment"]),
            (True, {}, f"Directory {name} is in the correct state"),
        )

    async def test_testMode(self) -> None:
        """
        In test mode the changes are predicted by path with Salt's comment.
        """
        name = self.path("new")
        ret = await self.state("directory", name, ctx=self.context(test=True))
        self.assertEqual(ret["changes"], {name: {"directory": "new"}})
        self.assertEqual(
            ret["comment"], f"The following files will be changed:\n{name}: directory - new\n"
        )
        self.assertIsNone(ret["result"])
        self.assertFalse(os.path.exists(name))

    async def test_recurse(self) -> None:
        """
        C{recurse: [user, group, mode]} sets owners and modes below the
        directory: files get C{file_mode}, directories C{dir_mode}.
        """
        name = self.path("tree")
        writeFile(os.path.join(name, "a"), "a", 0o600)
        writeFile(os.path.join(name, "sub", "b"), "b", 0o600)
        kwargs = {
            "user": "nobody",
            "group": "nogroup",
            "recurse": ["user", "group", "mode"],
            "dir_mode": "0755",
            "file_mode": "0644",
        }
        test = await self.state("directory", name, ctx=self.context(test=True), **kwargs)
        self.assertIsNone(test["result"])
        self.assertEqual(
            test["changes"][os.path.join(name, "a")],
            {"user": "nobody", "group": "nogroup", "mode": "0644"},
        )
        self.assertEqual(fileMode(os.path.join(name, "a")), "0600")
        ret = await self.state("directory", name, **kwargs)
        self.assertIs(ret["result"], True, ret)
        self.assertEqual(ret["comment"], f"Directory {name} updated")
        for path in (name, os.path.join(name, "a"), os.path.join(name, "sub", "b")):
            self.assertEqual(owner(path), ("nobody", "nogroup"))
        self.assertEqual(fileMode(os.path.join(name, "sub", "b")), "0644")
        self.assertEqual(fileMode(os.path.join(name, "sub")), "0755")
        again = await self.state("directory", name, **kwargs)
        self.assertEqual(again["changes"], {})

    async def test_recurseBad(self) -> None:
        """
        An unknown C{recurse} type fails.
        """
        ret = await self.state("directory", self.dir, recurse=["owner"])
        self.assertIs(ret["result"], False)
        self.assertIn('Types for "recurse" limited to', ret["comment"])

    async def test_clean(self) -> None:
        """
        C{clean} removes what no required C{file} state names, except
        C{exclude_pat}.
        """
        name = self.path("conf.d")
        keep = writeFile(os.path.join(name, "keep.conf"), "k")
        writeFile(os.path.join(name, "old.conf"), "o")
        writeFile(os.path.join(name, "sub", "deep"), "d")
        writeFile(os.path.join(name, "local.save"), "s")
        ret = await self.state(
            "directory", name, clean=True, require=[{"file": keep}], exclude_pat="*.save"
        )
        self.assertIs(ret["result"], True, ret)
        self.assertEqual(
            ret["changes"]["removed"], [os.path.join(name, "old.conf"), os.path.join(name, "sub")]
        )
        self.assertEqual(ret["comment"], f"Files cleaned from directory {name}")
        self.assertEqual(sorted(os.listdir(name)), ["keep.conf", "local.save"])

    async def test_fileInTheWay(self) -> None:
        """
        A file where the directory should be fails, unless C{force}
        (or C{backupname}, which keeps it).
        """
        name = writeFile(self.path("d"), "file")
        ret = await self.state("directory", name)
        self.assertEqual(ret["comment"], f"Specified location {name} exists and is a file")
        ret = await self.state("directory", name, force=True, backupname=self.path("d.bak"))
        self.assertIs(ret["result"], True, ret)
        self.assertTrue(os.path.isdir(name))
        self.assertEqual(readFile(self.path("d.bak")), b"file")


class SymlinkTests(FileStateTestCase):
    """
    C{file.symlink}.
    """

    async def test_create(self) -> None:
        """
        A symlink is created, then present; a new target replaces it.
        """
        target = writeFile(self.path("t1"), "1")
        name = self.path("link")
        ret = await self.state("symlink", name, target=target)
        self.assertEqual(
            ret,
            {
                "name": name,
                "result": True,
                "comment": f"Created new symlink {name} -> {target}",
                "changes": {"new": name},
            },
        )
        self.assertEqual(os.readlink(name), target)
        again = await self.state("symlink", name, target=target)
        self.assertEqual(again["comment"], f"Symlink {name} is present and owned by root:root")
        self.assertEqual(again["changes"], {})
        other = writeFile(self.path("t2"), "2")
        test = await self.state("symlink", name, target=other, ctx=self.context(test=True))
        self.assertEqual(
            (test["result"], test["comment"], test["changes"]),
            (None, f"Link {name} target is set to be changed to {other}", {"change": name}),
        )
        self.assertEqual(os.readlink(name), target)
        ret = await self.state("symlink", name, target=other)
        self.assertEqual(os.readlink(name), other)
        self.assertEqual(ret["changes"], {"new": name})

    async def test_ownership(self) -> None:
        """
        The symlink itself gets C{user} and C{group}.
        """
        name = self.path("owned")
        await self.state("symlink", name, target="/nonexistent")
        ret = await self.state(
            "symlink", name, target="/nonexistent", user="nobody", group="nogroup"
        )
        self.assertEqual(ret["changes"], {"ownership": "nobody:nogroup"})
        self.assertEqual(ret["comment"], f"Set ownership of symlink {name} to nobody:nogroup")
        self.assertEqual(owner(name, follow=False), ("nobody", "nogroup"))

    async def test_inTheWay(self) -> None:
        """
        A file in the way fails without C{force}; with C{backupname} it is
        moved aside; a missing directory fails without C{makedirs}.
        """
        name = writeFile(self.path("f"), "data")
        ret = await self.state("symlink", name, target="/etc")
        self.assertEqual(
            (ret["result"], ret["comment"]),
            (False, f"File exists where the symlink {name} should be"),
        )
        ret = await self.state("symlink", name, target="/etc", backupname="f.orig")
        self.assertIs(ret["result"], True, ret)
        self.assertEqual(readFile(self.path("f.orig")), b"data")
        self.assertTrue(os.path.islink(name))
        deep = self.path("x", "y", "link")
        ret = await self.state("symlink", deep, target="/etc")
        self.assertEqual(
            ret["comment"], f"Directory {os.path.dirname(deep)} for symlink is not present"
        )
        ret = await self.state("symlink", deep, target="/etc", makedirs=True)
        self.assertIs(ret["result"], True, ret)
        self.assertEqual(os.readlink(deep), "/etc")


class AbsentTouchCopyTests(FileStateTestCase):
    """
    C{file.absent}, C{file.touch}, C{file.copy}, C{file.exists} and
    C{file.missing}.
    """

    async def test_absent(self) -> None:
        """
        Files and trees are removed (in test mode only reported).
        """
        name = writeFile(self.path("tree", "f"), "x")
        tree = self.path("tree")
        test = await self.state("absent", tree, ctx=self.context(test=True))
        self.assertEqual(
            (test["result"], test["comment"], test["changes"]),
            (None, f"Directory {tree} is set for removal", {"removed": tree}),
        )
        self.assertTrue(os.path.exists(name))
        ret = await self.state("absent", name)
        self.assertEqual(
            (ret["comment"], ret["changes"]), (f"Removed file {name}", {"removed": name})
        )
        ret = await self.state("absent", tree)
        self.assertEqual(ret["comment"], f"Removed directory {tree}")
        self.assertFalse(os.path.exists(tree))
        ret = await self.state("absent", tree)
        self.assertEqual((ret["result"], ret["comment"]), (True, f"File {tree} is not present"))
        ret = await self.state("absent", "/")
        self.assertEqual((ret["result"], ret["comment"]), (False, 'Refusing to make "/" absent'))

    async def test_touch(self) -> None:
        """
        C{file.touch} creates a file, then updates its times.
        """
        name = self.path("t")
        ret = await self.state("touch", name)
        self.assertEqual(
            (ret["comment"], ret["changes"]), (f"Created empty file {name}", {"new": name})
        )
        ret = await self.state("touch", name, mtime=1700000000)
        self.assertEqual(ret["comment"], f"Updated times on file {name}")
        self.assertEqual(os.stat(name).st_mtime, 1700000000)
        ret = await self.state("touch", self.path("no", "dir"))
        self.assertEqual(
            (ret["result"], ret["comment"]),
            (False, f"Directory not present to touch file {self.path('no', 'dir')}"),
        )
        test = await self.state("touch", self.path("new"), ctx=self.context(test=True))
        self.assertEqual(test["comment"], f"File {self.path('new')} is set to be created")
        self.assertFalse(os.path.exists(self.path("new")))

    async def test_copy(self) -> None:
        """
        C{file.copy} copies once (then leaves the target alone unless
        C{force}), with the source's mode by default and the given owner.
        """
        source = writeFile(self.path("src"), "data\n", 0o640)
        name = self.path("out", "dst")
        ret = await self.state("copy", name, source=source)
        self.assertEqual(ret["comment"], f"The target directory {self.path('out')} is not present")
        ret = await self.state("copy", name, source=source, makedirs=True, user="nobody")
        self.assertEqual(ret["changes"], {name: source})
        self.assertEqual(ret["comment"], f'Copied "{source}" to "{name}"')
        self.assertEqual((readFile(name), fileMode(name)), (b"data\n", "0640"))
        self.assertEqual(owner(name)[0], "nobody")
        writeFile(source, "new\n")
        ret = await self.state("copy", name, source=source)
        self.assertEqual(
            ret["comment"], f'The target file "{name}" exists and will not be overwritten'
        )
        self.assertEqual(readFile(name), b"data\n")
        ret = await self.state("copy", name, source=source, force=True, preserve=True)
        self.assertEqual(readFile(name), b"new\n")
        missing = await self.state("copy", name, source=self.path("nope"))
        self.assertEqual(missing["comment"], f'Source file "{self.path("nope")}" is not present')

    async def test_existsMissing(self) -> None:
        """
        C{file.exists} and C{file.missing} only check.
        """
        here = writeFile(self.path("here"), "")
        gone = self.path("gone")
        self.assertEqual((await self.state("exists", here))["comment"], f"Path {here} exists")
        ret = await self.state("exists", gone)
        self.assertEqual(
            (ret["result"], ret["comment"]), (False, f"Specified path {gone} does not exist")
        )
        self.assertEqual((await self.state("missing", gone))["comment"], f"Path {gone} is missing")
        ret = await self.state("missing", here)
        self.assertEqual((ret["result"], ret["comment"]), (False, f"Specified path {here} exists"))


class CleanByIdTests(FileStateTestCase):
    """
    C{clean} keeps the files of required states named by id, through the
    run's low chunks (Salt's C{__lowstate__}).
    """

    async def test_requireById(self) -> None:
        """
        A requisite naming a state's id keeps that state's file.
        """
        name = self.path("d")
        writeFile(os.path.join(name, "app.conf"), "a")
        writeFile(os.path.join(name, "junk"), "j")
        ctx = self.context()
        ctx.context["__lowstate__"] = [
            {"state": "file", "__id__": "app_conf", "name": os.path.join(name, "app.conf")}
        ]
        ret = await self.state(
            "directory", name, clean=True, require=[{"file": "app_conf"}], ctx=ctx
        )
        self.assertEqual(ret["changes"]["removed"], [os.path.join(name, "junk")])
        self.assertEqual(os.listdir(name), ["app.conf"])


class RenameSerializeTests(FileStateTestCase):
    """
    C{file.rename} and C{file.serialize}.
    """

    async def test_rename(self) -> None:
        """
        The source is moved once; afterwards it has already moved.
        """
        source = writeFile(self.path("old"), "x")
        name = self.path("new")
        test = await self.state("rename", name, source=source, ctx=self.context(test=True))
        self.assertEqual(test["comment"], f'File "{source}" is set to be moved to "{name}"')
        ret = await self.state("rename", name, source=source)
        self.assertEqual(
            (ret["comment"], ret["changes"]), (f'Moved "{source}" to "{name}"', {name: source})
        )
        self.assertEqual(readFile(name), b"x")
        again = await self.state("rename", name, source=source)
        self.assertEqual(
            again["comment"], f'Source file "{source}" has already been moved out of place'
        )

    async def test_serialize(self) -> None:
        """
        JSON and YAML as Salt writes them; C{merge_if_exists} merges into
        the file's data; test mode says what would happen.
        """
        name = self.path("c.json")
        ret = await self.state("serialize", name, dataset={"b": 1, "a": [1, 2]}, serializer="json")
        self.assertIs(ret["result"], True, ret)
        self.assertEqual(readFile(name), b'{\n  "a": [\n    1,\n    2\n  ],\n  "b": 1\n}\n')
        test = await self.state(
            "serialize",
            name,
            dataset={"c": 3},
            formatter="json",
            merge_if_exists=True,
            ctx=self.context(test=True),
        )
        self.assertEqual(
            (test["result"], test["comment"]),
            (None, f"Dataset will be serialized and stored into {name}"),
        )
        ret = await self.state(
            "serialize", name, dataset={"c": 3}, formatter="json", merge_if_exists=True
        )
        self.assertEqual(json.loads(readFile(name)), {"a": [1, 2], "b": 1, "c": 3})
        self.assertEqual(ret["comment"], f"File {name} updated")
        ctx = self.context(pillar={"app": {"port": 80, "name": "web"}})
        yml = self.path("c.yaml")
        ret = await self.state("serialize", yml, dataset_pillar="app", ctx=ctx)
        self.assertEqual(readFile(yml), b"name: web\nport: 80\n")
        bad = await self.state("serialize", yml, dataset={}, serializer="toml")
        self.assertEqual(
            bad["comment"],
            "The toml serializer could not be found. It either does not exist or its "
            "prerequisites are not installed.",
        )


class HardlinkAccumulatedTests(FileStateTestCase):
    """
    C{file.hardlink} and C{file.accumulated}.
    """

    async def test_hardlink(self) -> None:
        """
        A hard link is created, then found in place.
        """
        target = writeFile(self.path("t"), "x")
        name = self.path("h")
        test = await self.state("hardlink", name, target=target, ctx=self.context(test=True))
        self.assertEqual(
            (test["result"], test["comment"]),
            (None, f"Hard link {name} to {target} is set for creation"),
        )
        ret = await self.state("hardlink", name, target=target)
        self.assertEqual(
            (ret["comment"], ret["changes"]),
            (f"Created new hard link {name} -> {target}", {"new": name}),
        )
        self.assertEqual(os.stat(name).st_ino, os.stat(target).st_ino)
        again = await self.state("hardlink", name, target=target)
        self.assertEqual(
            again["comment"], f"Target of hard link {name} is already pointing to {target}"
        )
        missing = await self.state("hardlink", self.path("h2"), target=self.path("nope"))
        self.assertEqual(
            missing["comment"], f"Target {self.path('nope')} for hard link does not exist"
        )

    async def test_accumulated(self) -> None:
        """
        Accumulated texts reach a C{file.managed} template as
        C{accumulator} and a C{file.blockreplace}'s content; an accumulator
        required by no file state is orphaned.
        """
        motd = self.path("motd")
        url = self.serve(
            "motd.j2", "{% for line in accumulator['extra'] %}{{ line }}\n{% endfor %}"
        )
        ctx = self.context()
        acc = dataclasses.replace(
            ctx, low={"__id__": "extra", "__sls__": "m", "require_in": [{"file": "motd"}]}
        )
        ret = await self.state("accumulated", "extra", filename=motd, text=["a", "b"], ctx=acc)
        self.assertEqual(ret["comment"], f"Accumulator extra for file {motd} was charged by text")
        managedCtx = dataclasses.replace(ctx, low={"__id__": "motd"})
        ret = await self.state("managed", motd, source=url, template="jinja", ctx=managedCtx)
        self.assertIs(ret["result"], True, ret)
        self.assertEqual(readFile(motd), b"a\nb\n")
        block = writeFile(
            self.path("block"), "#-- start managed zone --\n#-- end managed zone --\n"
        )
        acc2 = dataclasses.replace(
            ctx, low={"__id__": "more", "__sls__": "m", "require_in": [{"file": "blk"}]}
        )
        await self.state("accumulated", "more", filename=block, text="line1", ctx=acc2)
        blk = dataclasses.replace(ctx, low={"__id__": "blk"})
        ret = await self.state("blockreplace", block, ctx=blk)
        self.assertIs(ret["result"], True, ret)
        self.assertEqual(
            readFile(block), b"#-- start managed zone --\nline1\n#-- end managed zone --\n"
        )
        orphan = await self.state(
            "accumulated",
            "o",
            filename=motd,
            text="x",
            ctx=dataclasses.replace(ctx, low={"__id__": "o", "__sls__": "m"}),
        )
        self.assertEqual(
            (orphan["result"], orphan["comment"]), (False, "Orphaned accumulator o in m:o")
        )
