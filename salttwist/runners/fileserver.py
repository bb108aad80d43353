# -*- test-case-name: tests.test_runners_fileserver -*-
"""
The C{fileserver} runners (Salt's C{salt/runners/fileserver.py}): look
into and refresh the master's file server, the same
L{FileServer <salttwist.fileserver.server.FileServer>} the minions fetch
C{salt://} files from (C{context.master.fileServer}).

Every backend call blocks (a directory walk, git): each runs in the
master's threads through C{context.master.runBlocking}, never on the
reactor. They run in the master process, not a worker: C{update} and
C{clear_cache} must act on the master's own backends (a gitfs fetched in
a worker would leave the master serving its old trees).

Salt's return shapes: C{file_list}, C{dir_list}, C{empty_dir_list} and
C{envs} give sorted lists; C{update} gives C{True};
C{clear_cache} gives C{{"cleared": [...]}} or C{No cache was cleared}.

C{backend} narrows the backends as Salt's does: C{roots,git} (or a list)
for those, C{-git} for all but those; an unknown name fails the runner
with its name.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from salttwist.runners import RunnerContext


def _fileServer(context: RunnerContext) -> Any:
    """
    @return: the master's file server.
    @raise ValueError: if the master has none.
    """
    fileServer = getattr(context.master, "fileServer", None)
    if fileServer is None:
        raise ValueError("this master has no file server")
    return fileServer


async def _run(context: RunnerContext, f: Any, *args: Any) -> Any:
    """
    Run the blocking C{f(*args)} in the master's threads.
    """
    return await context.master.runBlocking(f, *args)


def _saltenv(saltenv: Any) -> str:
    if not isinstance(saltenv, str) or not saltenv:
        raise ValueError(f"saltenv must be a saltenv name, not {saltenv!r}")
    return saltenv


async def file_list(
    context: RunnerContext, saltenv: str = "base", backend: Any = None
) -> list[str]:
    """
    Return the files of C{saltenv} on the file server.

    CLI Example:

        salttwist-run fileserver.file_list
        salttwist-run fileserver.file_list saltenv=prod
        salttwist-run fileserver.file_list saltenv=dev backend=git
        salttwist-run fileserver.file_list base -git
    """
    fileServer = _fileServer(context)
    return await _run(context, fileServer.fileList, _saltenv(saltenv), "", backend)


async def dir_list(context: RunnerContext, saltenv: str = "base", backend: Any = None) -> list[str]:
    """
    Return the directories of C{saltenv} on the file server.

    CLI Example:

        salttwist-run fileserver.dir_list
        salttwist-run fileserver.dir_list saltenv=prod backend=roots
    """
    fileServer = _fileServer(context)
    return await _run(context, fileServer.dirList, _saltenv(saltenv), "", backend)


async def empty_dir_list(
    context: RunnerContext, saltenv: str = "base", backend: Any = None
) -> list[str]:
    """
    Return the empty directories of C{saltenv} on the file server (git
    holds none).

    CLI Example:

        salttwist-run fileserver.empty_dir_list
        salttwist-run fileserver.empty_dir_list saltenv=prod backend=roots
    """
    fileServer = _fileServer(context)
    saltenv = _saltenv(saltenv)

    def empty() -> list[str]:
        files = fileServer.fileList(saltenv, "", backend)
        dirs = fileServer.dirList(saltenv, "", backend)
        full = {parent for path in files + dirs for parent in _parents(path)}
        return [d for d in dirs if d not in full]

    return await _run(context, empty)


def _parents(path: str) -> list[str]:
    """
    @return: the directories above C{path} (C{a/b/c} gives C{a}, C{a/b}).
    """
    parts = path.split("/")
    return ["/".join(parts[:i]) for i in range(1, len(parts))]


async def envs(context: RunnerContext, backend: Any = None) -> list[str]:
    """
    Return the saltenvs of the file server (of every backend, or those
    C{backend} names).

    CLI Example:

        salttwist-run fileserver.envs
        salttwist-run fileserver.envs backend=roots,git
        salttwist-run fileserver.envs git
    """
    fileServer = _fileServer(context)
    return await _run(context, fileServer.envs, backend)


async def update(context: RunnerContext, backend: Any = None) -> bool:
    """
    Bring the file server up to date now: gitfs fetches its remotes (it
    also does every C{gitfs_update_interval} seconds); roots has nothing
    to do. A backend that fails is logged in the master's log and keeps
    serving what it had. Returns C{True}, as Salt's.

    CLI Example:

        salttwist-run fileserver.update
        salttwist-run fileserver.update backend=git
    """
    fileServer = _fileServer(context)
    await _run(context, fileServer.update, backend)
    return True


async def clear_cache(context: RunnerContext, backend: Any = None) -> Any:
    """
    Clear the caches of the file server's backends (gitfs's checkouts,
    fetched again at the next update; the hashes of every file, computed
    again when next asked). Returns C{{"cleared": [...]}} naming what was
    cleared, or C{No cache was cleared}.

    CLI Example:

        salttwist-run fileserver.clear_cache
        salttwist-run fileserver.clear_cache backend=git
        salttwist-run fileserver.clear_cache -roots
    """
    fileServer = _fileServer(context)

    def clear() -> list[str]:
        backends = fileServer.selectBackends(backend)
        if not backends:
            return []
        fileServer.clearCache(backend)
        return [f"The {b.name} fileserver cache was cleared" for b in backends]

    cleared = await _run(context, clear)
    if not cleared:
        return "No cache was cleared"
    return {"cleared": cleared}
