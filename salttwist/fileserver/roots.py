# -*- test-case-name: tests.test_fileserver_roots -*-
"""
Salt's C{roots} backend: the directories of C{file_roots}, per saltenv,
searched in order (the first root holding a path wins; listings are the
union of every root).

Options read (Salt's names and meanings):
  - C{file_roots}: C{{saltenv: [directory, ...]}};
  - C{file_ignore_regex}: paths matching one (C{re.search} on the relative
    path) are neither listed nor served;
  - C{file_ignore_glob}: likewise, C{fnmatch} on the whole relative path
    (C{*.swp}, C{*/.git/*});
  - C{fileserver_followsymlinks} (default C{True}): symlinked directories
    are walked; when C{False} they are neither listed nor walked, and a
    path through one is not found;
  - C{fileserver_ignoresymlinks} (default C{False}): when C{True}, symlinks
    are neither listed nor served (nor paths through them).

Confinement: every symlink is resolved (C{os.path.realpath}) and must stay
inside its root (the root's own real path). One that leaves it is never
listed, and L{RootsBackend.findFile} refuses it with a L{FileServerError}.
(Salt follows such symlinks; we do not: a symlink in a state tree must not
hand out C{/etc/shadow}.)

Everything here blocks (it walks and stats the disk): callers run it in a
thread (L{salttwist.fileserver.server.FileServer} is called through the
master's C{runBlocking}), never on the reactor.

Speed: the listings walk with C{os.scandir}, whose entries carry their
type, so a plain file costs no C{stat}: 10,000 files in 100 directories
list in about 20 ms (see L{tests.test_fileserver_roots}).
"""

from __future__ import annotations

import fnmatch
import os
import re
import stat
from typing import Any

from zope.interface import implementer

from salttwist.fileserver.interfaces import FileServerError, FoundFile, IFileServerBackend
from salttwist.fileserver.paths import checkRelativePath, checkSaltenv, isServableName


class IgnoreRules:
    """
    Salt's C{file_ignore_regex} and C{file_ignore_glob}, compiled once.

    @param regexes: regular expressions, searched anywhere in the relative
        path.
    @param globs: shell globs, matched against the whole relative path.
    @raise FileServerError: naming the option and the pattern, if a
        regular expression does not compile.
    """

    def __init__(self, regexes: list[str], globs: list[str]) -> None:
        patterns: list[str] = []
        for regex in regexes:
            try:
                re.compile(regex)
            except re.error as e:
                raise FileServerError(f"file_ignore_regex: {regex!r} is not valid: {e}") from None
            patterns.append(f"(?:{regex})")
        # fnmatch.translate anchors the glob (\Z); re.match anchors its start.
        globbed = [f"(?:{fnmatch.translate(glob)})" for glob in globs]
        self._search = re.compile("|".join(patterns)).search if patterns else None
        self._match = re.compile("|".join(globbed), re.DOTALL).match if globbed else None

    def __bool__(self) -> bool:
        return self._search is not None or self._match is not None

    def ignored(self, path: str) -> bool:
        """
        @return: whether C{path} (relative, C{/} separators) is ignored.
        """
        if self._search is not None and self._search(path):
            return True
        return self._match is not None and self._match(path) is not None

    @classmethod
    def fromConfig(cls, opts: dict[str, Any]) -> IgnoreRules:
        """
        @return: the rules of C{opts}' C{file_ignore_regex} and
            C{file_ignore_glob}.
        """
        regexes = opts.get("file_ignore_regex") or []
        globs = opts.get("file_ignore_glob") or []
        return cls(list(regexes), list(globs))


def isInside(realPath: str, realRoot: str) -> bool:
    """
    @return: whether the real path C{realPath} is C{realRoot} or under it.
    """
    if realPath == realRoot:
        return True
    prefix = realRoot if realRoot.endswith(os.sep) else realRoot + os.sep
    return realPath.startswith(prefix)


@implementer(IFileServerBackend)
class RootsBackend:
    """
    The directories of C{file_roots} (see the module's docstring).

    Subclasses serve other trees the same way by overriding L{roots} and
    L{envs} (L{salttwist.fileserver.gitfs.GitBackend} serves its
    checkouts so).

    @param opts: the master's (or a masterless minion's) options.
    @raise FileServerError: if C{file_roots} names an invalid saltenv or
        an ignore regex does not compile.
    """

    name = "roots"

    def __init__(self, opts: dict[str, Any]) -> None:
        fileRoots = opts.get("file_roots") or {}
        self._fileRoots: dict[str, list[str]] = {}
        for saltenv, dirs in fileRoots.items():
            try:
                checkSaltenv(saltenv)
            except FileServerError as e:
                raise FileServerError(f"file_roots: {e}") from None
            if isinstance(dirs, str):
                dirs = [dirs]
            self._fileRoots[saltenv] = [os.path.abspath(d) for d in dirs]
        self.ignore = IgnoreRules.fromConfig(opts)
        self.followSymlinks = bool(opts.get("fileserver_followsymlinks", True))
        self.ignoreSymlinks = bool(opts.get("fileserver_ignoresymlinks", False))
        #: Each root's real path, with the device and inode it had
        #: (L{realRoot}).
        self._realRoots: dict[str, tuple[str, int, int]] = {}

    def realRoot(self, root: str) -> str:
        """
        @return: C{os.path.realpath(root)}, the confinement boundary of
            C{root}: remembered, and used again only while C{root} and the
            remembered real path still name the same directory (the same
            device and inode, two C{stat}s in the kernel instead of
            C{realpath}'s Python walk with one C{lstat} per component of
            C{root}, which was most of the cost of finding a file). A
            root moved or replaced, or a symlink on its way pointed
            elsewhere, is resolved again.
        """
        try:
            info = os.stat(root)
        except OSError:
            return os.path.realpath(root)
        known = self._realRoots.get(root)
        if known is not None:
            real, dev, ino = known
            try:
                again = os.stat(real)
            except OSError:
                again = None
            if again is not None and (again.st_dev, again.st_ino) == (info.st_dev, info.st_ino) == (
                dev,
                ino,
            ):
                return real
        real = os.path.realpath(root)
        self._realRoots[root] = (real, info.st_dev, info.st_ino)
        return real

    def roots(self, saltenv: str) -> list[str]:
        """
        @return: the directories of C{saltenv}, in the order searched;
            C{[]} if it is not served.
        """
        return self._fileRoots.get(saltenv, [])

    def envs(self) -> list[str]:
        """
        @return: the saltenvs of C{file_roots}, sorted.
        """
        return sorted(self._fileRoots)

    def fileList(self, saltenv: str) -> list[str]:
        """
        @return: every file of C{saltenv}'s roots, sorted (see
            L{IFileServerBackend.fileList}).
        """
        return self._lists(saltenv)[0]

    def dirList(self, saltenv: str) -> list[str]:
        """
        @return: every directory of C{saltenv}'s roots, sorted (see
            L{IFileServerBackend.dirList}).
        """
        return self._lists(saltenv)[1]

    def _lists(self, saltenv: str) -> tuple[list[str], list[str]]:
        """
        @return: the files and the directories of C{saltenv}, each sorted.
        """
        files: set[str] = set()
        dirs: set[str] = set()
        for root in self.roots(saltenv):
            self._walk(root, files, dirs)
        return sorted(files), sorted(dirs)

    def _walk(self, root: str, files: set[str], dirs: set[str]) -> None:
        """
        Add the servable files and directories of C{root} to C{files} and
        C{dirs}: a depth-first C{os.scandir} walk; symlinks resolved and
        kept only inside the root; a symlink to one of its own ancestors
        is not walked again (no loop).
        """
        realRoot = self.realRoot(root)
        try:
            rootStat = os.stat(realRoot)
        except OSError:
            return
        if not stat.S_ISDIR(rootStat.st_mode):
            return
        ignore = self.ignore if self.ignore else None
        ignoreSymlinks, followSymlinks = self.ignoreSymlinks, self.followSymlinks
        # (directory to read, its relative path with a trailing "/", the
        # (st_dev, st_ino) of it and its ancestors, for symlink loops).
        rootKey = (rootStat.st_dev, rootStat.st_ino)
        stack: list[tuple[str, str, frozenset[tuple[int, int]]]] = [
            (realRoot, "", frozenset([rootKey]))
        ]
        while stack:
            directory, rel, ancestors = stack.pop()
            try:
                entries = os.scandir(directory)
            except OSError:
                continue
            with entries:
                for entry in entries:
                    relPath = rel + entry.name
                    if not isServableName(relPath):
                        continue
                    try:
                        if entry.is_symlink():
                            if ignoreSymlinks:
                                continue
                            target = os.path.realpath(entry.path)
                            if not isInside(target, realRoot):
                                continue
                            st = os.stat(target)
                            if stat.S_ISREG(st.st_mode):
                                isDir = False
                            elif stat.S_ISDIR(st.st_mode) and followSymlinks:
                                key = (st.st_dev, st.st_ino)
                                if key in ancestors:
                                    continue
                                isDir = True
                                stack.append((target, relPath + "/", ancestors | {key}))
                            else:
                                continue
                        elif entry.is_dir(follow_symlinks=False):
                            isDir = True
                            st = entry.stat(follow_symlinks=False)
                            key = (st.st_dev, st.st_ino)
                            stack.append((entry.path, relPath + "/", ancestors | {key}))
                        elif entry.is_file(follow_symlinks=False):
                            isDir = False
                        else:
                            continue
                    except OSError:
                        # Vanished or unreadable while walking: not served.
                        continue
                    if ignore is not None and ignore.ignored(relPath):
                        continue
                    (dirs if isDir else files).add(relPath)

    def findFile(self, path: str, saltenv: str) -> FoundFile | None:
        """
        Find C{path} in the first of C{saltenv}'s roots holding it as a
        regular file (see L{IFileServerBackend.findFile}).

        Each component is looked at with C{lstat}: a symlink is resolved
        and must stay inside the root; with C{fileserver_ignoresymlinks}
        a path through a symlink is not found, nor one through a
        symlinked directory without C{fileserver_followsymlinks}.

        @raise FileServerError: if C{path} is not a normalised relative
            path, or a symlink on its way leaves the root.
        """
        if checkRelativePath(path) != path:
            raise FileServerError(f"file path {path!r} is not normalised")
        if self.ignore and self.ignore.ignored(path):
            return None
        for root in self.roots(saltenv):
            found = self._findIn(root, path, saltenv)
            if found is not None:
                return found
        return None

    def _findIn(self, root: str, path: str, saltenv: str) -> FoundFile | None:
        """
        @return: C{path} in C{root}, or L{None}.
        @raise FileServerError: if a symlink on its way leaves C{root}.
        """
        realRoot = self.realRoot(root)
        parts = path.split("/")
        last = len(parts) - 1
        current = realRoot
        for index, part in enumerate(parts):
            current = os.path.join(current, part)
            try:
                st = os.lstat(current)
            except OSError:
                return None
            if stat.S_ISLNK(st.st_mode):
                if self.ignoreSymlinks or (index < last and not self.followSymlinks):
                    return None
                current = os.path.realpath(current)
                if not isInside(current, realRoot):
                    raise FileServerError(
                        f"salt://{path} in saltenv {saltenv!r} is a symlink that leads "
                        f"outside its file root; refused"
                    )
        try:
            st = os.stat(current)
        except OSError:
            return None
        if not stat.S_ISREG(st.st_mode):
            return None
        return FoundFile(path, current, st.st_size, st.st_mtime_ns, self.name)

    def update(self) -> bool:
        """
        Nothing to do: the roots are read live.

        @return: C{False}.
        """
        return False

    def clearCache(self) -> None:
        """
        Nothing cached.
        """
