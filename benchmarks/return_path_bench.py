"""
The master's CPU per job return, in one process, without sockets: how much
one master core could take, whatever else the machine is doing.

A real L{Master} with a real event bus (and C{--subscribers} subscribers on
its event socket's protocol, over in-memory transports) takes C{--returns}
encrypted C{_return} frames on one minion session's L{ReqServerProtocol},
each for its own job, exactly as they arrive from a socket: length prefix,
AES-GCM session frame, msgpack. The client side's sealing is done before
the clock starts. Measured: process CPU seconds per return (C{time.process_time}),
and with C{--profile} the functions that cost the most (cProfile, CPU
time).

Not included: the socket system calls (C{recv}/C{send}, about 10-20 us a
return on Linux) and the job cache, which runs in its own worker process
(C{benchmarks/jobcache_bench.py} measures it).

    .venv/bin/python benchmarks/return_path_bench.py [--returns 8000] [--subscribers 1]
"""

from __future__ import annotations

import argparse
import atexit
import os
import shutil
import sys
import tempfile
from typing import Any

from twisted.internet.testing import MemoryReactorClock, StringTransport

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(HERE))

from benchmarks import inprocess  # noqa: E402
from benchmarks.inprocess import cpuTimed  # noqa: E402
from salttwist import crypt, serial  # noqa: E402
from salttwist.blocking import runSynchronously  # noqa: E402
from salttwist.config import loadMasterConfig  # noqa: E402
from salttwist.events.bus import EventPublisherFactory, LocalEventBus  # noqa: E402
from salttwist.jid import JidGenerator  # noqa: E402
from salttwist.master.core import Master  # noqa: E402
from salttwist.master.keys import MasterKeys  # noqa: E402
from salttwist.master.reqserver import ReqServerProtocol  # noqa: E402
from salttwist.pki.keystore import InMemoryKeyStore  # noqa: E402
from salttwist.transport.session import SessionCipher  # noqa: E402

MINION = "bench-minion"


def buildMaster(subscribers: int) -> tuple[Master, list[StringTransport]]:
    """
    @return: a master without a job cache, and the transports of
        C{subscribers} event-bus subscribers to C{salt/job/}.
    """
    root = tempfile.mkdtemp(prefix="stb-ret-")
    # Nothing in it is kept: removed when the process exits.
    atexit.register(shutil.rmtree, root, True)
    config = loadMasterConfig(root, overrides={"root_dir": root})
    key = crypt.generatePrivateKey()
    bus = LocalEventBus()
    master = Master(
        config,
        MasterKeys(key, crypt.publicKeyToPem(key.public_key()), os.urandom(32)),
        InMemoryKeyStore(),
        bus,
        runSynchronously,
        MemoryReactorClock(),
    )
    factory = EventPublisherFactory(bus)
    transports = []
    for _ in range(subscribers):
        proto = factory.buildProtocol(None)
        transport = StringTransport()
        proto.makeConnection(transport)
        proto.frameReceived({"subscribe": ["salt/job/"]})
        transports.append(transport)
    return master, transports


def openSession(master: Master) -> tuple[ReqServerProtocol, StringTransport, SessionCipher]:
    """
    @return: the master's protocol of one authenticated minion session, its
        transport, and the minion's side of the session cipher.
    """
    server = ReqServerProtocol(master)
    transport = StringTransport()
    server.makeConnection(transport)
    sessionKey = os.urandom(32)
    server._authDone(({"ret": "accepted"}, sessionKey, "minion", MINION))
    return server, transport, SessionCipher(sessionKey, isServer=False)


def returnFrames(
    master: Master, client: SessionCipher, count: int
) -> tuple[list[bytes], list[str]]:
    """
    @return: C{count} sealed, length-prefixed C{_return} frames, one per
        new job registered on the master, and the jobs' jids.
    """
    frames, jids = [], []
    jidGenerator = JidGenerator()
    for rid in range(count):
        jid = jidGenerator.next()
        jids.append(jid)
        master.jobs.add(jid, {"jid": jid, "fun": "test.ping"}, [MINION])
        payload = {
            "cmd": "_return",
            "rid": rid,
            "id": MINION,
            "jid": jid,
            "fun": "test.ping",
            "fun_args": [],
            "return": True,
            "retcode": 0,
            "success": True,
        }
        body = serial.dumps(client.seal(payload))
        frames.append(len(body).to_bytes(4, "big") + body)
    return frames, jids


def run(options: argparse.Namespace) -> dict[str, Any]:
    """
    Feed the frames and measure.
    """
    master, subscriberTransports = buildMaster(options.subscribers)
    server, transport, client = openSession(master)
    frames, jids = returnFrames(master, client, options.returns)

    def feed() -> None:
        for i, frame in enumerate(frames):
            server.dataReceived(frame)
            if i % 1000 == 999:
                transport.clear()
                for t in subscriberTransports:
                    t.clear()

    cpu, profile = cpuTimed(feed, options.profile, options.top)
    replies = transport.value()
    out: dict[str, Any] = {
        "returns": options.returns,
        "subscribers": options.subscribers,
        "cpu_s": round(cpu, 3),
        "cpu_us_per_return": round(1e6 * cpu / options.returns, 1),
        "returns_per_core_second": round(options.returns / cpu),
        "accepted": sum(MINION in master.jobs.get(jid).returned for jid in jids),
        "last_replies_bytes": len(replies),
    }
    if profile is not None:
        out["profile"] = profile
    return out


def main(argv: list[str] | None = None) -> int:
    parser = inprocess.parser(__doc__.split("\n\n")[0])
    parser.add_argument(
        "--returns", type=int, default=8000, help="returns, one job each (at most 10,000)"
    )
    parser.add_argument("--subscribers", type=int, default=1, help="bus subscribers to salt/job/")
    return inprocess.report(run(parser.parse_args(argv)), 28)


if __name__ == "__main__":
    raise SystemExit(main())
