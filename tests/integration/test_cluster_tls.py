# -*- test-case-name: tests.integration.test_cluster_tls -*-
"""
Two real masters (the installed wheel's daemons) in one cluster through a
private C{nats-server} that requires TLS (a self-signed certificate made by
the test, given as C{cluster_broker_ca}) and a user and password (in
C{cluster_broker}): a job through master A reaches the minion on master B,
and neither master's log shows the password.
"""

from __future__ import annotations

import json

from twisted.trial.unittest import TestCase

from tests.integration.test_cluster import _TwoMasters
from tests.test_cluster_nats_tls import PASSWORD, PASSWORD_IN_URL, USER, startTlsServer


class TlsBrokerTests(_TwoMasters, TestCase):
    """
    The fan-out over TLS with a password.
    """

    timeout = 180

    async def test_jobThroughTlsBroker(self) -> None:
        """
        A ping through A's CLI reaches C{minion1} on B; the masters logged
        the broker's URL with the password masked.
        """
        server = await startTlsServer(
            self, f"{USER}:{PASSWORD_IN_URL}@", "--user", USER, "--pass", PASSWORD
        )
        assert server.caFile is not None
        await self.startMasters(server.url, cluster_broker_ca=server.caFile)
        ping = await self.ping()
        self.assertEqual(ping.code, 0, f"{ping}\n{self.logs()}")
        self.assertEqual(json.loads(ping.out), {"minion1": True}, f"{ping}\n{self.logs()}")
        logs = self.logs()
        self.assertIn(f"tls://{USER}:***@localhost:{server.port}", logs)
        self.assertNotIn(PASSWORD, logs)
        self.assertNotIn(PASSWORD_IN_URL, logs)
