"""
A new Salt minion's start to its first job, and its SIGTERM to exit: run
with the Python of the virtualenv that has Salt installed (C{run.py} does
that), against a running master.

    SALT_VENV/bin/python salt_firstjob.py MASTER_CONFIG_DIR --id ID \\
        --minion-config-dir DIR --warm-target ID --log FILE --pid-file FILE \\
        -- SALT_VENV/bin/salt-minion -c DIR -l error

Builds one C{salt.client.LocalClient} from C{MASTER_CONFIG_DIR/master} and
runs one untimed C{test.ping} to C{--warm-target}; writes the new minion's
key pair with C{salt.crypt.write_keys} in the C{pki_dir} of
C{--minion-config-dir/minion} and its public key in the master's
C{pki_dir/minions/ID}; listens on the master's event bus
(C{salt.utils.event.get_master_event}), spawns the minion and waits for
C{salt/minion/ID/start}; then C{client.cmd(ID, 'test.ping')} until it
returns C{True}; then SIGTERM (see C{firstjob_common.py}). Prints one JSON
object: C{spawn_to_start_event_s}, C{spawn_to_first_job_s},
C{first_job_latency_s}, C{second_job_latency_s} (one more job, at
once), C{attempts}, C{ok}, C{sigterm_to_exit_s} and the
rest, with C{accepted_key} (the file to delete afterwards).

Only the standard library and Salt are imported here.
"""

from __future__ import annotations

import os
import sys
import time
from typing import Any

import firstjob_common as common


def main(argv: list[str] | None = None) -> int:
    """
    Take one sample and print it as JSON.
    """
    options = common.parseArguments(__doc__.split("\n\n")[0], argv)
    import salt.client
    import salt.config
    import salt.crypt
    import salt.utils.event

    opts = salt.config.client_config(os.path.join(options.master_config_dir, "master"))
    minionOpts = salt.config.minion_config(os.path.join(options.minion_config_dir, "minion"))
    client = salt.client.LocalClient(mopts=opts)
    warm = client.cmd(options.warm_target, "test.ping", timeout=options.timeout)
    figures: dict[str, Any] = {
        "system": "salt",
        "id": options.id,
        "warm_ok": warm.get(options.warm_target) is True,
    }

    pkiDir = minionOpts["pki_dir"]
    os.makedirs(pkiDir, mode=0o700, exist_ok=True)
    salt.crypt.write_keys(pkiDir, "minion", minionOpts.get("keysize", 2048))
    with open(os.path.join(pkiDir, "minion.pub"), "rb") as f:
        pem = f.read()
    accepted = os.path.join(opts["pki_dir"], "minions", options.id)
    common.writeAcceptedKey(accepted, pem)
    figures["accepted_key"] = accepted

    event = salt.utils.event.get_master_event(opts, opts["sock_dir"], listen=True)
    process = None
    try:
        if not event.connect_pub(timeout=10):
            raise RuntimeError("could not connect to the master's event bus")
        tag = f"salt/minion/{options.id}/start"
        process, spawned = common.spawn(options)
        deadline = spawned + options.start_timeout
        while True:
            now = time.perf_counter()
            if now > deadline or process.poll() is not None:
                figures["error"] = "no start event" + (
                    f" (the minion exited {process.returncode})"
                    if process.poll() is not None
                    else ""
                )
                break
            got = event.get_event(wait=min(1.0, deadline - now), tag=tag, full=True)
            if got and got.get("tag") == tag:
                figures["spawn_to_start_event_s"] = round(time.perf_counter() - spawned, 4)
                break

        async def ping() -> bool:
            ret = client.cmd(options.id, "test.ping", timeout=options.timeout)
            return ret.get(options.id) is True

        common.runBlocking(common.timeJobs(figures, ping, process, spawned, deadline))
        figures["ok"] = "spawn_to_first_job_s" in figures
        figures.update(common.stop(process, options.stop_timeout))
    finally:
        common.killQuietly(process)
        event.destroy()
        client.destroy()
    common.report(figures)
    return 0


if __name__ == "__main__":
    sys.exit(main())
