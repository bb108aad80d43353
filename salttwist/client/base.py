# -*- test-case-name: tests.test_local_client,tests.test_direct_client,tests.test_acl -*-
"""
What the two local clients share, without Twisted: the errors, the result
of a job, where the master's req channel is, and how a client logs in.

L{salttwist.client.local.LocalClient} runs on the reactor;
L{salttwist.client.direct.DirectClient} is the blocking one the
C{salttwist} command uses when it can, so that a command does not pay for
importing Twisted.
"""

from __future__ import annotations

import os
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from salttwist import wire
from salttwist.files import PORTS_FILE, readRuntimeFile
from salttwist.rootkey import ROOT_KEY_FILE, readRootKey, readUserKey, userKeyFile
from salttwist.symmetric import deriveKey, hmacSha256
from salttwist.transport.errors import RequestError

__all__ = [
    "CONNECT_TIMEOUT",
    "JOB_PREFIXES",
    "JobResult",
    "MasterUnavailable",
    "clientLogin",
    "currentUser",
    "gatherReturns",
    "jobReturnTag",
    "masterReqAddress",
    "publishRequest",
    "readClientKey",
]

#: Seconds allowed for each step of reaching the master: connecting to
#: its event bus and req channel, its greeting, the answer to the login.
CONNECT_TIMEOUT = 2.0

#: The tags a client subscribes to: those of jobs, whose returns are
#: C{salt/job/<jid>/ret/<id>}. A prefix, not a glob such as
#: C{salt/job/*/ret/*} that would spare it the C{new} events: the master
#: matches every event it fires against every subscriber's filter, and a
#: prefix is the cheapest to match. The bus takes one subscription per
#: connection, so a kept connection cannot follow its jobs' jids.
JOB_PREFIXES = ["salt/job/"]


class MasterUnavailable(Exception):
    """
    The master is not running, or this user may not talk to it.
    """


@dataclass
class JobResult:
    """
    What came back for one job.

    @ivar returns: the return events by minion id, in arrival order.
    @ivar missing: the targeted minions that did not return in time.
    @ivar notConnected: the targeted minions the master knew were not
        connected when it published, and that did not return.
    """

    jid: str
    minions: list[str]
    returns: dict[str, dict[str, Any]] = field(default_factory=dict)
    missing: list[str] = field(default_factory=list)
    notConnected: list[str] = field(default_factory=list)

    def settle(self, connected: set[str]) -> None:
        """
        Sort the targeted minions that did not return into L{notConnected}
        (not in C{connected}) and L{missing} (the others).
        """
        self.notConnected = [
            m for m in self.minions if m not in connected and m not in self.returns
        ]
        self.missing = [
            m for m in self.minions if m not in self.returns and m not in self.notConnected
        ]


#: How many times in a row a client waiting for a job's returns keeps
#: waiting (another timeout each) when the master refuses its
#: C{saltutil.find_job} for a reason that may pass (L{wire.JOB_REFUSED}):
#: a short restart of the job cache's server or of the broker, not one that
#: lasts.
MAX_REFUSED_FIND_JOBS = 3


async def gatherReturns(
    result: JobResult,
    connected: set[str],
    returns: Mapping[str, dict[str, Any]],
    waitFor: Callable[[set[str], float], Awaitable[bool]],
    findJob: Callable[[list[str]], Awaitable[set[str]]],
    lost: Callable[[], bool],
    timeout: float,
) -> None:
    """
    Wait for a published job's returns as Salt's LocalClient does: wait
    C{timeout} seconds for the C{connected} targeted minions; then ask the
    silent ones with C{saltutil.find_job} and keep waiting for those still
    running it, another C{timeout} at a time. Minions the master knew were
    not connected are not waited for at all. Then fill in C{result}.

    Both clients run this: L{salttwist.client.local.LocalClient} with
    awaitables of its reactor, L{salttwist.client.direct.DirectClient} with
    coroutines that block and never suspend.

    @param returns: the returns gathered so far, by minion id, growing
        while the waits run.
    @param waitFor: C{(minions, seconds)}: waits until all of C{minions}
        returned (L{True}) or C{seconds} passed (L{False}).
    @param findJob: asks the silent minions whether they still run the
        job; gives those that do. If the master refuses that new job for a
        reason that may pass (L{wire.JOB_REFUSED}: its job cache's server or
        its broker is away), nothing is known of the minions: they are all
        waited for another C{timeout}, then asked again, up to
        L{MAX_REFUSED_FIND_JOBS} refusals in a row; the next one is raised.
    @param lost: whether the connection the returns come on was lost.
    """
    waiting = connected
    refused = 0
    while waiting - returns.keys():
        if await waitFor(waiting, timeout):
            break
        if lost():
            break
        try:
            stillRunning = await findJob(sorted(waiting - returns.keys()))
        except RequestError as e:
            refused += 1
            if not str(e).startswith(wire.JOB_REFUSED) or refused > MAX_REFUSED_FIND_JOBS:
                raise
            continue
        refused = 0
        if not stillRunning:
            break
        waiting = stillRunning
    result.returns = dict(returns)
    result.settle(connected)


def jobReturnTag(tag: str) -> tuple[str, str] | None:
    """
    @return: C{(jid, minion id)} if C{tag} is a job return's
        (C{salt/job/<jid>/ret/<id>}), else L{None}.
    """
    parts = tag.split("/")
    if len(parts) != 5 or parts[:2] != ["salt", "job"] or parts[3] != "ret":
        return None
    return parts[2], parts[4]


def masterReqAddress(config: dict[str, Any]) -> tuple[str, int]:
    """
    @return: the host and port of the req channel of the master running
        with C{config} on this machine: the port it wrote in its ports file
        (it may have let the system choose), else the configured one; its
        interface, or the loopback address when it listens on all of them.
    """
    ports = readRuntimeFile(os.path.join(config["sock_dir"], PORTS_FILE)) or {}
    port = ports.get("ret_port") or config["ret_port"]
    host = config["interface"]
    if host in ("0.0.0.0", "", "::"):
        host = "127.0.0.1" if host != "::" else "::1"
    return host, port


def publishRequest(tgt: Any, tgtType: str, fun: str, arg: list[Any], user: str) -> dict[str, Any]:
    """
    @return: the session request publishing C{fun(*arg)} to the minions
        C{tgt} of type C{tgtType} targets, as C{user}.
    """
    return {"cmd": "publish", "tgt": tgt, "tgt_type": tgtType, "fun": fun, "arg": arg, "user": user}


def clientLogin(clientKey: bytes, challenge: bytes, user: str) -> tuple[dict[str, Any], bytes]:
    """
    The C{_client_auth} request answering the master's C{challenge}: a MAC
    keyed with C{clientKey} over the challenge, a fresh nonce and C{user}.

    @return: the request, and the key of the session it opens.
    """
    nonce = os.urandom(32)
    mac = hmacSha256(clientKey, wire.clientAuthMessage(challenge, nonce, user))
    request = {"cmd": "_client_auth", "nonce": nonce, "mac": mac, "user": user}
    return request, deriveKey(clientKey, wire.clientSessionContext(challenge, nonce))


def readClientKey(cachedir: str, user: str, euid: int | None = None) -> bytes:
    """
    The key this process proves itself with: the root key when it runs as
    root or as the master's user (the owner of C{.root_key}), else the key
    the master wrote for C{user} because C{publisher_acl} names it,
    C{cachedir/.<user>_key}.

    @param user: the user this process runs as (L{currentUser}).
    @param euid: its effective uid; by default C{os.geteuid()}.
    @raise MasterUnavailable: the key cannot be read; the message says which
        key and why.
    """
    if euid is None:
        euid = os.geteuid()
    try:
        owner: int | None = os.stat(os.path.join(cachedir, ROOT_KEY_FILE)).st_uid
    except OSError:
        owner = None
    if euid == 0 or owner == euid:
        try:
            return readRootKey(cachedir)
        except (OSError, ValueError) as e:
            raise MasterUnavailable(
                f"cannot read the master's root key in {cachedir}: "
                f"run salttwist as the master's user ({e})"
            ) from e
    try:
        path = userKeyFile(cachedir, user)
    except ValueError as e:
        raise MasterUnavailable(f"user {user!r} may not publish: {e}") from e
    try:
        return readUserKey(cachedir, user)
    except (OSError, ValueError) as e:
        reason = e.strerror if isinstance(e, OSError) and e.strerror else str(e)
        raise MasterUnavailable(
            f"user {user} may not publish: no readable key {path} ({reason}). The master"
            " writes one at start for each user its publisher_acl names, and the user"
            f" needs to be able to search {cachedir} and the directories above it; see"
            " 'Letting other users publish: publisher_acl' in the README"
        ) from e


def currentUser() -> str:
    """
    The user this process runs as; run by root through sudo,
    C{sudo_<user>} as Salt names it (C{publisher_acl_blacklist} can tell
    those apart from root itself).
    """
    try:
        import pwd

        name = pwd.getpwuid(os.geteuid()).pw_name
    except (ImportError, KeyError):
        return "unknown"
    sudoUser = os.environ.get("SUDO_USER")
    if os.geteuid() == 0 and sudoUser and sudoUser != name:
        return f"sudo_{sudoUser}"
    return name
