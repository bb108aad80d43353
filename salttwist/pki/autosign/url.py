# -*- test-case-name: tests.test_autosign -*-
"""
The URL policy, C{autosign_url}: ask an HTTP service.
"""

from __future__ import annotations

import json
from typing import Any
from urllib.parse import urlsplit, urlunsplit

from twisted.internet.protocol import Protocol
from twisted.python.failure import Failure
from zope.interface import implementer

from salttwist.interfaces import IAutosignPolicy
from salttwist.pki.autosign.base import (
    ACCEPT,
    MAX_GRAINS_JSON,
    AutosignDecision,
    _contextGrains,
    _contextPeer,
    _grainsJSON,
    _GuardedPolicy,
    _pending,
)

_DISCARD_BODY_MAX = 1 << 20


class _DiscardBody(Protocol):
    """
    Reads and drops a response body, giving up after L{_DISCARD_BODY_MAX}
    bytes so an endless body cannot hold the connection.
    """

    def __init__(self) -> None:
        self._seen = 0

    def dataReceived(self, data: bytes) -> None:
        self._seen += len(data)
        if self._seen > _DISCARD_BODY_MAX and self.transport is not None:
            self.transport.stopProducing()


def _defaultHTTPClient(reactor: Any) -> Any:
    """
    A treq L{HTTPClient} with non-persistent connections.
    """
    from treq.client import HTTPClient
    from twisted.web.client import Agent, HTTPConnectionPool

    return HTTPClient(Agent(reactor, pool=HTTPConnectionPool(reactor, persistent=False)))


def _displayURL(url: str) -> str:
    """
    A URL as shown in reasons and logs: without user info, query or
    fragment, where a careless admin may have put a secret.
    """
    try:
        parts = urlsplit(url)
        host = parts.hostname or ""
        port = parts.port
    except ValueError:
        return "<the configured URL>"
    if ":" in host:
        host = f"[{host}]"
    netloc = f"{host}:{port}" if port is not None else host
    return urlunsplit((parts.scheme, netloc, parts.path, "", ""))


@implementer(IAutosignPolicy)
class URLPolicy(_GuardedPolicy):
    """
    C{autosign_url}: POST the request as JSON (C{id}, C{pem}, C{peer},
    C{grains}); a 2xx answer accepts. Any other status (redirects are not
    followed), an error or no answer within the timeout leaves the key
    pending.
    """

    name = "autosign_url"

    def __init__(self, url: str, httpClient: Any, clock: Any, timeout: float) -> None:
        """
        @param url: the URL.
        @param httpClient: a treq L{HTTPClient} or L{treq.testing.StubTreq}.
        @param clock: provides C{IReactorTime}, for the timeout.
        @param timeout: seconds to wait for the status line and headers.
        """
        self.url = url
        self._shownURL = _displayURL(url)
        self._client = httpClient
        self._clock = clock
        self._timeout = timeout

    async def _decide(self, minionId: str, pem: bytes, context: dict[str, Any]) -> AutosignDecision:
        grains = _grainsJSON(_contextGrains(context))
        if grains is None:
            return _pending(
                self.name,
                f"the autosign grains of {minionId!r} cannot be sent (not encodable as JSON,"
                f" or larger than {MAX_GRAINS_JSON} bytes)",
                True,
            )
        request = {
            "id": minionId,
            "pem": pem.decode("ascii", "replace"),
            "peer": _contextPeer(context),
            # Round-tripped through JSON: plain JSON values only from here on.
            "grains": json.loads(grains),
        }
        body = json.dumps(request, sort_keys=True).encode("ascii")
        d = self._client.post(
            self.url,
            data=body,
            headers={b"Content-Type": [b"application/json"]},
            allow_redirects=False,
            unbuffered=True,
        )
        # Not Deferred.addTimeout: the agent reports a cancelled request as
        # ResponseNeverReceived, which addTimeout does not recognise.
        timedOut: list[bool] = []

        def expire() -> None:
            timedOut.append(True)
            d.cancel()

        timer = self._clock.callLater(self._timeout, expire)
        try:
            response = await d
        except Exception as e:
            if timedOut:
                why = f"did not answer within {self._timeout:g} s"
            else:
                why = f"could not be reached: {Failure(e).getErrorMessage()}"
            return _pending(self.name, f"autosign_url {self._shownURL} {why}", True)
        finally:
            if timer.active():
                timer.cancel()
        code = response.code
        response.deliverBody(_DiscardBody())
        if 200 <= code < 300:
            return AutosignDecision(
                ACCEPT, self.name, f"autosign_url {self._shownURL} answered {code}"
            )
        return _pending(self.name, f"autosign_url {self._shownURL} answered {code}")
