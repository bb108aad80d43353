# -*- test-case-name: tests.test_modules_archive -*-
"""
Salt's C{archive} module: list, make and unpack tar and zip archives with
Python's C{tarfile} and C{zipfile}. Every function runs in a thread.

Unpacking never writes outside the destination: before anything is
written, every member is checked (L{_unsafeMembers}) and an archive with a
member that is an absolute path, climbs out with C{..}, is a symbolic link
whose target resolves outside (following the archive's own links), is a
hard link to something outside, or is a device file is refused whole with
L{CommandExecutionError} naming each such member and why. While
unpacking, each path is checked again against the disk (its parent's real
path must be inside the destination's), so a symbolic link already in the
destination cannot redirect a write either. tar archives are unpacked with
C{tarfile}'s C{data} filter as well (PEP 706: no set-uid bits, no group
or world write bits, no owners from the archive).
"""

from __future__ import annotations

import os
import posixpath
import shlex
import shutil
import stat
import subprocess
import tarfile
import zipfile
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlparse

from salttwist.modules import (
    CommandExecutionError,
    LoaderContext,
    SaltInvocationError,
    needsContext,
)

#: Endings that name a tar archive (Salt's C{guess_archive_type}).
TAR_ENDINGS = ("tar", "tar.gz", "tgz", "tar.bz2", "tbz2", "tbz", "tar.xz", "txz", "tar.lzma", "tlz")

#: How many symbolic links one path may go through before it is refused.
_MAX_LINKS = 40


def _guessArchiveType(name: str) -> str | None:
    """
    @return: C{"tar"}, C{"zip"} or C{"rar"} from C{name}'s ending (Salt's
        C{salt.utils.files.guess_archive_type}), or L{None}.
    """
    lowered = name.lower()
    for ending in TAR_ENDINGS:
        if lowered.endswith("." + ending):
            return "tar"
    for ending in ("zip", "rar"):
        if lowered.endswith("." + ending):
            return ending
    return None


@dataclass(frozen=True)
class Member:
    """
    One entry of an archive, as the safety check sees it.

    @ivar name: its path in the archive.
    @ivar kind: C{"file"}, C{"dir"}, C{"symlink"}, C{"hardlink"} or
        C{"special"} (a device or FIFO).
    @ivar link: the target of a link (relative to the link's directory for
        a symbolic link, to the archive's top for a hard link).
    """

    name: str
    kind: str
    link: str = ""


class _Escape(Exception):
    """
    A path resolves outside the destination (the message says how).
    """


def _resolve(path: str, links: dict[str, str], depth: int = 0) -> list[str]:
    """
    Resolve C{path} (relative to the destination) through the archive's
    symbolic links C{links}, lexically.

    @return: its components once resolved.
    @raise _Escape: it climbs above the destination, goes through an
        absolute link, or through too many links.
    """
    if depth > _MAX_LINKS:
        raise _Escape("too many levels of symbolic links")
    if path.startswith("/"):
        raise _Escape("absolute path")
    parts: list[str] = []
    for part in path.split("/"):
        if part in ("", "."):
            continue
        if part == "..":
            if not parts:
                raise _Escape("leads outside the destination")
            parts.pop()
            continue
        parts.append(part)
        here = "/".join(parts)
        if here in links:
            target = links[here]
            if target.startswith("/"):
                raise _Escape(f"goes through the link {here} to the absolute path {target}")
            base = "/".join(parts[:-1])
            parts = _resolve(posixpath.join(base, target) if base else target, links, depth + 1)
    return parts


def _clean(name: str) -> str:
    """
    @return: a member's name without a leading C{./} or trailing C{/}.
    """
    while name.startswith("./"):
        name = name[2:]
    return name.rstrip("/")


def _unsafeMembers(members: Iterable[Member]) -> list[tuple[str, str]]:
    """
    Check an archive's members before unpacking it (see the module's
    docstring).

    @return: C{(member name, reason)} for each member that would write
        outside the destination; empty when the archive is safe.
    """
    members = list(members)
    links: dict[str, str] = {}
    problems: list[tuple[str, str]] = []
    for member in members:
        name = _clean(member.name)
        if member.name.startswith("/") or os.path.isabs(member.name):
            problems.append((member.name, "absolute path"))
            continue
        if member.kind == "special":
            problems.append((member.name, "device or special file"))
            continue
        try:
            _resolve(name, links)
        except _Escape as e:
            problems.append((member.name, f"path {e}"))
            continue
        if member.kind == "symlink":
            if member.link.startswith("/"):
                problems.append((member.name, f"symbolic link to the absolute path {member.link}"))
                continue
            base = posixpath.dirname(name)
            try:
                _resolve(posixpath.join(base, member.link) if base else member.link, links)
            except _Escape as e:
                problems.append((member.name, f"symbolic link to {member.link}, which {e}"))
                continue
            links[name] = member.link
        elif member.kind == "hardlink":
            if member.link.startswith("/"):
                problems.append((member.name, f"hard link to the absolute path {member.link}"))
                continue
            try:
                _resolve(_clean(member.link), links)
            except _Escape as e:
                problems.append((member.name, f"hard link to {member.link}, which {e}"))
    return problems


def _refusal(archive: str, problems: list[tuple[str, str]]) -> CommandExecutionError:
    """
    @return: the error refusing C{archive} for L{_unsafeMembers}' C{problems}.
    """
    listed = "\n".join(f"- {name}: {reason}" for name, reason in problems)
    return CommandExecutionError(
        f"Refusing to extract {archive}: these members would write outside the destination "
        f"or are special files:\n{listed}"
    )


def _tarMembers(infos: list[tarfile.TarInfo]) -> list[Member]:
    members = []
    for info in infos:
        if info.issym():
            kind = "symlink"
        elif info.islnk():
            kind = "hardlink"
        elif info.isdir():
            kind = "dir"
        elif info.isfile():
            kind = "file"
        else:
            kind = "special"
        members.append(Member(info.name, kind, info.linkname))
    return members


def _zipKind(info: zipfile.ZipInfo) -> str:
    mode = info.external_attr >> 16
    if stat.S_ISLNK(mode):
        return "symlink"
    if info.is_dir() or stat.S_ISDIR(mode):
        return "dir"
    if stat.S_IFMT(mode) and not stat.S_ISREG(mode):
        return "special"
    return "file"


def _zipMembers(archive: zipfile.ZipFile) -> list[Member]:
    members = []
    for info in archive.infolist():
        kind = _zipKind(info)
        link = archive.read(info).decode("utf-8", "replace") if kind == "symlink" else ""
        members.append(Member(info.filename, kind, link))
    return members


def _inside(dest: str, path: str, followLast: bool = True) -> bool:
    """
    @return: whether C{path}'s parent (and, with C{followLast}, C{path}
        itself), with every link on disk resolved, is C{dest} or inside it.
    """
    realDest = os.path.realpath(dest)

    def within(p: str) -> bool:
        return p == realDest or p.startswith(realDest + os.sep)

    if not within(os.path.realpath(os.path.dirname(path))):
        return False
    return not followLast or not os.path.lexists(path) or within(os.path.realpath(path))


def _strip(name: str, components: int | None) -> str:
    """
    @return: C{name} without its first C{components} directories (C{""}
        when nothing is left), as C{tar --strip-components}.
    """
    if not components:
        return name
    parts = _clean(name).split("/")
    return "/".join(parts[components:])


def _trimFiles(files: list[str], trim_output: Any) -> list[str]:
    """
    Salt's C{_trim_files}: at most C{trim_output} names (C{True}: 100),
    with a last line saying how many were left out.
    """
    if trim_output is True:
        trim_output = 100
    if trim_output and not isinstance(trim_output, bool):
        limit = int(trim_output)
        if len(files) > limit:
            return [*files[:limit], f"List trimmed after {limit} files."]
    return files


def _localArchive(context: LoaderContext | None, name: str, saltenv: str, source_hash: Any) -> str:
    """
    @return: a local path of the archive C{name} (a path, C{file://},
        or C{salt://}/C{http(s)://} cached through C{cp.cache_file}).
    @raise CommandExecutionError: it cannot be had.
    """
    parsed = urlparse(str(name))
    if parsed.scheme in ("", "file"):
        path = parsed.path if parsed.scheme == "file" else str(name)
        if not os.path.isfile(path):
            raise CommandExecutionError(f"Archive {path} does not exist")
        return path
    if context is None:
        raise CommandExecutionError(f"Failed to cache {name}")
    from salttwist.modules.extmods import SaltFunctions

    cached = SaltFunctions(context)["cp.cache_file"](name, saltenv, source_hash=source_hash)
    if not cached:
        raise CommandExecutionError(f"Failed to cache {name}")
    return str(cached)


def _listMembers(path: str, archive_format: str) -> list[Member]:
    """
    @return: the members of the tar or zip archive at C{path}.
    @raise CommandExecutionError: it cannot be read as that format.
    """
    if archive_format == "tar":
        try:
            with tarfile.open(path, "r") as tar:
                return _tarMembers(tar.getmembers())
        except (tarfile.TarError, EOFError, OSError) as e:
            raise CommandExecutionError(
                f"Unable to list contents of {path}: {e}. If it is compressed with something "
                "other than gzip, bzip2 or xz, it cannot be read."
            ) from e
    if archive_format == "zip":
        try:
            with zipfile.ZipFile(path) as archive:
                return _zipMembers(archive)
        except (zipfile.BadZipFile, OSError) as e:
            raise CommandExecutionError(f"{path} is not a ZIP file") from e
    raise CommandExecutionError(f"Unsupported archive format '{archive_format}'")


def _summarize(members: list[Member], strip_components: int | None = None) -> dict[str, list[str]]:
    """
    @return: Salt's verbose C{archive.list}: C{dirs} (each ending with
        C{/}), C{files}, C{links}, and their C{top_level_} forms.
    """
    dirs: set[str] = set()
    files: list[str] = []
    links: list[str] = []
    for member in members:
        name = _strip(_clean(member.name), strip_components)
        if not name:
            continue
        if member.kind == "dir":
            dirs.add(name + "/")
        elif member.kind == "symlink":
            links.append(name)
        else:
            files.append(name)
        parts = name.split("/")
        for i in range(1, len(parts)):
            dirs.add("/".join(parts[:i]) + "/")
    ret = {"dirs": sorted(dirs), "files": sorted(files), "links": sorted(links)}
    ret["top_level_dirs"] = [d for d in ret["dirs"] if d.count("/") == 1]
    ret["top_level_files"] = [f for f in ret["files"] if "/" not in f]
    ret["top_level_links"] = [x for x in ret["links"] if "/" not in x]
    return ret


@needsContext
def list_(
    context: LoaderContext,
    name: str,
    archive_format: str | None = None,
    options: Any = None,
    strip_components: Any = None,
    clean: bool = False,
    verbose: bool = False,
    saltenv: str = "base",
    source_hash: Any = None,
    use_etag: bool = False,
) -> Any:
    """
    List the members of a tar or zip archive (a local path, C{file://},
    C{salt://} or C{http(s)://}, cached first): a sorted list, directories
    ending with C{/}; with C{verbose=True}, Salt's C{{"dirs", "files",
    "links", "top_level_dirs", "top_level_files", "top_level_links"}}.
    C{archive_format} is guessed from the name when not given;
    C{strip_components} drops leading directories; C{clean=True} removes
    the cached copy afterwards.

    CLI Example:

        salttwist '*' archive.list /path/to/myfile.tar.gz
        salttwist '*' archive.list salt://foo.tar.gz verbose=True
        salttwist '*' archive.list /path/to/myfile.tar.gz strip_components=1
    """
    if strip_components is not None:
        try:
            strip_components = int(strip_components)
        except (TypeError, ValueError):
            strip_components = -1
        if strip_components <= 0:
            raise CommandExecutionError("'strip_components' must be a positive integer")
    cached = _localArchive(context, name, saltenv, source_hash)
    parsed = urlparse(str(name))
    if not archive_format:
        archive_format = _guessArchiveType(parsed.path or parsed.netloc)
        if archive_format is None:
            raise CommandExecutionError(
                "Unable to guess archive format, please pass an 'archive_format' argument."
            )
    archive_format = str(archive_format).lower()
    members = _listMembers(cached, archive_format)
    if clean and cached != str(name) and parsed.scheme not in ("", "file"):
        try:
            os.remove(cached)
        except FileNotFoundError:
            pass
    summary = _summarize(members, strip_components)
    if verbose:
        return summary
    return sorted(summary["dirs"] + summary["files"] + summary["links"])


def _extractTar(
    path: str, dest: str, strip_components: int | None = None, trim_output: Any = False
) -> list[str]:
    """
    Unpack the tar archive C{path} into C{dest} (see the module's
    docstring for what is refused).

    @return: the names unpacked (trimmed as Salt's C{trim_output}).
    @raise CommandExecutionError: the archive is unsafe or unreadable.
    """
    try:
        tar = tarfile.open(path, "r")
    except (tarfile.TarError, OSError) as e:
        raise CommandExecutionError(f"Unable to read tar archive {path}: {e}") from e
    with tar:
        infos = tar.getmembers()
        stripped = []
        for info in infos:
            name = _strip(info.name, strip_components)
            if not name:
                continue
            if strip_components and info.islnk():
                info.linkname = _strip(info.linkname, strip_components)
            info.name = name
            stripped.append(info)
        problems = _unsafeMembers(_tarMembers(stripped))
        if problems:
            raise _refusal(path, problems)
        os.makedirs(dest, exist_ok=True)
        names = []
        for info in stripped:
            target = os.path.join(dest, _clean(info.name))
            if not _inside(dest, target, followLast=not info.issym()):
                raise _refusal(path, [(info.name, "path leads outside the destination")])
            try:
                tar.extract(info, dest, filter="data")
            except tarfile.FilterError as e:
                raise _refusal(path, [(info.name, str(e))]) from e
            except (tarfile.TarError, OSError) as e:
                raise CommandExecutionError(
                    f"Failed to extract {info.name} from {path}: {e}"
                ) from e
            # As tarfile.getnames(), which Salt returns: no slash after a
            # directory.
            names.append(info.name)
    return _trimFiles(names, trim_output)


def _zipPassword(password: Any) -> bytes | None:
    if password is None or password == "":
        return None
    return str(password).encode()


def unzip(
    zip_file: str,
    dest: str,
    excludes: Any = None,
    options: Any = None,
    template: Any = None,
    runas: str | None = None,
    trim_output: Any = False,
    password: Any = None,
    extract_perms: bool = True,
) -> list[str]:
    """
    Unpack the zip archive C{zip_file} into C{dest} and return the names
    unpacked (Salt's C{archive.unzip}, Python's C{zipfile}). C{excludes}:
    names (a list or comma-separated) to leave out; C{password} for an
    encrypted archive; C{extract_perms}: apply the modes stored in the
    archive; C{trim_output}: return at most that many names. A member that
    would land outside C{dest} refuses the whole archive (see the module's
    docstring).

    CLI Example:

        salttwist '*' archive.unzip /tmp/zipfile.zip /home/strongbad/ excludes=file_1,file_2
        salttwist '*' archive.unzip /tmp/zipfile.zip /home/strongbad/ password='BadPassword'
    """
    if runas:
        raise SaltInvocationError("runas is not supported by archive.unzip; use user/group")
    if isinstance(excludes, str):
        excludes = [x.strip() for x in excludes.split(",")]
    elif isinstance(excludes, int | float):
        excludes = [str(excludes)]
    excluded = set(excludes or [])
    secret = _zipPassword(password)
    try:
        archive = zipfile.ZipFile(zip_file)
    except (zipfile.BadZipFile, OSError) as e:
        raise CommandExecutionError(f"Exception encountered unpacking zipfile: {e}") from e
    with archive:
        infos = [i for i in archive.infolist() if i.filename not in excluded]
        members = [
            Member(
                i.filename,
                _zipKind(i),
                archive.read(i, pwd=secret).decode("utf-8", "replace")
                if _zipKind(i) == "symlink"
                else "",
            )
            for i in infos
        ]
        problems = _unsafeMembers(members)
        if problems:
            raise _refusal(zip_file, problems)
        os.makedirs(dest, exist_ok=True)
        names = []
        for info, member in zip(infos, members, strict=True):
            target = os.path.join(dest, _clean(info.filename))
            if not _inside(dest, target, followLast=member.kind != "symlink"):
                raise _refusal(zip_file, [(info.filename, "path leads outside the destination")])
            try:
                _writeZipMember(archive, info, member, target, secret, extract_perms)
            except RuntimeError as e:
                raise CommandExecutionError(f"Exception encountered unpacking zipfile: {e}") from e
            except (zipfile.BadZipFile, OSError) as e:
                raise CommandExecutionError(
                    f"Exception encountered unpacking zipfile: {info.filename}: {e}"
                ) from e
            names.append(info.filename)
    return _trimFiles(names, trim_output)


def _writeZipMember(
    archive: zipfile.ZipFile,
    info: zipfile.ZipInfo,
    member: Member,
    target: str,
    secret: bytes | None,
    extractPerms: bool,
) -> None:
    """
    Write one checked zip member at C{target}.
    """
    if member.kind == "dir":
        os.makedirs(target, exist_ok=True)
    else:
        os.makedirs(os.path.dirname(target), exist_ok=True)
        if os.path.lexists(target) and (os.path.islink(target) or not os.path.isdir(target)):
            os.unlink(target)
        if member.kind == "symlink":
            os.symlink(member.link, target)
            return
        with archive.open(info, pwd=secret) as src, open(target, "wb") as out:
            shutil.copyfileobj(src, out)
    if extractPerms:
        mode = (info.external_attr >> 16) & 0o777
        if mode == 0:
            umask = os.umask(0)
            os.umask(umask)
            mode = (0o777 if member.kind == "dir" else 0o666) & ~umask
        os.chmod(target, mode)


def zip_(
    zip_file: str,
    sources: Any,
    template: Any = None,
    cwd: str | None = None,
    runas: str | None = None,
    zip64: bool = False,
) -> list[str]:
    """
    Make the zip archive C{zip_file} from C{sources} (a list or
    comma-separated paths; directories recursively) and return the names
    archived. Relative sources need C{cwd}; names in the archive are
    relative to C{cwd} (or to C{/}).

    CLI Example:

        salttwist '*' archive.zip /tmp/zipfile.zip /tmp/sourcefile1,/tmp/sourcefile2
        salttwist '*' archive.zip /tmp/baz.zip baz.txt cwd=/foo/bar
    """
    if runas:
        raise SaltInvocationError("runas is not supported by archive.zip")
    if isinstance(sources, str):
        sources = [s.strip() for s in sources.split(",")]
    sources = [str(s) for s in sources or []]
    if cwd is not None and not os.path.isabs(str(cwd)):
        raise SaltInvocationError("cwd must be absolute")
    if not cwd and any(not os.path.isabs(s) for s in sources):
        raise SaltInvocationError("Relative paths require the 'cwd' parameter")
    root = cwd or "/"
    archived: list[str] = []
    try:
        with zipfile.ZipFile(zip_file, "w", zipfile.ZIP_DEFLATED, allowZip64=bool(zip64)) as out:
            for source in sources:
                full = os.path.join(root, source)
                if not os.path.exists(full):
                    continue
                if os.path.isdir(full):
                    for dirName, _subdirs, files in os.walk(full):
                        arcDir = os.path.relpath(dirName, root)
                        archived.append(arcDir + "/")
                        out.write(dirName, arcDir)
                        for filename in sorted(files):
                            arcName = os.path.join(arcDir, filename)
                            archived.append(arcName)
                            out.write(os.path.join(dirName, filename), arcName)
                else:
                    arcName = os.path.relpath(full, root)
                    archived.append(arcName)
                    out.write(full, arcName)
    except zipfile.LargeZipFile as e:
        raise CommandExecutionError(
            "Resulting zip file too large, would require ZIP64 support"
            "which has not been enabled. Rerun command with zip64=True"
        ) from e
    except OSError as e:
        raise CommandExecutionError(f"Exception encountered creating zipfile: {e}") from e
    return archived


def tar(
    options: str,
    tarfile: str,
    sources: Any = None,
    dest: str | None = None,
    cwd: str | None = None,
    template: Any = None,
    runas: str | None = None,
) -> list[str]:
    """
    Run the C{tar} command: C{options} are tar's (C{czf}, C{xf}, ...), for
    the archive C{tarfile}, on C{sources} (a list or comma-separated),
    extracting into C{dest} (C{-C}) when given; return tar's output lines,
    as Salt does.

    CLI Example:

        salttwist '*' archive.tar cjvf /tmp/tarfile.tar.bz2 /tmp/file_1,/tmp/file_2
        salttwist '*' archive.tar xf foo.tar dest=/target/directory cwd=/tmp
    """
    if not options:
        raise SaltInvocationError("Tar options can not be empty")
    if runas:
        raise SaltInvocationError("runas is not supported by archive.tar")
    if shutil.which("tar") is None:
        raise CommandExecutionError("tar command not available")
    if isinstance(sources, str):
        sources = [s.strip() for s in sources.split(",")]
    command = ["tar", *shlex.split(str(options)), str(tarfile), *[str(s) for s in sources or []]]
    if dest:
        command += ["-C", str(dest)]
    proc = subprocess.run(  # noqa: S603 (an argument list)
        command, cwd=cwd, capture_output=True, text=True, check=False
    )
    if proc.returncode != 0:
        raise CommandExecutionError(
            f"Command '{shlex.join(command)}' failed: {proc.stderr.strip()}"
        )
    return proc.stdout.splitlines()


@needsContext
def is_encrypted(
    context: LoaderContext,
    name: str,
    clean: bool = False,
    saltenv: str = "base",
    source_hash: Any = None,
    use_etag: bool = False,
) -> bool:
    """
    Return whether the zip archive C{name} (a path or any source
    C{cp.cache_file} takes) is password-protected.

    CLI Example:

        salttwist '*' archive.is_encrypted /path/to/myfile.zip
        salttwist '*' archive.is_encrypted salt://foo.zip clean=True
    """
    cached = _localArchive(context, name, saltenv, source_hash)
    try:
        with zipfile.ZipFile(cached) as archive:
            encrypted = any(info.flag_bits & 0x1 for info in archive.infolist())
    except (zipfile.BadZipFile, OSError) as e:
        raise CommandExecutionError(f"{name} is not a ZIP file") from e
    if clean and urlparse(str(name)).scheme not in ("", "file"):
        try:
            os.remove(cached)
        except FileNotFoundError:
            pass
    return encrypted
