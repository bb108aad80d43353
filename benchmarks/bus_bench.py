"""
The master's event bus under load (issue 5): events per second through a real
C{salttwist-master} to many subscribers, and the master's memory while one
subscriber stops reading.

Everything runs as separate processes on this machine: the master
(C{salttwist-master -c DIR}, temporary C{root_dir}, 127.0.0.1, ports 0), one
publisher writing frames to C{master_event_pull.ipc} over one connection (as
C{salttwist.events.fire} does, but without a connection per event), and
subscriber processes on C{master_event_pub.ipc}: the reading ones use the real
client (L{salttwist.events.client.listenEvents}, each its own process and
socket), the stalled one is a raw socket that sends the subscribe frame and
then does not read until told to.

  1. Throughput: C{--subscribers} reading subscribers to C{bench/}; the
     publisher fires C{--events} small events as fast as the pull socket
     takes them, then C{bench/end}.
  2. Stalled subscriber (on a fresh master, with C{master_stats} every 0.5 s):
     one stalled subscriber and one reading subscriber; C{--stall-events}
     events of about C{--stall-bytes} bytes each are fired while the master's
     C{VmRSS} is sampled every 0.5 s; then the stalled subscriber reads what
     it is sent, and its events plus the C{salt/event/dropped} counts must add
     up to what was fired.

Every process it starts, it stops, by pid. Run
C{.venv/bin/python benchmarks/bus_bench.py --help}.
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import resource
import shutil
import signal
import socket
import struct
import subprocess
import sys
import tempfile
import threading
import time
from typing import Any

BIN = os.path.dirname(os.path.abspath(sys.executable))
HERE = os.path.dirname(os.path.abspath(__file__))
PREFIX = "bench/"
EVENT_TAG = "bench/e"
END_TAG = "bench/end"
DROPPED_TAG = "salt/event/dropped"
STATS_TAG = "salt/master/stats"
HEADER = struct.Struct("!I")


# --- child processes ---------------------------------------------------------


def _cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def runSubscriber(sockPath: str, expected: int, idle: float, withStats: bool) -> None:
    """
    A reading subscriber on the real client: count C{bench/e} events (and
    whether their sequence numbers arrive in order), C{salt/event/dropped}
    notices and, with C{withStats}, the largest C{queued}/C{dropped} the
    master reported; print C{ready}, then one JSON line when C{bench/end}
    arrives, C{expected} events arrived, or nothing came for C{idle} seconds.
    """
    from twisted.internet import reactor, task
    from twisted.internet.defer import ensureDeferred

    from salttwist.events.client import listenEvents

    state: dict[str, Any] = {
        "received": 0,
        "first": None,
        "last": None,
        "outOfOrder": 0,
        "dropNotices": 0,
        "droppedReported": 0,
        "endSeen": False,
        "maxQueued": 0,
        "maxDroppedPending": 0,
        "maxSubscribers": 0,
    }
    nextSeq = [0]
    lastActivity = [time.monotonic()]
    done = [False]

    def finish() -> None:
        if done[0]:
            return
        done[0] = True
        state["cpu"] = _cpu()
        print(json.dumps(state), flush=True)
        reactor.stop()

    def onEvent(tag: str, data: dict[str, Any]) -> None:
        now = time.monotonic()
        lastActivity[0] = now
        if tag == EVENT_TAG:
            if state["first"] is None:
                state["first"] = now
            state["last"] = now
            state["received"] += 1
            if data.get("i") != nextSeq[0]:
                state["outOfOrder"] += 1
            nextSeq[0] = data.get("i", nextSeq[0]) + 1
            if state["received"] >= expected:
                finish()
        elif tag == DROPPED_TAG:
            state["dropNotices"] += 1
            state["droppedReported"] += int(data.get("dropped", 0))
        elif tag == STATS_TAG:
            events = data.get("events", {})
            state["maxQueued"] = max(state["maxQueued"], events.get("queued", 0))
            state["maxDroppedPending"] = max(state["maxDroppedPending"], events.get("dropped", 0))
            state["maxSubscribers"] = max(state["maxSubscribers"], events.get("subscribers", 0))
        elif tag == END_TAG:
            state["endSeen"] = True
            finish()

    def checkIdle() -> None:
        if time.monotonic() - lastActivity[0] > idle:
            finish()

    async def start() -> None:
        prefixes = [PREFIX, STATS_TAG] if withStats else [PREFIX]
        proto = await listenEvents(reactor, sockPath, prefixes, onEvent, timeout=30.0)
        proto.lost.addCallback(lambda _: finish())
        lastActivity[0] = time.monotonic()
        print("ready", flush=True)
        # Idle is counted from the publisher's start: the parent sends "go".
        task.LoopingCall(checkIdle).start(1.0, now=False)

    def failed(failure: Any) -> None:
        print(json.dumps({"error": str(failure.value)}), flush=True)
        reactor.stop()

    reactor.callWhenRunning(lambda: ensureDeferred(start()).addErrback(failed))
    reactor.run()


def runStalled(sockPath: str, idle: float) -> None:
    """
    A subscriber that stops reading: connect, send C{{"subscribe":
    ["bench/"]}}, read the confirmation, print C{ready}, then read nothing
    until a line arrives on stdin; then read everything until the master
    closes or is silent for C{idle} seconds, and print one JSON line.
    """
    from salttwist import serial

    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    sock.connect(sockPath)
    body = serial.dumps({"subscribe": [PREFIX]})
    sock.sendall(HEADER.pack(len(body)) + body)
    buffer = bytearray()
    while True:
        buffer += sock.recv(4096)
        if len(buffer) >= 4 and len(buffer) >= 4 + HEADER.unpack_from(buffer)[0]:
            break
    (length,) = HEADER.unpack_from(buffer)
    reply = serial.loads(bytes(buffer[4 : 4 + length]))
    del buffer[: 4 + length]
    print(
        json.dumps(
            {"ready": reply, "rcvbuf": sock.getsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF)}
        ),
        flush=True,
    )
    sys.stdin.readline()
    state: dict[str, Any] = {
        "received": 0,
        "dropNotices": 0,
        "droppedReported": 0,
        "noticeAfterEvents": [],
        "outOfOrder": 0,
        "closedByMaster": False,
        "endSeen": False,
    }
    nextSeq = 0
    sock.settimeout(idle)
    started = time.monotonic()
    while True:
        try:
            chunk = sock.recv(1 << 20)
        except TimeoutError:
            break
        if not chunk:
            state["closedByMaster"] = True
            break
        buffer += chunk
        offset = 0
        while len(buffer) - offset >= 4:
            (length,) = HEADER.unpack_from(buffer, offset)
            if len(buffer) - offset - 4 < length:
                break
            message = serial.loads(bytes(buffer[offset + 4 : offset + 4 + length]))
            offset += 4 + length
            tag = message.get("tag")
            data = message.get("data", {})
            if tag == EVENT_TAG:
                state["received"] += 1
                if data.get("i") != nextSeq:
                    state["outOfOrder"] += 1
                nextSeq = data.get("i", nextSeq) + 1
            elif tag == DROPPED_TAG:
                state["dropNotices"] += 1
                state["droppedReported"] += int(data.get("dropped", 0))
                state["noticeAfterEvents"].append(state["received"])
            elif tag == END_TAG:
                state["endSeen"] = True
        del buffer[:offset]
    state["drainSeconds"] = time.monotonic() - started - idle
    sock.close()
    print(json.dumps(state), flush=True)


def runPublisher(sockPath: str, count: int, padBytes: int, batch: int, rate: float) -> None:
    """
    Fire C{count} C{bench/e} events, C{{"i": n, "pad": "x" * padBytes}}
    (no pad when 0), then C{bench/end}, over one connection to the pull
    socket, C{batch} frames to a write (paced to C{rate} events/s when
    positive); the frames are built before the clock starts. Print
    C{ready}, wait for a line on stdin, fire, and print one JSON line.
    """
    from salttwist import serial

    pad = "x" * padBytes
    frames = []
    for i in range(count):
        data: dict[str, Any] = {"i": i, "pad": pad} if padBytes else {"i": i}
        body = serial.dumps({"tag": EVENT_TAG, "data": data})
        frames.append(HEADER.pack(len(body)) + body)
    end = serial.dumps({"tag": END_TAG, "data": {"count": count}})
    frameBytes = sum(len(f) for f in frames) / max(count, 1)
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    sock.connect(sockPath)
    print("ready", flush=True)
    sys.stdin.readline()
    start = time.monotonic()
    for n in range(0, count, batch):
        sock.sendall(b"".join(frames[n : n + batch]))
        if rate > 0:
            delay = start + (n + batch) / rate - time.monotonic()
            if delay > 0:
                time.sleep(delay)
    sent = time.monotonic()
    sock.sendall(HEADER.pack(len(end)) + end)
    sock.close()
    print(
        json.dumps(
            {
                "start": start,
                "sent": sent,
                "count": count,
                "pullFrameBytes": frameBytes,
                "cpu": _cpu(),
            }
        ),
        flush=True,
    )


# --- the parent --------------------------------------------------------------


class Master:
    """
    A real C{salttwist-master} under a temporary C{root_dir}.
    """

    def __init__(self, root: str, name: str, extra: dict[str, Any]) -> None:
        self.root = os.path.join(root, name)
        self.configDir = os.path.join(self.root, "etc")
        os.makedirs(self.configDir)
        lines = [
            f"root_dir: {self.root}",
            "interface: 127.0.0.1",
            "publish_port: 0",
            "ret_port: 0",
            *(f"{key}: {json.dumps(value)}" for key, value in extra.items()),
        ]
        with open(os.path.join(self.configDir, "master"), "w") as f:
            f.write("\n".join(lines) + "\n")
        self.log = open(os.path.join(self.root, "master.log"), "wb")
        self.process = subprocess.Popen(
            [os.path.join(BIN, "salttwist-master"), "-c", self.configDir, "-l", "warning"],
            stdout=self.log,
            stderr=subprocess.STDOUT,
        )
        self.pid = self.process.pid
        self.sockDir = os.path.join(self.root, "var/run/salttwist/master")
        portsFile = os.path.join(self.sockDir, "master.ports")
        deadline = time.monotonic() + 60
        while True:
            if self.process.poll() is not None:
                raise SystemExit(f"bus_bench: the master exited; see {self.root}/master.log")
            try:
                with open(portsFile) as f:
                    if json.load(f).get("pid") == self.pid:
                        break
            except (OSError, ValueError):
                pass
            if time.monotonic() > deadline:
                raise SystemExit("bus_bench: the master did not write its ports file")
            time.sleep(0.05)
        self.pubSocket = os.path.join(self.sockDir, "master_event_pub.ipc")
        self.pullSocket = os.path.join(self.sockDir, "master_event_pull.ipc")

    def status(self) -> dict[str, int]:
        """
        @return: C{VmRSS} and C{VmHWM} in KiB.
        """
        values = {}
        with open(f"/proc/{self.pid}/status") as f:
            for line in f:
                if line.startswith(("VmRSS:", "VmHWM:")):
                    key, value = line.split(":")
                    values[key] = int(value.split()[0])
        return values

    def cpu(self) -> float:
        """
        @return: the master's utime + stime in seconds.
        """
        with open(f"/proc/{self.pid}/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")

    def logTail(self, lines: int = 20) -> list[str]:
        self.log.flush()
        with open(os.path.join(self.root, "master.log"), errors="replace") as f:
            return f.read().splitlines()[-lines:]

    def stop(self) -> float:
        """
        SIGTERM the master (only it, by pid) and wait; SIGKILL after 10 s.

        @return: seconds to exit.
        """
        start = time.monotonic()
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
            try:
                self.process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
        self.log.close()
        return time.monotonic() - start


class Child:
    """
    One child process of this script, talking in lines on stdin/stdout.
    """

    def __init__(self, *args: str) -> None:
        self.process = subprocess.Popen(
            [sys.executable, os.path.abspath(__file__), *args],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
        )

    def readline(self, timeout: float = 120.0) -> str:
        result: list[str] = []
        reader = threading.Thread(target=lambda: result.append(self.process.stdout.readline()))
        reader.start()
        reader.join(timeout)
        if not result or not result[0]:
            raise SystemExit(f"bus_bench: child {self.process.args[2:]} said nothing")
        return result[0]

    def tell(self) -> None:
        self.process.stdin.write("go\n")
        self.process.stdin.flush()

    def result(self, timeout: float = 600.0) -> dict[str, Any]:
        return json.loads(self.readline(timeout))

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
            try:
                self.process.wait(timeout=5)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()


class Sampler(threading.Thread):
    """
    Sample the master's C{VmRSS} every C{interval} seconds until stopped.
    """

    def __init__(self, master: Master, interval: float) -> None:
        super().__init__(daemon=True)
        self.master = master
        self.interval = interval
        self.samples: list[tuple[float, int]] = []
        self.stopping = threading.Event()
        self.t0 = time.monotonic()

    def run(self) -> None:
        while not self.stopping.is_set():
            try:
                self.samples.append(
                    (round(time.monotonic() - self.t0, 2), self.master.status()["VmRSS"])
                )
            except OSError:
                return
            self.stopping.wait(self.interval)


def loadAverage() -> list[float]:
    return [round(x, 2) for x in os.getloadavg()]


def throughput(root: str, options: argparse.Namespace) -> dict[str, Any]:
    """
    Phase 1: one publisher, C{options.subscribers} reading subscribers.
    """
    master = Master(root, "m1", {})
    children: list[Child] = []
    try:
        rssIdle = master.status()["VmRSS"]
        subscribers = [
            Child("_sub", master.pubSocket, str(options.events), str(options.idle), "0")
            for _ in range(options.subscribers)
        ]
        children += subscribers
        for sub in subscribers:
            if sub.readline().strip() != "ready":
                raise SystemExit("bus_bench: a subscriber did not subscribe")
        publisher = Child(
            "_pub", master.pullSocket, str(options.events), "0", str(options.batch), "0"
        )
        children.append(publisher)
        publisher.readline()
        load = loadAverage()
        cpu0 = master.cpu()
        sampler = Sampler(master, 0.5)
        sampler.start()
        publisher.tell()
        fired = publisher.result()
        results = [sub.result() for sub in subscribers]
        sampler.stopping.set()
        sampler.join()
        masterCpu = master.cpu() - cpu0
        status = master.status()
    finally:
        for child in children:
            child.stop()
        stopSeconds = master.stop()
    start = fired["start"]
    n = options.events
    perSub = []
    for r in results:
        if "error" in r:
            raise SystemExit(f"bus_bench: subscriber failed: {r['error']}")
        span = (r["last"] - start) if r["last"] else None
        perSub.append(
            {
                "received": r["received"],
                "events_per_s": round(r["received"] / span, 1) if span else 0.0,
                "seconds_to_last": round(span, 3) if span else None,
                "out_of_order": r["outOfOrder"],
                "drop_notices": r["dropNotices"],
                "dropped_reported": r["droppedReported"],
                "end_seen": r["endSeen"],
                "cpu_s": round(r["cpu"], 2),
            }
        )
    lastAll = max((r["last"] or start) for r in results)
    delivered = sum(r["received"] for r in results)
    return {
        "subscribers": options.subscribers,
        "subscriber_kind": "one process and one UNIX socket each, events.client.listenEvents",
        "events": n,
        "pull_frame_bytes": round(fired["pullFrameBytes"], 1),
        "fire_seconds": round(fired["sent"] - start, 3),
        "fired_per_s": round(n / (fired["sent"] - start), 1),
        "publisher_cpu_s": round(fired["cpu"], 2),
        "seconds_to_last_delivery": round(lastAll - start, 3),
        "delivered_total": delivered,
        "delivered_per_s_total": round(delivered / (lastAll - start), 1),
        "all_received_everything": all(r["received"] == n for r in results),
        "dropped_reported_total": sum(r["droppedReported"] for r in results),
        "per_subscriber": perSub,
        "master_cpu_s": round(masterCpu, 2),
        "master_cpu_us_per_delivery": round(masterCpu / max(delivered, 1) * 1e6, 2),
        "master_rss_kib_idle": rssIdle,
        "master_rss_kib_peak_sampled": max(rss for _, rss in sampler.samples),
        "master_vmhwm_kib": status["VmHWM"],
        "master_sigterm_to_exit_s": round(stopSeconds, 2),
        "loadavg_at_start": load,
        "loadavg_at_end": loadAverage(),
    }


def stalled(root: str, options: argparse.Namespace) -> dict[str, Any]:
    """
    Phase 2: a stalled subscriber, a reading one, C{options.stall_events}
    events of about C{options.stall_bytes} bytes.
    """
    master = Master(root, "m2", {"master_stats": True, "master_stats_event_iter": 0.5})
    children: list[Child] = []
    n = options.stall_events
    # The pull frame is {"tag": "bench/e", "data": {"i": n, "pad": "x" * pad}}:
    # about 30 bytes of overhead; the master adds a 35-byte _stamp.
    pad = max(options.stall_bytes - 30, 0)
    try:
        time.sleep(1.0)
        rssBefore = master.status()
        stall = Child("_stall", master.pubSocket, "3")
        children.append(stall)
        stallReady = json.loads(stall.readline())
        reader = Child("_sub", master.pubSocket, str(n), str(options.idle), "1")
        children.append(reader)
        if reader.readline().strip() != "ready":
            raise SystemExit("bus_bench: the reading subscriber did not subscribe")
        publisher = Child(
            "_pub", master.pullSocket, str(n), str(pad), str(options.batch), str(options.stall_rate)
        )
        children.append(publisher)
        publisher.readline()
        load = loadAverage()
        rssSubscribed = master.status()
        sampler = Sampler(master, 0.5)
        sampler.start()
        publisher.tell()
        fired = publisher.result()
        readerResult = reader.result()
        if "error" in readerResult:
            raise SystemExit(f"bus_bench: reading subscriber failed: {readerResult['error']}")
        time.sleep(1.0)
        rssStalledAfter = master.status()
        stallAlive = stall.process.poll() is None
        # Now let the stalled subscriber read what it is owed.
        stall.tell()
        stallResult = stall.result()
        time.sleep(1.0)
        sampler.stopping.set()
        sampler.join()
        rssAfter = master.status()
        log = [line for line in master.logTail(50) if "dropped" in line or "closing" in line]
    finally:
        for child in children:
            child.stop()
        stopSeconds = master.stop()
    start = fired["start"]
    peak = max(sampler.samples, key=lambda s: s[1])
    accounted = (
        stallResult["received"] + int(stallResult["endSeen"]) + stallResult["droppedReported"]
    )
    return {
        "events": n,
        "publisher_rate_limit": options.stall_rate or None,
        "pull_frame_bytes": round(fired["pullFrameBytes"], 1),
        "event_queue_max": 10000,
        "fire_seconds": round(fired["sent"] - start, 3),
        "fired_per_s": round(n / (fired["sent"] - start), 1),
        "stalled_rcvbuf_bytes": stallReady["rcvbuf"],
        "master_rss_kib_before": rssBefore["VmRSS"],
        "master_rss_kib_subscribed": rssSubscribed["VmRSS"],
        "master_rss_kib_peak_sampled": peak[1],
        "master_rss_kib_peak_at_s": peak[0],
        "master_rss_kib_stalled_after_firing": rssStalledAfter["VmRSS"],
        "master_rss_kib_after_drain": rssAfter["VmRSS"],
        "master_vmhwm_kib": rssAfter["VmHWM"],
        "rss_samples": sampler.samples,
        "stalled_still_connected_after_firing": stallAlive and not stallResult["closedByMaster"],
        "stalled_closed_by_master": stallResult["closedByMaster"],
        "stalled_received": stallResult["received"],
        "stalled_drop_notices": stallResult["dropNotices"],
        "stalled_dropped_reported": stallResult["droppedReported"],
        "stalled_notice_after_events": stallResult["noticeAfterEvents"],
        "stalled_out_of_order": stallResult["outOfOrder"],
        "stalled_end_seen": stallResult["endSeen"],
        # bench/end matches the prefix too: n + 1 events were sent its way.
        "stalled_accounted": accounted,
        "stalled_nothing_lost_silently": accounted == n + 1,
        "reader_received": readerResult["received"],
        "reader_got_everything": readerResult["received"] == n,
        "reader_drop_notices": readerResult["dropNotices"],
        "reader_out_of_order": readerResult["outOfOrder"],
        "reader_seconds_to_last": round(readerResult["last"] - start, 3)
        if readerResult["last"]
        else None,
        "master_stats_max_queued": readerResult["maxQueued"],
        "master_stats_max_dropped_pending": readerResult["maxDroppedPending"],
        "master_log_lines": log,
        "master_sigterm_to_exit_s": round(stopSeconds, 2),
        "loadavg_at_start": load,
        "loadavg_at_end": loadAverage(),
    }


def printTable(result: dict[str, Any]) -> None:
    t = result.get("throughput")
    if t:
        print(f"\n== Throughput: 1 publisher -> master -> {t['subscribers']} subscribers ==")
        rows = [
            ("events fired", t["events"]),
            ("fired/s (pull socket took them)", t["fired_per_s"]),
            ("seconds to last delivery", t["seconds_to_last_delivery"]),
            ("delivered/s, all subscribers", t["delivered_per_s_total"]),
            ("every subscriber got all", t["all_received_everything"]),
            ("dropped (salt/event/dropped)", t["dropped_reported_total"]),
            (
                "master CPU s / us per delivery",
                f"{t['master_cpu_s']} / {t['master_cpu_us_per_delivery']}",
            ),
            (
                "master RSS idle / peak KiB",
                f"{t['master_rss_kib_idle']} / {t['master_rss_kib_peak_sampled']}",
            ),
            ("load average start / end", f"{t['loadavg_at_start']} / {t['loadavg_at_end']}"),
        ]
        for name, value in rows:
            print(f"  {name:<34} {value}")
        print("  sub  received  events/s  s-to-last  out-of-order  dropped  cpu-s")
        for i, s in enumerate(t["per_subscriber"]):
            print(
                f"  {i:>3}  {s['received']:>8}  {s['events_per_s']:>8}  {s['seconds_to_last']!s:>9}"
                f"  {s['out_of_order']:>12}  {s['dropped_reported']:>7}  {s['cpu_s']:>5}"
            )
    s = result.get("stalled")
    if s:
        print(f"\n== Stalled subscriber: {s['events']} events of ~{s['pull_frame_bytes']} bytes ==")
        rows = [
            ("fired/s", s["fired_per_s"]),
            ("master RSS before (KiB)", s["master_rss_kib_before"]),
            (
                "master RSS peak sampled (KiB)",
                f"{s['master_rss_kib_peak_sampled']} at {s['master_rss_kib_peak_at_s']} s",
            ),
            ("master RSS stalled, after firing", s["master_rss_kib_stalled_after_firing"]),
            ("master RSS after the drain", s["master_rss_kib_after_drain"]),
            ("master VmHWM (KiB)", s["master_vmhwm_kib"]),
            (
                "master stats: max queued / dropped",
                f"{s['master_stats_max_queued']} / {s['master_stats_max_dropped_pending']}",
            ),
            ("stalled: disconnected by master", s["stalled_closed_by_master"]),
            (
                "stalled: received / dropped notices",
                f"{s['stalled_received']} / {s['stalled_drop_notices']}"
                f" ({s['stalled_dropped_reported']} reported)",
            ),
            ("stalled: received + reported == sent", s["stalled_nothing_lost_silently"]),
            (
                "reader: received all",
                f"{s['reader_got_everything']}"
                f" ({s['reader_received']}, {s['reader_seconds_to_last']} s)",
            ),
            ("load average start / end", f"{s['loadavg_at_start']} / {s['loadavg_at_end']}"),
        ]
        for name, value in rows:
            print(f"  {name:<38} {value}")


def main() -> int:
    if len(sys.argv) > 1 and sys.argv[1].startswith("_"):
        mode, args = sys.argv[1], sys.argv[2:]
        if mode == "_sub":
            runSubscriber(args[0], int(args[1]), float(args[2]), args[3] == "1")
        elif mode == "_stall":
            runStalled(args[0], float(args[1]))
        elif mode == "_pub":
            runPublisher(args[0], int(args[1]), int(args[2]), int(args[3]), float(args[4]))
        return 0
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--events", type=int, default=100000, help="events in phase 1")
    parser.add_argument("--subscribers", type=int, default=10, help="reading subscribers, phase 1")
    parser.add_argument("--stall-events", type=int, default=100000, help="events in phase 2")
    parser.add_argument("--stall-bytes", type=int, default=200, help="bytes per event, phase 2")
    parser.add_argument(
        "--stall-rate", type=float, default=0, help="pace phase 2 to this many events/s"
    )
    parser.add_argument("--batch", type=int, default=100, help="frames per write of the publisher")
    parser.add_argument("--idle", type=float, default=20.0, help="subscriber idle timeout (s)")
    parser.add_argument("--only", choices=("throughput", "stalled"), help="run one phase")
    parser.add_argument("--keep", action="store_true", help="keep the temporary root_dir")
    parser.add_argument("--output", default=None, help="JSON file to write")
    parser.add_argument("--no-save", action="store_true", help="do not write the JSON file")
    options = parser.parse_args()
    root = tempfile.mkdtemp(prefix="stbus-")
    result: dict[str, Any] = {
        "date": datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds"),
        "host": socket.gethostname(),
        "cpus": os.cpu_count(),
        "python": sys.version.split()[0],
        "options": vars(options),
    }
    try:
        if options.only in (None, "throughput"):
            result["throughput"] = throughput(root, options)
        if options.only in (None, "stalled"):
            result["stalled"] = stalled(root, options)
    finally:
        if options.keep:
            print(f"bus_bench: kept {root}")
        else:
            shutil.rmtree(root, ignore_errors=True)
    printTable(result)
    if not options.no_save:
        path = options.output or os.path.join(
            HERE, "results", f"{datetime.date.today().isoformat()}-bus.json"
        )
        with open(path, "w") as f:
            json.dump(result, f, indent=1)
            f.write("\n")
        print(f"\nbus_bench: wrote {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
