# -*- test-case-name: tests.integration.test_pillar_targeting -*-
"""
Integration tests of pillar and ipcidr targeting with real daemons: a master
compiling real C{pillar_roots} whose top gives two minions different pillar,
and the real C{salttwist} command with C{-I}, C{-J}, C{-C 'I@... or ...'}
and C{-S}. The master expects the minions from its pillar cache (filled as
it compiles each minion's pillar) and each minion decides with its own
pillar.
"""

from __future__ import annotations

import json
import os
from typing import Any

from twisted.trial.unittest import TestCase

from tests.integration.harness import Cluster, waitFor

TOP = """\
base:
  '*':
    - common
  'web1':
    - web
  'db1':
    - db
"""

FILES = {
    "top.sls": TOP,
    "common.sls": "site: example.org\n",
    "web.sls": "role: web\nnet:\n  dc: Paris\n",
    "db.sls": "role: db\nnet:\n  dc: Lyon\n",
}


def writeTree(root: str, files: dict[str, str]) -> None:
    """
    Write C{files} (name -> text) under C{root}.
    """
    for name, text in files.items():
        path = os.path.join(root, name)
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with open(path, "w") as f:
            f.write(text)


class PillarTargetingTests(TestCase):
    """
    C{salttwist -I}, C{-J}, C{-C} with C{I@} and C{-S} against a real master
    and two real minions, C{web1} (pillar role web) and C{db1} (role db).
    """

    timeout = 180

    async def setUp(self) -> None:
        """
        Start the master with a C{pillar_roots} top giving each minion its
        role, and both minions; wait until both hold their pillar.
        """
        self.cluster = Cluster(self)
        pillarRoot = os.path.join(self.cluster.baseDir, "srv", "pillar")
        writeTree(pillarRoot, FILES)
        self.cluster.writeMasterConfig(pillar_roots={"base": [pillarRoot]})
        await self.cluster.startReady(("web1", "db1"))

        self.last: Any = None

        async def pillarsDelivered() -> bool:
            result = self.last = await self.cluster.salt(
                "*", "pillar.get", "role", "--out", "json", "--static"
            )
            if result.code != 0:
                return False
            try:
                return bool(json.loads(result.out) == {"web1": "web", "db1": "db"})
            except ValueError:
                return False

        await waitFor(
            pillarsDelivered,
            "both minions' pillar",
            context=lambda: self.cluster.explain(self.last),
        )

    async def salt(self, *args: str) -> dict[str, Any]:
        """
        Run C{salttwist ARGS --out json --static}, which must succeed (every
        expected minion returned).

        @return: its decoded output.
        """
        result = await self.cluster.salt(*args, "--out", "json", "--static")
        self.assertEqual(result.code, 0, self.cluster.explain(result))
        decoded: dict[str, Any] = json.loads(result.out)
        return decoded

    async def test_pillar(self) -> None:
        """
        C{-I role:web} is answered by C{web1} only, and the master expects
        no other minion (the command exits 0 without a missing return);
        C{--pillar} with a nested key and a glob, and C{-J}, likewise.
        """
        self.assertEqual(await self.salt("-I", "role:web", "test.ping"), {"web1": True})
        self.assertEqual(await self.salt("--pillar", "net:dc:Ly*", "test.ping"), {"db1": True})
        self.assertEqual(await self.salt("-J", "role:^d", "test.ping"), {"db1": True})
        self.assertEqual(
            await self.salt("--pillar-pcre", "role:.", "test.ping"),
            {
                "web1": True,
                "db1": True,
            },
        )

    async def test_compound(self) -> None:
        """
        C{I@} words in a compound target, with grain and id words.
        """
        self.assertEqual(
            await self.salt("-C", "I@role:web or G@id:db1", "test.ping"),
            {"web1": True, "db1": True},
        )
        self.assertEqual(
            await self.salt("-C", "I@site:example.org and not web1", "test.ping"), {"db1": True}
        )

    async def test_noMatch(self) -> None:
        """
        A pillar target that no cached pillar matches publishes nothing
        (exit 2, Salt's message).
        """
        result = await self.cluster.salt("-I", "role:mail", "test.ping")
        self.assertEqual(result.code, 2, self.cluster.explain(result))
        self.assertIn("No minions matched the target", result.out + result.err)

    async def test_ipcidr(self) -> None:
        """
        C{-S 127.0.0.0/8} is answered by both minions (their C{ipv4} grain
        holds the loopback address), C{-S 127.0.0.1} too, and a bad network
        is refused naming it.
        """
        both = {"web1": True, "db1": True}
        self.assertEqual(await self.salt("-S", "127.0.0.0/8", "test.ping"), both)
        self.assertEqual(await self.salt("--ipcidr", "127.0.0.1", "test.ping"), both)
        self.assertEqual(
            await self.salt("-C", "S@127.0.0.0/8 and I@role:db", "test.ping"), {"db1": True}
        )
        result = await self.cluster.salt("-S", "127.0.0.0/33", "test.ping")
        self.assertEqual(result.code, 2, self.cluster.explain(result))
        self.assertIn("'127.0.0.0/33'", result.out + result.err)
