# -*- test-case-name: tests.test_transient_sessions,tests.test_cli_call_master -*-
"""
C{salttwist-call}'s link to the master of its minion config (Salt's Caller
talking to its master): a transient session authenticated with the minion's
own key, over which the call sends its return (jid C{req}) and the events of
C{event.send}.

A transient session is authenticated like the minion daemon's (same key
checks, same pending and denied rules), but the master keeps it apart: it
does not replace the daemon's session, so the running minion stays
connected, and it cannot subscribe to publications.

Nothing here creates a key: the caller uses the key the minion daemon made
in C{pki_dir}, and the master must have accepted it.

With a list of masters (C{master: [...]}) the caller tries them in turn
until one opens the session (L{salttwist.masteraddress.masterOrder}: as
listed, or shuffled with C{random_master}; with C{master_type: failover}
and C{master_failback} the first stays first). That is Salt's failover
order, and for a plain list (Salt's multi-master) the first master that
answers. A master that cannot be reached, does not answer within
C{timeout} seconds at a step, refuses the minion's key (pending, rejected,
denied) or presents a key the minion has not pinned for it is left for
the next; if none opens the session the error names every master tried
and why. Each master's key is checked as the daemon checks it
(L{salttwist.pki.masterpins.PinnedMasterCredentials}: the pin of that
master alone, else the shared C{minion_master.pub}; a key matching no pin
is never trusted). With nothing pinned, only the first master of a plain
list (the one the daemon uses) has its key pinned on first contact; the
others are left (with C{master_type: failover} any master may be, as the
daemon's). Once the session is open the whole call uses that
master: a master lost during the call is not replaced.
"""

from __future__ import annotations

import os
import random
from collections.abc import Callable
from typing import Any

from twisted.internet.defer import CancelledError, Deferred, DeferredLock
from twisted.internet.defer import TimeoutError as AnswerTimeout
from twisted.internet.error import TimeoutError as ConnectTimeout
from twisted.logger import Logger

from salttwist import crypt, serial
from salttwist.masteraddress import MasterAddress, configuredMasters, masterOrder
from salttwist.pki.credentials import (
    AuthRefused,
    MasterIdentityError,
    MinionCredentials,
    authenticate,
)
from salttwist.pki.masterpins import PinnedMasterCredentials
from salttwist.transport.reqclient import ReqClientProtocol, RequestError, reqClientFactory

#: Seconds the caller waits for each step (connecting, each answer).
CALL_TIMEOUT = 10.0
#: The jid of a return the master did not publish (Salt's C{req}).
REQ_JID = "req"

ConnectTCP = Callable[[str, int, Any], Deferred]


class _PinnedOnly(PinnedMasterCredentials):
    """
    The credentials for a master of a plain list (not C{master_type:
    failover}) other than the first: its key is trusted only through a pin
    that exists already (its own, or the shared C{minion_master.pub} if it
    matches), never pinned on first contact. The daemon uses the first
    master alone, against C{minion_master.pub}: a key pinned there by the
    caller from another master would lock the daemon out of its own.
    """

    def openReply(self, reply: dict[str, Any], challenge: bytes, nonce: bytes) -> Any:
        """
        As L{PinnedMasterCredentials.openReply}, refusing a master when
        nothing is pinned. Blocking (RSA, the pinned-key files).

        @raise MasterIdentityError: nothing pinned, or a key not pinned.
        """
        if not (os.path.exists(self.ownPinPath) or os.path.exists(self.sharedPinPath)):
            raise MasterIdentityError(
                f"no master key is pinned yet and master {self.address} is not the first "
                f"of the list (with master_type str the minion uses the first alone and "
                f"pins its key): reach the first master once, or place this master's "
                f"public key in {self.ownPinPath}"
            )
        return super().openReply(reply, challenge, nonce)


#: What a step that took longer than the caller's timeout fails with.
_TIMEOUTS = (AnswerTimeout, ConnectTimeout, CancelledError)


class CallerError(Exception):
    """
    The caller could not talk to its master; the message says why, in words
    for the user.
    """


class MasterCaller:
    """
    The transient session of one C{salttwist-call} with its master, opened
    on first use and then reused.

    @ivar jid: the jid the master gave the return, once sent.
    """

    log = Logger()

    def __init__(
        self,
        config: dict[str, Any],
        minionId: str,
        reactor: Any,
        runBlocking: Callable[..., Deferred],
        connectTCP: ConnectTCP | None = None,
        timeout: float = CALL_TIMEOUT,
        shuffle: Callable[[list[MasterAddress]], None] = random.shuffle,
    ) -> None:
        """
        @param timeout: seconds each step may take (connecting, each
            answer) before the master is left for the next.
        @param shuffle: shuffles the list of masters in place
            (C{random_master}).
        """
        self.config = config
        self.id = minionId
        self.reactor = reactor
        self.runBlocking = runBlocking
        #: How to reach the master; by default, found at first use, the
        #: client endpoints of the C{transport} the config names (as the
        #: minion daemon connects).
        self.connectTCP = connectTCP
        self.timeout = timeout
        self._shuffle = shuffle
        #: The master the session is open with, once it is.
        self.master: MasterAddress | None = None
        self.jid: str | None = None
        self._lock = DeferredLock()
        self._req: ReqClientProtocol | None = None
        self._session: ReqClientProtocol | None = None
        self._error: str | None = None

    # -- the session -----------------------------------------------------------

    async def session(self) -> ReqClientProtocol:
        """
        @return: the authenticated transient session, opened on first use.
        @raise CallerError: if it cannot be opened (and every later call
            raises the same, without trying again).
        """
        async with self._lock:
            if self._session is None and self._error is None:
                try:
                    self._session = await self._open()
                except CallerError as e:
                    self._error = str(e)
                except Exception as e:
                    self.log.failure("opening the transient session failed")
                    self._error = f"unexpected error: {type(e).__name__}: {e}"
                if self._error is not None:
                    self.close()
        if self._session is None:
            raise CallerError(self._error)
        return self._session

    def _transportConnector(self) -> ConnectTCP:
        """
        @return: how to reach the master's req channel (the only one a
            transient session uses) with the client endpoints of the
            C{transport} the config names, as the minion daemon connects.
        @raise CallerError: the config names no known transport.
        """
        from salttwist.transport.interfaces import ROLE_REQ
        from salttwist.transport.registry import UnknownTransport, findTransport

        try:
            transport = findTransport(self.config["transport"])
        except UnknownTransport as e:
            raise CallerError(str(e)) from e
        reactor, config = self.reactor, self.config

        def connect(host: str, port: int, factory: Any) -> Deferred:
            return transport.clientEndpoint(reactor, config, host, port, ROLE_REQ).connect(factory)

        return connect

    async def _open(self) -> ReqClientProtocol:
        """
        Open the session with the first master of the list that takes it
        (see the module's docstring).

        @raise CallerError: no master took it; with several, the message
            names each one tried and why it was left.
        """
        credentials = await self.runBlocking(self._loadCredentials)
        try:
            masters = masterOrder(self.config, self._shuffle)
        except ValueError as e:
            raise CallerError(str(e)) from e
        if self.connectTCP is None:
            self.connectTCP = self._transportConnector()
        # As the daemon: a key pinned per master with a failover list (and
        # with any list here, where any of its masters may answer); the one
        # pinned key of minion_master.pub with a single master. With a
        # plain list the daemon uses the first master alone: only it may be
        # trusted on first contact, or the key pinned could be another's.
        failover = self.config.get("master_type") == "failover"
        perMaster = len(masters) > 1 or failover
        first = configuredMasters(self.config)[0]
        left: list[str] = []
        for address in masters:
            forMaster = credentials
            if perMaster:
                pinned = PinnedMasterCredentials if failover or address == first else _PinnedOnly
                forMaster = pinned(
                    credentials.id,
                    credentials.privateKey,
                    credentials.publicPem,
                    self.config["pki_dir"],
                    address,
                    credentials.masterFinger,
                )
            try:
                req = await self._openWith(address, forMaster)
            except CallerError as e:
                self.close()
                if len(masters) == 1:
                    raise
                self.log.info(
                    "salttwist-call: master {master} left ({why}); trying the next",
                    master=str(address),
                    why=e,
                )
                left.append(f"{address}: {e}")
                continue
            self.master = address
            return req
        raise CallerError(
            f"none of the {len(masters)} masters took the session; tried " + "; ".join(left)
        )

    async def _openWith(
        self, address: MasterAddress, credentials: MinionCredentials
    ) -> ReqClientProtocol:
        """
        Connect to the master at C{address} and authenticate there.

        @raise CallerError: it cannot be reached, did not answer within
            C{timeout} seconds, refused the key, or could not be trusted.
        """
        host, port = address.host, address.port
        assert self.connectTCP is not None
        try:
            req = await self._answer(
                self.connectTCP(host, port, reqClientFactory(self.config["max_frame_bytes"]))
            )
        except _TIMEOUTS as e:
            raise CallerError(
                f"cannot reach the master at {host}:{port} (no connection within "
                f"{self.timeout:g} s)"
            ) from e
        except Exception as e:
            raise CallerError(f"cannot reach the master at {host}:{port} ({e})") from e
        self._req = req
        try:
            accepted = await authenticate(
                req, credentials, self.runBlocking, self._answer, transient=True
            )
        except AuthRefused as e:
            raise CallerError(str(e)) from e
        except MasterIdentityError as e:
            raise CallerError(str(e)) from e
        except crypt.CryptError as e:
            raise CallerError(f"the master's answer did not verify: {e}") from e
        except _TIMEOUTS as e:
            raise CallerError(
                f"the master at {address} did not answer within {self.timeout:g} s"
            ) from e
        except Exception as e:
            raise CallerError(f"authentication with the master failed ({e})") from e
        req.startSession(accepted.sessionKey)
        return req

    def _loadCredentials(self) -> MinionCredentials:
        """
        Read the minion's key pair from C{pki_dir}. Blocking (a file, RSA).

        @raise CallerError: if there is no usable key.
        """
        pkiDir = self.config["pki_dir"]
        path = os.path.join(pkiDir, "minion.pem")
        try:
            with open(path, "rb") as f:
                privateKey = crypt.loadPrivateKey(f.read())
        except FileNotFoundError:
            raise CallerError(
                f"this minion has no key ({path} does not exist); start salttwist-minion "
                "once so that it makes one and the master can accept it"
            ) from None
        except OSError as e:
            raise CallerError(
                f"cannot read the minion's key {path}: {e.strerror or e} "
                "(run salttwist-call as the minion's user)"
            ) from e
        except ValueError as e:
            raise CallerError(f"the minion's key {path} is not usable: {e}") from e
        publicPem = crypt.publicKeyToPem(privateKey.public_key())
        return MinionCredentials(
            self.id, privateKey, publicPem, pkiDir, self.config.get("master_finger") or ""
        )

    def _answer(self, d: Deferred) -> Deferred:
        return d.addTimeout(self.timeout, self.reactor)

    def close(self) -> None:
        """
        Close the session (or the connection being authenticated).
        """
        req, self._req, self._session = self._req, None, None
        if req is not None and req.transport is not None:
            req.transport.loseConnection()

    # -- what goes over it -----------------------------------------------------

    async def request(self, payload: dict[str, Any]) -> dict[str, Any]:
        """
        Send one request on the session (opening it first if need be).

        @raise CallerError: if the session cannot be opened or the request
            gets no answer.
        @raise RequestError: if the master refused the request.
        """
        req = await self.session()
        try:
            return await self._answer(req.request(payload))
        except (RequestError, serial.SerialError):
            raise
        except Exception as e:
            raise CallerError(f"the master did not answer ({e})") from e

    def fireMaster(self, tag: str, data: Any) -> Deferred[dict[str, Any]]:
        """
        Send an event to the master's bus (C{LoaderContext.fireMaster}).
        """
        return Deferred.fromCoroutine(
            self.request({"cmd": "_minion_event", "id": self.id, "tag": tag, "data": data})
        )

    async def sendReturn(self, fun: str, arg: list[Any], result: dict[str, Any]) -> str:
        """
        Send the return of C{fun} with jid C{req}: the master records a job
        for it in its job cache, under a jid it makes.

        @param result: C{{"return", "retcode", "success"}} as the executor
            shaped it.
        @return: the jid the master gave the job.
        @raise CallerError: if the return could not be delivered.
        """
        value = result["return"]
        try:
            serial.dumps(value)
        except serial.SerialError as e:
            value = f"The minion function returned a value that cannot be sent: {e}"
        load = {
            "cmd": "_return",
            "id": self.id,
            "jid": REQ_JID,
            "fun": fun,
            "fun_args": arg,
            "return": value,
            "retcode": result["retcode"],
            "success": result["success"],
            "user": _user(),
        }
        try:
            reply = await self.request(load)
        except RequestError as e:
            raise CallerError(f"the master refused the return: {e}") from e
        except serial.SerialError as e:
            raise CallerError(f"the return cannot be sent: {e}") from e
        jid = reply.get("jid")
        self.jid = jid if isinstance(jid, str) else None
        return self.jid or ""


def _user() -> str:
    """
    The name of the user running the command, for the job's C{user}.
    """
    try:
        import pwd

        return pwd.getpwuid(os.geteuid()).pw_name
    except (ImportError, KeyError):
        return "unknown"
