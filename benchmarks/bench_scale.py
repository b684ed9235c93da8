"""Controller at scale (issue 27): install time and peak memory of ``fabroute controller``
against the number of switches, side by side with ``ovs-ofctl`` loading the same exported
program into the same bridges.

    .venv/bin/python benchmarks/bench_scale.py [--case NAME ...] [--json FILE] [--plot PNG]

Per case, in one run: the fabric's tables are built and written as ``fabroute tables`` does
(with the ``openflow`` export); ``fabroute controller`` (os-ken) is started; the Mininet + Open
vSwitch (userspace datapath) net is built with ``--hosts-per-switch`` hosts per switch and
points every bridge at the controller; then

1. **controller**: the bridges are built without a controller; from the one ``ovs-vsctl``
   transaction that points every bridge at the (already listening) controller to its status
   showing every switch verified — that transaction, the connections, the read-back, every
   flow- and group-mod, and the second read-back and compare;
   the controller's peak RSS (``VmHWM``) and CPU seconds are read from ``/proc``;
2. sampled host pairs probed and their exact switch path + VCs proven (per-flow counters);
3. **ovs-ofctl**: the controller is detached from every bridge (``ovs-vsctl del-controller``,
   one transaction; Open vSwitch then flushes the bridge) and stopped, every bridge emptied
   (one ``ovs-ofctl bundle`` "delete flows, delete groups" each), then per bridge
   ``ovs-ofctl -O OpenFlow13 add-groups BR s<id>.groups`` (if any) and ``add-flows BR
   s<id>.flows`` of the exported program, ``--ofctl-workers`` bridges at a time (``ofctl_s``,
   bounded parallelism, default 8); with ``--sequential`` emptied again and loaded one bridge
   after the other as an operator's loop would (``ofctl_sequential_s``);
4. both end with the same flow and group counts in every bridge as the controller left
   (checked), and the sampled pairs are probed again on the files' tables.

One JSON line per case on stdout (and appended to ``--json``); ``--plot`` draws install time
(controller and ovs-ofctl) and the controller's peak RSS against switches from every line of
the ``--json`` file.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from emulation.mininet.ctl import Controller, free_port
from emulation.mininet.net import clear_tables, emulate
from emulation.mininet.pathcheck import sample_pairs
from emulation.mininet.probes import Prober
from emulation.mininet.session import path_proofs
from tablegen.errors import RunFailed
from tablegen.exports.files import write_table_set
from tablegen.routing.build import build_tables
from tablegen.topologies.spec import build
from tablegen.verify import verify

CASES = {                # name: (SPEC, routing, hosts attached per switch)
    "sf5-min": ("slimfly:q=5", "min", 1),
    "sf7-min": ("slimfly:q=7", "min", 1),
    "sf11-min": ("slimfly:q=11", "min", 1),
    "sf13-min": ("slimfly:q=13", "min", 1),
    "df264-min": ("dragonfly:p=4,a=8,h=4", "min", 1),
    "sf13-val3h": ("slimfly:q=13", "val-3h", 1),
    "sf5-val3h": ("slimfly:q=5", "val-3h", 1),
}
PREFIX = "k"             # bridge / host names of this benchmark's nets


def proc_memory(pid: int) -> dict:
    """Peak and current resident memory (MiB) and CPU seconds (user + system) of ``pid``."""
    out = {}
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            k, _, v = line.partition(":")
            if k in ("VmHWM", "VmRSS"):
                out[k] = round(int(v.split()[0]) / 1024, 1)
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    tick = os.sysconf("SC_CLK_TCK")
    out["cpu_s"] = round((int(fields[11]) + int(fields[12])) / tick, 2)
    return {"peak_rss_mib": out["VmHWM"], "rss_mib": out["VmRSS"], "cpu_s": out["cpu_s"]}


def wait_listening(ctl: Controller, timeout: float = 120.0) -> None:
    """Wait until the controller has logged that it serves (its socket listens)."""
    deadline = time.monotonic() + timeout
    while " serving " not in ctl.log_tail(1 << 20):
        if ctl.proc.poll() is not None or time.monotonic() > deadline:
            raise RunFailed(f"fabroute controller does not serve: {ctl.log_tail()}")
        time.sleep(0.1)


def vsctl(command: str, args: list[list[str]]) -> None:
    """``command`` once per argument list, all in one ``ovs-vsctl`` transaction."""
    cmd = ["ovs-vsctl", "--timeout=300"]
    for a in args:
        cmd += ["--", command, *a]
    subprocess.run(cmd, check=True, capture_output=True)


def table_counts(fnet) -> list[tuple[int, int]]:
    """``(flows, groups)`` of every bridge, read with ``ovs-ofctl``."""
    def one(br):
        agg = fnet.ofctl("dump-aggregate", br)
        flows = int(agg.split("flow_count=")[1].split()[0])
        groups = sum(1 for x in fnet.ofctl("dump-groups", br).splitlines()
                     if x.strip().startswith("group_id="))
        return flows, groups
    with ThreadPoolExecutor(4) as ex:
        return list(ex.map(one, fnet.bridges))


def ofctl_load(fnet, of_dir: Path, workers: int) -> float:
    """``ovs-ofctl add-groups`` + ``add-flows`` of every switch's exported files into its
    bridge, ``workers`` bridges at a time; returns the seconds."""
    man = json.loads((of_dir / "manifest.json").read_text())

    def one(sw):
        br = fnet.bridges[sw["id"]]
        if sw.get("groups"):
            fnet.ofctl("add-groups", br, str(of_dir / sw["groups"]), timeout=600)
        fnet.ofctl("add-flows", br, str(of_dir / sw["flows"]), timeout=600)
    t0 = time.perf_counter()
    with ThreadPoolExecutor(workers) as ex:
        list(ex.map(one, man["switches"]))
    return time.perf_counter() - t0


def run_case(name: str, args, progress, task) -> dict:
    """One case (the module doc's steps); returns its JSON row."""
    spec, routing, hosts = CASES[name]
    hosts = args.hosts_per_switch or hosts
    t0 = time.perf_counter()
    step = lambda what: progress.update(task, description=f"{name}: {what}")  # noqa: E731
    step("tables")
    ts = build_tables(build(spec), routing)
    topo = ts.topo
    row = {"case": name, "spec": topo.name(), "routing": routing,
           "switches": topo.n_switches, "hosts_total": topo.n_hosts, "hosts_per_switch": hosts,
           "prepare_mib": args.prepare_mib, "ofctl_workers": args.ofctl_workers}
    with tempfile.TemporaryDirectory(prefix="fabroute-scale-") as tmp:
        d = Path(tmp)
        write_table_set(ts, verify(ts), d / "tables", ("openflow",))
        port = free_port()
        ctl = Controller(d / "tables", port, d, prepare_mib=args.prepare_mib)
        try:
            step("net build")
            # bridges without a controller first: both loads then start from the same
            # existing, empty bridges (creating 338 bridges takes Open vSwitch longer than
            # filling them, and would otherwise be counted against the controller)
            with emulate(topo, hosts_per_switch=hosts, prefix=PREFIX) as fnet:
                row["hosts_emulated"] = len(fnet.host_ids)
                row["net_build_s"] = round(fnet.times["build"], 2)
                row["bridges_created_s"] = round(fnet.times["ovs"], 2)
                wait_listening(ctl)
                step("controller install + verify")
                t_attach = time.perf_counter()
                vsctl("set-controller", [[b, f"tcp:127.0.0.1:{port}"] for b in fnet.bridges])
                row["attach_s"] = round(time.perf_counter() - t_attach, 2)
                ctl.wait_verified(topo.n_switches, timeout=args.timeout)
                row["controller_s"] = round(time.perf_counter() - t_attach, 2)
                row["controller"] = proc_memory(ctl.proc.pid)
                per = ctl.status()["per_switch"].values()
                row["flow_mods"] = sum(v["flow_mods"] for v in per)
                row["group_mods"] = sum(v["group_mods"] for v in per)
                if args.idle:
                    # the repairs --prepare-mib makes ready while idle: their memory
                    step(f"controller idle {args.idle:.0f} s (prepared repairs)")
                    time.sleep(args.idle)
                    row["controller_idle"] = proc_memory(ctl.proc.pid)
                    row["prepared"] = ctl.status().get("prepared")
                step("probes + path proofs (controller's tables)")
                after_ctl = table_counts(fnet)
                pairs = sample_pairs(fnet, args.samples, seed=args.seed)
                with Prober(fnet) as prober:
                    rep = prober.all_pairs(pairs=list(pairs))
                    row["probes"] = {"pairs": rep.pairs, "delivered": rep.delivered}
                    row["paths"] = path_proofs(fnet, ts, prober, pairs, 2, args.seed)
                if args.controller_only:
                    step("teardown")
                    row["ok"] = (row["probes"]["delivered"] == row["probes"]["pairs"]
                                 and row["paths"]["path_mismatches"] == 0)
                    row["wall_s"] = round(time.perf_counter() - t0, 1)
                    return row
                step("ovs-ofctl: detach, empty, load")
                vsctl("del-controller", [[b] for b in fnet.bridges])
                ctl.stop()
                loads = [("ofctl_s", args.ofctl_workers)]
                if args.sequential and args.ofctl_workers > 1:
                    loads.append(("ofctl_sequential_s", 1))
                for key, workers in loads:
                    clear_tables(fnet)
                    row[key] = round(ofctl_load(fnet, d / "tables" / "openflow", workers), 2)
                after_files = table_counts(fnet)
                row["flows"] = sum(f for f, _ in after_files)
                row["groups"] = sum(g for _, g in after_files)
                row["same_counts"] = after_ctl == after_files
                with Prober(fnet) as prober:
                    rep = prober.all_pairs(pairs=list(pairs))
                    row["probes_ofctl"] = {"pairs": rep.pairs, "delivered": rep.delivered}
                step("teardown")
        finally:
            ctl.stop()
    row["ratio"] = round(row["controller_s"] / row["ofctl_s"], 3)
    if "ofctl_sequential_s" in row:
        row["ratio_sequential"] = round(row["controller_s"] / row["ofctl_sequential_s"], 3)
    p = row["paths"]
    row["ok"] = (row["same_counts"] and row["probes"]["delivered"] == row["probes"]["pairs"]
                 and row["probes_ofctl"]["delivered"] == row["probes_ofctl"]["pairs"]
                 and p["path_mismatches"] == 0)
    row["wall_s"] = round(time.perf_counter() - t0, 1)
    return row


def plot(rows: list[dict], out: Path) -> None:
    """Left: install time (controller, ovs-ofctl) and the controller's peak RSS against
    switches; right: the same times per 1,000 flows installed.  Runs with ``--prepare-mib``
    add only their RSS after the idle wait (a separate marker)."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    fig, (ax, bx) = plt.subplots(1, 2, figsize=(12, 4.6))
    ax2 = ax.twinx()
    for routing, mk in (("min", "o"), ("val-3h", "s")):
        rs = sorted((r for r in rows if r["routing"] == routing), key=lambda r: r["switches"])
        plain = [r for r in rs if not r["prepare_mib"]]
        for fam, ls, lab in (("slimfly", "-", "Slim Fly"), ("dragonfly", "none", "Dragonfly")):
            group = [r for r in plain if r["spec"].startswith(fam)]
            if not group:
                continue
            m = mk if fam == "slimfly" else "^"
            x = [r["switches"] for r in group]
            tag = f"{lab} {routing.upper()}"
            for axis, div in ((ax, None), (bx, "flows")):
                y = lambda k: [r[k] / (r[div] / 1000 if div else 1) for r in group]  # noqa
                axis.plot(x, y("controller_s"), marker=m, ls=ls, color="C0",
                          label=f"controller attach→verified, {tag}")
                axis.plot(x, y("ofctl_s"), marker=m, ls=ls, color="C1",
                          label=f"ovs-ofctl add-groups+add-flows "
                          f"({group[0]['ofctl_workers']} at a time), {tag}")
            ax2.plot(x, [r["controller"]["peak_rss_mib"] for r in group], marker=m, ls=ls,
                     color="C2", label=f"controller peak RSS, {tag}")
        for r in (r for r in rs if r["prepare_mib"] and "controller_idle" in r):
            ax2.plot([r["switches"]], [r["controller_idle"]["peak_rss_mib"]], marker="*",
                     ms=11, ls="none", color="C3",
                     label=f"peak RSS, --prepare-mib {r['prepare_mib']}, {r['case']}")
    ax.set_xlabel("switches")
    ax.set_ylabel("install time (s)")
    ax2.set_ylabel("controller peak RSS (MiB)", color="C2")
    bx.set_xlabel("switches")
    bx.set_ylabel("install time per 1,000 flows (s)")
    for axis in (ax, ax2, bx):
        axis.set_xlim(left=0)
        axis.set_ylim(bottom=0)
    h1, l1 = ax.get_legend_handles_labels()
    h2, l2 = ax2.get_legend_handles_labels()
    ax.legend(h1 + h2, l1 + l2, fontsize=7, loc="upper left")
    ax.set_title("install + verify on Open vSwitch (userspace datapath)")
    bx.set_title("per 1,000 flows (flat: linear in the program's size)")
    fig.tight_layout()
    fig.savefig(out, dpi=120)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--case", action="append", choices=sorted(CASES))
    ap.add_argument("--json", help="append one JSON line per case to this file")
    ap.add_argument("--plot", help="PNG of every case in --json (after the runs)")
    ap.add_argument("--hosts-per-switch", type=int, help="override the cases' hosts per switch")
    ap.add_argument("--samples", type=int, default=12, help="host pairs probed and proven")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--prepare-mib", type=int, default=0,
                    help="the controller's --prepare-mib (default 0, as in emulate)")
    ap.add_argument("--idle", type=float, default=0.0,
                    help="seconds to leave the controller idle after verify (prepared repairs)"
                    " before reading its memory again")
    ap.add_argument("--ofctl-workers", type=int, default=8,
                    help="bridges ovs-ofctl loads at a time (default 8; 1: one after the other)")
    ap.add_argument("--sequential", action="store_true",
                    help="then empty the bridges again and load them one after the other too "
                    "(slow: each ovs-ofctl call waits for a main loop over every bridge)")
    ap.add_argument("--controller-only", action="store_true",
                    help="no ovs-ofctl loads (e.g. a run for the memory of --prepare-mib)")
    ap.add_argument("--timeout", type=float, default=1800.0)
    args = ap.parse_args()
    from rich.progress import Progress, SpinnerColumn, TextColumn, TimeElapsedColumn
    names = args.case or ([] if args.plot else list(CASES))
    with Progress(SpinnerColumn(), TextColumn("{task.description}"), TimeElapsedColumn(),
                  transient=True) as progress:
        task = progress.add_task("", total=len(names))
        for name in names:
            row = run_case(name, args, progress, task)
            print(json.dumps(row), flush=True)
            progress.advance(task)
            if args.json:
                with open(args.json, "a") as f:
                    f.write(json.dumps(row) + "\n")
    if args.plot:
        if not args.json:
            ap.error("--plot draws the cases of --json FILE")
        rows = [json.loads(x) for x in Path(args.json).read_text().splitlines() if x.strip()]
        plot(rows, Path(args.plot))


if __name__ == "__main__":
    main()
