# -*- test-case-name: tests.test_api_resources -*-
"""
C{/keys}, as Salt's rest_cherrypy, through the wheel C{key} functions
(allowed by C{@wheel}, or C{'@key'}, in the token's permissions).

C{GET /keys}: C{{"return": <key.list_all>}}.

C{GET /keys/<id>}: C{{"return": <key.finger of id>}}.

C{POST /keys} with C{mid} (and C{keysize}, C{force}): a new key pair for
the minion, its public key accepted (C{key.gen_accept}); the answer is a
tar file holding C{minion.pem} and C{minion.pub}, as Salt's. A minion
that has an accepted key already and no C{force} gets a 409 instead of
Salt's tar of two empty files.
"""

from __future__ import annotations

import io
import tarfile
from collections.abc import Mapping
from typing import Any

from salttwist.api.errors import ApiError, BadRequest
from salttwist.api.lowstate import runChunk
from salttwist.api.resource import ApiCall, ApiResource, RawAnswer, requireSession

__all__ = ["Keys"]


class Conflict(ApiError):
    """
    The minion has an accepted key already (409).
    """

    status = 409


def _tarball(pub: str, priv: str) -> bytes:
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w") as tar:
        for name, text in (("minion.pub", pub), ("minion.pem", priv)):
            data = text.encode("ascii")
            info = tarfile.TarInfo(name)
            info.size = len(data)
            info.mode = 0o600 if name.endswith(".pem") else 0o644
            tar.addfile(info, io.BytesIO(data))
    return buffer.getvalue()


class Keys(ApiResource):
    """
    C{/keys}.
    """

    name = "keys"

    def methodsAt(self, path: list[bytes]) -> tuple[str, ...]:
        # POST /keys only: POST /keys/<id> would ignore the id.
        return ("GET",) if path else ("GET", "POST")

    async def GET(self, call: ApiCall) -> dict[str, Any]:
        requireSession(call)
        mid = "/".join(call.path)
        chunk = {"fun": "key.finger", "match": mid} if mid else {"fun": "key.list_all"}
        result = await runChunk(call, chunk, "wheel")
        return {"return": result["data"]["return"]}

    async def POST(self, call: ApiCall) -> RawAnswer:
        requireSession(call)
        body = call.body
        if isinstance(body, list) and len(body) == 1:
            body = body[0]
        if not isinstance(body, Mapping) or not body.get("mid"):
            raise BadRequest("POST /keys needs mid, the minion id to make a key pair for")
        chunk: dict[str, Any] = {"fun": "key.gen_accept", "id_": body["mid"]}
        for name in ("keysize", "force"):
            if name in body:
                chunk[name] = body[name]
        if isinstance(chunk.get("keysize"), str) and chunk["keysize"].isdigit():
            chunk["keysize"] = int(chunk["keysize"])
        if isinstance(chunk.get("force"), str):
            chunk["force"] = chunk["force"].lower() in ("true", "1", "yes")
        result = await runChunk(call, chunk, "wheel")
        pair = result["data"]["return"]
        if not pair:
            raise Conflict(
                f"minion {body['mid']!r} has an accepted key already; send force=true to replace it"
            )
        return RawAnswer(
            _tarball(pair["pub"], pair["priv"]),
            "application/x-tar",
            headers={
                "Content-Disposition": f'attachment; filename="saltkeys-{body["mid"]}.tar"',
            },
        )
