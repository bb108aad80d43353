"""
Tests of the API's OpenAPI document (L{salttwist.api.openapi}): the copy
in docs/ is the packaged one, it is valid OpenAPI that schemathesis loads,
it describes exactly the paths and methods the resource tree mounts, and
the API serves it at C{/openapi.json}.
"""

from __future__ import annotations

import json
import os
import re
from typing import Any

import schemathesis
from openapi_spec_validator import validate
from twisted.trial.unittest import SynchronousTestCase
from twisted.web.resource import Resource

from salttwist.api.openapi import DOCUMENT_PATH
from salttwist.api.resource import ApiResource
from tests._apifakes import Api

DOCS_COPY = os.path.join(os.path.dirname(os.path.dirname(__file__)), "docs", "openapi.json")
#: The HTTP methods the document may name.
METHODS = ("GET", "POST", "PUT", "PATCH", "DELETE")
#: A value for each path parameter of the document.
SAMPLES = {
    "mid": "web1",
    "jid": "20240101000000000001",
    "tag": "build/done",
    "file": "index.html",
}


def loadDocument() -> dict[str, Any]:
    with open(DOCUMENT_PATH, encoding="utf-8") as f:
        return json.load(f)


def answeredMethods(resource: Resource) -> set[str]:
    """
    The methods a resource of the tree answers (HEAD apart).
    """
    if isinstance(resource, ApiResource):
        return {m for m in METHODS if hasattr(resource, m)}
    return {m for m in METHODS if hasattr(resource, f"render_{m}")}


class DocumentTests(SynchronousTestCase):
    """
    The document itself.
    """

    def test_docsCopyIsThePackagedOne(self) -> None:
        """
        docs/openapi.json is byte for byte the document the wheel carries
        and the API serves (edit both, or copy one over the other).
        """
        with open(DOCUMENT_PATH, "rb") as packaged, open(DOCS_COPY, "rb") as docs:
            self.assertEqual(packaged.read(), docs.read())

    def test_validOpenApi(self) -> None:
        """
        The document is valid OpenAPI 3.1 (openapi-spec-validator finds no
        error) and schemathesis makes an operation of each of its methods.
        """
        document = loadDocument()
        self.assertTrue(document["openapi"].startswith("3.1"))
        validate(document)
        schema = schemathesis.openapi.from_dict(document)
        labels = set()
        for result in schema.get_all_operations():
            labels.add(result.ok().label)
        expected = {
            f"{method.upper()} {path}"
            for path, item in document["paths"].items()
            for method in item
        }
        self.assertEqual(labels, expected)

    def test_errorsHaveTheErrorShape(self) -> None:
        """
        Every 4xx or 5xx answer written as JSON has the API's error shape
        (C{{"status", "return"}}), but a webhook's 503 (C{{"success": false}}).
        """
        document = loadDocument()
        responses = document["components"]["responses"]
        for path, item in document["paths"].items():
            for method, operation in item.items():
                for status, answer in operation["responses"].items():
                    if not status.startswith(("4", "5")) or path.startswith(("/ui", "/hook")):
                        continue
                    answer = responses.get(answer.get("$ref", "").rsplit("/", 1)[-1], answer)
                    schema = answer["content"]["application/json"]["schema"]
                    self.assertEqual(
                        schema, {"$ref": "#/components/schemas/Error"}, (method, path, status)
                    )

    def test_tokenScheme(self) -> None:
        """
        The token goes in the C{X-Auth-Token} header, needed by default;
        the paths that need none say so.
        """
        document = loadDocument()
        self.assertEqual(
            document["components"]["securitySchemes"]["token"],
            {
                "type": "apiKey",
                "in": "header",
                "name": "X-Auth-Token",
                "description": "a token from POST /login",
            },
        )
        self.assertEqual(document["security"], [{"token": []}])
        public = sorted(
            f"{method.upper()} {path}"
            for path, item in document["paths"].items()
            for method, operation in item.items()
            if operation.get("security") == []
        )
        self.assertEqual(
            public,
            [
                "GET /",
                "GET /login",
                "GET /openapi.json",
                "GET /ui",
                "GET /ui/{file}",
                "POST /login",
                "POST /run",
                "POST /token",
            ],
        )


class TreeTests(SynchronousTestCase):
    """
    The document and the resource tree the API mounts.
    """

    def setUp(self) -> None:
        self.api = Api(self.mktemp(), {"port": 8000, "disable_ssl": True, "collect_stats": True})
        self.document = loadDocument()

    def documented(self) -> dict[str, set[str]]:
        """
        @return: the documented methods by first path segment ("" for C{/}).
        """
        byName: dict[str, set[str]] = {}
        for path, item in self.document["paths"].items():
            segments = path.strip("/").split("/")
            self.assertFalse(
                any(re.fullmatch(r"\{.*\}", s) for s in segments[:1]),
                f"{path}: its first segment is a parameter",
            )
            self.assertLessEqual(len(segments), 2, f"{path}: deeper than the tree")
            byName.setdefault(segments[0], set()).update(m.upper() for m in item)
        return byName

    def test_everyRouteDocumented(self) -> None:
        """
        Every child the tree mounts, and C{/} itself, is in the document
        with the methods it answers; the document has no other path.
        """
        root = self.api.root
        mounted = {
            name.decode("utf-8"): answeredMethods(child) for name, child in root.children.items()
        }
        mounted[""] = answeredMethods(root.index)
        self.assertEqual(self.documented(), mounted)

    def test_paramPathsAreLeaves(self) -> None:
        """
        A documented C{/x/{param}} is served by a leaf resource (it sees the
        rest of the path), answering the methods documented there.
        """
        for path, item in self.document["paths"].items():
            segments = path.strip("/").split("/")
            if len(segments) != 2:
                continue
            child = self.api.root.children[segments[0].encode("utf-8")]
            self.assertTrue(child.isLeaf, path)
            self.assertLessEqual({m.upper() for m in item}, answeredMethods(child), path)

    def test_served(self) -> None:
        """
        C{GET /openapi.json} answers the document, without a token, with
        the API's security headers; a POST is refused with 405.
        """
        status, headers, body = self.api.request("GET", "/openapi.json")
        self.assertEqual(status, 200)
        with open(DOCUMENT_PATH, "rb") as f:
            self.assertEqual(body, f.read())
        self.assertEqual(headers["content-type"], ["application/json"])
        self.assertEqual(headers["x-content-type-options"], ["nosniff"])
        etag = headers["etag"][0]
        status, _, body = self.api.request("GET", "/openapi.json", headers={"If-None-Match": etag})
        self.assertEqual((status, body), (304, b""))
        status, headers, _ = self.api.request("POST", "/openapi.json", raw=b"{}")
        self.assertEqual(status, 405)
        self.assertIn("GET", headers["allow"][0])

    def test_undocumentedMethodsRefused(self) -> None:
        """
        Every documented path answers a method it does not document with
        405, C{Allow} listing the documented ones and the API's JSON error, the dashboard, the event
        stream and this document included (twisted.web answered 501 and an
        HTML page to PUT, DELETE, PATCH, TRACE, OPTIONS there), and
        C{/minions/<id>} and C{/keys/<id>} refuse POST (they ran it as a
        POST of C{/minions} or C{/keys}, ignoring the id) and do not list it
        in C{Allow}.
        """
        token = self.api.login("pinger")
        for path, item in self.document["paths"].items():
            url = re.sub(r"\{(\w+)\}", lambda m: SAMPLES[m.group(1)], path)
            for method in (*METHODS, "TRACE", "OPTIONS"):
                if method.lower() in item:
                    continue
                status, headers, body = self.api.request(method, url, token=token, raw=b"{}")
                where = f"{method} {url}"
                self.assertEqual(status, 405, where)
                allowed = {m.strip() for m in headers["allow"][0].split(",")} - {"HEAD"}
                self.assertEqual(allowed, {m.upper() for m in item}, where)
                self.assertEqual(headers["content-type"], ["application/json"], where)
                self.assertEqual(json.loads(body)["status"], 405, where)
                self.assertEqual(headers["x-content-type-options"], ["nosniff"], where)

    def test_statsOff(self) -> None:
        """
        Without C{collect_stats}, C{GET /stats} is the 404 the document
        gives it, in the error shape.
        """
        api = Api(self.mktemp())
        self.assertNotIn(b"stats", api.root.children)
        status, data = api.json("GET", "/stats", token=api.login("pinger"))
        self.assertEqual((status, data["status"]), (404, 404))
        self.assertIn("404", self.document["paths"]["/stats"]["get"]["responses"])
