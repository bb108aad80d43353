# -*- test-case-name: tests.test_api_hooks -*-
"""
C{POST /hook/<tag...>}: a webhook fires an event on the master's bus, as
Salt's C{rest_cherrypy} C{Webhook} does. The tag is
C{salt/netapi/hook/} followed by the path below C{/hook}
(C{/hook/mycompany/build/success} fires
C{salt/netapi/hook/mycompany/build/success}); the data is::

    {"body": "<the raw body, as text>",
     "post": {<the body read as JSON, YAML or form fields; {} when empty>},
     "headers": {"Content-Type": "...", "X-My-Secret": "...", ...,
                 "Remote-Addr": "127.0.0.1"}}

and the answer C{{"success": true}}. Unlike Salt, the C{X-Auth-Token} and
C{Cookie} headers are left out of C{headers}: the bus is read by reactors,
engines and every C{@events} user, who must not get the caller's token.

A token is required, as every endpoint's, unless C{webhook_disable_auth:
True} (for services that cannot send one; a reactor acting on the event
must then check a secret of its own in the headers or body). When the
master's bus cannot be reached the answer is 503 with C{{"success":
false}}.
"""

from __future__ import annotations

import os
from collections.abc import Awaitable, Callable
from typing import Any

from twisted.internet.endpoints import UNIXClientEndpoint
from twisted.logger import Logger

from salttwist import serial
from salttwist.api.errors import BadRequest
from salttwist.api.resource import Answer, ApiCall, ApiResource
from salttwist.events import EVENT_PULL_SOCKET
from salttwist.serial import SerialError
from salttwist.transport.framing import FrameProtocol, quietFactory

__all__ = ["HOOK_TAG", "Hook", "busFirer", "hookEvent", "hookResource"]

_log = Logger()

#: The prefix of every webhook's tag.
HOOK_TAG = "salt/netapi/hook"
#: The longest tag the master's bus takes.
MAX_TAG = 512
#: Headers never copied into the event (credentials).
PRIVATE_HEADERS = frozenset({"x-auth-token", "cookie", "authorization"})
#: Seconds allowed to hand an event to the master's bus.
FIRE_TIMEOUT = 5.0

Fire = Callable[[str, dict[str, Any]], Awaitable[bool]]


def hookTag(path: list[str]) -> str:
    """
    @param path: the path segments below C{/hook}.
    @return: the event's tag.
    @raise BadRequest: the tag would be too long or holds a control character.
    """
    tag = "/".join([HOOK_TAG, *path])
    if len(tag) > MAX_TAG:
        raise BadRequest(f"the webhook's tag is longer than {MAX_TAG} characters")
    if any(ord(c) < 32 or ord(c) == 127 for c in tag):
        raise BadRequest("the webhook's path holds a control character")
    return tag


def hookEvent(call: ApiCall) -> dict[str, Any]:
    """
    The event's data for a webhook call (see the module's docstring).
    """
    request = call.request
    headers: dict[str, str] = {}
    for name, values in request.requestHeaders.getAllRawHeaders():
        text = name.decode("latin-1")
        if text.lower() in PRIVATE_HEADERS:
            continue
        headers[text] = ", ".join(v.decode("latin-1") for v in values)
    headers["Remote-Addr"] = call.source
    raw = b""
    if request.content is not None:
        request.content.seek(0)
        raw = request.content.read()
    post = call.body if call.body is not None else {}
    return {"body": raw.decode("utf-8", "replace"), "post": post, "headers": headers}


def busFirer(reactor: Any, sockDir: str, timeout: float = FIRE_TIMEOUT) -> Fire:
    """
    A function that hands an event to the master's bus through its pull
    socket (C{master_event_pull.ipc} in C{sockDir}) without blocking.

    @return: an async function C{(tag, data) -> bool}: L{True} once the
        event was written, L{False} when the bus cannot be reached; it
        raises L{SerialError} for data the bus cannot carry.
    """
    path = os.path.join(sockDir, EVENT_PULL_SOCKET)

    async def fire(tag: str, data: dict[str, Any]) -> bool:
        # Serialised first: data msgpack cannot carry (an integer past 64
        # bits) raises SerialError here, before any connection is made.
        payload = serial.dumps({"tag": tag, "data": data})
        endpoint = UNIXClientEndpoint(reactor, path, timeout=timeout)
        try:
            proto = await endpoint.connect(quietFactory(FrameProtocol))
        except Exception as e:
            _log.warn("webhook: the master's event bus cannot be reached: {error}", error=e)
            return False
        proto.sendString(payload)
        proto.transport.loseConnection()
        return True

    return fire


class Hook(ApiResource):
    """
    C{/hook}: see the module's docstring.
    """

    name = "hook"

    def __init__(self, context: Any, fire: Fire) -> None:
        """
        @param fire: hands an event to the bus (L{busFirer}).
        """
        super().__init__(context)
        self._fire = fire
        # An instance attribute: the class's says every hook needs a token.
        self.requiresToken = not context.options.webhookDisableAuth  # type: ignore[misc]

    async def POST(self, call: ApiCall) -> Answer:
        tag = hookTag(call.path)
        try:
            fired = await self._fire(tag, hookEvent(call))
        except SerialError as e:
            raise BadRequest(f"the webhook's data cannot be put on the bus ({e})") from None
        return Answer({"success": fired}, status=200 if fired else 503)


def hookResource(context: Any, reactor: Any = None) -> Hook:
    """
    C{/hook} for the API of C{context}, firing on the bus of the master
    whose C{sock_dir} its config names.

    @param reactor: connects to the bus (default: the global reactor).
    """
    if reactor is None:
        from twisted.internet import reactor as globalReactor

        reactor = globalReactor
    firer: list[Fire] = []

    async def fire(tag: str, data: dict[str, Any]) -> bool:
        # Made on first use: the config's sock_dir is read then.
        if not firer:
            firer.append(busFirer(reactor, context.config["sock_dir"]))
        return await firer[0](tag, data)

    return Hook(context, fire)
