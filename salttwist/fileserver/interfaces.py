# -*- test-case-name: tests.test_fileserver_contract -*-
"""
The file server's interfaces: a backend that holds files
(L{IFileServerBackend}) and the client execution modules fetch files with
(L{IFileClient}).
"""

from __future__ import annotations

from dataclasses import dataclass

from zope.interface import Attribute, Interface


class FileServerError(ValueError):
    """
    A file-server request that cannot be served as asked: a path that would
    leave the roots (C{..}, absolute, NUL, a symlink out of a root), a
    saltenv that is not configured, a bad C{salt://} URL. The message says
    which and why; it is sent to the minion as the request's error (a
    L{ValueError}, so the req channel answers it in those words).
    """


@dataclass(frozen=True)
class FoundFile:
    """
    One file a backend holds.

    @ivar path: its relative path in the saltenv, with C{/} separators
        (C{"web/files/nginx.conf"}).
    @ivar realPath: the absolute path on the master's disk to read it from,
        confined to the backend's root.
    @ivar size: its size in bytes when found.
    @ivar mtimeNs: its modification time in nanoseconds when found (with
        C{size} and C{realPath}, the key of cached hashes).
    @ivar backend: the name of the backend that holds it.
    """

    path: str
    realPath: str
    size: int
    mtimeNs: int
    backend: str


class IFileServerBackend(Interface):
    """
    A source of C{salt://} files: Salt's C{roots} (directories of
    C{file_roots}) or C{git} (gitfs: branches and tags as saltenvs).

    Every method blocks (disk, git): callers run them in a thread or a
    worker process, never on the reactor. Paths given are relative, with
    C{/} separators, already checked by
    L{salttwist.fileserver.paths.checkRelativePath}; a backend still never
    returns a file outside its roots (symlinks are resolved and checked).
    """

    name = Attribute("The backend's name in C{fileserver_backend}: C{'roots'} or C{'git'}.")

    def envs() -> list[str]:
        """
        @return: the saltenvs this backend serves, sorted.
        """

    def fileList(saltenv: str) -> list[str]:
        """
        @return: the relative paths of every file in C{saltenv} (after
            C{file_ignore_regex} and C{file_ignore_glob}), sorted; C{[]}
            for a saltenv it does not serve.
        """

    def dirList(saltenv: str) -> list[str]:
        """
        @return: the relative paths of every directory in C{saltenv}
            (C{""} excluded), sorted.
        """

    def findFile(path: str, saltenv: str) -> FoundFile | None:
        """
        @return: the file C{path} of C{saltenv} (the first root holding it
            wins), or L{None} if no root holds it.
        @raise FileServerError: if C{path} resolves outside the roots.
        """

    def update() -> bool:
        """
        Bring the backend up to date (gitfs fetches its remotes; roots has
        nothing to do).

        @return: whether anything changed.
        """

    def clearCache() -> None:
        """
        Forget what the backend cached (gitfs: its checkouts, fetched again
        at the next L{update}).
        """


class IFileClient(Interface):
    """
    What execution modules (C{cp.*}, C{saltutil.sync_*}, templates) use to
    reach the file server: over the minion's session to its master
    (C{file_client: remote}) or from local roots (C{file_client: local},
    C{salttwist-call --local}). Fetched files are cached under the
    minion's C{cachedir} (C{files/<saltenv>/<path>}) and fetched again
    only when the master's SHA-256 differs.

    Every method is called on the reactor thread and returns a
    L{Deferred}; the blocking parts (disk, hashing) run in threads.
    C{path} arguments may be C{salt://path}, C{salt://path?saltenv=env} or
    a plain relative path; a saltenv in the URL wins over C{saltenv}.
    Failures: L{FileServerError} for a refused path or saltenv (its message
    from the master), L{ConnectionError} when the minion has no session.
    """

    def envs() -> object:
        """
        @return: a L{Deferred} firing with the saltenvs the file server has.
        """

    def fileList(saltenv: str, prefix: str = "") -> object:
        """
        @return: a L{Deferred} firing with the files of C{saltenv} under
            C{prefix} (Salt's C{cp.list_master}).
        """

    def dirList(saltenv: str, prefix: str = "") -> object:
        """
        @return: a L{Deferred} firing with the directories (Salt's
            C{cp.list_master_dirs}).
        """

    def hashFile(path: str, saltenv: str = "base") -> object:
        """
        @return: a L{Deferred} firing with C{{"hsum": hex, "hash_type":
            "sha256"}} of the file server's copy, or C{{}} if it has none.
        """

    def cacheFile(path: str, saltenv: str = "base") -> object:
        """
        Fetch C{path} into the cache unless the cached copy's SHA-256 is
        the file server's.

        @return: a L{Deferred} firing with the cached file's absolute path,
            or C{""} if the file server has no such file.
        """

    def cacheFileTo(path: str, saltenv: str, dest: str) -> object:
        """
        L{cacheFile}, and when the file is fetched, write it to C{dest} as
        well in the same pass (C{cp.get_file}): the bytes are not read
        back from the cache to copy them. C{dest} is written through a
        temporary file beside it, renamed into place once the SHA-256
        checks; an existing C{dest} keeps its mode. C{dest} is left alone
        when the cached copy was already good, when a regular file of the
        same size is there (the caller compares it), or when its
        temporary file cannot be made: the caller then copies from the
        cache as it would have.

        @return: a L{Deferred} firing with C{(cached path, whether dest was
            written)}, or C{("", False)} if the file server has no such
            file.
        """

    def hashFiles(paths: list[str], saltenv: str = "base") -> object:
        """
        L{hashFile} of many files at once (one request per saltenv on a
        master: C{_file_hash_many}).

        @return: a L{Deferred} firing with C{{path as given: {"hsum",
            "hash_type"} or {}}}; a path the file server refuses (a
            symlink leaving its root) is left out: L{hashFile} of it alone
            says why.
        """

    def cacheFiles(paths: list[str], saltenv: str = "base") -> object:
        """
        L{cacheFile} of many files at once: the hashes in one request,
        every cached copy checked in one thread call, small files that
        differ fetched many to a request (C{_serve_files}), big ones in
        chunks.

        @return: a L{Deferred} firing with C{{path as given: cached path,
            or "" if the file server has no such file}}; a path the file
            server refuses is left out (L{cacheFile} of it alone says why).
        """

    def cacheDir(path: str, saltenv: str = "base", includeEmpty: bool = False) -> object:
        """
        Fetch every file under directory C{path} (as L{cacheFile} does).

        @return: a L{Deferred} firing with the cached paths.
        """

    def cachedPath(path: str, saltenv: str = "base") -> str:
        """
        @return: where L{cacheFile} keeps C{path} (whether or not it is
            there now); no I/O.
        """

    def push(localPath: str, remotePath: str) -> object:
        """
        Send the local file C{localPath} to the master, which keeps it as
        C{cachedir/minions/<id>/files/<remotePath>} if its C{file_recv} is
        on (Salt's C{cp.push}).

        @return: a L{Deferred} firing with C{True}, or failing with
            L{FileServerError} saying why the master refused it.
        """
