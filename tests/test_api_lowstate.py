# -*- test-case-name: tests.test_api_lowstate -*-
"""
Tests for C{POST /}, C{/run} and C{/token} (L{salttwist.api.lowstate}):
the clients, their shapes, and every chunk authorised by the ACL engine,
with a fake master (L{tests._apifakes}).
"""

from __future__ import annotations

from twisted.trial.unittest import SynchronousTestCase

from salttwist.client.base import MasterUnavailable
from salttwist.crypt import generatePrivateKey, publicKeyToPem
from salttwist.serial import SerialError
from salttwist.transport.errors import RequestError
from tests._apifakes import Api


class LowstateTests(SynchronousTestCase):
    """
    C{POST /} with the clients.
    """

    def setUp(self) -> None:
        self.api = Api(self.mktemp())
        self.admin = self.api.login("admin")

    def post(self, chunks: object, token: str | None = None) -> tuple[int, object]:
        return self.api.json("POST", "/", chunks, token=token or self.admin)

    def test_local(self) -> None:
        """
        C{local} answers C{{minion: return}}; a single mapping is a list of
        one chunk; C{arg} and C{kwarg} travel in Salt's wire form.
        """
        status, data = self.post(
            {"client": "local", "tgt": "web*", "fun": "test.echo", "arg": "hi", "kwarg": {"a": 1}}
        )
        self.assertEqual(status, 200)
        self.assertEqual(data, {"return": [{"web1": "test.echo ran", "web2": "test.echo ran"}]})
        self.assertEqual(
            self.api.master.calls[-1],
            ("run", "web*", "glob", "test.echo", ["hi", {"a": 1, "__kwarg__": True}]),
        )

    def test_stringKeywords(self) -> None:
        """
        A string argument C{name=value} is a keyword argument, its value
        read as YAML, as Salt's minion reads it (C{curl -d arg='one=1'}).
        """
        status, _ = self.api.json(
            "POST",
            "/",
            raw=b"client=local&tgt=db1&fun=test.kwarg&arg=one%3D1&arg=two&arg=a%3D%3Db",
            token=self.admin,
            contentType="application/x-www-form-urlencoded",
        )
        self.assertEqual(status, 200)
        self.assertEqual(
            self.api.master.calls[-1][-1], ["two", "a==b", {"one": 1, "__kwarg__": True}]
        )
        self.post({"client": "runner", "fun": "manage.up", "arg": ["tgt=web*"], "timeout": 5})
        self.assertEqual(
            self.api.master.calls[-1], ("runner", "manage.up", [{"tgt": "web*", "__kwarg__": True}])
        )

    def test_several(self) -> None:
        """
        Several chunks answer in order.
        """
        status, data = self.post(
            [
                {"client": "local", "tgt": "db1", "fun": "test.ping"},
                {"client": "local_async", "tgt": "*", "fun": "test.ping"},
                {"client": "runner", "fun": "manage.up", "tgt": "x"},
            ]
        )
        self.assertEqual(status, 200)
        ret = data["return"]
        self.assertEqual(ret[0], {"db1": True})
        self.assertEqual(ret[1]["minions"], ["db1", "web1", "web2"])
        self.assertEqual(len(ret[1]["jid"]), 20)
        self.assertEqual(ret[2], "manage.up ran")
        # A runner's other keys are keyword arguments.
        self.assertEqual(
            self.api.master.calls[-1], ("runner", "manage.up", [{"tgt": "x", "__kwarg__": True}])
        )

    def test_runnerAsync(self) -> None:
        """
        C{runner_async} answers the run's tag and jid.
        """
        status, data = self.post({"client": "runner_async", "fun": "jobs.list_jobs"})
        self.assertEqual(status, 200)
        self.assertEqual(
            data["return"],
            [{"tag": "salt/run/20240101000000000098", "jid": "20240101000000000098"}],
        )
        self.assertEqual(self.api.master.calls[-1], ("runnerAsync", "jobs.list_jobs", []))

    def test_masterErrors(self) -> None:
        """
        A master that cannot be reached is a 503; a job it refuses, a 400
        with its message.
        """
        chunk = {"client": "local", "tgt": "*", "fun": "test.ping"}
        self.api.master.error = MasterUnavailable("the salttwist master is not running")
        status, data = self.post(chunk)
        self.assertEqual(status, 503)
        self.assertIn("Salt Master is not available", data["return"])
        self.api.master.error = RequestError("invalid target: G@")
        status, data = self.post(chunk)
        self.assertEqual((status, data["return"]), (400, "invalid target: G@"))

    def test_unserialisableChunk(self) -> None:
        """
        A chunk the wire cannot carry to the master (an integer past 64
        bits: the client raises L{SerialError}) is a 400 saying so, not a
        500. Found by schemathesis's kind of input: POST / with
        C{{"client": "local_async", "tgt": "*", "fun": "test.echo", "arg":
        [1180591620717411303424]}} answered 500.
        """
        chunk = {"client": "local", "tgt": "*", "fun": "test.echo", "arg": [2**70]}
        self.api.master.error = SerialError("cannot serialise: Integer value out of range")
        status, data = self.post(chunk)
        self.assertEqual(status, 400, data)
        self.assertIn("cannot be sent to the master", data["return"])

    def test_yamlBody(self) -> None:
        """
        Chunks may be sent as YAML, and answered as YAML.
        """
        status, headers, body = self.api.request(
            "POST",
            "/",
            raw=b"- client: local\n  tgt: db1\n  fun: test.ping\n",
            token=self.admin,
            headers={"Accept": "application/x-yaml"},
            contentType="application/x-yaml",
        )
        self.assertEqual(status, 200)
        self.assertEqual(body, b"return:\n- db1: true\n")

    def test_batch(self) -> None:
        """
        C{local_batch} answers one mapping per minion, flattened into the
        return list.
        """
        status, data = self.post(
            {"client": "local_batch", "tgt": "*", "fun": "test.ping", "batch": 2}
        )
        self.assertEqual(status, 200)
        self.assertEqual(data["return"], [{"db1": True}, {"web1": True}, {"web2": True}])
        self.assertEqual(self.api.master.calls[-1][-1], "2")

    def test_wheel(self) -> None:
        """
        C{wheel} answers Salt's C{{"tag", "data"}} shape.
        """
        key = generatePrivateKey(2048)
        self.api.keyStore.putKey("minions_pre", "new1", publicKeyToPem(key.public_key()))
        status, data = self.post({"client": "wheel", "fun": "key.list_all"})
        self.assertEqual(status, 200)
        ret = data["return"][0]
        self.assertTrue(ret["tag"].startswith("salt/wheel/"))
        self.assertEqual(ret["data"]["fun"], "wheel.key.list_all")
        self.assertEqual(ret["data"]["user"], "admin")
        self.assertTrue(ret["data"]["success"])
        self.assertEqual(ret["data"]["return"]["minions_pre"], ["new1"])

    def test_wheelAsync(self) -> None:
        """
        C{wheel_async} answers C{{"tag", "jid"}} at once (Salt's shape); the
        call runs and its C{new} and C{ret} events go on the bus, the
        return in C{ret}'s data as C{wheel} answers it.
        """
        key = generatePrivateKey(2048)
        self.api.keyStore.putKey("minions_pre", "new1", publicKeyToPem(key.public_key()))
        status, data = self.post({"client": "wheel_async", "fun": "key.accept", "match": "new1"})
        self.assertEqual(status, 200)
        ret = data["return"][0]
        self.assertEqual(set(ret), {"tag", "jid"})
        self.assertEqual(ret["tag"], f"salt/wheel/{ret['jid']}")
        tags = [tag for tag, _ in self.api.master.events]
        self.assertEqual(tags, [f"{ret['tag']}/new", f"{ret['tag']}/ret"])
        new, done = (event for _, event in self.api.master.events)
        self.assertEqual((new["fun"], new["user"]), ("wheel.key.accept", "admin"))
        self.assertTrue(done["success"])
        self.assertEqual(done["return"], {"minions": ["new1"]})
        self.assertEqual(self.api.keyStore.listKeys("minions"), ["new1"])

    def test_wheelAsyncFailure(self) -> None:
        """
        A C{wheel_async} call that fails after it was answered says so in
        its C{ret} event (C{success} false, the error as the return); an
        unauthorised one is a 403 before anything runs.
        """
        status, _ = self.post({"client": "wheel_async", "fun": "key.nosuch"})
        self.assertEqual(status, 200)
        _, done = self.api.master.events[-1]
        self.assertFalse(done["success"])
        self.assertIn("key.nosuch", done["return"])
        token = self.api.login("pinger")
        status, _ = self.post({"client": "wheel_async", "fun": "key.list_all"}, token=token)
        self.assertEqual(status, 403)
        self.assertEqual(len(self.api.master.events), 2)

    def test_subset(self) -> None:
        """
        C{local_subset} asks the targeted minions C{sys.list_functions} and
        runs the function on at most C{subset} of those that have it
        (Salt's legacy C{sub} too), as a C{list} target.
        """
        status, data = self.post(
            {"client": "local_subset", "tgt": "*", "fun": "grains.items", "subset": 5}
        )
        self.assertEqual(status, 200)
        # db1 has no grains.items.
        self.assertEqual(data["return"], [{"web1": "grains.items ran", "web2": "grains.items ran"}])
        discovery, run = self.api.master.calls[-2:]
        self.assertEqual(discovery[:4], ("run", "*", "glob", "sys.list_functions"))
        self.assertEqual(run[:4], ("run", ["web1", "web2"], "list", "grains.items"))
        status, data = self.post(
            {"client": "local_subset", "tgt": "*", "fun": "test.ping", "sub": 1}
        )
        self.assertEqual(status, 200)
        (picked,) = data["return"]
        self.assertEqual(len(picked), 1)
        self.assertIn(next(iter(picked)), {"web1", "web2", "db1"})

    def test_subsetDefaultAndErrors(self) -> None:
        """
        C{subset} defaults to 3, as Salt's; a bad one, or several
        functions, is a 400; a target without minions having the
        function answers C{{}}.
        """
        status, data = self.post({"client": "local_subset", "tgt": "*", "fun": "test.ping"})
        self.assertEqual(len(data["return"][0]), 3)
        for subset in (0, "x", True):
            status, data = self.post(
                {"client": "local_subset", "tgt": "*", "fun": "test.ping", "subset": subset}
            )
            self.assertEqual(status, 400)
            self.assertIn("subset", data["return"])
        status, data = self.post(
            {"client": "local_subset", "tgt": "*", "fun": ["test.ping", "test.echo"]}
        )
        self.assertEqual(status, 400)
        self.assertIn("one function", data["return"])
        calls = len(self.api.master.calls)
        status, data = self.post({"client": "local_subset", "tgt": "db1", "fun": "grains.items"})
        self.assertEqual((status, data["return"]), (200, [{}]))
        self.assertEqual(len(self.api.master.calls), calls + 1)

    def test_subsetAuthorised(self) -> None:
        """
        C{local_subset} is checked by the ACL as C{local} is: a target the
        user's rules do not cover is refused before anything runs.
        """
        token = self.api.login("webop")
        status, _ = self.post(
            {"client": "local_subset", "tgt": "db1", "fun": "test.ping"}, token=token
        )
        self.assertEqual(status, 403)
        status, data = self.post(
            {"client": "local_subset", "tgt": "web*", "fun": "test.ping", "subset": 5}, token=token
        )
        self.assertEqual(status, 200)
        self.assertEqual(set(data["return"][0]), {"web1", "web2"})

    def test_notAList(self) -> None:
        """
        A body that is neither a list nor a mapping is a 400.
        """
        status, data = self.post("test.ping")
        self.assertEqual((status, data["return"]), (400, "Lowstates must be a list"))

    def test_jobsUser(self) -> None:
        """
        Every job and run is the eauth user's: the master records it as
        the job's user, as Salt does.
        """
        token = self.api.login("webop")
        self.api.json(
            "POST",
            "/",
            [
                {"client": "local", "tgt": "web1", "fun": "test.ping"},
                {"client": "local_async", "tgt": "web1", "fun": "test.ping"},
                {"client": "local_batch", "tgt": "web1", "fun": "test.ping"},
                {"client": "runner", "fun": "jobs.list_jobs"},
                {"client": "runner_async", "fun": "jobs.list_jobs"},
            ],
            token=token,
        )
        self.assertEqual(self.api.master.users, ["webop"] * 5)

    def test_badClient(self) -> None:
        """
        An unknown client, a client salttwist-api lacks and a chunk without
        C{tgt} are 400s naming the problem.
        """
        status, data = self.post({"client": "nope", "fun": "test.ping"})
        self.assertEqual((status, data["return"]), (400, "Invalid client specified: 'nope'"))
        status, data = self.post({"client": "ssh", "tgt": "*", "fun": "test.ping"})
        self.assertEqual(status, 400)
        self.assertEqual(
            data["return"],
            "Client not available in salttwist-api: 'ssh' (salttwist has no salt-ssh)",
        )
        status, data = self.post({"client": "local", "fun": "test.ping"})
        self.assertEqual(status, 400)
        self.assertIn("tgt", data["return"])

    def test_disabledClient(self) -> None:
        """
        A client C{netapi_enable_clients} does not name is refused, as Salt.
        """
        self.api.context.enabledClients = ("local",)
        status, data = self.post({"client": "runner", "fun": "manage.up"})
        self.assertEqual(status, 400)
        self.assertIn("Client disabled: 'runner'", data["return"])

    def test_noToken(self) -> None:
        """
        Without a token, C{POST /} is a 401; a chunk's own C{token} will do.
        """
        chunk = {"client": "local", "tgt": "*", "fun": "test.ping"}
        status, _ = self.api.json("POST", "/", [chunk])
        self.assertEqual(status, 401)
        status, data = self.api.json("POST", "/", [dict(chunk, token=self.admin)])
        self.assertEqual(status, 200)
        status, _ = self.api.json("POST", "/", [dict(chunk, token="ab" * 32)])
        self.assertEqual(status, 401)


class AuthorizationTests(SynchronousTestCase):
    """
    Every chunk is authorised with the token's permissions.
    """

    def setUp(self) -> None:
        self.api = Api(self.mktemp())

    def post(self, user: str, chunk: dict[str, object]) -> tuple[int, object]:
        return self.api.json("POST", "/", [chunk], token=self.api.login(user))

    def test_functionRefused(self) -> None:
        """
        A function the user is not granted is a 403 naming it, and nothing
        is published.
        """
        status, data = self.post("pinger", {"client": "local", "tgt": "*", "fun": "cmd.run"})
        self.assertEqual(status, 403)
        self.assertIn("cmd.run", data["return"])
        self.assertEqual(self.api.master.calls, [])

    def test_runnerAndWheelRefused(self) -> None:
        """
        Runner and wheel functions need C{@runner}, C{@wheel} or their
        module's C{@} item.
        """
        for chunk in (
            {"client": "runner", "fun": "manage.up"},
            {"client": "wheel", "fun": "key.delete", "match": "*"},
        ):
            status, data = self.post("webop", chunk)
            self.assertEqual(status, 403, data)
        self.assertEqual(self.api.master.calls, [])

    def test_jobsAllowed(self) -> None:
        """
        C{@jobs} allows the C{jobs} runner module only.
        """
        status, _ = self.post("webop", {"client": "runner", "fun": "jobs.list_jobs"})
        self.assertEqual(status, 200)

    def test_targetRestricted(self) -> None:
        """
        A target-restricted rule allows the function only on the minions
        it covers: the minions are looked up first, and the job goes to
        exactly those checked (a list target).
        """
        status, data = self.post("webop", {"client": "local", "tgt": "web*", "fun": "test.ping"})
        self.assertEqual((status, data), (200, {"return": [{"web1": True, "web2": True}]}))
        self.assertEqual(self.api.master.calls[-2], ("grains", "web*", "glob"))
        self.assertEqual(self.api.master.calls[-1][:3], ("run", ["web1", "web2"], "list"))
        status, data = self.post("webop", {"client": "local", "tgt": "*", "fun": "test.ping"})
        self.assertEqual(status, 403)
        self.assertIn("db1", data["return"])
        self.assertNotIn("run", [c[0] for c in self.api.master.calls[2:]])

    def test_grainRestricted(self) -> None:
        """
        A rule targeting grains covers the minions whose cached grains
        match it.
        """
        chunk = {"client": "local_async", "tgt": "G@os:Debian", "tgt_type": "compound"}
        status, data = self.post("debop", dict(chunk, fun="test.ping"))
        self.assertEqual(status, 200, data)
        self.assertEqual(data["return"][0]["minions"], ["web1", "web2"])
        status, data = self.post("debop", {"client": "local", "tgt": "db1", "fun": "test.ping"})
        self.assertEqual(status, 403)

    def test_noMinions(self) -> None:
        """
        A restricted call whose target matches no minion publishes nothing.
        """
        status, data = self.post("webop", {"client": "local", "tgt": "zzz", "fun": "test.ping"})
        self.assertEqual((status, data), (200, {"return": [{}]}))
        self.assertNotIn("run", [c[0] for c in self.api.master.calls])


class RunAndTokenTests(SynchronousTestCase):
    """
    C{/run} with credentials in the chunks, and C{/token}.
    """

    def setUp(self) -> None:
        self.api = Api(self.mktemp())

    def test_runWithCredentials(self) -> None:
        """
        C{/run} takes C{username}, C{password} and C{eauth} in each chunk.
        """
        chunk = {
            "client": "local",
            "tgt": "*",
            "fun": "test.ping",
            "username": "pinger",
            "password": "pinger-pw",
            "eauth": "file",
        }
        status, data = self.api.json("POST", "/run", [chunk])
        self.assertEqual(status, 200, data)
        self.assertEqual(data["return"][0], {"db1": True, "web1": True, "web2": True})
        status, data = self.api.json("POST", "/run", [dict(chunk, password="nope")])
        self.assertEqual(status, 401)
        status, data = self.api.json("POST", "/run", [dict(chunk, fun="cmd.run")])
        self.assertEqual(status, 403)

    def test_runIgnoresSessionHeader(self) -> None:
        """
        C{/run} uses no session: an X-Auth-Token header alone is not enough.
        """
        token = self.api.login("admin")
        chunk = {"client": "local", "tgt": "*", "fun": "test.ping"}
        self.assertEqual(self.api.json("POST", "/run", [chunk], token=token)[0], 401)
        self.assertEqual(self.api.json("POST", "/run", [dict(chunk, token=token)])[0], 200)

    def test_token(self) -> None:
        """
        C{/token} answers the token as Salt's C{mk_token}, usable at once.
        """
        status, data = self.api.json(
            "POST", "/token", [{"username": "admin", "password": "admin-pw", "eauth": "file"}]
        )
        self.assertEqual(status, 200, data)
        self.assertEqual(data[0]["name"], "admin")
        self.assertEqual(
            set(data[0]), {"token", "name", "eauth", "start", "expire", "groups", "auth_list"}
        )
        self.assertEqual(self.api.json("GET", "/jobs", token=data[0]["token"])[0], 200)
