"""
A new salttwist minion's start to its first job, and its SIGTERM to exit:
run with the Python of salttwist's virtualenv (C{run.py} does that),
against a running master.

    .venv/bin/python salttwist_firstjob.py MASTER_CONFIG_DIR --id ID \\
        --minion-config-dir DIR --warm-target ID --log FILE --pid-file FILE \\
        -- .venv/bin/salttwist-minion -c DIR -l error

Inside one C{task.react}: builds one
L{salttwist.client.local.LocalClient} (C{keepConnected}, as Salt's
LocalClient keeps its event subscription) from C{MASTER_CONFIG_DIR} and
runs one untimed C{test.ping} to C{--warm-target}; writes the new minion's
key pair (C{salttwist.crypt.loadOrCreateKeyPair}, as the minion would) in
the C{pki_dir} of C{--minion-config-dir} and stores its public key as
accepted in the master's key store (C{FilesystemKeyStore.putKey}); listens
on the master's event bus (C{salttwist.events.client.listenEvents}),
spawns the minion and waits for C{salt/minion/ID/start}; then
C{client.run(ID, 'test.ping')} until it returns C{True}. Then, off the
reactor, SIGTERM (see C{firstjob_common.py}). Prints one JSON object, as
C{salt_firstjob.py}.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from typing import Any

import firstjob_common as common


def main(argv: list[str] | None = None) -> int:
    """
    Take one sample and print it as JSON.
    """
    options = common.parseArguments(__doc__.split("\n\n")[0], argv)
    from twisted.internet import defer, task

    from salttwist import crypt
    from salttwist.client.local import LocalClient
    from salttwist.config import loadMasterConfig, loadMinionConfig
    from salttwist.events import EVENT_PUB_SOCKET
    from salttwist.events.client import listenEvents
    from salttwist.pki.keystore import FilesystemKeyStore

    config = loadMasterConfig(options.master_config_dir)
    minionConfig = loadMinionConfig(options.minion_config_dir)
    figures: dict[str, Any] = {"system": "salttwist", "id": options.id}
    state: dict[str, subprocess.Popen[bytes] | None] = {"process": None}

    async def sample(reactor: Any) -> None:
        client = LocalClient(config, reactor, keepConnected=True)

        async def ping(target: str) -> bool:
            result = await client.run(target, "test.ping", [], timeout=options.timeout)
            return result.returns.get(target, {}).get("return") is True

        figures["warm_ok"] = await ping(options.warm_target)
        pkiDir = minionConfig["pki_dir"]
        os.makedirs(pkiDir, mode=0o700, exist_ok=True)
        _, pem = crypt.loadOrCreateKeyPair(pkiDir, "minion", minionConfig["keysize"])
        keyStore = FilesystemKeyStore(config["pki_dir"])
        keyStore.putKey("minions", options.id, pem)
        figures["accepted_key"] = os.path.join(config["pki_dir"], "minions", options.id)

        tag = f"salt/minion/{options.id}/start"
        started: defer.Deferred[None] = defer.Deferred()

        def onEvent(eventTag: str, data: dict[str, Any]) -> None:
            if eventTag == tag and not started.called:
                started.callback(None)

        listener = await listenEvents(
            reactor, os.path.join(config["sock_dir"], EVENT_PUB_SOCKET), [tag], onEvent
        )
        try:
            process, spawned = common.spawn(options)
            state["process"] = process
            deadline = spawned + options.start_timeout

            def watch() -> None:
                # A minion that died, or never started, fails the wait.
                if started.called:
                    return
                if process.poll() is not None:
                    started.errback(RuntimeError(f"the minion exited {process.returncode}"))
                elif time.perf_counter() > deadline:
                    started.errback(RuntimeError("no start event"))

            watcher = task.LoopingCall(watch)
            watcher.clock = reactor
            watcher.start(0.05, now=False)
            try:
                await started
                figures["spawn_to_start_event_s"] = round(time.perf_counter() - spawned, 4)
            except RuntimeError as e:
                figures["error"] = str(e)
            finally:
                watcher.stop()
            await common.timeJobs(figures, lambda: ping(options.id), process, spawned, deadline)
        finally:
            listener.transport.loseConnection()
            client.close()

    try:
        try:
            task.react(lambda reactor: defer.Deferred.fromCoroutine(sample(reactor)))
        except SystemExit as e:
            # react() always exits; a failure has been logged on stderr.
            if e.code not in (0, None):
                figures.setdefault("error", f"the sample failed (exit {e.code})")
        figures["ok"] = "spawn_to_first_job_s" in figures
        process = state["process"]
        if process is not None:
            figures.update(common.stop(process, options.stop_timeout))
    finally:
        common.killQuietly(state["process"])
    common.report(figures)
    return 0


if __name__ == "__main__":
    sys.exit(main())
