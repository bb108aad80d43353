# -*- test-case-name: tests.test_gitfs -*-
"""
Salt's C{gitfs}: git repositories' branches and tags served as saltenvs.

Options (Salt's names and meanings):
  - C{gitfs_remotes}: repository URLs, in order (the first remote holding
    a path wins, listings are merged), each a string or a single-key
    mapping C{{url: [{root: ...}, {mountpoint: ...}, {base: ...}, {name:
    ...}]}} whose options override the global ones for that remote;
  - C{gitfs_base} (default C{master}): the branch (or tag) served as the
    C{base} saltenv; every other branch and tag is a saltenv of its own
    name (C{dev}, C{v1.2}, C{feature/x});
  - C{gitfs_root}: the subdirectory of the repository that is served (its
    files appear at the top of the saltenv);
  - C{gitfs_mountpoint}: a prefix the files appear under (C{salt://formulas}
    or C{formulas}: C{nginx/init.sls} is served as
    C{formulas/nginx/init.sls});
  - C{gitfs_env_whitelist} / C{gitfs_env_blacklist}: saltenv names (exact,
    globs or regular expressions matching the whole name, as Salt's) that
    are exposed or hidden; the whitelist, if any, must name C{base} too;
  - C{file_ignore_regex}, C{file_ignore_glob}, C{fileserver_followsymlinks}
    and C{fileserver_ignoresymlinks} apply as to C{roots}.
Salt's per-remote authentication options (C{user}, C{password},
C{pubkey}, C{privkey} ...) and C{saltenv} mappings are not supported: a
remote naming one is refused at start with its name. Use the SSH agent or
C{~/.ssh} of the master's user for private repositories.

Implementation: the git binary (C{/usr/bin/git}, else the first C{git} on
C{PATH}). Neither dulwich nor pygit2 is installed, and either would be a
new dependency (pygit2 a compiled one tied to a libgit2 version); the git
binary is on every host that has repositories, speaks every transport
(SSH with the agent, HTTPS with the system's CAs, local paths), and each
command runs in its own process, so a hung fetch is killed without
touching the master. Each command runs with a clean environment (no user
or system git config, no terminal prompt, SSH in batch mode), in its own
process group (killed whole after L{GitBackend.timeout} seconds), and its
failure is logged and kept in L{GitBackend.errors}.

Layout, under C{cachedir/gitfs/<sha256 of the URL>/}:
  - C{mirror.git}: a bare mirror (C{git clone --mirror}, then C{git fetch
    --prune}: a branch or tag deleted upstream goes);
  - C{trees/<commit>-<config>}: the files of one commit (only the
    C{root} subdirectory, under the C{mountpoint}), exported with
    C{git read-tree} and C{git checkout-index} into a temporary directory
    renamed into place, so a tree is complete or absent; one export per
    commit, shared by every ref at that commit. An update exports the
    trees of C{base} and of the refs already in use whose commit moved;
    any other ref's tree is exported at its first use (a repository with
    hundreds of tags costs one export per tag actually asked for);
  - C{state-<config>.json}: the saltenvs of the last good update and their
    commits, so a restarted master serves at once.
The trees are then served as L{RootsBackend} serves C{file_roots}, with the
same confinement (a symlink in the repository leading out of its tree is
refused). A failed fetch keeps the last good trees; trees no longer used
are removed one update later (a transfer in flight finishes first).

Everything here blocks (git subprocesses, disk): callers run it in a
thread, never on the reactor. L{GitBackend.update} is serialised by a lock
(and, across processes sharing a cachedir, a C{flock} per repository);
readers see the state of one update or the next, never a mix.
"""

from __future__ import annotations

import fcntl
import fnmatch
import hashlib
import json
import os
import re
import shutil
import signal
import subprocess
import tempfile
import threading
import time
from collections import Counter
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit, urlunsplit

from twisted.logger import Logger
from zope.interface import implementer

from salttwist.fileserver.interfaces import FileServerError, IFileServerBackend
from salttwist.fileserver.paths import checkRelativePath, checkSaltenv
from salttwist.fileserver.roots import RootsBackend

#: Seconds a git command may take before its process group is killed.
GIT_TIMEOUT = 300.0
#: A saltenv's commit and the directory of its exported tree (L{None}
#: until its first use).
_Ref = tuple[str, str | None]
#: A commit id (SHA-1 or SHA-256).
_COMMIT = re.compile(r"\A[0-9a-f]{40}(?:[0-9a-f]{24})?\Z")
#: The per-remote options of C{gitfs_remotes} that are supported.
REMOTE_OPTIONS = ("base", "mountpoint", "name", "root")


def findGit() -> str:
    """
    @return: C{/usr/bin/git} if present, else the first C{git} on C{PATH}
        (or C{"git"}, failing at the first command with its error).
    """
    if os.access("/usr/bin/git", os.X_OK):
        return "/usr/bin/git"
    return shutil.which("git") or "git"


class GitError(Exception):
    """
    A git command failed (its exit status and standard error in the
    message) or timed out.
    """


def redactUrl(url: str) -> str:
    """
    @return: C{url} without the password of its user information
        (C{https://user:token@host/r} gives C{https://user:***@host/r}),
        for logs and errors.
    """
    try:
        parts = urlsplit(url)
    except ValueError:
        return url
    if parts.password is None:
        return url
    user = parts.username or ""
    host = parts.hostname or ""
    if parts.port is not None:
        host = f"{host}:{parts.port}"
    return urlunsplit(parts._replace(netloc=f"{user}:***@{host}"))


def _normalisedSubdir(value: Any, option: str, where: str) -> str:
    """
    @return: a C{root} or C{mountpoint} as a relative path without
        slashes at either end (C{""} for none); a C{salt://} prefix of a
        mountpoint is dropped.
    @raise FileServerError: naming C{option} and C{where}, if it is not a
        string or leaves the repository.
    """
    if value is None:
        return ""
    if not isinstance(value, str):
        raise FileServerError(f"{where}: {option} must be a string")
    if value.startswith("salt://"):
        value = value[len("salt://") :]
    value = value.strip("/")
    if value in ("", "."):
        return ""
    try:
        return checkRelativePath(value)
    except FileServerError as e:
        raise FileServerError(f"{where}: {option}: {e}") from None


def _shortHash(*parts: str) -> str:
    """
    @return: the first 12 hex digits of the SHA-256 of C{parts}.
    """
    return hashlib.sha256("\0".join(parts).encode("utf-8", "surrogateescape")).hexdigest()[:12]


@dataclass(frozen=True)
class GitRemote:
    """
    One entry of C{gitfs_remotes}, with the global options applied.

    @ivar url: the repository's URL (or local path).
    @ivar root: the subdirectory served (C{""}: the whole repository).
    @ivar mountpoint: the prefix its files appear under (C{""}: none).
    @ivar base: the branch or tag served as C{base}.
    @ivar name: its C{name} option, or L{None}.
    @ivar directory: its cache directory, C{cachedir/gitfs/<sha256(url)>}.
    """

    url: str
    root: str
    mountpoint: str
    base: str
    name: str | None
    directory: str

    @property
    def label(self) -> str:
        """
        @return: how logs and errors name it (its name, or its URL without
            a password).
        """
        return self.name or redactUrl(self.url)

    @property
    def mirror(self) -> str:
        """
        @return: the bare mirror's path.
        """
        return os.path.join(self.directory, "mirror.git")

    @property
    def trees(self) -> str:
        """
        @return: the directory of the exported trees.
        """
        return os.path.join(self.directory, "trees")

    @property
    def treeSuffix(self) -> str:
        """
        @return: what tells this remote's trees (its root and mountpoint)
            from those of another remote of the same URL.
        """
        return _shortHash(self.root, self.mountpoint)

    def treeFor(self, commit: str) -> str:
        """
        @return: the directory of C{commit}'s exported tree.
        """
        return os.path.join(self.trees, f"{commit}-{self.treeSuffix}")

    @property
    def stateFile(self) -> str:
        """
        @return: the file of its last good state.
        """
        key = _shortHash(self.root, self.mountpoint, self.base, self.name or "")
        return os.path.join(self.directory, f"state-{key}.json")


def parseRemotes(opts: dict[str, Any], cachedir: str) -> list[GitRemote]:
    """
    @return: the remotes of C{opts["gitfs_remotes"]}, in order.
    @raise FileServerError: naming the remote, if an entry or one of its
        options is malformed or unsupported.
    """
    globalRoot = _normalisedSubdir(opts.get("gitfs_root") or "", "gitfs_root", "gitfs")
    globalMount = _normalisedSubdir(opts.get("gitfs_mountpoint") or "", "gitfs_mountpoint", "gitfs")
    globalBase = opts.get("gitfs_base") or "master"
    remotes: list[GitRemote] = []
    for entry in opts.get("gitfs_remotes") or []:
        if isinstance(entry, str) and entry:
            url, options = entry, {}
        elif isinstance(entry, dict) and len(entry) == 1:
            url, raw = next(iter(entry.items()))
            options = _remoteOptions(url, raw)
        else:
            raise FileServerError(
                f"gitfs_remotes: {entry!r} is neither a URL nor a mapping {{url: [options]}}"
            )
        if not isinstance(url, str) or not url or "\x00" in url:
            raise FileServerError(f"gitfs_remotes: {url!r} is not a repository URL")
        where = f"gitfs_remotes: remote {redactUrl(url)}"
        unknown = sorted(set(options) - set(REMOTE_OPTIONS))
        if unknown:
            raise FileServerError(
                f"{where}: option(s) {', '.join(unknown)} not supported "
                f"(supported: {', '.join(REMOTE_OPTIONS)})"
            )
        base = options.get("base", globalBase)
        if not isinstance(base, str) or not base:
            raise FileServerError(f"{where}: base must be a branch or tag name")
        name = options.get("name")
        if name is not None and (not isinstance(name, str) or not name):
            raise FileServerError(f"{where}: name must be a non-empty string")
        remotes.append(
            GitRemote(
                url=url,
                root=_normalisedSubdir(options.get("root", globalRoot), "root", where),
                mountpoint=_normalisedSubdir(
                    options.get("mountpoint", globalMount), "mountpoint", where
                ),
                base=base,
                name=name,
                directory=os.path.join(
                    cachedir, "gitfs", hashlib.sha256(url.encode("utf-8")).hexdigest()
                ),
            )
        )
    return remotes


def _remoteOptions(url: Any, raw: Any) -> dict[str, Any]:
    """
    @return: a remote's options, given as Salt's list of single-key
        mappings (C{[{root: x}, {mountpoint: y}]}) or as one mapping.
    @raise FileServerError: if they are neither.
    """
    if raw is None:
        return {}
    if isinstance(raw, dict):
        return dict(raw)
    if isinstance(raw, list):
        options: dict[str, Any] = {}
        for item in raw:
            if not isinstance(item, dict):
                raise FileServerError(
                    f"gitfs_remotes: remote {redactUrl(str(url))}: options must be "
                    f"single-key mappings, not {item!r}"
                )
            options.update(item)
        return options
    raise FileServerError(
        f"gitfs_remotes: remote {redactUrl(str(url))}: options must be a list of mappings"
    )


def _exprMatch(name: str, expr: str) -> bool:
    """
    @return: whether C{name} is C{expr}, matches it as a glob, or matches
        it whole as a regular expression (Salt's C{expr_match}).
    """
    if name == expr or fnmatch.fnmatchcase(name, expr):
        return True
    try:
        return re.match(rf"\A(?:{expr})\Z", name) is not None
    except re.error:
        return False


def gitEnvironment() -> dict[str, str]:
    """
    @return: the environment git commands run with: C{PATH}, C{HOME} (for
        C{~/.ssh}) and C{SSH_AUTH_SOCK} kept; no user or system git
        config, no terminal prompt, SSH in batch mode, the C locale, and
        only the C{file}, C{git}, C{http}, C{https} and C{ssh} transports.
    """
    env = {
        "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
        "HOME": os.environ.get("HOME", "/"),
        "LANG": "C",
        "LC_ALL": "C",
        "GIT_TERMINAL_PROMPT": "0",
        "GIT_CONFIG_GLOBAL": os.devnull,
        "GIT_CONFIG_NOSYSTEM": "1",
        "GIT_SSH_COMMAND": "ssh -o BatchMode=yes",
        # Only these transports: never ext:: (a command line as a URL) or
        # a remote helper a repository's submodule might name.
        "GIT_ALLOW_PROTOCOL": "file:git:http:https:ssh",
    }
    if "SSH_AUTH_SOCK" in os.environ:
        env["SSH_AUTH_SOCK"] = os.environ["SSH_AUTH_SOCK"]
    return env


@implementer(IFileServerBackend)
class GitBackend(RootsBackend):
    """
    Salt's gitfs (see the module's docstring).

    @ivar remotes: the L{GitRemote}s, in order.
    @ivar errors: C{{remote label: the last error}} of the remotes whose
        last update failed (they serve their last good trees).
    @ivar timeout: seconds a git command may take.
    @param opts: the master's options.
    @param cachedir: the master's C{cachedir}; the backend keeps its
        mirrors and trees under C{cachedir/gitfs}.
    @raise FileServerError: if C{gitfs_remotes} is malformed.
    """

    name = "git"
    log = Logger()
    timeout = GIT_TIMEOUT

    def __init__(self, opts: dict[str, Any], cachedir: str) -> None:
        super().__init__({**opts, "file_roots": {}})
        self.git = findGit()
        self.cachedir = os.path.join(cachedir, "gitfs")
        self.remotes = parseRemotes(opts, cachedir)
        self.whitelist = list(opts.get("gitfs_env_whitelist") or [])
        self.blacklist = list(opts.get("gitfs_env_blacklist") or [])
        self.errors: dict[str, str] = {}
        #: Held by an update (one at a time; readers do not wait for it).
        self._lock = threading.Lock()
        #: Held while the states are read and swapped, and trees pruned.
        self._stateLock = threading.Lock()
        #: Held while a tree is exported on demand (one at a time).
        self._exportLock = threading.Lock()
        #: Trees being exported on demand (how many times): never pruned
        #: meanwhile.
        self._exporting: Counter[str] = Counter()
        #: Whether an update ran (or a saved state was loaded): until then
        #: the first use updates.
        self._ready = False
        #: Per remote, C{{saltenv: (commit, tree directory or None until
        #: exported)}}; replaced whole, never changed in place.
        self._states: list[dict[str, _Ref]] = [self._load(r) for r in self.remotes]
        if any(self._states):
            self._ready = True

    # Serving: the trees of the last good update, as RootsBackend serves
    # file_roots.

    def _ensureReady(self) -> None:
        """
        Update once if nothing was ever fetched (first use in a fresh
        cachedir); threads arriving meanwhile wait for that update.
        """
        if not self._ready:
            with self._lock:
                if not self._ready:
                    self._updateLocked()

    def roots(self, saltenv: str) -> list[str]:
        """
        @return: the trees serving C{saltenv}, in the remotes' order; a
            ref's tree is exported at its first use (see L{_updateRemote}).
        """
        self._ensureReady()
        trees: list[str] = []
        for index, state in enumerate(self._states):
            ref = state.get(saltenv)
            if ref is None:
                continue
            commit, tree = ref
            if tree is None:
                tree = self._exportOnDemand(index, saltenv, commit)
                if tree is None:
                    continue
            trees.append(tree)
        return trees

    def envs(self) -> list[str]:
        """
        @return: the saltenvs of every remote's branches and tags (after
            the whitelist and blacklist), sorted.
        """
        self._ensureReady()
        return sorted({saltenv for state in self._states for saltenv in state})

    def exposed(self, saltenv: str) -> bool:
        """
        @return: whether C{saltenv} passes C{gitfs_env_whitelist} and
            C{gitfs_env_blacklist}.
        """
        if self.whitelist and not any(_exprMatch(saltenv, e) for e in self.whitelist):
            return False
        return not any(_exprMatch(saltenv, e) for e in self.blacklist)

    def _exportOnDemand(self, index: int, saltenv: str, commit: str) -> str | None:
        """
        Export C{commit} of remote C{index} for C{saltenv}'s first use,
        and record it in the state (if the ref has not moved meanwhile).
        Exports do not wait for an update's fetch: commits are immutable.

        @return: the tree, or L{None} if it could not be exported (logged).
        """
        remote = self.remotes[index]
        path = remote.treeFor(commit)
        with self._stateLock:
            self._exporting[path] += 1
        try:
            with self._exportLock:
                try:
                    tree = self._export(remote, commit)
                except (GitError, OSError) as e:
                    self.log.error(
                        "gitfs: {remote}: cannot export {saltenv} ({commit}): {error}",
                        remote=remote.label,
                        saltenv=saltenv,
                        commit=commit,
                        error=str(e),
                    )
                    return None
            with self._stateLock:
                state = self._states[index]
                if state.get(saltenv, (None, None))[0] == commit:
                    states = list(self._states)
                    states[index] = {**state, saltenv: (commit, tree)}
                    self._states = states
            return tree
        finally:
            with self._stateLock:
                self._exporting[path] -= 1
                if not self._exporting[path]:
                    del self._exporting[path]

    # Updating.

    def update(self) -> bool:
        """
        Fetch every remote (clone it the first time), export the trees of
        the refs in use that moved, and switch to the new state. A remote
        that fails keeps its last good state; its error is logged and kept
        in L{errors}.

        @return: whether any saltenv appeared, went, or moved to another
            commit.
        """
        with self._lock:
            return self._updateLocked()

    def _updateLocked(self) -> bool:
        """
        L{update}, with the lock held. Readers wait for the first update
        (see L{_ensureReady}), not for later ones: they keep the last state
        until the new one is swapped in.
        """
        oldStates = self._states
        fetched: list[dict[str, _Ref]] = []
        for remote, old in zip(self.remotes, oldStates, strict=True):
            try:
                new = self._updateRemote(remote, old)
            except (GitError, OSError) as e:
                message = str(e)
                self.errors[remote.label] = message
                self.log.error(
                    "gitfs: updating {remote} failed; serving its last good trees: {error}",
                    remote=remote.label,
                    error=message,
                )
                new = old
            except Exception as e:
                # A bug, not the remote: logged with its traceback; the
                # other remotes still update.
                self.errors[remote.label] = f"internal error: {e}"
                self.log.failure("gitfs: updating {remote} failed", remote=remote.label)
                new = old
            else:
                self.errors.pop(remote.label, None)
            fetched.append(new)
        with self._stateLock:
            # Trees exported on demand while this update fetched are kept.
            current = self._states
            newStates = [
                {
                    saltenv: (commit, tree or _treeIfSame(now.get(saltenv), commit))
                    for saltenv, (commit, tree) in new.items()
                }
                for new, now in zip(fetched, current, strict=True)
            ]
            self._states = newStates
            self._ready = True
            # The trees just replaced stay for one more update: a transfer
            # reading one finishes first.
            keep = _trees(newStates) | _trees(current) | _trees(oldStates)
            self._prune(keep | set(self._exporting))
        for remote, state, old in zip(self.remotes, newStates, oldStates, strict=True):
            if state != old or not os.path.exists(remote.stateFile):
                try:
                    self._save(remote, state)
                except OSError as e:
                    self.log.warn(
                        "gitfs: cannot save the state of {remote}: {error}",
                        remote=remote.label,
                        error=str(e),
                    )
        return [_commits(s) for s in oldStates] != [_commits(s) for s in newStates]

    def _updateRemote(self, remote: GitRemote, old: dict[str, _Ref]) -> dict[str, _Ref]:
        """
        Fetch C{remote} and list its refs. A ref whose commit is unchanged
        keeps its tree; the trees of C{base} and of the refs already in
        use (exported before) are exported now; the others at their first
        use, so a repository with hundreds of tags costs one export per
        tag actually asked for.

        @return: its new state.
        @raise GitError: if a git command fails.
        """
        os.makedirs(remote.trees, mode=0o700, exist_ok=True)
        with _Flock(os.path.join(remote.directory, "lock")):
            if os.path.isdir(remote.mirror):
                self._git(["--git-dir", remote.mirror, "fetch", "--prune", "--quiet", "origin"])
            else:
                self._clone(remote)
            new: dict[str, _Ref] = {}
            for saltenv, commit in self._refs(remote).items():
                previous = old.get(saltenv)
                if previous is not None and previous[0] == commit:
                    kept = previous[1] is not None and os.path.isdir(previous[1])
                    new[saltenv] = previous if kept else (commit, None)
                elif saltenv == "base" or (previous is not None and previous[1] is not None):
                    new[saltenv] = (commit, self._export(remote, commit))
                else:
                    new[saltenv] = (commit, None)
        return new

    def _clone(self, remote: GitRemote) -> None:
        """
        Clone C{remote} as a bare mirror, into a temporary directory
        renamed into place (a failed clone leaves nothing).
        """
        tmp = tempfile.mkdtemp(prefix=".clone-", dir=remote.directory)
        try:
            target = os.path.join(tmp, "mirror.git")
            self._git(["clone", "--mirror", "--quiet", "--", remote.url, target])
            os.rename(target, remote.mirror)
        finally:
            shutil.rmtree(tmp, ignore_errors=True)

    def _refs(self, remote: GitRemote) -> dict[str, str]:
        """
        @return: C{{saltenv: commit}} of C{remote}'s branches, then its
            tags (a tag does not hide a branch of the same name); the
            C{base} ref is C{base}; names that are not valid saltenvs or
            not exposed are left out.
        """
        out = self._git(
            [
                "--git-dir",
                remote.mirror,
                "for-each-ref",
                "--format=%(refname)%09%(objecttype)%09%(objectname)"
                "%09%(*objecttype)%09%(*objectname)",
                "refs/heads",
                "refs/tags",
            ]
        )
        branches: dict[str, str] = {}
        tags: dict[str, str] = {}
        for line in out.decode("utf-8", "replace").splitlines():
            fields = line.split("\t")
            if len(fields) != 5:
                continue
            ref, kind, sha, peeledKind, peeledSha = fields
            if kind == "tag" and peeledKind == "commit":
                kind, sha = "commit", peeledSha
            if kind != "commit":
                continue
            if ref.startswith("refs/heads/"):
                branches[ref[len("refs/heads/") :]] = sha
            elif ref.startswith("refs/tags/"):
                tags[ref[len("refs/tags/") :]] = sha
        result: dict[str, str] = {}
        for refs in (branches, tags):
            for refName, sha in sorted(refs.items()):
                saltenv = "base" if refName == remote.base else refName
                if saltenv in result:
                    continue
                try:
                    checkSaltenv(saltenv)
                except FileServerError:
                    self.log.warn(
                        "gitfs: {remote}: ref {ref!r} is not a valid saltenv name; not served",
                        remote=remote.label,
                        ref=refName,
                    )
                    continue
                if self.exposed(saltenv):
                    result[saltenv] = sha
        return result

    def _export(self, remote: GitRemote, commit: str) -> str:
        """
        Export C{commit}'s C{root} subdirectory under C{mountpoint} into
        C{trees/<commit>-<suffix>} (unless there already). A commit
        without C{root} gives an empty tree (the saltenv exists, with no
        files from this remote).

        @return: the tree's directory.
        """
        dest = remote.treeFor(commit)
        if os.path.isdir(dest):
            return dest
        tmp = tempfile.mkdtemp(prefix=".export-", dir=remote.trees)
        index = tmp + ".index"
        try:
            treeish = f"{commit}:{remote.root}" if remote.root else f"{commit}^{{tree}}"
            kind = self._gitMaybe(["--git-dir", remote.mirror, "cat-file", "-t", treeish])
            if kind is not None and kind.strip() == b"tree":
                env = {"GIT_INDEX_FILE": index}
                self._git(["--git-dir", remote.mirror, "read-tree", treeish], env=env)
                prefix = remote.mountpoint + "/" if remote.mountpoint else ""
                self._git(
                    [
                        "--git-dir",
                        remote.mirror,
                        "--work-tree",
                        tmp,
                        "checkout-index",
                        "--all",
                        "--force",
                        f"--prefix={prefix}",
                    ],
                    env=env,
                    cwd=tmp,
                )
            else:
                self.log.warn(
                    "gitfs: {remote}: commit {commit} has no directory {root!r}; "
                    "it serves no files there",
                    remote=remote.label,
                    commit=commit,
                    root=remote.root,
                )
            os.chmod(tmp, 0o755)
            try:
                os.rename(tmp, dest)
            except OSError:
                # Another process exported it first: use theirs.
                if not os.path.isdir(dest):
                    raise
                shutil.rmtree(tmp, ignore_errors=True)
        except BaseException:
            shutil.rmtree(tmp, ignore_errors=True)
            raise
        finally:
            if os.path.exists(index):
                os.unlink(index)
        return dest

    def _prune(self, keep: set[str]) -> None:
        """
        Remove the trees of every remote's directory that C{keep} does
        not name (and leftovers of interrupted exports).
        """
        for directory in {r.trees for r in self.remotes}:
            try:
                names = os.listdir(directory)
            except OSError:
                continue
            for name in names:
                path = os.path.join(directory, name)
                if name.startswith(".export-") and not self._abandoned(path):
                    # Perhaps another process's export in progress.
                    continue
                if path not in keep:
                    if os.path.isdir(path) and not os.path.islink(path):
                        shutil.rmtree(path, ignore_errors=True)
                    else:
                        try:
                            os.unlink(path)
                        except OSError:
                            pass

    def _abandoned(self, path: str) -> bool:
        """
        @return: whether C{path} is older than two git timeouts (an export
            left by a process that died).
        """
        try:
            return os.lstat(path).st_mtime < time.time() - 2 * self.timeout
        except OSError:
            return False

    # The state of the last good update, kept on disk.

    def _save(self, remote: GitRemote, state: dict[str, _Ref]) -> None:
        """
        Write C{remote}'s state (atomically): each saltenv's commit (its
        tree is found again from the commit).
        """
        data = {
            "url": redactUrl(remote.url),
            "refs": {saltenv: commit for saltenv, (commit, _) in state.items()},
        }
        fd, tmp = tempfile.mkstemp(prefix=".state-", dir=remote.directory)
        try:
            with os.fdopen(fd, "w") as f:
                json.dump(data, f, sort_keys=True)
            os.replace(tmp, remote.stateFile)
        except BaseException:
            if os.path.exists(tmp):
                os.unlink(tmp)
            raise

    def _load(self, remote: GitRemote) -> dict[str, _Ref]:
        """
        @return: C{remote}'s saved state (the saltenvs still exposed, each
            with its tree if that is still there); C{{}} if none, or if the
            file is not one this backend wrote.
        """
        try:
            with open(remote.stateFile) as f:
                refs = json.load(f)["refs"]
            state: dict[str, _Ref] = {}
            for saltenv, commit in refs.items():
                checkSaltenv(saltenv)
                if not isinstance(commit, str) or not _COMMIT.match(commit):
                    return {}
                if self.exposed(saltenv):
                    tree = remote.treeFor(commit)
                    state[saltenv] = (commit, tree if os.path.isdir(tree) else None)
            return state
        except (OSError, ValueError, KeyError, TypeError, AttributeError):
            return {}

    def clearCache(self) -> None:
        """
        Remove every mirror and tree: the next use (or L{update}) clones
        again.
        """
        with self._lock, self._stateLock:
            for remote in self.remotes:
                shutil.rmtree(remote.directory, ignore_errors=True)
            self._states = [{} for _ in self.remotes]
            self._ready = False

    # Running git.

    def _git(
        self, args: list[str], env: dict[str, str] | None = None, cwd: str | None = None
    ) -> bytes:
        """
        Run git with C{args} in a clean environment and its own process
        group, killed whole after L{timeout} seconds.

        @return: its standard output.
        @raise GitError: if it fails or times out, with its standard error.
        """
        fullEnv = gitEnvironment()
        if env:
            fullEnv.update(env)
        try:
            proc = subprocess.Popen(
                [self.git, *args],
                stdin=subprocess.DEVNULL,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                env=fullEnv,
                cwd=cwd,
                start_new_session=True,
            )
        except OSError as e:
            raise GitError(f"cannot run {self.git}: {e}") from None
        shown = " ".join(redactUrl(a) for a in args if not a.startswith("--format="))
        try:
            out, err = proc.communicate(timeout=self.timeout)
        except subprocess.TimeoutExpired:
            try:
                os.killpg(proc.pid, signal.SIGKILL)
            except OSError:
                pass
            proc.communicate()
            raise GitError(f"git {shown} timed out after {self.timeout} s; killed") from None
        if proc.returncode != 0:
            text = err.decode("utf-8", "replace").strip()[-2000:]
            for remote in self.remotes:
                text = text.replace(remote.url, remote.label)
            raise GitError(f"git {shown} failed (exit {proc.returncode}): {text}")
        return out

    def _gitMaybe(self, args: list[str]) -> bytes | None:
        """
        @return: git's output, or L{None} if it failed.
        """
        try:
            return self._git(args)
        except GitError:
            return None


class _Flock:
    """
    An exclusive C{flock} on a file, as a context manager: one update per
    repository at a time across the processes sharing a cachedir.
    """

    def __init__(self, path: str) -> None:
        self.path = path
        self.fd = -1

    def __enter__(self) -> _Flock:
        self.fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o600)
        fcntl.flock(self.fd, fcntl.LOCK_EX)
        return self

    def __exit__(self, *exc: object) -> None:
        fcntl.flock(self.fd, fcntl.LOCK_UN)
        os.close(self.fd)


def _commits(state: dict[str, _Ref]) -> dict[str, str]:
    """
    @return: C{{saltenv: commit}} of a remote's state.
    """
    return {env: commit for env, (commit, _) in state.items()}


def _trees(states: list[dict[str, _Ref]]) -> set[str]:
    """
    @return: every tree the states use.
    """
    return {tree for state in states for (_, tree) in state.values() if tree is not None}


def _treeIfSame(ref: _Ref | None, commit: str) -> str | None:
    """
    @return: C{ref}'s tree if C{ref} is at C{commit}, else L{None}.
    """
    if ref is not None and ref[0] == commit:
        return ref[1]
    return None
