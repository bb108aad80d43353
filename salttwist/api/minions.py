# -*- test-case-name: tests.test_api_resources -*-
"""
C{/minions}, as Salt's rest_cherrypy.

C{GET /minions[/<id>]}: the grains of every minion (or of C{<id>}, a
glob), C{{"return": [{minion: grains}]}}, from the master's grains cache
rather than by a C{grains.items} job as Salt does (no waiting for minions
that are down; the grains are those each minion last reported). The token
must be allowed C{grains.items} on those minions, as for the job.

C{POST /minions}: lowstate chunks run with the C{local_async} client;
202 with C{{"return": [{"jid", "minions"}], "_links": {"jobs": [{"href":
"/jobs/<jid>"}]}}}.
"""

from __future__ import annotations

from typing import Any

from salttwist.api.errors import Forbidden
from salttwist.api.lowstate import requireClient, runLowstate
from salttwist.api.resource import Answer, ApiCall, ApiResource, requireSession
from salttwist.eauth.engine import AclRefused

__all__ = ["Minions"]


class Minions(ApiResource):
    """
    C{/minions}.
    """

    name = "minions"

    def methodsAt(self, path: list[bytes]) -> tuple[str, ...]:
        # POST /minions only: POST /minions/<id> would ignore the id.
        return ("GET",) if path else ("GET", "POST")

    async def GET(self, call: ApiCall) -> dict[str, Any]:
        session = requireSession(call)
        requireClient(call, "local")
        tgt = "/".join(call.path) or "*"
        try:
            session.authorize("grains.items", (), "local")
        except AclRefused as e:
            raise Forbidden(str(e)) from None
        grainsById = await call.context.master.grains(tgt, "glob")
        try:
            session.authorize("grains.items", sorted(grainsById), "local", grainsById)
        except AclRefused as e:
            raise Forbidden(str(e)) from None
        return {"return": [grainsById]}

    async def POST(self, call: ApiCall) -> Answer:
        requireSession(call)
        jobs = await runLowstate(call, "local_async")
        links = [{"href": f"/jobs/{job['jid']}"} for job in jobs if job and job.get("jid")]
        return Answer({"return": jobs, "_links": {"jobs": links}}, status=202)
