# -*- test-case-name: tests.test_states_archive -*-
"""
Salt's C{archive.extracted}: a tar or zip archive unpacked into a
directory, only when something in it is missing there, with Salt's
arguments, comments and changes.

The archive comes from a local path or C{file://} (read in place), or
C{salt://}/C{http(s)://} (cached through C{cp.cache_file}; a web source
needs C{source_hash} or C{skip_verify}). It is unpacked with Python's
C{tarfile}/C{zipfile} by L{salttwist.modules.archive}, which refuses an
archive with a member that would land outside C{name}; tar C{options}
other than C{--strip-components} run the C{tar} command, after the same
check of the members.

Not supported (refused with a comment): C{rar} archives, C{options} for
zip archives (C{use_cmd_unzip}), signatures (C{signature},
C{source_hash_sig}, ...).
"""

from __future__ import annotations

import hashlib
import os
import re
import shlex
import shutil
import stat
import subprocess
from typing import Any
from urllib.parse import urlparse

from salttwist.modules import CommandExecutionError, SaltInvocationError
from salttwist.modules.archive import (
    _extractTar,
    _guessArchiveType,
    _listMembers,
    _refusal,
    _summarize,
    _unsafeMembers,
    unzip,
)
from salttwist.states import StateContext, stateReturn

#: Digest lengths by hash type.
_HASHES = {"md5": 32, "sha1": 40, "sha224": 56, "sha256": 64, "sha384": 96, "sha512": 128}


def _redact(url: str) -> str:
    return re.sub(r"(?<=://)([^/@:]*):[^/@]*@", r"\1:XXXXXXXXXX@", url)


def _fileHash(path: str, form: str) -> str:
    digest = hashlib.new(form)
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 16), b""):
            digest.update(block)
    return digest.hexdigest()


def _sourceSum(ctx: StateContext, source: str, sourceHash: Any, sourceHashName: Any) -> dict:
    """
    @return: C{{"hash_type", "hsum"}} from C{source_hash}: a digest (its
        length names the type), C{type=digest}, or a local path or URL of a
        file of hashes (the line naming C{source_hash_name} or the source's
        file name, else the first digest).
    @raise CommandExecutionError: it cannot be used.
    """
    text = str(sourceHash).strip()
    hashFile = None
    if text.startswith("/"):
        hashFile = text
    elif urlparse(text).scheme in ("salt", "http", "https", "file"):
        cached = ctx.salt["cp.cache_file"](text, ctx.saltenv)
        if not cached:
            raise CommandExecutionError(f"Source hash file {_redact(text)} not found")
        hashFile = str(cached)
    if hashFile is not None:
        try:
            with open(hashFile, encoding="utf-8", errors="replace") as f:
                lines = f.read().splitlines()
        except OSError as e:
            raise CommandExecutionError(f"Unable to read hash file {hashFile}: {e.strerror}") from e
        wanted = [str(sourceHashName)] if sourceHashName else []
        wanted.append(os.path.basename(urlparse(source).path))
        found = []
        for line in lines:
            match = re.search(r"(?<![0-9a-fA-F])([0-9a-fA-F]{32,128})(?![0-9a-fA-F])", line)
            if match and len(match.group(1)) in _HASHES.values():
                found.append((line, match.group(1).lower()))
        for name in wanted:
            for line, hsum in found:
                if name and name in line.split() or f"({name})" in line or f"*{name}" in line:
                    return _typed(hsum)
        if found and not sourceHashName:
            return _typed(found[0][1])
        raise CommandExecutionError(f"No matching hash for {source} found in {text}")
    if "=" in text:
        form, hsum = (x.strip() for x in text.split("=", 1))
        form = form.lower()
        if form not in _HASHES or len(hsum) != _HASHES[form]:
            raise CommandExecutionError(f"Source hash {text} format is invalid")
        return {"hash_type": form, "hsum": hsum.lower()}
    if not re.fullmatch(r"[0-9a-fA-F]+", text) or len(text) not in _HASHES.values():
        raise CommandExecutionError(f"Source hash {text} format is invalid")
    return _typed(text.lower())


def _typed(hsum: str) -> dict[str, str]:
    form = next(name for name, length in _HASHES.items() if length == len(hsum))
    return {"hash_type": form, "hsum": hsum}


def _stripComponents(options: str | None) -> int | None:
    if not options:
        return None
    match = re.search(r"""--strip(?:-components)?(?:\s+|=)["']?(\d+)["']?""", options)
    return int(match.group(1)) if match else None


def _otherTarOptions(options: str) -> list[str]:
    """
    @return: C{options} without C{--strip-components} and verbosity.
    """
    words = shlex.split(options)
    rest: list[str] = []
    skip = False
    for i, word in enumerate(words):
        if skip:
            skip = False
            continue
        if re.fullmatch(r"--strip(-components)?=\S+", word):
            continue
        if word in ("--strip", "--strip-components") and i + 1 < len(words):
            skip = True
            continue
        if word in ("v", "-v", "--verbose"):
            continue
        rest.append(word)
    return rest


def _removePath(path: str) -> None:
    if os.path.isdir(path) and not os.path.islink(path):
        shutil.rmtree(path)
    elif os.path.lexists(path):
        os.unlink(path)


def _chownTree(path: str, uid: int, gid: int) -> bool:
    """
    Set the owner of C{path} and everything under it (links themselves).

    @return: whether anything changed.
    """
    changed = False
    paths = [path]
    if os.path.isdir(path) and not os.path.islink(path):
        for root, dirs, files in os.walk(path):
            paths += [os.path.join(root, n) for n in dirs + files]
    for p in paths:
        st = os.lstat(p)
        if (uid != -1 and st.st_uid != uid) or (gid != -1 and st.st_gid != gid):
            os.lchown(p, uid, gid)
            changed = True
    return changed


def _needsChown(path: str, uid: int, gid: int) -> bool:
    paths = [path]
    if os.path.isdir(path) and not os.path.islink(path):
        for root, dirs, files in os.walk(path):
            paths += [os.path.join(root, n) for n in dirs + files]
    for p in paths:
        st = os.lstat(p)
        if (uid != -1 and st.st_uid != uid) or (gid != -1 and st.st_gid != gid):
            return True
    return False


def extracted(
    ctx: StateContext,
    name: str,
    source: Any = None,
    source_hash: Any = None,
    source_hash_name: Any = None,
    source_hash_update: bool = False,
    skip_files_list_verify: bool = False,
    skip_verify: bool = False,
    password: Any = None,
    options: Any = None,
    list_options: Any = None,
    force: bool = False,
    overwrite: bool = False,
    clean: bool = False,
    clean_parent: bool = False,
    user: Any = None,
    group: Any = None,
    if_missing: Any = None,
    trim_output: Any = False,
    use_cmd_unzip: Any = None,
    extract_perms: bool = True,
    enforce_toplevel: bool = True,
    enforce_ownership_on: Any = None,
    archive_format: Any = None,
    use_etag: bool = False,
    **kwargs: Any,
) -> dict[str, Any]:
    """
    Make sure the archive C{source} is unpacked in the directory C{name}
    (Salt's C{archive.extracted}): nothing is done when every file and
    directory of the archive is already there (C{overwrite=True}:
    always unpack; C{if_missing}: a path whose existence means done).

    C{source_hash} (C{sha256=...}, a digest or a hash file) is checked
    (C{skip_verify=True} skips it); C{archive_format} (C{tar}, C{zip}) is
    guessed from the source's name; C{enforce_toplevel} (default) refuses
    an archive without exactly one top-level directory; C{clean} removes
    the archive's top-level paths first (C{clean_parent}: C{name} itself);
    C{force} replaces paths of the wrong type; C{keep_source}/C{keep}
    (default C{True}) keeps a downloaded archive cached; C{user}/C{group}
    own what was unpacked; C{trim_output} limits the names in the changes;
    C{password} for a zip archive; C{options} for tar
    (C{--strip-components=1}, or options of the C{tar} command).

    Changes: C{{"extracted_files": [...], "directories_created": [name]}}
    (plus C{"removed"}, C{"updated ownership"}).
    """
    ret = stateReturn(name, False, "", {})
    keepSource = True
    if "keep_source" in kwargs and "keep" in kwargs:
        ret.setdefault("warnings", []).append(
            "Both 'keep_source' and 'keep' were used. Since these both "
            "do the same thing, 'keep' was ignored."
        )
        keepSource = bool(kwargs.pop("keep_source"))
        kwargs.pop("keep")
    elif "keep_source" in kwargs:
        keepSource = bool(kwargs.pop("keep_source"))
    elif "keep" in kwargs:
        keepSource = bool(kwargs.pop("keep"))
    unsupported = [
        k
        for k in ("signature", "source_hash_sig", "signed_by_any", "signed_by_all")
        if kwargs.get(k)
    ]
    if unsupported:
        ret["comment"] = f"Not supported by salttwist's archive.extracted: {', '.join(unsupported)}"
        return ret
    if skip_files_list_verify and skip_verify:
        ret["comment"] = 'Only one of "skip_files_list_verify" and "skip_verify" can be set to True'
        return ret
    if not name:
        ret["comment"] = "Name of the directory path needs to be specified"
        return ret
    if not os.path.isabs(str(name)):
        ret["comment"] = f"{name} is not an absolute path"
        return ret
    name = str(name).rstrip(os.sep)
    if os.path.isfile(name):
        ret["comment"] = f"{name} exists and is not a directory"
        return ret
    dest = name + os.sep
    if if_missing is not None and not os.path.isabs(str(if_missing)):
        ret["comment"] = "Value for 'if_missing' is not an absolute path"
        return ret
    if enforce_ownership_on is not None:
        if not os.path.isabs(str(enforce_ownership_on)):
            ret["comment"] = "Value for 'enforce_ownership_on' is not an absolute path"
            return ret
        if os.path.relpath(str(enforce_ownership_on), dest).startswith(".." + os.sep):
            ret["comment"] = f"Value for 'enforce_ownership_on' must be within {dest}"
            return ret
    if if_missing is not None and os.path.exists(str(if_missing)):
        ret["result"] = True
        ret["comment"] = f"Path {if_missing} exists"
        return ret
    uid = gid = -1
    if user:
        uid = ctx.salt["file.user_to_uid"](user)
        if uid == "":
            ret["comment"] = f"User {user} does not exist"
            return ret
    if group:
        gid = ctx.salt["file.group_to_gid"](group)
        if gid == "":
            ret["comment"] = f"Group {group} does not exist"
            return ret
    if source_hash_update and not source_hash:
        ret.setdefault("warnings", []).append(
            "The 'source_hash_update' argument is ignored when 'source_hash' is not also specified."
        )
    if isinstance(source, list):
        source = next(iter(source[0])) if isinstance(source[0], dict) else source[0]
    if not source:
        ret["comment"] = f'Invalid source "{source}"'
        return ret
    source = str(source)
    parsed = urlparse(source)
    scheme = parsed.scheme.lower()
    sourceIsLocal = scheme in ("", "file")
    sourcePath = parsed.path or parsed.netloc
    if sourceIsLocal:
        localSource = os.path.realpath(os.path.expanduser(sourcePath))
        if not os.path.isfile(localSource):
            ret["comment"] = f"Source file '{_redact(localSource)}' does not exist"
            return ret
    elif scheme not in ("salt", "http", "https"):
        ret["comment"] = f'Invalid source "{_redact(source)}"'
        return ret
    validFormats = ("tar", "zip")
    if not archive_format:
        archive_format = _guessArchiveType(sourcePath)
        if archive_format is None:
            ret["comment"] = (
                "Could not guess archive_format from the value of the "
                "'source' argument. Please set this archive_format to one "
                "of the following: tar, rar, zip"
            )
            return ret
    archive_format = str(archive_format).lower()
    if archive_format == "rar":
        ret["comment"] = (
            "archive.unrar function not available, rar/unrar might not be installed on minion"
        )
        return ret
    if archive_format not in validFormats:
        ret["comment"] = (
            f"Invalid archive_format '{archive_format}'. Either set it to a supported "
            "value (tar, rar, zip) or remove this argument and the archive format will "
            "be guessed based on file extension."
        )
        return ret
    if options is not None and not isinstance(options, str):
        options = str(options)
    if password and archive_format != "zip":
        ret["comment"] = "The 'password' argument is only supported for zip archives"
        return ret
    if archive_format == "zip" and (options or use_cmd_unzip):
        ret["comment"] = (
            "salttwist extracts zip archives itself: 'options' and 'use_cmd_unzip' "
            "are not supported for zip archives"
        )
        return ret
    stripComponents = _stripComponents(options) if archive_format == "tar" else None
    tarCommand = _otherTarOptions(options) if options and archive_format == "tar" else []
    if tarCommand and shutil.which("tar") is None:
        ret["comment"] = "tar command not available, it might not be installed on minion"
        return ret
    if trim_output is True:
        trim_output = 100
    elif trim_output and not isinstance(trim_output, int):
        try:
            trim_output = int(trim_output)
        except (TypeError, ValueError):
            ret["comment"] = "Invalid value for trim_output, must be True/False or an integer"
            return ret

    sourceSum: dict[str, str] = {}
    if source_hash:
        try:
            sourceSum = _sourceSum(ctx, source, source_hash, source_hash_name)
        except CommandExecutionError as e:
            ret["comment"] = str(e)
            return ret

    if sourceIsLocal:
        cached = localSource
    else:
        if not source_hash and not skip_verify and scheme in ("http", "https"):
            ret["comment"] = (
                f"Unable to verify upstream hash of source file {_redact(source)}, please "
                "set source_hash or set skip_verify to True"
            )
            return ret
        if ctx.test:
            ret["result"] = None
            ret["comment"] = (
                f"Archive {_redact(source)} would be cached (if necessary) and checked to "
                "discover if extraction is needed"
            )
            return ret
        wanted = (
            f"{sourceSum['hash_type']}={sourceSum['hsum']}"
            if sourceSum and not skip_verify
            else None
        )
        try:
            got = ctx.salt["cp.cache_file"](source, ctx.saltenv, source_hash=wanted)
        except (CommandExecutionError, SaltInvocationError) as e:
            ret["comment"] = f"Failed to cache {_redact(source)}: {e}"
            return ret
        if not got:
            ret["comment"] = f"Unable to cache {_redact(source)}: not found"
            return ret
        cached = str(got)
        if sourceSum and not skip_verify:
            actual = _fileHash(cached, sourceSum["hash_type"])
            if actual != sourceSum["hsum"]:
                ret["comment"] = (
                    f"Specified {sourceSum['hash_type']} checksum for {_redact(source)} "
                    f"({sourceSum['hsum']}) does not match actual checksum ({actual})"
                )
                return ret

    hashRecord = os.path.join(
        str(ctx.opts.get("cachedir", "/var/cache/salttwist")),
        "archive_hash",
        hashlib.sha256(cached.encode()).hexdigest(),
    )

    if archive_format == "zip" and not password:
        try:
            encrypted = ctx.salt["archive.is_encrypted"](cached)
        except CommandExecutionError:
            encrypted = False
        if encrypted:
            ret["comment"] = (
                f"Archive {_redact(source)} is password-protected, but no password was "
                "specified. Please set the 'password' argument."
            )
            return ret

    try:
        members = _listMembers(cached, archive_format)
    except CommandExecutionError as e:
        ret["comment"] = str(e)
        return ret
    contents = _summarize(members, stripComponents)
    problems = _unsafeMembers(members)
    if problems:
        ret["comment"] = str(_refusal(_redact(source), problems))
        return ret

    if enforce_toplevel and (
        len(contents["top_level_dirs"]) > 1 or len(contents["top_level_files"]) > 0
    ):
        ret["comment"] = (
            "Archive does not have a single top-level directory. "
            "To allow this archive to be extracted, set "
            "'enforce_toplevel' to False. To avoid a "
            f"'{archive_format}-bomb' it may also be advisable to set a "
            "top-level directory by adding it to the 'name' "
            f"value (for example, setting 'name' to {os.path.join(dest, 'some_dir')} "
            f"instead of {dest})."
        )
        return ret
    if clean and clean_parent:
        ret["comment"] = "Only one of 'clean' and 'clean_parent' can be set to True"
        return ret

    if skip_files_list_verify and sourceSum:
        try:
            with open(hashRecord) as f:
                recorded = f.read().strip()
        except OSError:
            recorded = None
        if recorded == f"{sourceSum['hash_type']}:{sourceSum['hsum']}":
            ret["result"] = None if ctx.test else True
            ret["comment"] = (
                f"Archive {_redact(source)} existing source sum is the same as the "
                "expected one and skip_files_list_verify argument was set "
                "to True. Extraction is not needed"
            )
            return ret

    extractionNeeded = bool(overwrite)
    contentsMissing = False
    incorrect: list[str] = []
    checks = (
        (contents["dirs"], stat.S_ISDIR),
        (contents["files"], lambda m: not stat.S_ISLNK(m) and not stat.S_ISDIR(m)),
        (contents["links"], stat.S_ISLNK),
    )
    for paths, isRight in checks:
        for path in paths:
            full = os.path.join(dest, path).rstrip(os.sep)
            try:
                mode = os.lstat(full).st_mode
            except FileNotFoundError:
                extractionNeeded = contentsMissing = True
                continue
            except NotADirectoryError:
                continue
            if not isRight(mode):
                incorrect.append(path)
    if incorrect:
        listed = "\n\n" + "\n".join(f"- {p}" for p in incorrect)
        ret["comment"] = (
            f"The below paths (relative to {dest}) exist, but are the "
            "incorrect type (file instead of directory, symlink "
            "instead of file, etc.)."
        )
        if ctx.test and clean:
            ret["result"] = None
            ret["comment"] += (
                " Since the 'clean' option is enabled, the destination paths would be "
                f"cleared and the archive would be extracted.{listed}"
            )
            return ret
        if ctx.test and clean_parent:
            ret["result"] = None
            ret["comment"] += (
                " Since the 'clean_parent' option is enabled, the destination parent "
                "directory would be removed first and then re-created and the archive "
                "would be extracted"
            )
            return ret
        if not clean:
            if not force:
                ret["comment"] += (
                    " To proceed with extraction, set 'force' to True. Note that this "
                    f"will remove these paths before extracting.{listed}"
                )
                return ret
            if not ctx.test:
                for path in incorrect:
                    full = os.path.join(dest, path).rstrip(os.sep)
                    try:
                        _removePath(full)
                    except OSError as e:
                        ret["comment"] = (
                            "One or more paths existed by were the incorrect type (i.e. "
                            "file instead of directory or vice-versa), but could not be "
                            f"removed. The following errors were observed:\n\n- {e}"
                        )
                        return ret
                    ret["changes"].setdefault("removed", []).append(full)
            extractionNeeded = True

    sourceHashTrigger = False
    if not extractionNeeded and source_hash_update and sourceSum:
        try:
            with open(hashRecord) as f:
                recorded = f.read().strip()
        except OSError:
            recorded = None
        if recorded != f"{sourceSum['hash_type']}:{sourceSum['hsum']}":
            extractionNeeded = sourceHashTrigger = True

    def explain() -> None:
        if sourceHashTrigger:
            ret["comment"] += ", due to source_hash update"
        elif contentsMissing:
            ret["comment"] += ", due to absence of one or more files/dirs"

    files: list[str] = []
    createdDestdir = False
    if extractionNeeded:
        if sourceIsLocal and sourceSum and not skip_verify:
            if _fileHash(cached, sourceSum["hash_type"]) != sourceSum["hsum"]:
                ret["comment"] = (
                    f"{_redact(source)} does not match the desired source_hash {sourceSum['hsum']}"
                )
                return ret
        if ctx.test:
            ret["result"] = None
            ret["comment"] = f"Archive {_redact(source)} would be extracted to {dest}"
            if clean:
                ret["comment"] += ", after cleaning destination path(s)"
            explain()
            return ret
        if clean_parent:
            try:
                _removePath(name)
            except OSError as e:
                ret["comment"] = (
                    f"Unable to remove the directory {dest}. The following errors were "
                    f"observed:\n\n- {e}"
                )
                return ret
            ret["changes"]["removed"] = f"Directory {dest} was removed prior to the extraction"
        if clean:
            for path in contents["top_level_dirs"] + contents["top_level_files"]:
                full = os.path.join(dest, path).rstrip(os.sep)
                if not os.path.lexists(full):
                    continue
                try:
                    _removePath(full)
                except OSError as e:
                    ret["comment"] = (
                        "One or more paths could not be cleaned. The following errors "
                        f"were observed:\n\n- {e}"
                    )
                    return ret
                ret["changes"].setdefault("removed", []).append(full)
        if not os.path.isdir(name):
            os.makedirs(name)
            if uid != -1 or gid != -1:
                os.chown(name, uid, gid)
            createdDestdir = True
        try:
            if archive_format == "zip":
                files = unzip(
                    cached,
                    dest,
                    trim_output=trim_output,
                    password=password,
                    extract_perms=extract_perms,
                )
            elif tarCommand:
                files = _runTar(cached, dest, tarCommand, stripComponents, trim_output)
            else:
                files = _extractTar(cached, dest, stripComponents, trim_output)
        except CommandExecutionError as e:
            if createdDestdir:
                shutil.rmtree(name, ignore_errors=True)
            ret["comment"] = str(e)
            return ret
        if sourceSum:
            os.makedirs(os.path.dirname(hashRecord), exist_ok=True)
            with open(hashRecord, "w") as f:
                f.write(f"{sourceSum['hash_type']}:{sourceSum['hsum']}\n")

    enforceFailed: list[str] = []
    enforceMissing: list[str] = []
    if uid != -1 or gid != -1:
        if enforce_ownership_on:
            targets = [str(enforce_ownership_on)]
        else:
            targets = [
                os.path.join(dest, p).rstrip(os.sep)
                for p in contents["top_level_dirs"]
                + contents["top_level_files"]
                + contents["top_level_links"]
            ]
        for target in targets:
            if not os.path.lexists(target):
                if not ctx.test:
                    enforceMissing.append(target)
                continue
            try:
                if ctx.test:
                    if _needsChown(target, uid, gid):
                        ret["changes"]["updated ownership"] = True
                elif _chownTree(target, uid, gid):
                    ret["changes"]["updated ownership"] = True
            except OSError:
                enforceFailed.append(target)

    if extractionNeeded:
        if files:
            if createdDestdir:
                ret["changes"]["directories_created"] = [dest]
            ret["changes"]["extracted_files"] = files
            ret["comment"] = f"{_redact(source)} extracted to {dest}"
            explain()
            if trim_output:
                ret["comment"] += f". Output was trimmed to {trim_output} number of lines"
            ret["result"] = True
        else:
            ret["result"] = False
            ret["comment"] = f"No files were extracted from {_redact(source)}"
    else:
        ret["result"] = True
        ret["comment"] = "All files in archive are already present"
        if ctx.test and ret["changes"].get("updated ownership"):
            ret["result"] = None
            ret["comment"] += ". Ownership would be updated on one or more files/directories."
    if enforceMissing:
        if not if_missing:
            ret["result"] = False
        ret["comment"] += (
            "\n\nWhile trying to enforce user/group ownership, the following paths were "
            "missing:\n" + "".join(f"\n- {p}" for p in enforceMissing)
        )
    if enforceFailed:
        ret["result"] = False
        ret["comment"] += (
            "\n\nWhile trying to enforce user/group ownership, Salt was unable to change "
            "ownership on the following paths:\n" + "".join(f"\n- {p}" for p in enforceFailed)
        )
    if not sourceIsLocal and not keepSource:
        try:
            os.remove(cached)
        except OSError as e:
            ret.setdefault("warnings", []).append(f"Failed to remove cached {cached}: {e}")
    return ret


def _runTar(
    cached: str, dest: str, options: list[str], strip: int | None, trimOutput: Any
) -> list[str]:
    """
    Unpack with the C{tar} command and C{options} (after the members were
    checked).

    @return: tar's verbose output lines.
    """
    command = ["tar", "-x", "-v", *options, "-f", cached]
    if strip:
        command.insert(3, f"--strip-components={strip}")
    proc = subprocess.run(  # noqa: S603 (an argument list)
        command, cwd=dest, capture_output=True, text=True, check=False
    )
    if proc.returncode != 0:
        raise CommandExecutionError(f"tar failed (exit {proc.returncode}): {proc.stderr.strip()}")
    files = proc.stdout.splitlines() or ["no tar output so far"]
    if trimOutput and len(files) > int(trimOutput):
        files = [*files[: int(trimOutput)], f"List trimmed after {int(trimOutput)} files."]
    return files
