"""Link capacities and paced traffic on the emulation: what OpenFlow counters show under
overload, and how much the userspace datapath and the generator carry (docs/emulation.md,
*Traffic and link capacities*).  Root, Open vSwitch running; holds the emulation lock.

    .venv/bin/python benchmarks/bench_traffic.py counters [--out tests/data]
    .venv/bin/python benchmarks/bench_traffic.py capacity SPEC --tables D \
        --load 0.1,0.3,0.5 [--link-mbit 10] [--traffic uniform] [--seconds 5] [--shape]
    .venv/bin/python benchmarks/bench_traffic.py run SPEC --tables D1,D2 \
        --traffic worst-case --load 1.0 --link-mbit 1 --payload 1400 [--seconds 8]

``counters``: Dragonfly p=2,a=4,h=2 with MIN tables, links shaped to 1 Mbit/s with
20-packet queues, 1,400-byte payloads; hosts 0 and 1 (switch 0) send to hosts 2 and 3
(switch 1), all through switch 0's port 3 (the link to switch 1).  Every 0.5 s the port and queue statistics of switch 0
(``ovs-ofctl -O OpenFlow13 dump-ports`` / ``queue-stats``) and the tc counters of
``xs0-eth3`` are recorded: ``counters-overload.json`` (each host at 1.0 × capacity: the port
offered 2×, 10 s), ``counters-step.json`` (0.25 → 0.75 → 0.25 per host: the port at 0.5× →
1.5× → 0.5×, 5 s each).

``capacity``: unshaped (or ``--shape``d) links, tables from ``D``, one run per load (each
host at ``load × link_mbit``): injected and delivered frames/s, switch passes/s (frames ×
switches on their MIN path), the generator's CPU share and lag.  ``run``: shaped links;
per table set (installed from files, 2 s of the traffic at load 0.2 first) and load, the
main numbers of :func:`~emulation.mininet.traffic.run_traffic`'s report.  Each prints JSON
lines.
"""

from __future__ import annotations

import argparse
import json
import re
import subprocess
import sys
import threading
import time
from pathlib import Path

import numpy as np

from emulation.mininet.net import emulate, install_from_files
from emulation.mininet.traffic import Phase, frame_bytes, run_traffic
from tablegen.topology import distance_matrix
from tablegen.topologies.spec import build

DF = "dragonfly:p=2,a=4,h=2"
_PORT = re.compile(r"port\s+(\d+): rx pkts=(\d+), bytes=(\d+), drop=(\d+), errs=(\d+).*?\n"
                   r"\s+tx pkts=(\d+), bytes=(\d+), drop=(\d+), errs=(\d+)")
_QUEUE = re.compile(r"port (\d+) queue (\d+): bytes=(\d+), pkts=(\d+), errors=(\d+)")
_TC = re.compile(r"class htb 1:1 .*?Sent (\d+) bytes (\d+) pkt \(dropped (\d+), overlimits "
                 r"(\d+) requeues \d+\)\s+backlog (\d+)b (\d+)p", re.S)


def tables(spec: str, routing: str, out: Path) -> Path:
    if not (out / "openflow" / "manifest.json").exists():
        subprocess.run([str(Path(sys.executable).with_name("fabroute")), "tables", spec,
                        "--routing", routing, "--formats", "json,openflow", "--out", str(out)],
                       check=True, capture_output=True)
    return out


def sample(fnet, bridge: str, devs: dict[int, str]) -> dict:
    ports = {m[0]: {"rx_packets": int(m[1]), "rx_bytes": int(m[2]), "tx_packets": int(m[5]),
                    "tx_bytes": int(m[6]), "tx_dropped": int(m[7]), "tx_errors": int(m[8]),
                    "rx_dropped": int(m[3]), "rx_errors": int(m[4])}
             for m in _PORT.findall(fnet.ofctl("dump-ports", bridge))}
    queues = {m[0]: {"tx_bytes": int(m[2]), "tx_packets": int(m[3]), "tx_errors": int(m[4])}
              for m in _QUEUE.findall(fnet.ofctl("queue-stats", bridge)) if m[1] == "0"}
    tc = {}
    for p, dev in devs.items():
        m = _TC.search(subprocess.run(["tc", "-s", "class", "show", "dev", dev],
                                      capture_output=True, text=True).stdout)
        tc[str(p)] = {"sent_bytes": int(m[1]), "sent_packets": int(m[2]), "dropped": int(m[3]),
                      "overlimits": int(m[4]), "backlog_packets": int(m[6])}
    return {"ports": dict(sorted(ports.items(), key=lambda kv: int(kv[0]))),
            "queues": dict(sorted(queues.items(), key=lambda kv: int(kv[0]))), "tc": tc}


def counters(out: Path, link_mbit: float = 1.0, queue: int = 20, payload: int = 1400) -> None:
    topo = build(DF)
    d = tables(DF, "min", Path("/tmp/fabroute-bench-traffic") / "df-min")
    series = {"counters-overload.json": [({0: 2, 1: 3}, 10.0, 1.0)],
              "counters-step.json": [({0: 2, 1: 3}, 5.0, 0.25), ({0: 2, 1: 3}, 5.0, 0.75),
                                     ({0: 2, 1: 3}, 5.0, 0.25)]}
    for name, phases in series.items():
        with emulate(topo, prefix="x", link_mbit=link_mbit, queue_packets=queue) as fnet:
            install_from_files(fnet, d)
            br = fnet.bridges[0]
            samples, stop = [], threading.Event()
            t0 = time.monotonic()

            def poll():
                k = 0
                while not stop.is_set():
                    s = sample(fnet, br, {3: f"{br}-eth3"})
                    samples.append({"t": round(time.monotonic() - t0, 3), **s})
                    k += 1
                    stop.wait(max(0.0, t0 + 0.5 * k - time.monotonic()))

            th = threading.Thread(target=poll)
            th.start()
            time.sleep(1.0)
            rep = run_traffic(fnet, [Phase(*p) for p in phases], load=1.0, payload=payload)
            time.sleep(1.0)
            stop.set()
            th.join()
            offered = " → ".join(f"{2 * p[2]:g}× for {p[1]:g} s" for p in phases)
            doc = {"capacity_bps": int(link_mbit * 1e6), "queue_packets": queue,
                   "frame_bytes": frame_bytes(rep["payload"]),
                   "frame_bytes_tagged": frame_bytes(rep["payload"]) + 4,
                   "samples": samples,
                   "traffic": {k: rep[k] for k in ("sent", "received", "lost", "misrouted",
                                                   "offered_mbps", "delivered_mbps")},
                   "note": (f"{DF}, MIN tables, every switch egress port shaped "
                            f"(linux-htb, max-rate {link_mbit:g} Mbit/s, leaf "
                            f"pfifo_head_drop limit {queue}), {payload}-byte UDP payloads. "
                            "Bridge xs0 (switch 0): hosts 0 and 1 on ports 1, 2 each send to "
                            "hosts 2 and 3 of switch 1, all through port 3 (link to switch 1), "
                            f"offered {offered} of its capacity (frames carry a 4-byte VLAN "
                            "tag there: frame_bytes_tagged); ports 4-7 idle.  Traffic "
                            "starts at t ~1 s.  Drops at the shaped queue: queues[3].tx_errors "
                            "(= tc class 1:1 'dropped', in tc[3]); ports[3].tx_dropped and "
                            "tx_errors stay 0.")}
            (out / name).write_text(json.dumps(doc, indent=1) + "\n")
            last = samples[-1]
            print(json.dumps({"file": name, "samples": len(samples),
                              "port3": last["ports"]["3"], "queue3": last["queues"]["3"],
                              "tc3": last["tc"]["3"], "traffic": doc["traffic"]}))


def switch_passes(topo, hosts: list[int], traffic: str) -> float:
    """Mean switches a frame passes on MIN paths under ``traffic`` (uniform over its
    destinations) — the datapath's work per injected frame."""
    from emulation.mininet.traffic import destinations

    dist = distance_matrix(topo)
    sw = topo.host_table()[:, 1]
    per = [np.mean(dist[sw[s], sw[ds]] + 1) for s, ds in
           destinations(topo, hosts, traffic, 1).items()]
    return float(np.mean(per))


def capacity(a) -> None:
    topo = build(a.spec)
    with emulate(topo, prefix="x", link_mbit=a.link_mbit if a.shape else None) as fnet:
        install_from_files(fnet, Path(a.tables))
        passes = switch_passes(topo, fnet.host_ids, a.traffic)
        n = len(fnet.host_ids)
        run_traffic(fnet, [(a.traffic, 2.0)], load=min(a.loads), link_mbit=a.link_mbit,
                    payload=a.payload)                                   # warm the caches
        for load in a.loads:
            c0, w0 = time.process_time(), time.monotonic()
            rep = run_traffic(fnet, [(a.traffic, a.seconds)], load=load,
                              link_mbit=a.link_mbit, payload=a.payload)
            cpu = (time.process_time() - c0) / (time.monotonic() - w0)
            target = n * load * a.link_mbit * 1e6 / 8 / frame_bytes(a.payload)
            print(json.dumps({
                "spec": a.spec, "traffic": a.traffic, "hosts": n, "link_mbit": a.link_mbit,
                "shaped": a.shape, "payload": a.payload, "load": load,
                "target_fps": round(target), "sent_fps": round(rep["sent"] / a.seconds),
                "delivered_fps": round(rep["received"] / a.seconds),
                "switch_passes_per_frame": round(passes, 3),
                "delivered_switch_passes_per_s": round(rep["received"] / a.seconds * passes),
                "loss": round(rep["lost"] / max(rep["sent"], 1), 5), "late": rep["late"],
                "misrouted": rep["misrouted"], "latency_ms": rep["latency_ms"],
                "max_lag_ms": rep["max_lag_ms"], "send_errors": rep["send_errors"],
                "generator_cpu": round(cpu, 3)}), flush=True)


def one_run(a) -> None:
    topo = build(a.spec)
    with emulate(topo, prefix="x", link_mbit=a.link_mbit, queue_packets=a.queue) as fnet:
        for d in a.tables.split(","):
            info = install_from_files(fnet, d)
            phases = [(t, a.seconds) for t in a.traffic.split(",")]
            run_traffic(fnet, [(t, 2.0) for t in a.traffic.split(",")], load=0.2,
                        payload=a.payload)                       # datapath flows installed
            for load in a.loads:
                c0, w0 = time.process_time(), time.monotonic()
                rep = run_traffic(fnet, phases, load=load, payload=a.payload)
                cpu = (time.process_time() - c0) / (time.monotonic() - w0)
                keep = ("offered_mbps", "delivered_mbps", "offered_load", "accepted_load",
                        "sent", "received", "late", "lost", "queue_drops", "other_drops",
                        "misrouted", "duplicates", "latency_ms", "max_lag_ms")
                print(json.dumps({"spec": a.spec, "routing": info["routing"],
                                  "traffic": a.traffic, "load": load,
                                  "link_mbit": a.link_mbit, "payload": a.payload,
                                  "queue": a.queue, **{k: rep[k] for k in keep},
                                  "generator_cpu": round(cpu, 3),
                                  "phases": [{k: p[k] for k in ("traffic", "accepted_load",
                                                                "lost", "late")}
                                             for p in rep["phases"]]}), flush=True)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    c = sub.add_parser("counters")
    c.add_argument("--out", type=Path, default=Path("tests/data"))
    for name in ("capacity", "run"):
        p = sub.add_parser(name)
        p.add_argument("spec")
        p.add_argument("--tables", required=True, help="table dir(s), comma-separated for run")
        p.add_argument("--traffic", default="uniform")
        p.add_argument("--load", default="1.0")
        p.add_argument("--link-mbit", type=float, default=10.0)
        p.add_argument("--payload", type=int, default=1400)
        p.add_argument("--seconds", type=float, default=5.0)
        p.add_argument("--queue", type=int, default=20)
        p.add_argument("--shape", action="store_true")
    a = ap.parse_args()
    if a.cmd == "counters":
        a.out.mkdir(parents=True, exist_ok=True)
        counters(a.out)
        return
    a.loads = [float(x) for x in a.load.split(",")]
    (capacity if a.cmd == "capacity" else one_run)(a)


if __name__ == "__main__":
    main()
