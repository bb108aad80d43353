# -*- test-case-name: tests.test_master_pillarserving -*-
"""
Tests for L{salttwist.master.pillarserving} (C{_pillar} on the master),
L{salttwist.master.pillarcache} and L{salttwist.master.pillartasks}: real
C{pillar_roots} in a temporary directory, compiled by the real compiler
(synchronously, in an L{InlineWorkerPool}, or through a recording pool to
hold a compile open), time through a L{Clock}.
"""

from __future__ import annotations

import os
from typing import Any

from twisted.internet.defer import Deferred
from twisted.internet.task import Clock
from twisted.internet.testing import EventLoggingObserver
from twisted.logger import LogLevel, formatEvent, globalLogPublisher
from twisted.trial.unittest import SynchronousTestCase

from salttwist import serial
from salttwist.blocking import runSynchronously
from salttwist.config import loadMasterConfig
from salttwist.master.grainscache import GrainsCache
from salttwist.master.pillarcache import PillarCache
from salttwist.master.pillarserving import MAX_COMPILES_PER_MINION, PillarRequests
from salttwist.master.pillartasks import (
    COMPILE_MANY_TASK,
    compileManyPillars,
    compileMinionPillar,
    showMinionTop,
)
from salttwist.transport.session import SessionCipher, SessionError
from salttwist.workers import WorkerFailed
from salttwist.workers.pool import InlineWorkerPool
from tests._pools import RecordingPool

SECRET = "s3cr3t-Pa55-4e1f"

TOP = """\
base:
  '*':
    - common
  'web*':
    - web
  'db*':
    - db
  'G@role:broken':
    - match: compound
    - broken
"""

FILES = {
    "top.sls": TOP,
    "common.sls": "motd: hello {{ grains.get('os', 'unknown') }}\n",
    "web.sls": "{% for n in range(3) %}\nport{{ n }}: {{ 8000 + n }}\n{% endfor %}\n",
    "db.sls": f"db_password: {SECRET}\n",
    "broken.sls": "good: 1\nbad: [unclosed\n",
}


def writeTree(root: str, files: dict[str, str]) -> str:
    """
    Write C{files} (relative path -> text) under C{root}.

    @return: C{root}.
    """
    for name, text in files.items():
        path = os.path.join(root, name)
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with open(path, "w") as f:
            f.write(text)
    return root


class FakeSession:
    """
    What the room reads of a session: the authenticated minion id.
    """

    def __init__(self, minionId: str) -> None:
        self.minionId = minionId


class PillarRoomTestCase(SynchronousTestCase):
    """
    A L{PillarRequests} over real C{pillar_roots}, compiling synchronously.
    """

    configOverrides: dict[str, Any] = {}

    def setUp(self) -> None:
        root = os.path.abspath(self.mktemp())
        self.pillarRoot = writeTree(os.path.join(root, "pillar"), FILES)
        self.config = loadMasterConfig(
            root,
            overrides={
                "root_dir": root,
                "pillar_roots": {"base": [self.pillarRoot]},
                **self.configOverrides,
            },
        )
        self.clock = Clock()
        self.grains = GrainsCache(None, runSynchronously)
        self.cache = PillarCache()
        self.room = PillarRequests(
            self.config, self.clock, runSynchronously, self.grains, self.cache
        )
        self.logs = EventLoggingObserver.createWithCleanup(self, globalLogPublisher)

    def ask(self, minionId: str, **load: Any) -> Deferred[dict[str, Any]]:
        """
        C{_pillar} from C{minionId}'s session.

        @return: a L{Deferred} of the reply as the minion reads it (through
            msgpack: the pillar is in the reply as its bytes).
        """
        d = self.room.minionPillar(FakeSession(minionId), {"cmd": "_pillar", **load})
        return d.addCallback(lambda reply: serial.loads(serial.dumps(reply)))

    def pillarOf(self, minionId: str, **load: Any) -> dict[str, Any]:
        """
        @return: the pillar C{minionId} gets at once.
        """
        reply = self.successResultOf(self.ask(minionId, id=minionId, **load))
        self.assertEqual(list(reply), ["ret"])
        return reply["ret"]  # type: ignore[no-any-return]

    def logText(self) -> str:
        """
        @return: every log line of the test, formatted.
        """
        return "\n".join(formatEvent(event) for event in self.logs)

    def rewrite(self, name: str, text: str) -> None:
        writeTree(self.pillarRoot, {name: text})


class OwnPillarTests(PillarRoomTestCase):
    """
    A session gets the pillar of its own minion id, with its grains.
    """

    def test_ownPillar(self) -> None:
        """
        Each minion gets what the top file gives its id, rendered with the
        grains it sent.
        """
        self.assertEqual(
            self.pillarOf("web1", grains={"os": "Debian"}),
            {"motd": "hello Debian", "port0": 8000, "port1": 8001, "port2": 8002},
        )
        self.assertEqual(
            self.pillarOf("db1", grains={}), {"motd": "hello unknown", "db_password": SECRET}
        )

    def test_idOptional(self) -> None:
        """
        A load without C{id} is answered for the session's minion.
        """
        reply = self.successResultOf(self.ask("db1"))
        self.assertEqual(reply["ret"]["db_password"], SECRET)

    def test_cachedGrains(self) -> None:
        """
        Without grains in the request, the master's cached grains are used.
        """
        self.grains.grains["web1"] = {"os": "Alpine"}
        self.assertEqual(self.pillarOf("web1")["motd"], "hello Alpine")

    def test_rogueIdRefused(self) -> None:
        """
        A load naming another minion is refused with a clear error, and the
        attempt is logged as a warning carrying no pillar.
        """
        error = self.assertRaises(ValueError, self.ask, "web1", id="db1")
        self.assertEqual(
            str(error), "minion 'web1' may only ask for its own pillar, not for 'db1''s"
        )
        warnings = [e for e in self.logs if e["log_level"] == LogLevel.warn]
        self.assertEqual(len(warnings), 1)
        self.assertEqual(
            formatEvent(warnings[0]), "minion 'web1' asked for the pillar of 'db1': refused"
        )
        self.assertEqual(self.room.compiles, 0)
        self.assertNotIn(SECRET, self.logText())
        self.assertIsNone(self.cache.get("db1"))

    def test_grainsIdIsTheSessions(self) -> None:
        """
        Grains claiming another id are compiled with the session's id.
        """
        self.rewrite("top.sls", "base:\n  '*':\n    - who\n")
        self.rewrite(
            "who.sls",
            "who: {{ grains['id'] }}\n{% if grains['id'] == 'db1' %}\nleak: yes\n{% endif %}\n",
        )
        self.assertEqual(self.pillarOf("web1", grains={"id": "db1"}), {"who": "web1"})
        self.assertEqual(self.pillarOf("web1", grains={}), {"who": "web1"})
        self.grains.grains["web1"] = {"id": "db1"}
        self.assertEqual(self.pillarOf("web1"), {"who": "web1"})

    def test_rogueIdBounded(self) -> None:
        """
        A long or odd claimed id is logged escaped and cut.
        """
        error = self.assertRaises(ValueError, self.ask, "web1", id="x\n" * 500)
        self.assertLess(len(str(error)), 200)
        self.assertNotIn("\n", self.logText())

    def test_malformed(self) -> None:
        """
        A saltenv, pillarenv or override of the wrong type is refused.
        """
        self.assertRaises(ValueError, self.ask, "web1", saltenv=3)
        self.assertRaises(ValueError, self.ask, "web1", pillarenv=["x"])
        error = self.assertRaises(ValueError, self.ask, "web1", pillar_override=[1])
        self.assertIn("pillar_override must be a mapping", str(error))

    def test_override(self) -> None:
        """
        C{pillar_override} is merged last; such a pillar is not cached for
        targeting.
        """
        pillar = self.pillarOf("web1", pillar_override={"motd": "override", "extra": 1})
        self.assertEqual((pillar["motd"], pillar["extra"]), ("override", 1))
        self.assertIsNone(self.cache.get("web1"))

    def test_storedForTargeting(self) -> None:
        """
        The compiled pillar is kept in the L{PillarCache} by minion id.
        """
        self.pillarOf("db1")
        self.pillarOf("web1")
        self.assertEqual(sorted(self.cache.byId()), ["db1", "web1"])
        self.assertEqual(self.cache.get("db1")["db_password"], SECRET)  # type: ignore[index]

    def test_noValuesLogged(self) -> None:
        """
        Compiling and serving a pillar logs none of its values.
        """
        self.pillarOf("db1")
        self.assertNotIn(SECRET, self.logText())


class RenderErrorTests(PillarRoomTestCase):
    """
    Render errors: full text in the master's log, Salt's C{_errors} to the
    minion, other minions unaffected.
    """

    def test_errors(self) -> None:
        """
        A broken SLS gives the minion C{_errors} naming the file, and the
        master's log an error naming file and line; another minion's
        pillar is whole.
        """
        pillar = self.pillarOf("web9", grains={"role": "broken"})
        self.assertIn("_errors", pillar)
        self.assertTrue(any("broken" in text for text in pillar["_errors"]), pillar)
        errors = [formatEvent(e) for e in self.logs if e["log_level"] == LogLevel.error]
        self.assertTrue(errors)
        self.assertTrue(all(text.startswith("pillar for minion web9: ") for text in errors))
        self.assertTrue(any("broken.sls" in text and "line" in text for text in errors), errors)
        self.assertEqual(self.pillarOf("db1")["db_password"], SECRET)

    def test_compilerFailure(self) -> None:
        """
        A compile that cannot run at all (a worker task error) is logged
        and answered as an error; the minion is told to see the log.
        """
        pool = RecordingPool()
        self.room.workers = pool
        d = self.ask("web1")
        pool.calls[0][2].callback([{"errorType": "RuntimeError", "errorMessage": "boom"}])
        failure = self.failureResultOf(d, ValueError)
        self.assertEqual(
            str(failure.value),
            "the master could not compile the pillar of 'web1'; see the master's log",
        )
        self.assertIn(
            "pillar for minion web1 could not be compiled: RuntimeError: boom", self.logText()
        )


class SharedCompileTests(PillarRoomTestCase):
    """
    Compiles run in the master's workers when it has them; requests for
    the same inputs share one.
    """

    def test_shared(self) -> None:
        """
        Two requests of one minion while its compile runs share it: one
        item of one task call, both answered.
        """
        pool = RecordingPool(size=2)
        self.room.workers = pool
        first = self.ask("web1", grains={"os": "x"})
        second = self.ask("web1", grains={"os": "x"})
        other = self.ask("db1", grains={"os": "x"})
        self.assertEqual(len(pool.calls), 2)
        task, args, d = pool.calls[0]
        self.assertEqual(task, COMPILE_MANY_TASK)
        self.assertEqual(args, ([["web1", {"os": "x", "id": "web1"}, None, None, {}]], self.config))
        d.callback([{"result": [serial.dumps({"a": 1}), []]}])
        self.assertEqual(self.successResultOf(first), {"ret": {"a": 1}})
        self.assertEqual(self.successResultOf(second), {"ret": {"a": 1}})
        self.assertNoResult(other)
        # Done: the next request compiles again.
        self.ask("web1", grains={"os": "x"})
        self.assertEqual(len(pool.calls), 3)

    def test_sharedAmongSeveral(self) -> None:
        """
        With two compiles of one minion running (different grains), a
        request joins the one of its own inputs; the first one's end leaves
        the other one to its waiters; another minion with the same grains
        never shares a compile.
        """
        pool = RecordingPool(size=4)
        self.room.workers = pool
        one = self.ask("web1", grains={"os": "x"})
        two = self.ask("web1", grains={"os": "y"})
        other = self.ask("db1", grains={"os": "y"})
        self.assertEqual(len(pool.calls), 3)
        twoAgain = self.ask("web1", grains={"os": "y"})
        self.assertEqual(len(pool.calls), 3)
        pool.calls[0][2].callback([{"result": [serial.dumps({"n": 1}), []]}])
        self.assertEqual(self.successResultOf(one), {"ret": {"n": 1}})
        self.assertNoResult(two)
        self.assertNoResult(twoAgain)
        pool.calls[1][2].callback([{"result": [serial.dumps({"n": 2}), []]}])
        self.assertEqual(self.successResultOf(two), {"ret": {"n": 2}})
        self.assertEqual(self.successResultOf(twoAgain), {"ret": {"n": 2}})
        self.assertNoResult(other)
        self.assertEqual(self.room._inFlight.keys(), {"db1"})

    def test_batched(self) -> None:
        """
        Compiles that wait for a worker go together in the next task call,
        each answered with its own result or error.
        """
        pool = RecordingPool(size=1)
        self.room.workers = pool
        web = self.ask("web1")
        db = self.ask("db1")
        other = self.ask("x1")
        self.assertEqual(len(pool.calls), 1)
        pool.calls[0][2].callback([{"result": [serial.dumps({"w": 1}), []]}])
        self.assertEqual(self.successResultOf(web), {"ret": {"w": 1}})
        self.assertEqual(len(pool.calls), 2)
        items = pool.calls[1][1][0]
        self.assertEqual([item[0] for item in items], ["db1", "x1"])
        pool.calls[1][2].callback(
            [
                {"result": [serial.dumps({"d": 1}), []]},
                {"errorType": "RuntimeError", "errorMessage": "bad"},
            ]
        )
        self.assertEqual(self.successResultOf(db), {"ret": {"d": 1}})
        self.failureResultOf(other, ValueError)

    def test_boundedPerMinion(self) -> None:
        """
        A minion may have L{MAX_COMPILES_PER_MINION} compiles with
        different inputs running; more are refused until one is over,
        other minions unaffected.
        """
        pool = RecordingPool(size=8)
        self.room.workers = pool
        asked = [self.ask("web1", grains={"n": n}) for n in range(MAX_COMPILES_PER_MINION)]
        error = self.assertRaises(ValueError, self.ask, "web1", grains={"n": "more"})
        self.assertIn("pillar compiles running already", str(error))
        self.ask("db1")
        pool.calls[0][2].callback([{"result": [serial.dumps({}), []]}])
        pool.calls[1][2].callback([{"errorType": "RuntimeError", "errorMessage": "boom"}])
        self.ask("web1", grains={"n": "more"})
        self.ask("web1", grains={"n": "again"})
        self.assertRaises(ValueError, self.ask, "web1", grains={"n": "too many"})
        self.assertEqual(len(pool.calls), MAX_COMPILES_PER_MINION + 3)
        self.successResultOf(asked[0])
        self.failureResultOf(asked[1], ValueError)

    def test_inWorkerTask(self) -> None:
        """
        Through a pool, the task compiles the real pillar (its arguments and
        result through msgpack).
        """
        pool = InlineWorkerPool()
        self.successResultOf(pool.start())
        self.room.workers = pool
        self.assertEqual(self.pillarOf("db1")["db_password"], SECRET)

    def test_workersUnavailable(self) -> None:
        """
        A pool that cannot take the compile (a worker died) leaves it to a
        thread.
        """
        pool = RecordingPool()
        self.room.workers = pool
        d = self.ask("db1")
        pool.calls[0][2].errback(WorkerFailed(COMPILE_MANY_TASK, 123, "died"))
        self.assertEqual(self.successResultOf(d)["ret"]["db_password"], SECRET)

    def test_tasks(self) -> None:
        """
        The tasks answer C{[pillar, errors]} and C{[top, errors]}.
        """
        pillar, errors = compileMinionPillar(self.config, "db1", {})
        self.assertEqual((pillar["db_password"], errors), (SECRET, []))
        top, errors = showMinionTop(self.config, "web1", {})
        self.assertEqual((top, errors), ({"base": ["common", "web"]}, []))
        answers = compileManyPillars(
            [["db1", {}, None, None, None], ["web1", {}, None, None, {"x": 1}]], self.config
        )
        # Each pillar as its msgpack bytes.
        self.assertEqual(serial.loads(answers[0]["result"][0])["db_password"], SECRET)
        self.assertEqual(serial.loads(answers[1]["result"][0])["x"], 1)


class PassedThroughTests(PillarRoomTestCase):
    """
    A worker answers each pillar as its msgpack bytes: the master keeps
    them and sends them on as they are, sealed to the asking minion's
    session only.
    """

    def test_bytesKeptAndSent(self) -> None:
        """
        The worker's bytes are what the cache keeps and what the reply
        carries (L{serial.Packed}), not decoded on the way; the minion reads
        the pillar from the sealed reply.
        """
        pool = RecordingPool(size=1)
        self.room.workers = pool
        d = self.room.minionPillar(FakeSession("web1"), {"cmd": "_pillar"})
        packed = serial.dumps({"a": {"b": [1, 2]}, "s": SECRET})
        pool.calls[0][2].callback([{"result": [packed, []]}])
        reply = self.successResultOf(d)
        self.assertIs(reply["ret"].data, packed)
        self.assertIs(self.cache.pillars["web1"], packed)
        self.assertEqual(self.cache.get("web1"), {"a": {"b": [1, 2]}, "s": SECRET})
        key = os.urandom(32)
        frame = SessionCipher(key, isServer=True).seal(dict(reply, rid=3))
        self.assertEqual(
            SessionCipher(key, isServer=False).open(frame),
            {"ret": {"a": {"b": [1, 2]}, "s": SECRET}, "rid": 3},
        )
        # Another minion's session key opens nothing.
        self.assertRaises(SessionError, SessionCipher(os.urandom(32), isServer=False).open, frame)
        self.assertNotIn(SECRET, self.logText())

    def test_pillarForDecodes(self) -> None:
        """
        L{PillarRequests.pillarFor} gives the pillar as a mapping, and
        L{PillarRequests.packedPillarFor} as its bytes, from a worker or a
        thread alike.
        """
        self.assertEqual(
            self.successResultOf(self.room.pillarFor("db1", {}))["db_password"], SECRET
        )
        packed = self.successResultOf(self.room.packedPillarFor("db1", {}, cleanCache=True))
        self.assertEqual(serial.loads(packed)["db_password"], SECRET)
        pool = InlineWorkerPool()
        self.successResultOf(pool.start())
        self.room.workers = pool
        self.assertEqual(
            self.successResultOf(self.room.pillarFor("db1", {}))["db_password"], SECRET
        )

    def test_notAMapping(self) -> None:
        """
        A worker's answer that is not a msgpack map fails that minion's
        request with a clear error, logged, and caches nothing.
        """
        pool = RecordingPool(size=1)
        self.room.workers = pool
        d = self.ask("web1")
        pool.calls[0][2].callback([{"result": [serial.dumps([1, 2]), []]}])
        error = self.failureResultOf(d, ValueError)
        self.assertIn("could not compile the pillar of 'web1'", str(error.value))
        self.assertIn("the compiler returned no mapping", self.logText())
        self.assertNotIn("web1", self.cache.pillars)


class PillarCacheTests(PillarRoomTestCase):
    """
    With C{pillar_cache}, a cached pillar answers for C{pillar_cache_ttl}
    seconds, unless the minion asks for a clean one.
    """

    configOverrides = {"pillar_cache": True, "pillar_cache_ttl": 60}

    def test_ttl(self) -> None:
        """
        Within the TTL the cache answers (a changed SLS is not seen); after
        it the pillar is compiled again.
        """
        self.assertEqual(self.pillarOf("db1")["db_password"], SECRET)
        self.rewrite("db.sls", "db_password: changed\n")
        self.clock.advance(59)
        self.assertEqual(self.pillarOf("db1")["db_password"], SECRET)
        self.assertEqual(self.room.compiles, 1)
        self.clock.advance(1)
        self.assertEqual(self.pillarOf("db1")["db_password"], "changed")
        self.assertEqual(self.room.compiles, 2)

    def test_cleanCache(self) -> None:
        """
        C{clean_cache} (C{saltutil.refresh_pillar}) compiles again at once.
        """
        self.pillarOf("db1")
        self.rewrite("db.sls", "db_password: changed\n")
        self.assertEqual(self.pillarOf("db1", clean_cache=True)["db_password"], "changed")

    def test_otherEnvironment(self) -> None:
        """
        A request for another pillarenv is not answered from the cache.
        """
        self.pillarOf("db1")
        self.pillarOf("db1", pillarenv="base")
        self.assertEqual(self.room.compiles, 2)

    def test_withoutPillarCache(self) -> None:
        """
        Without C{pillar_cache} every request compiles.
        """
        self.config["pillar_cache"] = False
        self.pillarOf("db1")
        self.pillarOf("db1")
        self.assertEqual(self.room.compiles, 2)


class KeyEventTests(PillarRoomTestCase):
    """
    A minion whose key is deleted or rejected loses its cached pillar.
    """

    def test_forget(self) -> None:
        """
        C{salt/key} C{delete} and C{reject} forget; C{accept} does not.
        """
        self.pillarOf("db1")
        self.pillarOf("web1")
        self.room.keyEvent("salt/key", {"act": "accept", "id": "db1"})
        self.assertIsNotNone(self.cache.get("db1"))
        self.room.keyEvent("salt/key", {"act": "delete", "id": "db1"})
        self.room.keyEvent("salt/key", {"act": "reject", "id": "web1"})
        self.assertEqual(dict(self.cache.byId()), {})

    def test_compileDuringForget(self) -> None:
        """
        A compile that ends after the key was deleted is answered but not
        cached.
        """
        pool = RecordingPool()
        self.room.workers = pool
        d = self.ask("db1")
        self.room.keyEvent("salt/key", {"act": "delete", "id": "db1"})
        pool.calls[0][2].callback([{"result": [{"a": 1}, []]}])
        self.successResultOf(d)
        self.assertIsNone(self.cache.get("db1"))


class PillarCacheUnitTests(SynchronousTestCase):
    """
    L{PillarCache} on its own.
    """

    def test_keptPacked(self) -> None:
        """
        A pillar is kept as its msgpack bytes; each read gives a new copy,
        so a reader that changes what it got changes nothing cached.
        C{byId} is a snapshot: a pillar stored after it does not show, and
        each of its pillars is decoded once, when looked up.
        """
        cache = PillarCache()
        cache.store("m", {"a": [1, 2]})
        self.assertIsInstance(cache.pillars["m"], bytes)
        got = cache.get("m")
        got["a"].append(3)  # type: ignore[index]
        self.assertEqual(cache.get("m"), {"a": [1, 2]})
        view = cache.byId()
        cache.store("n", {"b": 1})
        self.assertEqual(sorted(view), ["m"])
        self.assertNotIn("n", view)
        self.assertIs(view["m"], view["m"])
        self.assertEqual(view.get("n"), None)
        self.assertEqual(sorted(cache.byId()), ["m", "n"])

    def test_fresh(self) -> None:
        """
        C{fresh} answers a pillar stored for the same environments less
        than C{ttl} seconds ago.
        """
        cache = PillarCache()
        self.assertIsNone(cache.fresh("m", (None, None), 0, 10))
        cache.store("m", {"a": 1}, 100.0, ("base", None))
        self.assertEqual(cache.fresh("m", ("base", None), 109.9, 10), {"a": 1})
        self.assertIsNone(cache.fresh("m", ("base", None), 110, 10))
        self.assertIsNone(cache.fresh("m", (None, None), 101, 10))
        cache.store("m", {"a": 2})
        self.assertIsNone(cache.fresh("m", (None, None), 0, 10))
        self.assertEqual(cache.get("m"), {"a": 2})
        self.assertEqual(cache.generation("m"), 0)
        cache.forget("m")
        self.assertEqual((cache.get("m"), cache.generation("m")), (None, 1))
