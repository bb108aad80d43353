# -*- test-case-name: tests.test_cli_cp -*-
"""
C{salttwist-cp}: Salt's C{salt-cp}. Copy files from the master's host to
the targeted minions, through jobs published by the local master.

    salttwist-cp '*' /etc/motd /etc/motd
    salttwist-cp -L web1,web2 -C /srv/app/ /opt/app/
    salttwist-cp -G 'os:Debian' -C big.iso other.iso /tmp/

Two modes, as Salt's:

    - the default (Salt's old mode): each SOURCE (files only) is read
      whole and sent in one C{cp.recv} job; the return is each minion's
      C{{path: True}}. A source too large for one publication is refused
      with a word about C{-C};
    - C{-C/--chunked}: files and directories (recursively, empty ones
      made), each file sent in chunks of L{CHUNK_SIZE} bytes (less when the
      master's C{max_frame_bytes} is under 2.8 MiB), gzip-compressed
      unless C{-n/--no-compression}, one C{cp.recv_chunked} job per chunk;
      each chunk goes to the minions that took every earlier one, so a
      minion that failed is not sent the rest. The destination is a
      directory when it ends in C{/}, when several files are sent or when
      an empty directory is; a source directory C{dir} lands in
      C{DEST/dir/...}, C{dir/} (a trailing slash) straight in C{DEST}.

The output is Salt's: C{{minion: {destination path: True or the error}}};
a minion that did not answer shows C{Minion did not return. [No
response]} for the files it missed. DEST must be an absolute path.

Exit codes: 0 when every targeted minion took every file; 1 when one did
not; 2 when the master is unreachable, refused the job, no minion matched
the target, or the arguments are wrong (a missing source, a relative
DEST).

Reading and compressing the source files runs in threads (never on the
reactor of this command, which keeps the master's connections alive); at
most one chunk is held in memory at a time.
"""

from __future__ import annotations

import argparse
import base64
import gzip
import os
import stat
import sys
from collections.abc import Iterator
from typing import Any

from salttwist._startup import exitNow, holdGarbageCollection
from salttwist.cli import addCommonArguments
from salttwist.config import ConfigError, loadMasterConfig

#: Bytes of a file read for one chunk: well under any frame limit once
#: base64-encoded (4/3), and large enough that a 100 MB file takes a
#: hundred jobs, not a thousand (Salt's C{salt_cp_chunk_size} is 96 KiB).
CHUNK_SIZE = 1 << 20

#: The most the default mode sends in one job; more asks for C{-C}.
ONE_JOB_MAX = 16 << 20


def frameLimits(maxFrameBytes: int) -> tuple[int, int]:
    """
    The chunk size and the most one C{cp.recv} job may carry for a master
    whose frames are at most C{maxFrameBytes} (C{max_frame_bytes}): half a
    frame at most (the rest is for the job's other fields, its encryption
    and signature), a chunk's base64 taking 4/3 of it.

    @return: C{(chunk size, one-job maximum)}, in bytes.
    """
    room = maxFrameBytes // 2
    return min(CHUNK_SIZE, max(4096, room * 3 // 4 - 1024)), min(ONE_JOB_MAX, room)


NO_RESPONSE = "Minion did not return. [No response]"
NO_MATCH = "No minions matched the target. No command was sent, no jid was assigned.\n"
EX_OK, EX_GENERIC, EX_UNAVAILABLE = 0, 1, 2

#: Salt's target flags of C{salt-cp} (its C{TargetOptionsMixIn}: C{-C} is
#: C{--chunked} here, so a compound target is C{--compound} alone).
TARGET_FLAGS = (
    (("-E", "--pcre"), "pcre", "Target minions by a regular expression on their id."),
    (("-L", "--list"), "list", "Target a comma-separated list of minion ids."),
    (("-G", "--grain"), "grain", "Target by grain, e.g. 'os:Debian'."),
    (("-P", "--grain-pcre"), "grain_pcre", "Target by grain with a regular expression."),
    (("-N", "--nodegroup"), "nodegroup", "Target a nodegroup from the master config."),
    (("--compound",), "compound", "Target with a compound expression."),
)


class UsageError(Exception):
    """
    The command line cannot be carried out (exit code 2, the message on
    standard error).
    """


def buildParser() -> argparse.ArgumentParser:
    """
    The command line, with Salt's flags.
    """
    parser = argparse.ArgumentParser(
        prog="salttwist-cp",
        usage="salttwist-cp [options] '<target>' SOURCE [SOURCE2 SOURCE3 ...] DEST",
        description="Copy files from this host to the targeted minions.",
    )
    addCommonArguments(parser, "master")
    parser.add_argument(
        "-t",
        "--timeout",
        type=float,
        default=None,
        help="Seconds to wait for each job's returns (default: the master's 'timeout', 5).",
    )
    parser.add_argument(
        "--out",
        choices=("nested", "json", "yaml", "txt", "raw", "quiet"),
        default="nested",
        help="Outputter (default: nested).",
    )
    parser.add_argument("--out-indent", type=int, default=None, help="Indent for json/yaml output.")
    files = parser.add_argument_group("File Options")
    files.add_argument(
        "-C",
        "--chunked",
        action="store_true",
        help="Use chunked file transfer: big files, directories (recursively) and "
        "directory creation.",
    )
    files.add_argument(
        "-n",
        "--no-compression",
        dest="gzip",
        action="store_false",
        help="Disable gzip compression (chunked mode).",
    )
    group = parser.add_mutually_exclusive_group()
    for flags, kind, text in TARGET_FLAGS:
        group.add_argument(*flags, dest="tgt_type", action="store_const", const=kind, help=text)
    parser.add_argument("target")
    parser.add_argument("paths", nargs="+", metavar="SOURCE... DEST")
    return parser


def parseOptions(argv: list[str] | None) -> argparse.Namespace:
    """
    Parse the command line; C{options.sources} and C{options.dest} split
    off C{paths}, C{options.tgt} is the target (a list for C{-L}).

    @raise SystemExit: (argparse) for a command line that does not parse
        or has no DEST.
    """
    parser = buildParser()
    options = parser.parse_args(argv)
    if len(options.paths) < 2:
        parser.error("give at least one SOURCE and a DEST")
    options.sources = options.paths[:-1]
    options.dest = options.paths[-1]
    options.tgt_type = options.tgt_type or "glob"
    if options.tgt_type == "list":
        text = options.target
        options.tgt = [t for t in (text.split(",") if "," in text else text.split()) if t]
    else:
        options.tgt = options.target
    return options


def listSources(sources: list[str]) -> tuple[dict[str, int], list[str]]:
    """
    (Blocking.) The files to send and their permission bits, and the empty
    directories, walking the directories of C{sources}.

    @raise UsageError: if a source does not exist.
    """
    files: dict[str, int] = {}
    empty: list[str] = []
    for source in sources:
        if os.path.isfile(source):
            files[source] = stat.S_IMODE(os.stat(source).st_mode)
        elif os.path.isdir(source):
            for directory, dirnames, filenames in os.walk(source):
                if not dirnames and not filenames:
                    empty.append(directory)
                for name in filenames:
                    path = os.path.join(directory, name)
                    if os.path.isfile(path):
                        files[path] = stat.S_IMODE(os.stat(path).st_mode)
        else:
            raise UsageError(f"{source} does not exist or is not a file or directory")
    return files, empty


def destIsDir(dest: str, files: dict[str, int], empty: list[str]) -> bool:
    """
    Salt's rule: the destination is a directory when it ends in C{/}, or
    several files or an empty directory are sent.
    """
    return bool(empty) or len(files) > 1 or dest.endswith("/")


def remotePath(path: str, sources: list[str], dest: str, isDir: bool) -> str:
    """
    Where C{path} (a source or a file under a source directory) lands on
    the minions, as Salt's C{salt-cp} places it.
    """
    if path in sources:
        return os.path.join(dest, os.path.basename(path)) if isDir else dest
    for source in sources:
        relative = os.path.relpath(path, source)
        if relative == ".." or relative.startswith(".." + os.sep):
            continue
        return os.path.join(dest, os.path.basename(source), relative)
    raise UsageError(f"cannot place {path} under {dest}")


def readChunks(path: str, size: int = CHUNK_SIZE, compress: bool = True) -> Iterator[str]:
    """
    (Blocking.) The chunks of the file C{path} as C{cp.recv_chunked} takes
    them: base64 of each C{size} bytes, gzip-compressed first with
    C{compress}. An empty file is one empty chunk.
    """
    with open(path, "rb") as f:
        data = f.read(size)
        while True:
            if compress:
                data = gzip.compress(data, compresslevel=6)
            yield base64.b64encode(data).decode("ascii")
            data = f.read(size)
            if not data:
                return


def _nextChunk(chunks: Iterator[str]) -> str | None:
    """
    (Blocking.) The next chunk, or L{None} at the end.
    """
    return next(chunks, None)


async def copyChunked(
    client: Any, runBlocking: Any, options: argparse.Namespace, timeout: float
) -> tuple[dict[str, dict[str, Any]], bool]:
    """
    Send the sources chunk by chunk (C{cp.recv_chunked} jobs).

    @param client: publishes a job and gathers its returns, as
        L{salttwist.client.local.LocalClient.run}.
    @param runBlocking: runs reading and compressing off the reactor.
    @return: C{({minion: {remote path: result}}, whether a minion matched)}.
    @raise UsageError: for a relative DEST or a missing source.
    """
    dest = options.dest
    if not os.path.isabs(dest):
        raise UsageError(f"DEST must be an absolute path on the minions: {dest!r}")
    files, empty = await runBlocking(listSources, options.sources)
    isDir = destIsDir(dest, files, empty)
    ret: dict[str, dict[str, Any]] = {}
    # The first job goes to the target; the later ones to the minions it
    # matched that have taken every chunk so far.
    tgt: Any = options.tgt
    tgtType = options.tgt_type
    matched: list[str] | None = None

    async def send(arg: list[Any], remote: str, alive: list[str] | None) -> list[str]:
        nonlocal matched
        if alive is not None and not alive:
            return []
        result = await client.run(
            tgt if alive is None else alive,
            "cp.recv_chunked",
            arg,
            tgtType if alive is None else "list",
            timeout,
        )
        if matched is None:
            matched = list(result.minions)
        ok = []
        for minionId in result.minions if alive is None else alive:
            data = result.returns.get(minionId)
            value = NO_RESPONSE if data is None else data.get("return")
            entry = ret.setdefault(minionId, {})
            if value is True:
                entry.setdefault(remote, True)
                ok.append(minionId)
            else:
                entry[remote] = value
        return ok

    for path, mode in sorted(files.items()):
        remote = remotePath(path, options.sources, dest, isDir)
        chunks = readChunks(path, getattr(options, "chunk_size", CHUNK_SIZE), options.gzip)
        alive: list[str] | None = None if matched is None else list(matched)
        append = False
        try:
            while True:
                chunk = await runBlocking(_nextChunk, chunks)
                if chunk is None:
                    break
                alive = await send([remote, chunk, append, options.gzip, mode], remote, alive)
                if matched == []:
                    return ret, False
                append = True
                if not alive:
                    break
        finally:
            chunks.close()
    for directory in sorted(empty):
        remote = remotePath(directory, options.sources, dest, isDir)
        await send([remote, None], remote, None if matched is None else list(matched))
        if matched == []:
            return ret, False
    if matched is None:
        matched = []
    return ret, bool(matched)


async def copyOneJob(
    client: Any, runBlocking: Any, options: argparse.Namespace, timeout: float
) -> tuple[dict[str, Any], bool]:
    """
    Send the source files in one C{cp.recv} job (Salt's default mode).

    @return: C{({minion: its return}, whether a minion matched)}.
    @raise UsageError: for a directory source, sources too large for one
        job, or a relative DEST.
    """
    dest = options.dest
    if not os.path.isabs(dest):
        raise UsageError(f"DEST must be an absolute path on the minions: {dest!r}")

    limit = getattr(options, "one_job_max", ONE_JOB_MAX)

    def load() -> dict[str, Any]:
        loaded: dict[str, Any] = {}
        total = 0
        for source in options.sources:
            if os.path.isdir(source):
                raise UsageError(
                    f"{source} is a directory, only files are supported in non-chunked "
                    'mode. Use "--chunked" command line argument.'
                )
            if not os.path.isfile(source):
                raise UsageError(f"{source} does not exist or is not a file")
            total += os.path.getsize(source)
            if total > limit:
                raise UsageError(
                    f"the sources are larger than {limit} bytes, too large for one "
                    'job: use "--chunked" (-C)'
                )
            with open(source, "rb") as f:
                data = f.read()
            try:
                loaded[source] = data.decode("utf-8")
            except UnicodeDecodeError:
                loaded[source] = data
        return loaded

    files = await runBlocking(load)
    result = await client.run(options.tgt, "cp.recv", [files, dest], options.tgt_type, timeout)
    ret: dict[str, Any] = {}
    for minionId in result.minions:
        data = result.returns.get(minionId)
        ret[minionId] = NO_RESPONSE if data is None else data.get("return")
    return ret, bool(result.minions)


def succeeded(ret: dict[str, Any]) -> bool:
    """
    @return: whether every minion took every file (every value C{True}).
    """
    for value in ret.values():
        if not isinstance(value, dict) or not value:
            return False
        if any(v is not True for v in value.values()):
            return False
    return True


async def runCopy(reactor: Any, options: argparse.Namespace, config: dict[str, Any]) -> int:
    """
    Copy as the options say and print the returns.

    @return: the exit code.
    """
    from twisted.internet.threads import deferToThread

    from salttwist.cli.output import render
    from salttwist.client.base import MasterUnavailable
    from salttwist.client.local import LocalClient
    from salttwist.transport.errors import RequestError

    timeout = options.timeout if options.timeout is not None else float(config["timeout"])
    options.chunk_size, options.one_job_max = frameLimits(config["max_frame_bytes"])
    client = LocalClient(config, reactor, keepConnected=True)
    copy = copyChunked if options.chunked else copyOneJob
    try:
        ret, matched = await copy(client, deferToThread, options, timeout)
    except UsageError as e:
        sys.stderr.write(f"Error: {e}\n")
        return EX_UNAVAILABLE
    except MasterUnavailable as e:
        sys.stderr.write(f"Error: {e}\n")
        return EX_UNAVAILABLE
    except RequestError as e:
        sys.stderr.write(f"Error: the master refused the job: {e}\n")
        return EX_UNAVAILABLE
    finally:
        client.close()
    if not matched:
        sys.stderr.write(NO_MATCH)
        return EX_UNAVAILABLE
    if options.out != "quiet":
        color = options.out == "nested" and sys.stdout.isatty()
        sys.stdout.write(render(options.out, ret, color, options.out_indent))
        sys.stdout.flush()
    return EX_OK if succeeded(ret) else EX_GENERIC


def main(argv: list[str] | None = None) -> int:
    """
    Entry point of C{salttwist-cp}. From the console script (C{argv} is
    L{None}) the process ends as soon as the output is written; otherwise
    the exit code is returned.
    """
    if argv is not None:
        return _main(argv)
    holdGarbageCollection()
    exitNow(_main(None))
    return EX_GENERIC  # not reached


def _main(argv: list[str] | None) -> int:
    from salttwist.cli.reactor import runWithReactor
    from salttwist.transport.registry import findTransport

    options = parseOptions(argv)
    try:
        config = loadMasterConfig(options.config_dir)
        tls = findTransport(config["transport"]).needsTLS
    except ConfigError as e:
        sys.stderr.write(f"Error: {e}\n")
        return EX_UNAVAILABLE
    exitCode, failed = runWithReactor(lambda reactor: runCopy(reactor, options, config), tls=tls)
    return failed if failed is not None else exitCode


if __name__ == "__main__":
    sys.exit(main())
