# -*- test-case-name: tests.test_api_resource,tests.test_api_resources -*-
"""
The API's resource tree: L{makeRoot} builds it, L{mountResources} hangs
the endpoint families on the root, one module each:

    /            L{salttwist.api.lowstate.Lowstate}: GET the welcome, POST lowstate
    /run         L{salttwist.api.lowstate.Run}: chunks with their credentials
    /token       L{salttwist.api.lowstate.Token}
    /login       L{salttwist.api.login.Login}
    /logout      L{salttwist.api.login.Logout}
    /minions     L{salttwist.api.minions.Minions}
    /jobs        L{salttwist.api.jobs.Jobs}
    /keys        L{salttwist.api.keys.Keys}
    /stats       L{salttwist.api.stats_resource.Stats} (with C{collect_stats})
    /openapi.json  L{salttwist.api.openapi.OpenApiDocument}: the API described

To add an endpoint family: write a module with an
L{salttwist.api.resource.ApiResource} subclass (see that module: C{async
def GET(self, call)}...), and add one line to L{mountResources}. A
resource that streams (C{/events}) or serves files (C{/app}) may be any
twisted.web resource instead; it then sets its own headers (see
L{salttwist.api.resource.securityHeaders}).
"""

from __future__ import annotations

from typing import Any

from twisted.web.resource import Resource

from salttwist.api.context import ApiContext
from salttwist.api.errors import NotFound
from salttwist.api.resource import ApiCall, ApiResource

__all__ = ["makeRoot", "mountResources"]


class Missing(ApiResource):
    """
    What a path that names no resource gets: 404 in the API's error shape.
    """

    requiresToken = False
    readsBody = ()

    async def _missing(self, call: ApiCall) -> Any:
        raise NotFound(f"The path '{call.request.path.decode('utf-8', 'replace')}' was not found.")

    GET = POST = _missing


class Root(Resource):
    """
    The root: C{/} itself is L{salttwist.api.lowstate.Lowstate}; other
    paths are its children, and unknown ones L{Missing}.
    """

    def __init__(self, context: ApiContext, index: Resource) -> None:
        super().__init__()
        self.context = context
        self.index = index
        self.missing = Missing(context)

    def getChild(self, path: bytes, request: Any) -> Resource:
        if path == b"":
            return self.index
        return self.missing

    def render(self, request: Any) -> Any:
        return self.index.render(request)


def mountResources(root: Root, context: ApiContext) -> None:
    """
    Hang the endpoint families on C{root}: one C{putChild} each. Others
    (the events stream, webhooks, the dashboard) are added here too.
    """
    from salttwist.api.jobs import Jobs
    from salttwist.api.keys import Keys
    from salttwist.api.login import Login, Logout
    from salttwist.api.lowstate import Run, Token
    from salttwist.api.minions import Minions
    from salttwist.api.openapi import OpenApiDocument
    from salttwist.api.static import mountLive
    from salttwist.api.stats_resource import Stats

    root.putChild(b"run", Run(context))
    root.putChild(b"token", Token(context))
    root.putChild(b"login", Login(context))
    root.putChild(b"logout", Logout(context))
    root.putChild(b"minions", Minions(context))
    root.putChild(b"jobs", Jobs(context))
    root.putChild(b"keys", Keys(context))
    if context.options.collectStats:
        root.putChild(b"stats", Stats(context))
    mountLive(root, context)  # /events, /hook, /ui
    root.putChild(b"openapi.json", OpenApiDocument(tls=not context.options.disableSsl))


def makeRoot(context: ApiContext) -> Root:
    """
    @return: the root resource of the API, every endpoint mounted.
    """
    from salttwist.api.lowstate import Lowstate

    root = Root(context, Lowstate(context))
    mountResources(root, context)
    return root
