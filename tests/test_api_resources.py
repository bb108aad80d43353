# -*- test-case-name: tests.test_api_resources -*-
"""
Tests for C{/minions}, C{/jobs}, C{/keys} and C{/stats}, with a fake
master (L{tests._apifakes}).
"""

from __future__ import annotations

import io
import json
import tarfile

from twisted.trial.unittest import SynchronousTestCase

from salttwist.crypt import fingerprint, generatePrivateKey, publicKeyToPem
from tests._apifakes import GRAINS, Api


class MinionsTests(SynchronousTestCase):
    """
    C{/minions}.
    """

    def setUp(self) -> None:
        self.api = Api(self.mktemp())

    def test_grains(self) -> None:
        """
        C{GET /minions} answers every minion's cached grains;
        C{/minions/<id>} one's.
        """
        token = self.api.login("admin")
        status, data = self.api.json("GET", "/minions", token=token)
        self.assertEqual((status, data), (200, {"return": [GRAINS]}))
        status, data = self.api.json("GET", "/minions/db1", token=token)
        self.assertEqual(data, {"return": [{"db1": GRAINS["db1"]}]})

    def test_grainsRestricted(self) -> None:
        """
        The token must be allowed C{grains.items} on the minions shown.
        """
        token = self.api.login("webop")
        status, data = self.api.json("GET", "/minions/web*", token=token)
        self.assertEqual(status, 200)
        self.assertEqual(sorted(data["return"][0]), ["web1", "web2"])
        self.assertEqual(self.api.json("GET", "/minions", token=token)[0], 403)
        self.assertEqual(self.api.json("GET", "/minions", token=self.api.login("pinger"))[0], 403)

    def test_post(self) -> None:
        """
        C{POST /minions} publishes asynchronously: 202 with the jid, the
        minions and a link to the job.
        """
        token = self.api.login("admin")
        status, data = self.api.json(
            "POST", "/minions", [{"tgt": "web1", "fun": "test.ping"}], token=token
        )
        self.assertEqual(status, 202)
        jid = data["return"][0]["jid"]
        self.assertEqual(data["return"][0]["minions"], ["web1"])
        self.assertEqual(data["_links"]["jobs"], [{"href": f"/jobs/{jid}"}])


class JobsTests(SynchronousTestCase):
    """
    C{/jobs}.
    """

    def setUp(self) -> None:
        self.api = Api(self.mktemp())

    def test_list(self) -> None:
        """
        C{GET /jobs} answers C{jobs.list_jobs} in a list.
        """
        status, data = self.api.json("GET", "/jobs", token=self.api.login("webop"))
        self.assertEqual(status, 200)
        self.assertEqual(data, {"return": [{"20240101000000000001": {"Function": "test.ping"}}]})
        self.assertEqual(self.api.master.calls[-1], ("runner", "jobs.list_jobs", []))

    def test_one(self) -> None:
        """
        C{GET /jobs/<jid>} answers the job's info and each minion's return.
        """
        jid = "20240101000000000007"
        status, data = self.api.json("GET", f"/jobs/{jid}", token=self.api.login("webop"))
        self.assertEqual(status, 200)
        self.assertEqual(data["info"][0]["jid"], jid)
        self.assertEqual(data["return"], [{m: True for m in GRAINS}])

    def test_badJid(self) -> None:
        """
        A jid that is not 20 digits is a 400.
        """
        status, _ = self.api.json("GET", "/jobs/../keys", token=self.api.login("admin"))
        self.assertEqual(status, 400)

    def test_refused(self) -> None:
        """
        Without C{@jobs} (or C{@runner}), the job cache is refused.
        """
        self.assertEqual(self.api.json("GET", "/jobs", token=self.api.login("pinger"))[0], 403)


class DisabledClientTests(SynchronousTestCase):
    """
    The convenience URLs go through Salt's clients, which
    C{netapi_enable_clients} must name, as in Salt.
    """

    def test_disabled(self) -> None:
        """
        C{/jobs} needs C{runner}, C{/minions} C{local} (C{local_async} to
        post), C{/keys} C{wheel}.
        """
        api = Api(self.mktemp())
        api.context.enabledClients = ()
        token = api.login("admin")
        for method, path, client in (
            ("GET", "/jobs", "runner"),
            ("GET", "/minions", "local"),
            ("POST", "/minions", "local_async"),
            ("GET", "/keys", "wheel"),
        ):
            body = [{"tgt": "*", "fun": "test.ping"}] if method == "POST" else None
            status, data = api.json(method, path, body, token=token)
            self.assertEqual(status, 400, path)
            self.assertIn(f"Client disabled: '{client}'", data["return"])
        self.assertEqual(api.master.calls, [])


class KeysTests(SynchronousTestCase):
    """
    C{/keys}.
    """

    def setUp(self) -> None:
        self.api = Api(self.mktemp())
        self.pem = publicKeyToPem(generatePrivateKey(2048).public_key())
        self.api.keyStore.putKey("minions", "web1", self.pem)
        self.api.keyStore.putKey("minions_pre", "new1", self.pem)
        self.token = self.api.login("admin")

    def test_list(self) -> None:
        """
        C{GET /keys} answers C{key.list_all}.
        """
        status, data = self.api.json("GET", "/keys", token=self.token)
        self.assertEqual(status, 200)
        self.assertEqual(data["return"]["minions"], ["web1"])
        self.assertEqual(data["return"]["minions_pre"], ["new1"])
        self.assertEqual(data["return"]["minions_rejected"], [])

    def test_finger(self) -> None:
        """
        C{GET /keys/<id>} answers the key's fingerprint by state.
        """
        status, data = self.api.json("GET", "/keys/new1", token=self.token)
        self.assertEqual(data, {"return": {"minions_pre": {"new1": fingerprint(self.pem)}}})

    def test_genAccept(self) -> None:
        """
        C{POST /keys} makes a key pair, accepts its public key and answers
        a tar of C{minion.pem} and C{minion.pub}; a second time, without
        C{force}, a 409.
        """
        status, headers, body = self.api.request(
            "POST", "/keys", {"mid": "fresh1"}, token=self.token
        )
        self.assertEqual(status, 200, body)
        self.assertEqual(headers["content-type"], ["application/x-tar"])
        self.assertIn("saltkeys-fresh1.tar", headers["content-disposition"][0])
        with tarfile.open(fileobj=io.BytesIO(body)) as tar:
            pub = tar.extractfile("minion.pub").read()  # type: ignore[union-attr]
            priv = tar.extractfile("minion.pem").read()  # type: ignore[union-attr]
        self.assertIn(b"PRIVATE KEY", priv)
        self.assertEqual(self.api.keyStore.getKey("minions", "fresh1"), pub)
        self.assertIn(("accept", "fresh1"), self.api.keyEvents)
        status, data = self.api.json("POST", "/keys", {"mid": "fresh1"}, token=self.token)
        self.assertEqual(status, 409)

    def test_genAcceptRefused(self) -> None:
        """
        Without C{@wheel}, keys are neither read nor made.
        """
        token = self.api.login("webop")
        self.assertEqual(self.api.json("GET", "/keys", token=token)[0], 403)
        self.assertEqual(self.api.request("POST", "/keys", {"mid": "x1"}, token=token)[0], 403)
        self.assertIsNone(self.api.keyStore.getKey("minions", "x1"))

    def test_genAcceptBadId(self) -> None:
        """
        An invalid minion id is a 400.
        """
        status, _, body = self.api.request("POST", "/keys", {"mid": "../x"}, token=self.token)
        self.assertEqual(status, 400, body)


class StatsTests(SynchronousTestCase):
    """
    C{/stats}.
    """

    def test_off(self) -> None:
        """
        Without C{collect_stats}, there is no C{/stats}.
        """
        api = Api(self.mktemp())
        self.assertEqual(api.json("GET", "/stats", token=api.login("admin"))[0], 404)

    def test_counts(self) -> None:
        """
        With C{collect_stats}, C{/stats} counts requests by path and status.
        """
        api = Api(self.mktemp(), {"disable_ssl": True, "collect_stats": True})
        token = api.login("admin")
        api.json("GET", "/jobs", token=token)
        status, headers, body = api.request("GET", "/stats", token=token)
        self.assertEqual(status, 200)
        stats = json.loads(body)["salttwist-api"]
        self.assertEqual(stats["Requests by path"]["jobs"]["count"], 1)
        self.assertEqual(stats["Requests by status"]["200"], 2)
