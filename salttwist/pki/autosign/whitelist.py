# -*- test-case-name: tests.test_autosign -*-
"""
The whitelist policies, C{autosign_file} and C{autoreject_file}: one id or
glob per line, with Puppet's C{*.DOMAIN} globs.
"""

from __future__ import annotations

import fnmatch
import os
import re
from dataclasses import dataclass
from typing import Any

from twisted.logger import Logger
from zope.interface import implementer

from salttwist.blocking import RunBlocking
from salttwist.interfaces import IAutosignPolicy
from salttwist.pki.autosign.base import (
    ACCEPT,
    PENDING,
    REJECT,
    AutosignDecision,
    _GuardedPolicy,
    _pending,
)
from salttwist.pki.autosign.executable import PolicyProcessRunner
from salttwist.pki.autosign.hygiene import UntrustedPathError, checkTrusted

# A label of a host name, as Puppet's domain globs accept it: ASCII letters,
# digits, "-" and "_" (Puppet's \w).
_LABEL = re.compile(r"[A-Za-z0-9_-]+\Z")


@dataclass(frozen=True)
class Whitelist:
    """
    A parsed whitelist (C{autosign_file} or C{autoreject_file}).

    @ivar patterns: the usable lines, in file order.
    @ivar problems: a message for each line that was ignored because it can
        never match (a malformed domain glob, whitespace inside).
    """

    patterns: tuple[str, ...]
    problems: tuple[str, ...] = ()

    def match(self, minionId: str) -> str | None:
        """
        @return: the first pattern matching C{minionId}, or L{None}.
        """
        for pattern in self.patterns:
            if matchesPattern(pattern, minionId):
                return pattern
        return None


def parseWhitelist(text: str) -> Whitelist:
    """
    Parse a whitelist: one id or glob per line; surrounding whitespace is
    stripped; blank lines and lines starting with C{#} are ignored.

    A line starting with C{*.} is a Puppet domain glob: the rest must be a
    domain name (labels of ASCII letters, digits, C{-} and C{_}), else the
    line is ignored as a problem. Lines with whitespace inside can never
    match an id and are ignored as problems too.

    @param text: the file's content.
    @return: the whitelist.
    """
    patterns: list[str] = []
    problems: list[str] = []
    for number, raw in enumerate(text.splitlines(), start=1):
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        if any(char.isspace() for char in line):
            problems.append(f"line {number}: {line!r} contains whitespace and never matches")
            continue
        if line.startswith("*.") and not _isDomain(line[2:]):
            problems.append(
                f"line {number}: {line!r} is not a domain glob (*. then a domain name)"
                " and never matches"
            )
            continue
        patterns.append(line)
    return Whitelist(tuple(patterns), tuple(problems))


def _isDomain(text: str) -> bool:
    """
    Is C{text} a domain name made of L{_LABEL} labels?
    """
    return bool(text) and all(_LABEL.match(label) for label in text.split("."))


def matchesPattern(pattern: str, minionId: str) -> bool:
    """
    Does one whitelist line match a minion id?

    A C{*.DOMAIN} line matches ids that are one or more host-name labels
    followed by C{.DOMAIN}, comparing the domain without regard to ASCII case
    (domain names are case-insensitive): C{*.example.com} matches
    C{a.example.com}, C{a.b.example.com} and C{A.Example.COM}, never
    C{example.com}, C{evilexample.com} or C{a.example.com.evil.net}. Any other
    line is a Salt glob, matched with L{fnmatch.fnmatchcase} without regard
    to ASCII case too: ids are unique regardless of ASCII case (C{WEB1} cannot
    join when C{web1} exists, see L{salttwist.pki.ids}), and are host names,
    which DNS compares that way; so C{web*} matches C{Web1}. Only ASCII
    letters are folded: the Kelvin sign never matches C{k}.
    """
    if pattern.startswith("*."):
        suffix = pattern[1:]  # ".example.com"
        if len(minionId) <= len(suffix):
            return False
        head, tail = minionId[: -len(suffix)], minionId[-len(suffix) :]
        # isascii first: str.lower maps some non-ASCII letters (the Kelvin
        # sign) onto ASCII ones.
        if not tail.isascii() or _asciiLower(tail) != _asciiLower(suffix):
            return False
        return _isDomain(head)
    return fnmatch.fnmatchcase(_asciiLower(minionId), _asciiLower(pattern))


_ASCII_LOWER = str.maketrans("ABCDEFGHIJKLMNOPQRSTUVWXYZ", "abcdefghijklmnopqrstuvwxyz")


def _asciiLower(text: str) -> str:
    """
    C{text} with ASCII letters lowercased and nothing else changed (unlike
    L{str.lower}, which maps the Kelvin sign onto C{k}).
    """
    return text.translate(_ASCII_LOWER)


def _inspectFile(path: str, allowExecutable: bool, what: str) -> tuple[str, str | None]:
    """
    Look at a policy file, in a thread.

    The file must pass L{checkTrusted}: a regular file that only root and the
    master's user can change, in directories only they can change.

    @param path: the file.
    @param allowExecutable: if true, a regular file executable by this
        process is reported as C{"executable"} and not read.
    @param what: the option naming the file, for messages.
    @return: C{("missing", None)}, C{("executable", None)} or C{("list",
        text)}.
    @raise UntrustedPathError: someone else could change the file.
    @raise OSError: the file exists but cannot be read.
    @raise UnicodeDecodeError: the file is not UTF-8.
    """
    try:
        checkTrusted(path, what)
    except FileNotFoundError:
        return ("missing", None)
    if allowExecutable and os.access(path, os.X_OK):
        return ("executable", None)
    with open(path, "rb") as f:
        data = f.read()
    return ("list", data.decode("utf-8"))


@implementer(IAutosignPolicy)
class _ListFilePolicy(_GuardedPolicy):
    """
    Shared code of the whitelist policies.

    @cvar name: the policy's name.
    @cvar verdict: the verdict when a line matches.
    """

    name = ""
    verdict = PENDING
    log = Logger()

    def __init__(self, path: str, runBlocking: RunBlocking) -> None:
        """
        @param path: the whitelist file; re-read at every decision.
        @param runBlocking: runs a blocking callable, returning a L{Deferred}.
        """
        self.path = path
        self._runBlocking = runBlocking

    async def _decide(self, minionId: str, pem: bytes, context: dict[str, Any]) -> AutosignDecision:
        try:
            kind, text = await self._runBlocking(
                _inspectFile, self.path, self._allowExecutable(), self.name
            )
        except UntrustedPathError as e:
            self.log.error("autosign: {problem}", problem=str(e))
            return _pending(self.name, str(e), True)
        except (OSError, UnicodeDecodeError) as e:
            return _pending(self.name, f"{self.name} {self.path} cannot be read: {e}", True)
        if kind == "missing":
            return _pending(self.name, f"{self.name} {self.path} does not exist")
        if kind == "executable":
            return await self._runExecutable(minionId, pem, context)
        return self._matchList(minionId, parseWhitelist(text or ""))

    def _allowExecutable(self) -> bool:
        return False

    async def _runExecutable(
        self, minionId: str, pem: bytes, context: dict[str, Any]
    ) -> AutosignDecision:
        raise NotImplementedError()  # pragma: no cover

    def _matchList(self, minionId: str, whitelist: Whitelist) -> AutosignDecision:
        for problem in whitelist.problems:
            self.log.warn(
                "{policy} {path}: {problem}", policy=self.name, path=self.path, problem=problem
            )
        pattern = whitelist.match(minionId)
        if pattern is None:
            return _pending(self.name, f"no line of {self.name} {self.path} matches {minionId!r}")
        return AutosignDecision(
            self.verdict, self.name, f"{minionId!r} matches {pattern!r} in {self.path}"
        )


class AutorejectFilePolicy(_ListFilePolicy):
    """
    C{autoreject_file}: a key whose id matches a line is rejected.

    The file is always read as a list, even if it is executable. A missing
    file rejects nothing; an unreadable one is a failure.
    """

    name = "autoreject_file"
    verdict = REJECT


class AutosignFilePolicy(_ListFilePolicy):
    """
    C{autosign_file}: a key whose id matches a line is accepted; or, if the
    file is a regular file executable by the master's user, it is run as a
    policy executable, as Puppet does.
    """

    name = "autosign_file"
    verdict = ACCEPT

    def __init__(self, path: str, runner: PolicyProcessRunner, runBlocking: RunBlocking) -> None:
        """
        @param path: the file; re-inspected at every decision.
        @param runner: runs the file when it is executable.
        @param runBlocking: runs a blocking callable, returning a L{Deferred}.
        """
        super().__init__(path, runBlocking)
        self._runner = runner

    def _allowExecutable(self) -> bool:
        return True

    async def _runExecutable(
        self, minionId: str, pem: bytes, context: dict[str, Any]
    ) -> AutosignDecision:
        return await self._runner.run(self.path, minionId, pem, context)
