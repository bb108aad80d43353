# -*- test-case-name: tests.test_state_masteropts -*-
"""
Tests for L{salttwist.state.masteropts}: the master's state options
(C{_master_opts}) merged into a minion's state runs, as Salt's
C{HighState.__gen_opts}; and the master's answer
(L{salttwist.master.fileserving.FileRequests.masterOpts}).
"""

from __future__ import annotations

import os
from typing import Any

from twisted.internet.defer import Deferred, fail, succeed
from twisted.internet.task import Clock
from twisted.trial.unittest import SynchronousTestCase

from salttwist.blocking import runSynchronously
from salttwist.config import loadMasterConfig
from salttwist.master.fileserving import FileRequests
from salttwist.state.masteropts import (
    MASTER_OPTS_CMD,
    fetchMasterOptions,
    masterStateOptions,
    mergeMasterOptions,
    usesMasterOptions,
    withMasterOptions,
)
from salttwist.transport.errors import RequestError


class MergeTests(SynchronousTestCase):
    """
    L{mergeMasterOptions}: Salt's rules.
    """

    def test_replaced(self) -> None:
        """
        The master's C{failhard}, C{renderer}, C{state_top},
        C{state_top_saltenv}, C{nodegroups}, C{state_auto_order} and top
        merging options replace the minion's; the others stay.
        """
        minion = {
            "id": "m1",
            "failhard": True,
            "renderer": "yaml",
            "state_top": "mine.sls",
            "state_auto_order": False,
            "top_file_merging_strategy": "same",
            "state_max_parallel": 3,
        }
        master = {
            "failhard": False,
            "renderer": "jinja|yaml",
            "state_top": "salt://top.sls",
            "state_top_saltenv": "prod",
            "nodegroups": {"webs": "L@web1,web2"},
            "state_auto_order": True,
            "top_file_merging_strategy": "merge",
            "env_order": ["base", "prod"],
            "default_top": "base",
        }
        merged = mergeMasterOptions(minion, master)
        self.assertEqual(merged, {"id": "m1", "state_max_parallel": 3, **master})
        self.assertEqual(minion["failhard"], True)

    def test_either(self) -> None:
        """
        C{state_aggregate} and C{state_events} are on when either side
        turns them on (the minion's list of modules is kept).
        """
        self.assertEqual(
            mergeMasterOptions({"state_aggregate": False}, {"state_aggregate": True}),
            {"state_aggregate": True},
        )
        self.assertEqual(
            mergeMasterOptions({"state_aggregate": ["pkg"]}, {"state_aggregate": True}),
            {"state_aggregate": ["pkg"]},
        )
        self.assertEqual(
            mergeMasterOptions({"state_events": True}, {"state_events": False}),
            {"state_events": True},
        )
        self.assertEqual(
            mergeMasterOptions(
                {"state_events": False, "state_aggregate": False},
                {"state_events": False, "state_aggregate": False},
            ),
            {"state_events": False, "state_aggregate": False},
        )

    def test_noAnswer(self) -> None:
        """
        No answer (L{None}, an error) leaves the minion's options.
        """
        self.assertEqual(mergeMasterOptions({"failhard": True}, None), {"failhard": True})
        self.assertEqual(mergeMasterOptions({"failhard": True}, "error"), {"failhard": True})

    def test_uses(self) -> None:
        """
        A masterless minion or C{local_state} keeps its own options.
        """
        self.assertTrue(usesMasterOptions({}))
        self.assertTrue(usesMasterOptions({"file_client": "remote"}))
        self.assertFalse(usesMasterOptions({"file_client": "local"}))
        self.assertFalse(usesMasterOptions({"local_state": True}))


class FetchTests(SynchronousTestCase):
    """
    L{fetchMasterOptions} and L{withMasterOptions} with a request function
    (on the reactor's thread: a L{Clock}).
    """

    def setUp(self) -> None:
        self.clock = Clock()
        self.sent: list[dict[str, Any]] = []

    def client(self, answer: Any) -> Any:
        testCase = self

        class Client:
            def request(self, payload: dict[str, Any]) -> Deferred[Any]:
                testCase.sent.append(payload)
                return answer() if callable(answer) else succeed(answer)

        return Client()

    def test_merged(self) -> None:
        """
        The run's options are the minion's merged with the master's answer.
        """
        client = self.client({"ret": {"state_aggregate": True, "failhard": True}})
        opts = withMasterOptions({"id": "m1", "failhard": False}, client, self.clock)
        self.assertEqual(opts, {"id": "m1", "failhard": True, "state_aggregate": True})
        self.assertEqual(self.sent, [{"cmd": MASTER_OPTS_CMD}])

    def test_refused(self) -> None:
        """
        A master that refuses the request (an older one) leaves the
        minion's options.
        """
        client = self.client(lambda: fail(RequestError("unknown command _master_opts")))
        opts = withMasterOptions({"failhard": True}, client, self.clock)
        self.assertEqual(opts, {"failhard": True})

    def test_notAMapping(self) -> None:
        """
        An answer that is not options is ignored.
        """
        self.assertIsNone(fetchMasterOptions(self.client({"ret": ["x"]}).request, self.clock))
        self.assertIsNone(fetchMasterOptions(self.client("x").request, self.clock))

    def test_noRemote(self) -> None:
        """
        Without a master to ask (a local file client) or masterless, no
        request is sent.
        """
        self.assertEqual(
            withMasterOptions({"failhard": True}, object(), self.clock), {"failhard": True}
        )
        client = self.client({"ret": {"failhard": False}})
        self.assertEqual(
            withMasterOptions({"file_client": "local", "failhard": True}, client, self.clock),
            {"file_client": "local", "failhard": True},
        )
        self.assertEqual(self.sent, [])


class MasterAnswerTests(SynchronousTestCase):
    """
    The master's C{_master_opts}.
    """

    def test_answer(self) -> None:
        """
        The master answers with its state options, nothing else of its
        config.
        """
        root = os.path.abspath(self.mktemp())
        os.makedirs(root)
        config = loadMasterConfig(
            root,
            overrides={
                "root_dir": root,
                "state_aggregate": True,
                "failhard": True,
                "nodegroups": {"webs": "web*"},
            },
        )
        room = FileRequests(config, Clock(), runSynchronously)
        answer = self.successResultOf(room.masterOpts(object(), {"cmd": "_master_opts"}))
        self.assertEqual(answer["ret"], masterStateOptions(config))
        self.assertEqual(answer["ret"]["state_aggregate"], True)
        self.assertEqual(answer["ret"]["failhard"], True)
        self.assertEqual(answer["ret"]["nodegroups"], {"webs": "web*"})
        self.assertNotIn("file_roots", answer["ret"])
        self.assertNotIn("root_dir", answer["ret"])
        self.assertEqual(
            set(answer["ret"]),
            {
                "renderer",
                "failhard",
                "state_top",
                "state_top_saltenv",
                "nodegroups",
                "state_auto_order",
                "top_file_merging_strategy",
                "env_order",
                "default_top",
                "state_events",
                "state_aggregate",
            },
        )
