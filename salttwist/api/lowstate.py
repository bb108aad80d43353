# -*- test-case-name: tests.test_api_lowstate -*-
"""
C{/}: C{GET} answers Salt's welcome, C{POST} runs a list of lowstate
chunks, each authorised with the token's permissions by the one ACL
engine (L{salttwist.eauth.engine}) before anything reaches the master::

    [{"client": "local", "tgt": "*", "fun": "test.ping"},
     {"client": "runner", "fun": "jobs.list_jobs"}]

answers C{{"return": [<the first's return>, <the second's>]}}.

The clients (Salt's C{netapi_enable_clients} must name each one used):

  - C{local}: publish and wait (C{tgt}, C{fun}, C{arg}, C{kwarg},
    C{tgt_type}, C{timeout}, C{full_return}) -> C{{minion: return}};
  - C{local_async}: publish -> C{{"jid", "minions"}};
  - C{local_batch}: as C{local}, C{batch} minions at a time -> one
    C{{minion: return}} per minion;
  - C{local_subset}: as C{local}, on at most C{subset} (default 3; Salt's
    legacy C{sub} too) minions picked at random among the targeted ones
    whose C{sys.list_functions} lists C{fun} -> C{{minion: return}};
  - C{runner}: a runner function in the master (C{fun}, C{arg}, C{kwarg},
    and any other key as a keyword argument) -> its return;
  - C{runner_async}: as C{runner}, not waiting for the return ->
    C{{"tag": "salt/run/<jid>", "jid"}};
  - C{wheel}: key management (C{key.list_all}, C{key.accept}, ...) ->
    Salt's C{{"tag", "data": {"fun", "jid", "user", "_stamp", "return",
    "success"}}};
  - C{wheel_async}: as C{wheel}, not waiting -> C{{"tag":
    "salt/wheel/<jid>", "jid"}}; the call's C{salt/wheel/<jid>/new} and
    C{salt/wheel/<jid>/ret} events go on the master's bus (C{/events}).

Salt's C{ssh} client is refused with a 400 naming it: salttwist has no
salt-ssh.

A job for minions is allowed when a rule without a target allows the
function; when only target-restricted rules do, the API asks the master
which minions the target reaches (with their cached grains), checks that
the rules cover each, and publishes to exactly those (a C{list} target),
so a minion accepted in between gets nothing it was not checked for.
"""

from __future__ import annotations

import datetime
import math
import random
import re
from collections.abc import Mapping
from typing import Any

from twisted.internet.defer import Deferred
from twisted.logger import Logger

from salttwist.api.errors import (
    BadRequest,
    Forbidden,
    TooManyRequests,
    Unauthorized,
    Unavailable,
)
from salttwist.api.formats import yamlArg
from salttwist.api.options import CLIENTS, MISSING_CLIENTS
from salttwist.api.resource import ApiCall, ApiResource
from salttwist.client.base import MasterUnavailable
from salttwist.eauth.authenticator import AuthenticationFailed, Session
from salttwist.eauth.engine import AclRefused, Permissions
from salttwist.jid import JidGenerator
from salttwist.serial import SerialError
from salttwist.transport.errors import RequestError

__all__ = [
    "CLIENTS",
    "Lowstate",
    "Run",
    "Token",
    "authorizeJob",
    "credentialsSession",
    "requireClient",
    "runChunk",
    "runLowstate",
]

#: Keys of a runner or wheel chunk that are not keyword arguments.
_RESERVED = frozenset(
    {
        "client",
        "fun",
        "arg",
        "kwarg",
        "token",
        "eauth",
        "username",
        "password",
        "full_return",
        "timeout",
    }
)
#: Salt's default size of a C{local_subset} job.
DEFAULT_SUBSET = 3
#: Picks a C{local_subset}'s minions.
_random = random.SystemRandom()
#: A string argument that is a keyword argument (Salt's C{parse_input}).
_KWARG = re.compile(r"^([^\d\W][\w.-]*)=(?!=)(.*)$")
_jids = JidGenerator()
_log = Logger()


def _checkFun(chunk: Mapping[str, Any]) -> Any:
    fun = chunk.get("fun")
    if isinstance(fun, str) and fun:
        return fun
    if (
        isinstance(fun, list)
        and fun
        and chunk.get("client", "").startswith("local")
        and all(isinstance(f, str) and f for f in fun)
    ):
        return fun
    raise BadRequest(f"the chunk's fun must be a function name, not {fun!r}")


def _argList(chunk: Mapping[str, Any], keywords: Mapping[str, Any] | None = None) -> list[Any]:
    """
    The chunk's C{arg} (a single value is a list of one, as Salt makes it)
    and C{kwarg} (and C{keywords}), in Salt's wire form. A string argument
    C{name=value} is a keyword argument, its value read as YAML, as Salt's
    minion and runner client read it (the CLI does the same).
    """
    arg = chunk.get("arg", [])
    if not isinstance(arg, list):
        arg = [arg]
    positional: list[Any] = []
    kwargs: dict[str, Any] = dict(keywords or {})
    for item in arg:
        match = _KWARG.match(item) if isinstance(item, str) else None
        if match:
            kwargs[match.group(1)] = yamlArg(match.group(2))
        else:
            positional.append(item)
    kwarg = chunk.get("kwarg")
    if kwarg is not None:
        if not isinstance(kwarg, Mapping):
            raise BadRequest(f"the chunk's kwarg must be a mapping, not {type(kwarg).__name__}")
        kwargs.update(kwarg)
    if kwargs:
        positional.append({**kwargs, "__kwarg__": True})
    return positional


def _keywords(chunk: Mapping[str, Any]) -> dict[str, Any]:
    """
    A runner or wheel chunk's keyword arguments: its C{kwarg} and every key
    that is not the chunk's own.
    """
    kwargs = {k: v for k, v in chunk.items() if k not in _RESERVED and not k.startswith("__")}
    kwarg = chunk.get("kwarg")
    if kwarg is not None:
        if not isinstance(kwarg, Mapping):
            raise BadRequest(f"the chunk's kwarg must be a mapping, not {type(kwarg).__name__}")
        kwargs.update(kwarg)
    return kwargs


def _timeout(chunk: Mapping[str, Any], config: Mapping[str, Any]) -> float:
    value = chunk.get("timeout", config.get("timeout", 5))
    if isinstance(value, str):
        try:
            value = float(value)
        except ValueError:
            pass
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not value > 0:
        raise BadRequest(f"the chunk's timeout must be a positive number, not {value!r}")
    return float(value)


def _target(chunk: Mapping[str, Any]) -> tuple[Any, str]:
    tgt = chunk.get("tgt")
    if tgt is None or tgt == "" or tgt == []:
        raise BadRequest("the chunk has no tgt: a local client needs a target")
    tgtType = chunk.get("tgt_type", chunk.get("expr_form", "glob"))
    if not isinstance(tgtType, str):
        raise BadRequest(f"the chunk's tgt_type must be a string, not {tgtType!r}")
    return tgt, tgtType


async def authorizeJob(
    call: ApiCall, session: Session, tgt: Any, tgtType: str, fun: Any
) -> tuple[Any, str, list[str] | None]:
    """
    May C{session} run C{fun} on C{tgt}?

    @return: the target to publish to (the minions checked, as a C{list}
        target, when only target-restricted rules allow it), its type, and
        the minions checked (L{None} when no check by minion was needed).
    @raise Forbidden: it may not.
    """
    try:
        decision = session.authorize(fun, (), "local")
        if not decision.restricted:
            return tgt, tgtType, None
        grainsById = await call.context.master.grains(tgt, tgtType)
        minions = sorted(grainsById)
        session.authorize(fun, minions, "local", grainsById)
    except AclRefused as e:
        raise Forbidden(str(e)) from None
    except ValueError as e:
        raise BadRequest(str(e)) from None
    return minions, "list", minions


async def _local(call: ApiCall, session: Session, chunk: Mapping[str, Any]) -> Any:
    fun = _checkFun(chunk)
    tgt, tgtType = _target(chunk)
    arg = _argList(chunk)
    tgt, tgtType, checked = await authorizeJob(call, session, tgt, tgtType, fun)
    master = call.context.master
    client = chunk["client"]
    if checked == []:
        return {} if client != "local_async" else {"jid": "", "minions": []}
    if client == "local_async":
        reply = await master.publish(tgt, tgtType, fun, arg, session.name)
        return {"jid": reply.get("jid", ""), "minions": list(reply.get("minions", []))}
    timeout = _timeout(chunk, call.context.config)
    if client == "local_batch":
        batch = chunk.get("batch", "10%")
        if isinstance(batch, int) and not isinstance(batch, bool):
            batch = str(batch)
        if not isinstance(batch, str) or not batch:
            raise BadRequest(f"the chunk's batch must be a number or a percentage, not {batch!r}")
        try:
            return await master.batch(tgt, tgtType, fun, arg, batch, timeout, session.name)
        except ValueError as e:
            raise BadRequest(str(e)) from None
    full = bool(chunk.get("full_return"))
    if client == "local_subset":
        tgt, tgtType = await _subset(call, session, chunk, tgt, tgtType, fun, timeout)
        if not tgt:
            return {}
    return await master.run(tgt, tgtType, fun, arg, timeout, full, session.name)


def _subsetSize(chunk: Mapping[str, Any]) -> int:
    size = chunk.get("subset", chunk.get("sub", DEFAULT_SUBSET))
    if isinstance(size, str) and size.isdigit():
        size = int(size)
    if isinstance(size, bool) or not isinstance(size, int) or size < 1:
        raise BadRequest(f"the chunk's subset must be a positive integer, not {size!r}")
    return size


async def _subset(
    call: ApiCall,
    session: Session,
    chunk: Mapping[str, Any],
    tgt: Any,
    tgtType: str,
    fun: Any,
    timeout: float,
) -> tuple[list[str], str]:
    """
    The minions of a C{local_subset} chunk (Salt's C{cmd_subset}): the
    targeted minions are asked C{sys.list_functions} (as the session's
    user; the API's look-up, not checked against the ACL, as Salt does not
    check it), and at most C{subset} of those that list C{fun} are picked
    at random.

    @return: a C{list} target.
    """
    if not isinstance(fun, str):
        raise BadRequest("local_subset runs one function: the chunk's fun must be a string")
    size = _subsetSize(chunk)
    functionsById = await call.context.master.run(
        tgt, tgtType, "sys.list_functions", [], timeout, False, session.name
    )
    having = [
        minion
        for minion, functions in functionsById.items()
        if isinstance(functions, (list, tuple, dict)) and fun in functions
    ]
    _random.shuffle(having)
    return sorted(having[:size]), "list"


async def _runner(call: ApiCall, session: Session, chunk: Mapping[str, Any]) -> Any:
    fun = _checkFun(chunk)
    try:
        session.authorize(fun, (), "runner")
    except AclRefused as e:
        raise Forbidden(str(e)) from None
    except ValueError as e:
        raise BadRequest(str(e)) from None
    arg = _argList(chunk, _keywords(chunk))
    if chunk["client"] == "runner_async":
        return await call.context.master.runnerAsync(fun, arg, session.name)
    reply = await call.context.master.runner(fun, arg, session.name)
    return reply.get("return")


async def _wheel(call: ApiCall, session: Session, chunk: Mapping[str, Any]) -> Any:
    fun = _checkFun(chunk)
    try:
        session.authorize(fun, (), "wheel")
    except AclRefused as e:
        raise Forbidden(str(e)) from None
    except ValueError as e:
        raise BadRequest(str(e)) from None
    kwargs = _keywords(chunk)
    arg = chunk.get("arg")
    if arg:
        # Salt's wheel functions take their first arguments by position.
        if not isinstance(arg, list):
            arg = [arg]
        kwargs["__positional__"] = list(arg)
    jid = _jids.next()
    if chunk["client"] == "wheel_async":
        Deferred.fromCoroutine(_wheelAsync(call, session, fun, kwargs, jid))
        return {"tag": f"salt/wheel/{jid}", "jid": jid}
    try:
        ret = await call.context.master.wheel(fun, kwargs)
    except ValueError as e:
        raise BadRequest(str(e)) from None
    return {"tag": f"salt/wheel/{jid}", "data": _wheelData(fun, jid, session, ret, True)}


def _wheelData(fun: str, jid: str, session: Session, ret: Any, success: bool) -> dict[str, Any]:
    stamp = datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%dT%H:%M:%S.%f")
    return {
        "fun": f"wheel.{fun}",
        "jid": jid,
        "user": session.name,
        "_stamp": stamp,
        "return": ret,
        "success": success,
    }


async def _wheelAsync(
    call: ApiCall, session: Session, fun: str, kwargs: dict[str, Any], jid: str
) -> None:
    """
    Run a C{wheel_async} call: C{salt/wheel/<jid>/new} on the bus, the
    call, then C{salt/wheel/<jid>/ret} with its return (or its error, with
    C{success} false), as Salt's master fires them.
    """
    master = call.context.master
    tag = f"salt/wheel/{jid}"
    stamp = datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%dT%H:%M:%S.%f")
    new = {"fun": f"wheel.{fun}", "jid": jid, "user": session.name, "_stamp": stamp}
    try:
        await master.fire(f"{tag}/new", new)
        try:
            ret, success = await master.wheel(fun, kwargs), True
        except Exception as e:
            ret, success = f"{type(e).__name__}: {e}", False
        await master.fire(f"{tag}/ret", _wheelData(fun, jid, session, ret, success))
    except Exception:
        _log.failure("api: wheel_async {fun} ({jid}) failed", fun=fun, jid=jid)


_RUN = {
    "local": _local,
    "local_async": _local,
    "local_batch": _local,
    "local_subset": _local,
    "runner": _runner,
    "runner_async": _runner,
    "wheel": _wheel,
    "wheel_async": _wheel,
}


def requireClient(call: ApiCall, name: str) -> None:
    """
    Refuse a call through the client C{name} unless Salt's
    C{netapi_enable_clients} names it (C{GET /jobs} goes through C{runner},
    C{GET /minions} through C{local}, as in Salt).

    @raise BadRequest: it does not, with Salt's words.
    """
    if name not in call.context.enabledClients:
        raise BadRequest(
            f"Client disabled: '{name}'. Add to 'netapi_enable_clients' master config"
            " option to enable."
        )


async def credentialsSession(call: ApiCall, chunk: Mapping[str, Any]) -> Session:
    """
    The session of a chunk that carries C{username}, C{password} and
    C{eauth} instead of a token (Salt's C{/run}): checked by the backend
    (and counted by the login limit) for this chunk alone; no token is made.

    @raise ApiError: 400 without all three, 429 past the login limit, 401
        when they are refused.
    """
    creds = {name: chunk.get(name) for name in ("username", "password", "eauth")}
    missing = [name for name, value in creds.items() if not isinstance(value, str)]
    if missing:
        raise BadRequest(f'Require "username", "password", and "eauth" params: {missing[0]}')
    limiter = call.context.loginLimiter
    assert limiter is not None
    wait = limiter.attempt(call.source)
    if wait > 0:
        raise TooManyRequests(
            f"Too many logins from {call.source}: try again in {math.ceil(wait)} s",
            {"Retry-After": str(math.ceil(wait))},
        )
    authenticator = await call.context.getAuthenticator()
    try:
        groups, authList = await authenticator.authenticate(
            creds["eauth"], creds["username"], creds["password"]
        )
    except AuthenticationFailed as e:
        _log.warn(
            "api: credentials of {user} from {source} refused: {reason}",
            user=creds["username"],
            source=call.source,
            reason=e.reason,
        )
        raise Unauthorized("Could not authenticate using provided credentials") from None
    limiter.succeeded(call.source)
    now = call.context.clock.seconds()
    perms = Permissions.fromItems(authList, authenticator.externalAuth.nodegroups)
    return Session("", creds["username"], creds["eauth"], now, now, tuple(groups), perms)


async def runChunk(call: ApiCall, chunk: object, client: str | None = None) -> Any:
    """
    Run one lowstate chunk as the call's session (or the chunk's C{token}).

    @param client: the client to use whatever the chunk says.
    @raise ApiError: the chunk is invalid (400), its client disabled (400),
        there is no valid token (401), the ACL refuses it (403), the master
        cannot be reached (503).
    """
    if not isinstance(chunk, Mapping):
        raise BadRequest(f"each lowstate chunk must be a mapping, not {type(chunk).__name__}")
    chunk = dict(chunk)
    if client is not None:
        chunk["client"] = client
    name = chunk.get("client")
    if name not in CLIENTS:
        if name == "ssh":
            raise BadRequest(
                "Client not available in salttwist-api: 'ssh' (salttwist has no salt-ssh)"
            )
        if name in MISSING_CLIENTS:
            raise BadRequest(f"Client not available in salttwist-api: '{name}'")
        raise BadRequest(f"Invalid client specified: '{name}'")
    requireClient(call, name)
    session = call.session
    if "token" in chunk and (session is None or chunk["token"] != session.token):
        session = await call.context.session(chunk["token"])
    elif session is None and "eauth" in chunk:
        session = await credentialsSession(call, chunk)
    if session is None:
        raise Unauthorized("No authentication credentials given")
    try:
        return await _RUN[name](call, session, chunk)
    except MasterUnavailable as e:
        raise Unavailable(f"Salt Master is not available. ({e})") from None
    except RequestError as e:
        raise BadRequest(str(e)) from None
    except SerialError as e:
        # Data the wire cannot carry (an integer past 64 bits).
        raise BadRequest(f"the chunk cannot be sent to the master ({e})") from None


async def runLowstate(call: ApiCall, client: str | None = None) -> list[Any]:
    """
    Run the call's body, a list of chunks (a single mapping is a list of
    one, as Salt takes it).

    @return: the return of each chunk, in order.
    """
    lowstate = call.body
    if isinstance(lowstate, Mapping):
        lowstate = [lowstate]
    if not isinstance(lowstate, list):
        raise BadRequest("Lowstates must be a list")
    if not lowstate:
        raise BadRequest("the lowstate list is empty: send at least one chunk")
    results = []
    for chunk in lowstate:
        result = await runChunk(call, chunk, client)
        if (client or chunk.get("client")) == "local_batch" and isinstance(result, list):
            results.extend(result)
        else:
            results.append(result)
    return results


class Run(ApiResource):
    """
    C{/run}: lowstate chunks that each carry their credentials
    (C{username}, C{password}, C{eauth}) or a C{token}; no session is used.
    """

    name = "run"
    requiresToken = False

    async def POST(self, call: ApiCall) -> dict[str, Any]:
        call.session = None
        return {"return": await runLowstate(call)}


class Token(ApiResource):
    """
    C{/token}: make a token from credentials (Salt's C{auth.mk_token}):
    a list of C{{"token", "name", "eauth", "start", "expire", "groups",
    "auth_list"}}, one per set of credentials sent.
    """

    name = "token"
    requiresToken = False

    async def POST(self, call: ApiCall) -> list[dict[str, Any]]:
        body = call.body
        chunks = [body] if isinstance(body, Mapping) else body
        if not isinstance(chunks, list) or not chunks:
            raise BadRequest('Require "username", "password", and "eauth" params')
        from salttwist.api.login import login

        tokens = []
        for chunk in chunks:
            session = await login(call, chunk)
            authenticator = await call.context.getAuthenticator()
            data = await authenticator.store.get(session.token)
            tokens.append(data.asDict(session.token) if data is not None else session.asDict())
        return tokens


class Lowstate(ApiResource):
    """
    C{/}: Salt's welcome and the lowstate runner.
    """

    name = ""
    requiresToken = False

    async def GET(self, call: ApiCall) -> dict[str, Any]:
        return {"return": "Welcome", "clients": list(CLIENTS)}

    async def POST(self, call: ApiCall) -> dict[str, Any]:
        if call.session is None and not _chunksCarryTokens(call.body):
            raise Unauthorized()
        return {"return": await runLowstate(call)}


def _chunksCarryTokens(body: object) -> bool:
    chunks = [body] if isinstance(body, Mapping) else body
    return (
        isinstance(chunks, list)
        and bool(chunks)
        and all(isinstance(c, Mapping) and "token" in c for c in chunks)
    )
