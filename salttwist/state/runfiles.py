# -*- test-case-name: tests.test_state_runfiles -*-
"""
A state run's view of the minion's file client: before the first state
runs, the C{salt://} sources of the run's C{file.managed} states are
fetched into the file cache in a few batched requests (L{IFileClient
<salttwist.fileserver.interfaces.IFileClient>}'s C{cacheFiles}, then
C{hashFiles}; a remote client's C{cacheFilesHashed} tells both in the
requests of C{cacheFiles} alone), instead of one C{_file_hash} request (and a transfer, and
a save of the cache index) per state; each state's C{cp.cache_file} of
such a source then costs a C{stat} of the cached copy and no request.

What the run learnt is kept for the run only (a L{RunFileClient} is made
for each run): a source changed on the master after the run's start is
used as it was then (Salt, which asks for each file's hash as its state
runs, would take the new one); a later run asks again. A cached copy
removed or changed meanwhile is fetched again. A prefetch that fails
changes nothing: each state asks for its own source and reports its own
error, in its own words, as without it.

Only plain C{file.managed} sources are fetched ahead: a single
C{salt://} URL, with no C{contents*}, C{replace: False}, C{onlyif},
C{unless} or C{creates} (a state that may not need its source does not
fetch it early).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from twisted.internet.defer import Deferred
from twisted.logger import Logger

from salttwist.fileserver.client import splitUrl
from salttwist.fileserver.interfaces import FileServerError

__all__ = ["RunFileClient", "prefetchSources"]

_log = Logger()

#: Arguments with which a C{file.managed} state may not read its source.
_MAYBE_UNUSED = (
    "contents",
    "contents_pillar",
    "contents_grains",
    "onlyif",
    "unless",
    "creates",
)


def prefetchSources(
    chunks: Iterable[Mapping[str, Any]], saltenv: str | None
) -> list[tuple[str, str]]:
    """
    @param chunks: a run's low chunks.
    @param saltenv: the run's saltenv (a chunk's C{__env__} wins).
    @return: C{(salt:// URL, saltenv)} of each source worth fetching
        before the run (see the module's docstring), each once, in order.
    """
    seen: set[tuple[str, str]] = set()
    found: list[tuple[str, str]] = []
    for chunk in chunks:
        if chunk.get("state") != "file" or chunk.get("fun") != "managed":
            continue
        source = chunk.get("source")
        if not isinstance(source, str) or not source.startswith("salt://"):
            continue
        if chunk.get("replace") is False or any(
            chunk.get(key) is not None for key in _MAYBE_UNUSED
        ):
            continue
        env = chunk.get("saltenv") or chunk.get("__env__") or saltenv or "base"
        key = (source, str(env))
        if key not in seen:
            seen.add(key)
            found.append(key)
    return found


class RunFileClient:
    """
    The minion's file client for one state run: C{cacheFile} of a file
    L{prefetch} fetched needs no request; everything else is the minion's
    client's (L{__getattr__}). Every method is called on the reactor's
    thread, but L{cachedKnown}, which the run's states call from their
    thread.
    """

    def __init__(self, client: Any) -> None:
        self.client = client
        #: The master's SHA-256 of each prefetched file, by C{(saltenv,
        #: relative path)}.
        self._known: dict[tuple[str, str], str] = {}
        #: C{(cached path, SHA-256)} of each prefetched file, by C{(URL,
        #: saltenv)} as the run's chunks name it (with C{cacheFilesHashed}).
        self._byUrl: dict[tuple[str, str], tuple[str, str]] = {}

    def __getattr__(self, name: str) -> Any:
        return getattr(self.client, name)

    @property
    def canPrefetch(self) -> bool:
        """
        Whether the client can fetch many files at once and be told a
        file's hash (a remote client; a local one copies each file in one
        thread call anyway).
        """
        return all(
            callable(getattr(self.client, name, None))
            for name in ("cacheFiles", "hashFiles", "cacheFileKnown")
        )

    def prefetch(self, sources: Iterable[tuple[str, str]]) -> Deferred[int]:
        """
        Fetch C{sources} (C{(salt:// URL, saltenv)}) into the cache, one
        batch per saltenv, and remember their hashes for the run.

        @return: a L{Deferred} firing with the number of files known (it
            never fails: a failure is logged and the states fetch their
            sources one by one).
        """
        byEnv: dict[str, list[str]] = {}
        for url, env in sources:
            byEnv.setdefault(env, []).append(url)

        async def run() -> int:
            if not byEnv or not self.canPrefetch:
                return 0
            hashed = getattr(self.client, "cacheFilesHashed", None)
            for env, urls in byEnv.items():
                try:
                    if callable(hashed):
                        # One _file_hash_many (and the transfers) instead
                        # of that and a second one.
                        found = await hashed(urls, env)
                        self._byUrl.update(((url, env), pair) for url, pair in found.items())
                        hashes = {url: {"hsum": hsum} for url, (_, hsum) in found.items()}
                    else:
                        await self.client.cacheFiles(urls, env)
                        hashes = await self.client.hashFiles(urls, env)
                except Exception as e:
                    _log.debug(
                        "sources of saltenv {env} not fetched ahead: {error}", env=env, error=e
                    )
                    continue
                for url, info in hashes.items():
                    hsum = info.get("hsum") if isinstance(info, dict) else None
                    if not isinstance(hsum, str) or not hsum:
                        continue
                    try:
                        relative, fileEnv = splitUrl(url, env)
                    except FileServerError:
                        continue
                    self._known[(fileEnv, relative)] = hsum
            return len(self._known)

        return Deferred.fromCoroutine(run())

    def cacheFile(self, path: str, saltenv: str = "base") -> Any:
        """
        The client's C{cacheFile}; for a prefetched file, its
        C{cacheFileKnown} with the hash the run learnt (no request unless
        the cached copy changed since).
        """
        try:
            relative, env = splitUrl(path, saltenv)
        except FileServerError:
            return self.client.cacheFile(path, saltenv)
        hsum = self._known.get((env, relative))
        if hsum is None:
            return self.client.cacheFile(path, saltenv)
        return self.client.cacheFileKnown(path, saltenv, hsum)

    def cachedKnown(self, path: str, saltenv: str) -> tuple[str, str] | None:
        """
        C{cacheFile}'s answer for a prefetched file whose cached copy still
        has the hash the run learnt, found on the calling thread (it blocks
        for a C{stat} of the copy, and a hash if the copy's size or mtime
        changed): a state's thread asks here first and saves the trips to
        the reactor and back (and to a thread for the C{stat}) that
        C{cp.cache_file} costs.

        @param path: a C{salt://} URL (a saltenv in it wins over
            C{saltenv}).
        @return: C{(cached path, SHA-256)}, or L{None}: not prefetched, or
            the copy is gone or changed (then C{cp.cache_file} fetches it
            again, as without this).
        """
        index = getattr(self.client, "index", None)
        if index is None:
            return None
        known = self._byUrl.get((path, saltenv))
        if known is None:
            try:
                relative, env = splitUrl(path, saltenv)
            except FileServerError:
                return None
            hsum = self._known.get((env, relative))
            if hsum is None:
                return None
            known = (self.client.cachedPath(relative, env), hsum)
        if index.hashOf(known[0]) != known[1]:
            return None
        return known
