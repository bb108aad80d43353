# -*- test-case-name: tests.test_api_resources -*-
"""
C{/jobs}, as Salt's rest_cherrypy: the job cache through the C{jobs}
runner, allowed by C{@jobs} (or C{@runner}) in the token's permissions.

C{GET /jobs}: C{{"return": [<jobs.list_jobs>]}}.

C{GET /jobs/<jid>}: C{{"info": [<jobs.list_job>], "return": [{minion:
return}]}}.
"""

from __future__ import annotations

from typing import Any

from salttwist.api.errors import BadRequest, Forbidden, Unavailable
from salttwist.api.lowstate import requireClient
from salttwist.api.resource import ApiCall, ApiResource, requireSession
from salttwist.client.base import MasterUnavailable
from salttwist.eauth.engine import AclRefused
from salttwist.jid import isJid
from salttwist.transport.errors import RequestError

__all__ = ["Jobs"]


class Jobs(ApiResource):
    """
    C{/jobs}.
    """

    name = "jobs"

    async def GET(self, call: ApiCall) -> dict[str, Any]:
        session = requireSession(call)
        requireClient(call, "runner")
        jid = "/".join(call.path)
        if jid and not isJid(jid):
            raise BadRequest(f"{jid!r} is not a job id (20 digits)")
        fun = "jobs.list_job" if jid else "jobs.list_jobs"
        try:
            session.authorize(fun, (), "jobs")
        except AclRefused as e:
            raise Forbidden(str(e)) from None
        try:
            reply = await call.context.master.runner(fun, [jid] if jid else [], session.name)
        except MasterUnavailable as e:
            raise Unavailable(f"Salt Master is not available. ({e})") from None
        except RequestError as e:
            raise BadRequest(str(e)) from None
        info = reply.get("return")
        if not jid:
            return {"return": [info]}
        results = (info or {}).get("Result") or {}
        returns = {
            minion: (data.get("return") if isinstance(data, dict) else data)
            for minion, data in results.items()
        }
        return {"info": [info], "return": [returns]}
