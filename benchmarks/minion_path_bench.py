"""
A minion's CPU per job, in one process, without sockets: what one
publication costs a real L{Minion} from the bytes of its pub connection to
the sealed return written on its req connection.

A real master and minion are joined in memory (C{tests/_loopback.py}):
the minion authenticates and subscribes as over TCP. Then the master
publishes C{--jobs} C{test.ping} jobs (C{Master.publish}, before the clock
starts) and their bytes, exactly as the master wrote them for this
minion's subscription, are fed to the minion's pub connection one frame at
a time. Measured: process CPU seconds per job (C{time.process_time}), and
with C{--profile} the functions that cost the most (cProfile, CPU time).
The returns are not acknowledged during the run (the master's side of the
req connection is not read), which is what a minion sees between a return
and the acknowledgement that rides with the next publication.

Not included: the socket system calls and the reactor's wake-up for each
frame (about 20-50 us a job on Linux, more where several processes share
a core).

    .venv/bin/python benchmarks/minion_path_bench.py [--jobs 3000] [--profile]
"""

from __future__ import annotations

import argparse
import atexit
import os
import shutil
import sys
import tempfile
from typing import Any

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(HERE))

from benchmarks import inprocess  # noqa: E402
from benchmarks.inprocess import cpuTimed  # noqa: E402
from salttwist import crypt  # noqa: E402
from salttwist.config import loadMasterConfig, loadMinionConfig  # noqa: E402
from salttwist.master.keys import MasterKeys  # noqa: E402
from salttwist.minion.core import Minion  # noqa: E402
from salttwist.pki.keystore import ACCEPTED  # noqa: E402
from tests._loopback import MasterMinionNetwork  # noqa: E402

MINION = "bench-minion"


def readyMinion() -> tuple[MasterMinionNetwork, Minion]:
    """
    @return: an in-memory master and a minion authenticated and subscribed
        to it.
    """
    root = tempfile.mkdtemp(prefix="stb-minion-")
    # Nothing in it is kept: removed when the process exits.
    atexit.register(shutil.rmtree, root, True)
    config = loadMasterConfig(
        root, overrides={"root_dir": root, "publish_port": 4505, "ret_port": 4506}
    )
    masterKey = crypt.generatePrivateKey()
    net = MasterMinionNetwork(
        config, MasterKeys(masterKey, crypt.publicKeyToPem(masterKey.public_key()), b"r" * 32)
    )
    minionRoot = os.path.join(root, "minion")
    minionConfig = loadMinionConfig(
        minionRoot,
        overrides={
            "root_dir": minionRoot,
            "id": MINION,
            "master": "salt.test",
            "master_port": 4506,
            "recon_randomize": False,
        },
    )
    os.makedirs(minionConfig["pki_dir"], mode=0o700)
    minionKey = crypt.generatePrivateKey()
    crypt.writePrivateFile(
        os.path.join(minionConfig["pki_dir"], "minion.pem"), crypt.privateKeyToPem(minionKey)
    )
    net.keyStore.putKey(ACCEPTED, MINION, crypt.publicKeyToPem(minionKey.public_key()))
    minion = net.buildMinion(minionConfig)
    ready = minion.whenReady()
    minion.start()
    net.flush()
    failures: list[Any] = []
    ready.addErrback(failures.append)
    if minion.state != "ready" or failures:
        raise SystemExit(f"the minion did not get ready: {minion.state} {failures}")
    return net, minion


def publications(net: MasterMinionNetwork, count: int) -> list[bytes]:
    """
    @return: the bytes of C{count} publications of C{test.ping} to C{*}, as
        the master wrote them on this minion's pub connection, one item
        per frame.
    """
    master = net.master
    subscriber = master.subscribers[MINION]
    transport: Any = subscriber.transport
    frames = []
    for _ in range(count):
        jid = master.jids.next()
        load = {
            "jid": jid,
            "fun": "test.ping",
            "arg": [],
            "tgt": "*",
            "tgt_type": "glob",
            "user": "root",
            "ts": net.reactor.seconds(),
        }
        master.jobs.add(jid, load, [MINION])
        master.publish(load)
        frames.append(transport.getOutBuffer())
    return frames


def run(options: argparse.Namespace) -> dict[str, Any]:
    """
    Feed the publications and measure.
    """
    net, minion = readyMinion()
    frames = publications(net, options.jobs)
    pub: Any = minion.pub
    req: Any = minion.req

    def feed() -> None:
        for i, frame in enumerate(frames):
            pub.dataReceived(frame)
            if i % 500 == 499:
                req.transport.getOutBuffer()

    cpu, profile = cpuTimed(feed, options.profile, options.top)
    out: dict[str, Any] = {
        "jobs": options.jobs,
        "cpu_s": round(cpu, 3),
        "cpu_us_per_job": round(1e6 * cpu / options.jobs, 1),
        "jobs_per_core_second": round(options.jobs / cpu),
        "returns_sent": len(minion.returns.unacknowledged),
    }
    if profile is not None:
        out["profile"] = profile
    minion.stop()
    return out


def main(argv: list[str] | None = None) -> int:
    parser = inprocess.parser(__doc__.split("\n\n")[0])
    parser.add_argument("--jobs", type=int, default=3000, help="publications, one job each")
    return inprocess.report(run(parser.parse_args(argv)), 24)


if __name__ == "__main__":
    raise SystemExit(main())
