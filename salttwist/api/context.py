# -*- test-case-name: tests.test_api_resource -*-
"""
What every resource of the API shares: L{ApiContext}.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from twisted.internet.defer import Deferred
from twisted.internet.interfaces import IReactorTime

from salttwist.api.errors import Unauthorized, Unavailable
from salttwist.api.limits import LoginLimiter
from salttwist.api.options import ApiOptions
from salttwist.api.stats import ApiStats
from salttwist.eauth.authenticator import AuthenticationFailed, Authenticator, Session

__all__ = ["ApiContext"]


@dataclass
class ApiContext:
    """
    @ivar config: the master's config.
    @ivar options: its C{rest_cherrypy} block.
    @ivar clock: the reactor's clock.
    @ivar authenticator: returns a L{Deferred} firing with the
        L{Authenticator} once the token store is open
        (L{salttwist.eauth.service.EauthService.whenReady}).
    @ivar master: the L{salttwist.api.interfaces.IMasterGateway}.
    @ivar enabledClients: Salt's C{netapi_enable_clients}.
    """

    config: Mapping[str, Any]
    options: ApiOptions
    clock: IReactorTime
    authenticator: Callable[[], Deferred[Authenticator]]
    master: Any
    enabledClients: tuple[str, ...] = ()
    loginLimiter: LoginLimiter | None = None
    stats: ApiStats = field(default_factory=ApiStats)

    def __post_init__(self) -> None:
        if self.loginLimiter is None:
            self.loginLimiter = LoginLimiter(
                self.clock, self.options.loginRate, self.options.loginBurst
            )

    async def getAuthenticator(self) -> Authenticator:
        """
        @raise Unavailable: the token store could not be opened.
        """
        try:
            return await self.authenticator()
        except Exception as e:
            raise Unavailable(f"the token store is not available ({e})") from e

    async def session(self, token: object) -> Session:
        """
        The session of C{token}.

        @raise Unauthorized: no token, or one unknown, expired or revoked.
        """
        if not isinstance(token, str) or not token:
            raise Unauthorized()
        authenticator = await self.getAuthenticator()
        try:
            return await authenticator.session(token)
        except AuthenticationFailed as e:
            raise Unauthorized(str(e)) from None
