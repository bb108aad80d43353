# -*- test-case-name: tests.test_states_file_source -*-
"""
Where the C{file} states' new contents come from (Salt's C{file.source_list},
C{file.get_source_sum}, C{file.extract_hash} and C{file.get_managed}):
choosing the first existing source of a list, parsing a C{source_hash}
(a digest, C{type=digest}, or a file of hashes), fetching a source into
the minion's cache through C{cp.cache_file} (C{salt://}, C{http(s)://}) or
reading it in place (a local path, C{file://}), and rendering templates.

Blocking: called from a state function's thread; C{ctx.salt["cp.*"]}
waits for the reactor.
"""

from __future__ import annotations

import hashlib
import os
import re
import string
from collections.abc import Callable
from typing import Any
from urllib.parse import urlparse

from salttwist.modules import CommandExecutionError
from salttwist.states import StateContext

#: Digest lengths by hash type (Salt's C{HASHES}).
HASHES = {"md5": 32, "sha1": 40, "sha224": 56, "sha256": 64, "sha384": 96, "sha512": 128}
#: Hash types by digest length (Salt's C{HASHES_REVMAP}).
HASHES_BY_LENGTH = {length: name for name, length in HASHES.items()}
#: The URL schemes a source or a hash file may have.
PROTOCOLS = ("salt", "file", "http", "https")
#: Sources fetched over the network, whose hash must be known.
REMOTE = ("http", "https")


class SourceError(Exception):
    """
    A source cannot be used; the message is the state's comment after
    C{Unable to manage file: }.
    """


def get_hash(path: str, form: str = "sha256", chunk_size: int = 65536) -> str:
    """
    The hex digest of the file C{path} (C{form}: a C{hashlib} name), read
    in chunks; L{salttwist.modules.filemod.get_hash} (C{file.get_hash})
    is this with Salt's argument checks.

    @raise CommandExecutionError: when the file cannot be read.
    """
    digest = hashlib.new(form)
    try:
        with open(path, "rb") as f:
            while chunk := f.read(int(chunk_size)):
                digest.update(chunk)
    except OSError as e:
        raise CommandExecutionError(f"Unable to read {path}: {e.strerror}") from e
    return digest.hexdigest()


def redact(url: str) -> str:
    """
    @return: C{url} without the password of its user.
    """
    return re.sub(r"(?<=://)([^/@:]*):[^/@]*@", r"\1:XXXXXXXXXX@", url)


def scheme(source: str) -> str:
    """
    @return: the URL scheme of C{source} (C{''} for a plain path).
    """
    # The common cases without urlparse (a file state asks several times).
    if source.startswith("salt://"):
        return "salt"
    if source.startswith("/"):
        return ""
    found = urlparse(source).scheme.lower()
    return found if found in PROTOCOLS else ""


def localPath(source: str) -> str | None:
    """
    @return: the local path of a C{file://} URL or an absolute path, else
        L{None}.
    """
    kind = scheme(source)
    if kind == "file":
        parsed = urlparse(source)
        return os.path.join(parsed.netloc, parsed.path) if parsed.netloc else parsed.path
    if kind == "" and source.startswith("/"):
        return source
    return None


def saltUrl(source: str, saltenv: str) -> tuple[str, str]:
    """
    @return: the relative path and saltenv of a C{salt://} URL.
    """
    if source.startswith("salt://") and not any(c in source for c in "?#;"):
        # What urlparse gives such a URL, without it.
        return source[len("salt://") :].lstrip("/"), saltenv
    parsed = urlparse(source)
    path = (parsed.netloc + parsed.path).lstrip("/")
    match = re.search(r"(?:^|&)saltenv=([^&]*)", parsed.query)
    return path, match.group(1) if match else saltenv


def _masterHas(ctx: StateContext, source: str, saltenv: str) -> bool:
    path, env = saltUrl(source, saltenv)
    key = f"file._masterFiles|{env}"
    if key not in ctx.context:
        try:
            files = set(ctx.salt["cp.list_master"](saltenv=env))
            dirs = set(ctx.salt["cp.list_master_dirs"](saltenv=env))
        except CommandExecutionError:
            files, dirs = set(), set()
        ctx.context[key] = files | dirs
    return path.rstrip("/") in ctx.context[key]


def _reachable(ctx: StateContext, source: str, saltenv: str) -> bool:
    kind = scheme(source)
    if kind == "salt":
        return _masterHas(ctx, source, saltenv)
    if kind in REMOTE:
        try:
            return bool(ctx.salt["cp.cache_file"](source, saltenv))
        except CommandExecutionError:
            return False
    local = localPath(source)
    return local is not None and os.path.exists(local)


def sourceList(ctx: StateContext, source: Any, sourceHash: Any, saltenv: str) -> tuple[str, Any]:
    """
    Salt's C{file.source_list}: for a list of sources (strings, or
    C{{source: source_hash}} dictionaries), the first that exists.

    @return: C{(source, source_hash)}.
    @raise SourceError: if none exists.
    """
    if not isinstance(source, list):
        return str(source), sourceHash
    for single in source:
        if isinstance(single, dict):
            if len(single) != 1:
                continue
            src, hsh = next(iter(single.items()))
            if _reachable(ctx, str(src), saltenv):
                return str(src), hsh if hsh else sourceHash
        elif isinstance(single, str) and _reachable(ctx, single, saltenv):
            return single, sourceHash
    raise SourceError("none of the specified sources were found")


def _invalid(sourceHash: Any) -> CommandExecutionError:
    lengths = ", ".join(f"{name} ({length})" for length, name in sorted(HASHES_BY_LENGTH.items()))
    return CommandExecutionError(
        f"Source hash {redact(str(sourceHash))} format is invalid. The supported formats "
        "are: 1) a hash, 2) an expression in the format <hash_type>=<hash>, or 3) either "
        "a path to a local file containing hashes, or a URI of a remote hash file. "
        f"Supported protocols for remote hash files are: {', '.join(PROTOCOLS)}. The hash "
        "may also not be of a valid length, the following are supported hash types and "
        f"lengths: {lengths}."
    )


def extractHash(
    hashFile: str, name: str, source: str, sourceHashName: str | None
) -> dict[str, str] | None:
    """
    Salt's C{file.extract_hash}: find the digest for a file in a file of
    hashes (C{sha256sum} output, BSD style C{SHA256 (file) = hex}, or one
    bare digest). A line naming C{sourceHashName} wins; then one naming the
    source's file name, then the target's; then the first digest.

    @return: C{{"hash_type", "hsum"}}, or L{None} when the file holds none.
    """
    try:
        with open(hashFile, encoding="utf-8", errors="replace") as f:
            lines = f.read().splitlines()
    except OSError as e:
        raise CommandExecutionError(f"Unable to read hash file {hashFile}: {e.strerror}") from e
    digest = re.compile(r"(?<![0-9a-fA-F])[0-9a-fA-F]{32,128}(?![0-9a-fA-F])")
    found: list[tuple[str, str]] = []
    for text in lines:
        for match in digest.finditer(text):
            if len(match.group()) in HASHES_BY_LENGTH:
                found.append((text, match.group().lower()))
                break
    if not found:
        return None

    def pick(wanted: str | None) -> str | None:
        if not wanted:
            return None
        for text, hsum in found:
            rest = text.replace(hsum, " ", 1)
            words = re.split(r"[\s()*=]+", rest)
            if wanted in words or os.path.basename(wanted) in words:
                return hsum
        return None

    candidates = [
        sourceHashName,
        os.path.basename(urlparse(source).path) if source else None,
        os.path.basename(name) if name else None,
    ]
    for wanted in candidates:
        hsum = pick(wanted)
        if hsum:
            return {"hash_type": HASHES_BY_LENGTH[len(hsum)], "hsum": hsum}
    if sourceHashName:
        return None
    hsum = found[0][1]
    return {"hash_type": HASHES_BY_LENGTH[len(hsum)], "hsum": hsum}


def sourceSum(
    ctx: StateContext,
    name: str,
    source: str,
    sourceHash: Any,
    sourceHashName: str | None,
    saltenv: str,
) -> dict[str, str]:
    """
    Salt's C{file.get_source_sum}: the expected digest of C{source} from
    C{sourceHash}: a digest (its length names the type), C{type=digest}, a
    local file of hashes, or the URL of one.

    @return: C{{"hash_type", "hsum"}}.
    @raise CommandExecutionError: naming what is wrong with it.
    """
    text = str(sourceHash).strip()
    hashFile = None
    if os.path.isabs(text):
        hashFile = text
    elif urlparse(text).scheme:
        if urlparse(text).scheme.lower() not in PROTOCOLS:
            raise _invalid(sourceHash)
        hashFile = ctx.salt["cp.cache_file"](text, saltenv)
        if not hashFile:
            raise CommandExecutionError(f"Source hash file {redact(text)} not found")
    if hashFile is not None:
        local = localPath(hashFile) or hashFile
        found = extractHash(local, name, source, sourceHashName)
        if found is None:
            raise _invalid(sourceHash)
        return found
    if "=" in text:
        hashType, hsum = (part.strip() for part in text.split("=", 1))
    else:
        if not text or not all(c in string.hexdigits for c in text):
            raise _invalid(sourceHash)
        hsum = text
        if len(hsum) not in HASHES_BY_LENGTH:
            raise _invalid(sourceHash)
        hashType = HASHES_BY_LENGTH[len(hsum)]
    hashType = hashType.lower()
    if hashType not in HASHES:
        raise CommandExecutionError(
            f"Invalid hash type '{hashType}'. Supported hash types are: {', '.join(HASHES)}. "
            f"Either remove the hash type and simply use '{hsum}' as the source_hash, or "
            "change the hash type to a supported type."
        )
    if len(hsum) not in HASHES_BY_LENGTH:
        raise _invalid(sourceHash)
    if len(hsum) != HASHES[hashType]:
        raise CommandExecutionError(
            f"Invalid length ({len(hsum)}) for hash type '{hashType}'. Either remove the hash "
            f"type and simply use '{hsum}' as the source_hash, or change the hash type to "
            f"'{HASHES_BY_LENGTH[len(hsum)]}'"
        )
    return {"hash_type": hashType, "hsum": hsum.lower()}


def fetchSource(
    ctx: StateContext,
    name: str,
    source: str,
    sourceHash: Any,
    sourceHashName: str | None,
    saltenv: str,
    skipVerify: bool,
) -> tuple[str, dict[str, str]]:
    """
    Salt's C{file.get_managed} without the template: the local path of
    C{source}'s contents (in the cache, or the local file itself) and its
    digest, checked against C{sourceHash} for web sources.

    @return: C{(path, {"hash_type", "hsum"})}.
    @raise SourceError: with Salt's words when the source is missing or its
        hash does not match.
    """
    kind = scheme(source)
    local = localPath(source)
    if local is not None or kind == "":
        path = local if local is not None else source
        if not os.path.exists(path):
            raise SourceError(f"Local file source {path} does not exist")
        return path, {"hash_type": "sha256", "hsum": get_hash(path, "sha256")}
    if kind == "salt":
        sources = getattr(ctx, "sources", None)
        known = sources.cachedKnown(source, saltenv) if sources is not None else None
        if known is not None:
            return known[0], {"hash_type": "sha256", "hsum": known[1]}
        try:
            cached = ctx.salt["cp.cache_file"](source, saltenv)
        except CommandExecutionError as e:
            raise SourceError(f"Source file {source} not found in saltenv '{saltenv}': {e}") from e
        if not cached:
            raise SourceError(f"Source file {source} not found in saltenv '{saltenv}'")
        return cached, {"hash_type": "sha256", "hsum": get_hash(cached, "sha256")}
    expected: dict[str, str] | None = None
    if not skipVerify:
        if not sourceHash:
            raise SourceError(
                f"Unable to verify upstream hash of source file {redact(source)}, please set "
                "source_hash or set skip_verify to True"
            )
        try:
            expected = sourceSum(ctx, name, source, sourceHash, sourceHashName, saltenv)
        except CommandExecutionError as e:
            raise SourceError(f"Unable to manage file: {e}") from e
    wanted = f"{expected['hash_type']}={expected['hsum']}" if expected else None
    try:
        cached = ctx.salt["cp.cache_file"](source, saltenv, source_hash=wanted)
    except CommandExecutionError as e:
        raise SourceError(f"Failed to cache {redact(source)}: {e}") from e
    if not cached or not os.path.exists(cached):
        raise SourceError(f"Source file '{redact(source)}' not found")
    if expected is None:
        return cached, {"hash_type": "sha256", "hsum": get_hash(cached, "sha256")}
    actual = get_hash(cached, expected["hash_type"])
    if actual != expected["hsum"]:
        raise HashMismatch(
            f"Specified {expected['hash_type']} checksum for {redact(source)} "
            f"({expected['hsum']}) does not match actual checksum ({actual}). If the "
            "'source_hash' value refers to a remote file with multiple possible matches, "
            "then it may be necessary to set 'source_hash_name'."
        )
    return cached, expected


class HashMismatch(SourceError):
    """
    A downloaded source does not have its C{source_hash}: the message is
    the whole comment.
    """


def templateLoader(ctx: StateContext, saltenv: str) -> Callable[[str], tuple[str, str]]:
    """
    @return: a template loader for files a template includes or imports,
        fetched from the file server through C{cp.cache_file}.
    """

    def loader(name: str) -> tuple[str, str]:
        try:
            cached = ctx.salt["cp.cache_file"](f"salt://{name}", saltenv)
        except CommandExecutionError as e:
            raise LookupError(f"salt://{name}: {e}") from e
        if not cached:
            raise LookupError(f"salt://{name} is not on the file server (saltenv {saltenv})")
        with open(cached, encoding="utf-8") as f:
            return f.read(), cached

    return loader


def renderTemplate(
    ctx: StateContext,
    text: str,
    template: str,
    variables: dict[str, Any],
    saltenv: str,
    source: str | None,
) -> str:
    """
    Render C{text} with the template engine C{template} (C{jinja}) and
    Salt's variables (C{salt}, C{grains}, C{pillar}, C{opts}, C{saltenv})
    plus C{variables}.

    @raise SourceError: the engine is unknown or the template fails.
    """
    from salttwist.render import RenderError, renderJinja

    if str(template).lower() != "jinja":
        raise SourceError(f"Specified template format {template} is not supported")
    context: dict[str, Any] = {
        "salt": ctx.salt,
        "grains": ctx.grains,
        "pillar": ctx.pillar,
        "opts": ctx.opts,
        "saltenv": saltenv,
    }
    context.update(variables)
    name = None
    path = "<contents>"
    if source and scheme(source) == "salt":
        name, _ = saltUrl(source, saltenv)
        path = source
    elif source:
        path = source
    try:
        return renderJinja(text, context, path=path, loader=templateLoader(ctx, saltenv), name=name)
    except RenderError as e:
        raise SourceError(str(e)) from e
