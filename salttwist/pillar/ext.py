# -*- test-case-name: tests.test_ext_pillar -*-
"""
The external pillars (Salt's C{ext_pillar} modules) and their registry.

  - C{file_tree}: a directory tree per minion (C{hosts/<id>/...}) and per
    nodegroup (C{nodegroups/<name>/...}); directories become mappings and
    files keys whose value is their text;
  - C{cmd_json} and C{cmd_yaml}: a command's output, parsed, with C{%s}
    replaced by the minion's id.

Each is made by a factory taking the master's options; L{EXT_PILLARS} maps
names to factories and L{registerExtPillar} adds one. Everything here
blocks (disk, commands): the pillar compiler runs in a worker process or a
thread.
"""

from __future__ import annotations

import fnmatch
import json
import os
import shlex
import signal
import subprocess
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from zope.interface import implementer

from salttwist.pillar.interfaces import ExtPillarError, IExtPillar
from salttwist.pillar.merge import mergeRecurse
from salttwist.render import RenderError, loadYaml, renderText
from salttwist.targeting import TargetError, compileTarget

#: A factory of external pillars: the master's options to an L{IExtPillar}.
ExtPillarFactory = Callable[[dict[str, Any]], IExtPillar]

#: The seconds a C{cmd_json} / C{cmd_yaml} command may run by default.
DEFAULT_COMMAND_TIMEOUT = 30.0

#: The most output a command may write, in bytes.
MAX_COMMAND_OUTPUT = 16 * 1024 * 1024


def _checkMinionId(minionId: str) -> None:
    if not minionId or minionId in (".", "..") or "/" in minionId or "\x00" in minionId:
        raise ExtPillarError(f"minion id {minionId!r} cannot name a directory")


@implementer(IExtPillar)
class FileTreePillar:
    """
    Salt's C{file_tree}. Configuration (a mapping):

      - C{root_dir} (required): holds C{hosts/<minion id>/} and
        C{nodegroups/<nodegroup>/}; a relative C{root_dir} is looked for
        under each root of the C{pillarenv}'s C{pillar_roots}, in order, and
        the results merged (as Salt since 2018.3);
      - C{follow_dir_links} (C{False}): follow symbolic links to
        directories (and then files reached through links may lie outside
        C{root_dir}, as in Salt); without it, links that leave C{root_dir}
        are skipped;
      - C{keep_newline} (C{False}): keep the one trailing newline of each
        file, which is otherwise removed; C{True} for all, or a list of
        globs of paths relative to the host or nodegroup directory;
      - C{template} (C{False}) and C{render_default}: render each file
        through a pipeline (the C{renderer} option by default) with
        C{grains}, C{opts} and C{pillar} in the context.

    The nodegroups the minion is in come first, in the order of the
    C{nodegroups} option, then its host directory, merged recursively. A
    file that is not UTF-8 text gives its bytes.
    """

    name = "file_tree"

    def __init__(self, opts: dict[str, Any]) -> None:
        self._opts = opts
        self._nodegroups: dict[str, Any] = dict(opts.get("nodegroups") or {})

    def compile(
        self, minionId: str, pillar: dict, conf: object, grains: dict | None = None
    ) -> dict:
        if isinstance(conf, str):
            conf = {"root_dir": conf}
        if not isinstance(conf, dict) or not isinstance(conf.get("root_dir"), str):
            raise ExtPillarError("file_tree needs a mapping with root_dir")
        keepNewline = conf.get("keep_newline", False)
        if not isinstance(keepNewline, (bool, list)):
            raise ExtPillarError("file_tree: keep_newline must be true, false or a list of globs")
        _checkMinionId(minionId)
        rootDir = conf["root_dir"]
        if os.path.isabs(rootDir):
            if not os.path.isdir(rootDir):
                raise ExtPillarError(f"file_tree root_dir {rootDir!r} is not a directory")
            roots = [rootDir]
        else:
            pillarenv = self._opts.get("pillarenv")
            if not pillarenv:
                raise ExtPillarError(
                    f"file_tree root_dir {rootDir!r} is relative but pillarenv is not set"
                )
            envRoots = (self._opts.get("pillar_roots") or {}).get(pillarenv)
            if not envRoots:
                raise ExtPillarError(
                    f"file_tree root_dir {rootDir!r} is relative but pillarenv"
                    f" {pillarenv!r} has no pillar_roots"
                )
            roots = []
            for envRoot in envRoots:
                candidate = os.path.normpath(os.path.join(envRoot, rootDir))
                if candidate not in roots and os.path.isdir(candidate):
                    roots.append(candidate)
        options = _TreeOptions(
            follow=bool(conf.get("follow_dir_links", False)),
            keepNewline=keepNewline,
            template=conf.get("template", False) is True,
            pipeline=str(conf.get("render_default") or self._opts.get("renderer") or "jinja|yaml"),
            context={"grains": grains or {}, "opts": self._opts, "pillar": pillar},
        )
        result: dict = {}
        for root in roots:
            result = mergeRecurse(result, self._compileRoot(minionId, root, grains, options))
        return result

    def _compileRoot(
        self, minionId: str, root: str, grains: dict | None, options: _TreeOptions
    ) -> dict:
        root = os.path.abspath(root)
        result: dict = {}
        groupsDir = os.path.join(root, "nodegroups")
        if self._nodegroups and os.path.isdir(groupsDir):
            for group in self._nodegroups:
                groupDir = os.path.join(groupsDir, group)
                if "/" in group or group in (".", "..") or not os.path.isdir(groupDir):
                    continue
                try:
                    matcher = compileTarget(group, "nodegroup", self._nodegroups)
                except TargetError as e:
                    raise ExtPillarError(f"file_tree nodegroup {group!r}: {e}") from None
                if matcher.matches(minionId, grains):
                    result = mergeRecurse(result, self._tree(groupDir, root, options))
        hostDir = os.path.join(root, "hosts", minionId)
        if os.path.isdir(hostDir):
            result = mergeRecurse(result, self._tree(hostDir, root, options))
        return result

    def _tree(self, top: str, root: str, options: _TreeOptions) -> dict:
        realRoot = os.path.realpath(root)
        tree: dict = {}
        for dirPath, dirNames, fileNames in os.walk(top, followlinks=options.follow):
            dirNames.sort()
            relDir = os.path.relpath(dirPath, top)
            node = tree
            if relDir != ".":
                for part in relDir.split(os.sep):
                    node = node.setdefault(part, {})
            for dirName in list(dirNames):
                full = os.path.join(dirPath, dirName)
                if not options.follow and not _inside(full, realRoot):
                    dirNames.remove(dirName)
                else:
                    node.setdefault(dirName, {})
            for fileName in sorted(fileNames):
                full = os.path.join(dirPath, fileName)
                if not options.follow and not _inside(full, realRoot):
                    continue
                if not os.path.isfile(full):
                    continue
                relFile = fileName if relDir == "." else f"{relDir}/{fileName}"
                node[fileName] = self._value(full, relFile, options)
        return tree

    def _value(self, path: str, relPath: str, options: _TreeOptions) -> Any:
        try:
            with open(path, "rb") as f:
                raw = f.read()
        except OSError as e:
            raise ExtPillarError(f"file_tree: cannot read {path}: {e.strerror or e}") from None
        if raw.endswith(b"\n") and not _keepNewline(relPath, options.keepNewline):
            raw = raw[:-1]
        try:
            text = raw.decode("utf-8")
        except UnicodeDecodeError:
            return raw
        if not options.template:
            return text
        try:
            return renderText(text, options.context, path=path, defaultPipeline=options.pipeline)
        except RenderError as e:
            raise ExtPillarError(str(e)) from None


@dataclass(frozen=True)
class _TreeOptions:
    follow: bool
    keepNewline: bool | list
    template: bool
    pipeline: str
    context: dict[str, Any]


def _inside(path: str, realRoot: str) -> bool:
    real = os.path.realpath(path)
    return real == realRoot or real.startswith(realRoot + os.sep)


def _keepNewline(relPath: str, keepNewline: object) -> bool:
    if isinstance(keepNewline, bool):
        return keepNewline
    if isinstance(keepNewline, list):
        return any(fnmatch.fnmatch(relPath, str(pattern)) for pattern in keepNewline)
    return False


@implementer(IExtPillar)
class CommandPillar:
    """
    Salt's C{cmd_json} and C{cmd_yaml}: run a shell command, C{%s} replaced
    by the minion's id (shell-quoted when it holds anything but safe
    characters), and parse its output as JSON or YAML, which must be a
    mapping.

    Configuration: the command (a string), or a mapping with C{command}
    and C{timeout} (seconds, default L{DEFAULT_COMMAND_TIMEOUT}). The
    command runs in its own process group, killed as a group on timeout; an
    exit status other than 0, a timeout, output over L{MAX_COMMAND_OUTPUT}
    bytes or output that is not a mapping is an L{ExtPillarError}.
    """

    def __init__(self, opts: dict[str, Any], name: str = "cmd_json") -> None:
        if name not in ("cmd_json", "cmd_yaml"):
            raise ValueError(f"unknown command pillar {name!r}")
        self.name = name

    def compile(
        self, minionId: str, pillar: dict, conf: object, grains: dict | None = None
    ) -> dict:
        timeout: float = DEFAULT_COMMAND_TIMEOUT
        if isinstance(conf, dict):
            command = conf.get("command")
            timeout = conf.get("timeout", DEFAULT_COMMAND_TIMEOUT)
            if not isinstance(timeout, (int, float)) or isinstance(timeout, bool) or timeout <= 0:
                raise ExtPillarError(f"{self.name}: timeout must be a positive number")
        else:
            command = conf
        if not isinstance(command, str) or not command.strip():
            raise ExtPillarError(f"{self.name} needs a command (a string)")
        command = command.replace("%s", shlex.quote(minionId))
        output = _runCommand(self.name, command, float(timeout))
        if self.name == "cmd_json":
            try:
                data = json.loads(output)
            except ValueError as e:
                raise ExtPillarError(f"command output is not JSON: {e}") from None
        else:
            try:
                data = loadYaml(output, "<cmd_yaml output>")
            except RenderError as e:
                raise ExtPillarError(
                    f"command output is not YAML: line {e.line}: {e.cause}"
                ) from None
        if data is None:
            return {}
        if not isinstance(data, dict):
            raise ExtPillarError(f"command output is a {type(data).__name__}, not a mapping")
        return data


def _runCommand(name: str, command: str, timeout: float) -> str:
    process = subprocess.Popen(  # noqa: S602 (Salt's ext_pillar runs a shell command)
        command,
        shell=True,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        start_new_session=True,
    )
    try:
        out, err = process.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        _killGroup(process)
        process.communicate()
        raise ExtPillarError(f"command timed out after {timeout:g} seconds") from None
    finally:
        _killGroup(process)
    if len(out) > MAX_COMMAND_OUTPUT:
        raise ExtPillarError(f"command wrote more than {MAX_COMMAND_OUTPUT} bytes")
    if process.returncode != 0:
        detail = err.decode("utf-8", "replace").strip().splitlines()
        last = f": {detail[-1][:200]}" if detail else ""
        raise ExtPillarError(f"command exited with status {process.returncode}{last}")
    try:
        return out.decode("utf-8")
    except UnicodeDecodeError:
        raise ExtPillarError("command output is not UTF-8") from None


def _killGroup(process: subprocess.Popen) -> None:
    """
    Kill what is left of the command's process group (its own session).
    """
    try:
        os.killpg(process.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass


#: The external pillars by name.
EXT_PILLARS: dict[str, ExtPillarFactory] = {
    "file_tree": FileTreePillar,
    "cmd_json": lambda opts: CommandPillar(opts, "cmd_json"),
    "cmd_yaml": lambda opts: CommandPillar(opts, "cmd_yaml"),
}


def registerExtPillar(name: str, factory: ExtPillarFactory) -> None:
    """
    Make C{name} usable in C{ext_pillar}.

    @param factory: called with the master's options, returns an
        L{IExtPillar} whose C{name} is C{name}.
    """
    EXT_PILLARS[name] = factory


def getExtPillar(name: str, opts: dict[str, Any]) -> IExtPillar | None:
    """
    @return: the external pillar called C{name}, made for C{opts}, or
        L{None} when there is none of that name.
    """
    factory = EXT_PILLARS.get(name)
    return None if factory is None else factory(opts)
