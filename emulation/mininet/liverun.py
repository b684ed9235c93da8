"""``fabroute emulate SPEC --expand N`` / ``--fail a:b``: a live update of a running fabric
under continuous probe traffic, from the controller's first flow-mod to the last probe.

*Growth* (DSN-F): the controller serves the tables of ``n`` switches; a probe stream runs
between the existing hosts; the grown, verified table set is handed to the controller
(``fabroute load``), which applies it as an ordered or two-phase update
(``controller/openflow/update.py``); then the new switches and hosts are added to the running
net (they connect and get their programs), then their cables; the new hosts are pinged until
every one answers.

*Failure*: a probe stream (including every pair whose path crosses the link) runs; the link
goes down (both veth ends), the controller sees the port status, computes and verifies the
tables without it and applies them (two-phase); then the link comes back and the original
tables are restored.  The report gives the loss window on the probes' clock.
"""

from __future__ import annotations

import contextlib
import re
import subprocess
import tempfile
import time
from pathlib import Path

from controller.openflow.control import request
from emulation.mininet.ctl import Controller, free_port
from emulation.mininet.grow import add_cables, add_switches, renumbered, rewire, set_link
from emulation.mininet.net import cleanup_leftovers, emulate, ensure_ovs
from emulation.mininet.session import PREFIX
from emulation.mininet.stream import ProbeStream, default_pairs, reachable_after
from tablegen.errors import BadInput, NotExpressible, RunFailed
from tablegen.exports.files import write_table_set
from tablegen.exports.openflow import plan
from tablegen.tables import TableSet
from tablegen.update import table_diff
from tablegen.verify import same_routing, verify

__all__ = ["run_expand", "run_fail", "run_transform"]

STREAM_PAIRS = 32          # probe pairs (more overload the userspace datapath: docs/emulation.md)
# a probe's send time is taken before its sendto and the barrier reply before the datapath's
# cached flows are revalidated: losses may end a few ms after the flip's last barrier
IN_FORCE_SLACK_MS = 20.0
PREPARE_WAIT_S = 300.0     # the controller makes every single-cable repair ready first


def check_expressible(ts: TableSet) -> None:
    try:
        plan(ts)
    except NotExpressible as e:
        raise BadInput(f"emulate: {e}") from None


def _controller(d: Path, ts: TableSet, drain: float | None, ff: bool = False,
                repair: bool = True, prepare_mib: int | None = None,
                extra: tuple[str, ...] = ()) -> Controller:
    write_table_set(ts, verify(ts), d / "old", ("openflow",))
    args = (("--static", "--control", str(d / "ctl.sock"))
            + (("--fast-failover",) if ff else ()) + (() if repair else ("--no-link-repair",)))
    return Controller(d / "old", free_port(), d, prepare_mib=prepare_mib,
                      args=args + (("--drain", str(drain)) if drain is not None else ())
                      + extra)


def ovs_counters() -> dict:
    """OpenFlow table misses summed over every bridge (a packet no entry of a table matched:
    dropped, which a consistent update never causes) and Open vSwitch's drop counters (the
    datapath dropping under load)."""
    out = subprocess.run("for b in $(ovs-vsctl list-br); do echo \"bridge $b\"; "
                         "ovs-ofctl -O OpenFlow13 dump-tables $b; done", shell=True,
                         capture_output=True, text=True).stdout
    # per bridge and table as well, so that a miss names where it happened
    at: dict[str, int] = {}
    for bridge, body in re.findall(r"^bridge (\S+)\n(.*?)(?=^bridge |\Z)", out, re.M | re.S):
        for table, look, hit in re.findall(
                r"table (\d+):\s*\n\s*active=\d+, lookup=(\d+), matched=(\d+)", body):
            at[f"table_misses@{bridge}/{table}"] = int(look) - int(hit)
    misses = sum(at.values())
    cov = subprocess.run(["ovs-appctl", "coverage/show"], capture_output=True,
                         text=True).stdout
    drops = {f[0]: int(f[-1]) for f in map(str.split, cov.splitlines())
             if f and "drop" in f[0] and f[-1].isdigit()}
    stats = subprocess.run(["ovs-vsctl", "--format=json", "--columns=statistics", "list",
                            "Interface"], capture_output=True, text=True).stdout
    for k in ("rx_dropped", "tx_dropped"):
        drops["interface_" + k] = sum(int(x) for x in re.findall(rf'"{k}",(\d+)', stats))
    return {"table_misses": misses, **at, **drops}


def counter_delta(a: dict, b: dict) -> dict:
    return {k: b[k] - a.get(k, 0) for k in b if b[k] - a.get(k, 0)}


def _prepared(ts: TableSet, new_topo) -> tuple[TableSet, object]:
    """The verified tables of ``ts``'s routing on ``new_topo``; both sets must fit the
    OpenFlow pipeline (bad input otherwise, before anything starts)."""
    check_expressible(ts)
    new_ts, rep = same_routing(new_topo, ts)
    if not rep.ok:
        raise RunFailed(f"{ts.routing} on {new_topo.name()} fails verification: "
                        f"{rep.errors[0]}")
    check_expressible(new_ts)
    return new_ts, rep


@contextlib.contextmanager
def _running(ts: TableSet, new_ts: TableSet | None = None, drain: float | None = None,
             ff: bool = False, repair: bool = True, prepare_mib: int | None = 0,
             extra: tuple[str, ...] = ()):
    """``(dir, controller, net)``: a scratch directory (with ``new_ts`` written to ``new``),
    the controller serving ``ts`` with a control socket (and the options ``extra``), the
    net of ``ts`` up and every switch verified; all torn down afterwards."""
    ensure_ovs()
    with tempfile.TemporaryDirectory(prefix="fabroute-live-") as tmp:
        d = Path(tmp)
        if new_ts is not None:
            write_table_set(new_ts, verify(new_ts), d / "new", ("openflow",))
        ctl = _controller(d, ts, drain, ff, repair, prepare_mib, extra)
        try:
            with emulate(ts.topo, controller_port=ctl.port, prefix=PREFIX) as fnet:
                ctl.wait_verified(ts.topo.n_switches)
                yield d, ctl, fnet
        finally:
            ctl.stop()
            cleanup_leftovers(PREFIX)


def _wait_update(ctl: Controller, count: int, timeout: float = 60.0) -> dict:
    """The controller's status once its ``count``-th update has ended."""
    return ctl.wait_for(lambda st: st.get("updates", 0) >= count, timeout,
                        f"update {count}")


def run_expand(ts: TableSet, count: int, *, rate: float = 200.0, drain: float | None = None,
               log=print, controller_extra: tuple[str, ...] = ()) -> dict:
    """Grow the running DSN-F fabric of ``ts`` by ``count`` switches (module doc); the
    JSON-ready report: the stream's counts, ``new_hosts_reachable_s`` (from the moment
    every switch, old and new, holds its verified program, which is after the last
    flow-mod), the controller's update report and the times of every step."""
    from tablegen.topologies.dsnf import add_nodes

    topo = ts.topo
    if topo.kind != "dsnf" or "fail" in topo.params:
        raise BadInput(f"emulate --expand: {topo.name()} is not an intact dsnf fabric; "
                       "expected dsnf:n=N")
    try:
        new_topo, cables = add_nodes(topo, count)
    except Exception as e:               # TopologyError: past what the labels allow
        raise BadInput(f"emulate --expand {count}: {e}") from None
    new_ts, _ = _prepared(ts, new_topo)
    diff = table_diff(ts, new_ts)
    times: dict = {}
    with _running(ts, new_ts, drain, extra=controller_extra) as (d, ctl, fnet):
        old_hosts = list(fnet.host_ids)
        log(f"net up: {topo.n_switches} switches verified; probe stream on; growing "
            f"to {new_topo.n_switches} ({diff['order']['consistency']} update)")
        c0 = ovs_counters()
        with ProbeStream(fnet, default_pairs(old_hosts, STREAM_PAIRS),
                         rate=rate) as stream:
            time.sleep(1.0)
            t = time.monotonic()
            upd = request(d / "ctl.sock", {"load": str(d / "new")})
            if not upd.get("ok"):
                raise RunFailed(f"controller update failed: {upd}\n{ctl.log_tail()}")
            times["update_s"] = time.monotonic() - t
            t = time.monotonic()
            grown = add_switches(fnet, new_topo, cables)
            times["switches_added_s"] = grown["bridges"] - t
            ctl.wait_verified(new_topo.n_switches)
            t_programs = time.monotonic()
            times["new_switches_verified_s"] = t_programs - t
            wired = add_cables(fnet, cables.added)
            times["cables_added_s"] = wired["ports"] - t_programs
            new_hosts = [h for h in fnet.host_ids if h not in set(old_hosts)]
            reach = reachable_after(fnet, new_hosts, t_programs)
            time.sleep(1.0)
        counters = counter_delta(c0, ovs_counters())
        rep = stream.report()
        after = ctl.status()
    return _report(ts, new_ts, rep, upd, after, times, {
        "expand": count, "new_hosts": len(new_hosts), "ovs": counters,
        "new_hosts_reachable_s": round(reach, 3),
        "cables_added": len(cables.added),
        "ok": (rep["lost"] == rep["misrouted"] == rep["duplicated"] == 0
               and after.get("verified") == new_topo.n_switches and reach < 2.0
               and not counters.get("table_misses"))})


def run_fail(ts: TableSet, pairs, *, rate: float = 200.0, drain: float | None = None,
             down_s: float = 2.0, fast_failover: bool = False, repair: bool = True,
             prepare_mib: int | None = None, log=print,
             controller_extra: tuple[str, ...] = ()) -> dict:
    """Take the cables between each switch pair of ``pairs`` down under a probe stream, let
    the controller route around them, bring them back and let it restore the tables
    (module doc); with ``fast_failover`` the switches hold FAST_FAILOVER groups on the
    verified backup ports; without ``repair`` the controller leaves the tables as they are
    (what the data plane does alone); ``prepare_mib`` is the controller's ``--prepare-mib``
    (``None``: its default), and the cable goes down only once its repairs are ready.  The
    report: the stream's counts and loss window (ms from the link going down), the degraded
    tables' proof, both update reports, the prepared repairs, whether the original program
    is back."""
    from tablegen.topologies.failures import without_links

    topo = ts.topo
    try:
        deg_topo = without_links(topo, pairs)
    except Exception as e:
        raise BadInput(f"emulate --fail: {e}") from None
    deg_ts, deg_rep = _prepared(ts, deg_topo)
    times: dict = {}
    with _running(ts, None, drain, fast_failover, repair, prepare_mib,
                  controller_extra) as (d, ctl, fnet):
        original = ctl.status()["cookie"]
        ff = ctl.status().get("fast_failover")
        # the repairs the controller makes ready while idle (controller/openflow/prepared.py)
        prepared = ctl.wait_for(lambda st: (st.get("prepared") or {}).get("complete"),
                                PREPARE_WAIT_S, "the prepared repairs")["prepared"]
        sp = crossing_pairs(ts, fnet.host_ids, pairs) + default_pairs(fnet.host_ids,
                                                                 STREAM_PAIRS)
        sp = list(dict.fromkeys(sp))[:STREAM_PAIRS + 16]
        log(f"net up: {topo.n_switches} switches verified; probe stream on "
            f"({len(sp)} pairs); failing {pairs}")
        c0 = ovs_counters()
        with ProbeStream(fnet, sp, rate=rate) as stream:
            time.sleep(1.0)
            t_down = max(set_link(fnet, a, b, False) for a, b in pairs)
            wall_down = time.time() - (time.monotonic() - t_down)
            down = _wait_update(ctl, 1) if repair else None
            times["repaired_s"] = time.monotonic() - t_down
            time.sleep(down_s)
            t_up = max(set_link(fnet, a, b, True) for a, b in pairs)
            up = _wait_update(ctl, 2) if repair else None
            times["restored_s"] = time.monotonic() - t_up
            time.sleep(1.0)
        counters = counter_delta(c0, ovs_counters())
        rep = stream.report(t_ref=t_down)
        after = ctl.status()
    if not repair:
        return _report(ts, deg_ts, rep, {}, after, times, {
            "fail": [list(p) for p in pairs], "repair": False, "ovs": counters,
            "fast_failover": None if ff is None else {k: ff[k] for k in ("switches", "entries")},
            "link_up_ms": round((t_up - t_down) * 1e3, 1),
            "loss_window": {"lost_from_ms": rep["first_lost_ms"],
                            "lost_to_ms": rep["last_lost_ms"]},
            "ok": (rep["misrouted"] == rep["duplicated"] == 0
                   and not counters.get("table_misses"))})
    du, uu = down["update"], up["update"]
    if not du.get("ok"):
        raise RunFailed(f"controller: the repair failed: {du}")

    def ms(t):
        return round((t - wall_down) * 1e3, 1)

    # ms after the link went down: the controller's port-status event, the start of the
    # update (degraded tables computed and verified), the flip (the new program in force),
    # the old version removed; and the first and last probe lost, by their send times
    window = {"port_status_ms": ms(du["t_event"]), "update_start_ms": ms(du["t_start"]),
              "planned_ms": ms(du["t_planned"]), "in_force_ms": ms(du["t_in_force"]),
              "done_ms": ms(du["t_last_flow_mod"]),
              "lost_from_ms": rep["first_lost_ms"], "lost_to_ms": rep["last_lost_ms"]}
    return _report(ts, deg_ts, rep, du, after, times, {
        "fail": [list(p) for p in pairs], "restore_update": _brief(uu), "ovs": counters,
        "prepared": prepared,
        "fast_failover": None if ff is None else {k: ff[k] for k in ("switches", "entries")},
        "fast_failover_cables": None if ff is None else [
            list(p) for p in pairs if list(sorted(p)) in ff["cables"]],
        "loss_window": window,
        "degraded": {"topology": deg_topo.name(), "verified": deg_rep.ok,
                     "vcs": deg_ts.num_vcs, "vcs_intact": ts.num_vcs,
                     "cdg_acyclic": not deg_rep.cycle,
                     "cdg_dependencies": deg_rep.cdg.get("dependencies", 0)},
        "restored": after.get("cookie") == original and after.get("verified") == topo.n_switches,
        "ok": (rep["misrouted"] == rep["duplicated"] == 0 and du.get("ok") and uu.get("ok")
               and after.get("cookie") == original
               and after.get("verified") == topo.n_switches
               and not counters.get("table_misses")
               and (rep["last_lost_ms"] is None
                    or rep["last_lost_ms"] <= window["in_force_ms"] + IN_FORCE_SLACK_MS))})


def run_transform(ts: TableSet, *, rate: float = 200.0, drain: float | None = None,
                  log=print, controller_extra: tuple[str, ...] = ()) -> dict:
    """DSN-F's ``p -> p + 1`` transformation of the running fabric of ``ts`` (the full
    ``p``-level network at ``n = (p+1) 2^(p+1)``) under the probe stream: the controller
    installs the new version, holds (hosts inject nothing, the old version drains), the
    cables are moved (:func:`~emulation.mininet.grow.rewire`: switches keep their bridges
    and datapaths, hosts their addresses), the controller flips to the new version.  The
    report: the stream's counts, the loss window against the hold (ms after the hold began:
    resumed, new program in force, first and last probe lost), the cables moved and the
    update report."""
    from tablegen.topologies.dsnf import transform

    topo = ts.topo
    n, p = topo.n_switches, int(topo.params.get("p", 0))
    if topo.kind != "dsnf" or "fail" in topo.params or n != (p + 1) * 2 ** (p + 1):
        raise BadInput(f"emulate --transform: {topo.name()} is not a full DSN-F at a "
                       "transformation point; expected dsnf:n=N with N = p·2^p (24, 64, 160…)")
    new_topo, _, relabel = transform(n, int(topo.hosts[0]))
    new_ts, _ = _prepared(ts, new_topo)
    times: dict = {}
    with _running(ts, new_ts, drain, extra=controller_extra) as (d, ctl, fnet):
        log(f"net up: {n} switches verified; probe stream on; transforming to "
            f"{new_topo.name()}")
        c0 = ovs_counters()
        with ProbeStream(fnet, default_pairs(list(fnet.host_ids), STREAM_PAIRS),
                         rate=rate) as stream:
            time.sleep(1.0)
            t0 = time.monotonic()
            wall0 = time.time()
            held = request(d / "ctl.sock", {"load": str(d / "new")})
            if not held.get("held"):
                raise RunFailed(f"controller did not hold: {held}\n{ctl.log_tail()}")
            times["held_s"] = time.monotonic() - t0
            moved = rewire(fnet, renumbered(new_topo, relabel))
            times["rewired_s"] = moved["ports"] - t0
            upd = request(d / "ctl.sock", {"resume": True})
            if not upd.get("ok"):
                raise RunFailed(f"controller update failed: {upd}\n{ctl.log_tail()}")
            times["done_s"] = time.monotonic() - t0
            time.sleep(1.0)
        counters = counter_delta(c0, ovs_counters())
        rep = stream.report(t_ref=t0)
        after = ctl.status()

    def ms(t):
        return round((t - wall0) * 1e3, 1)

    window = {"held_ms": ms(upd["t_held"]), "resumed_ms": ms(upd["t_resumed"]),
              "in_force_ms": ms(upd["t_in_force"]), "lost_from_ms": rep["first_lost_ms"],
              "lost_to_ms": rep["last_lost_ms"]}
    return _report(ts, new_ts, rep, upd, after, times, {
        "transform": True, "cables": {k: moved[k] for k in ("removed", "added")},
        "ovs": counters, "loss_window": window,
        "ok": (rep["misrouted"] == rep["duplicated"] == 0 and upd.get("ok")
               and after.get("verified") == n and not counters.get("table_misses"))})


def crossing_pairs(ts: TableSet, hosts, pairs) -> list[tuple[int, int]]:
    """Host pairs (first host of each switch) whose minimal path crosses a failed cable."""
    topo = ts.topo
    cut = {tuple(sorted(p)) for p in pairs}
    first = {}
    for h in hosts:
        first.setdefault(topo.host_of(h)[0], h)
    out = []
    for s, hs in first.items():
        for t, ht in first.items():
            if s == t:
                continue
            w = ts.walk(s, t, ts.classes[0])["switches"]
            if any(tuple(sorted(e)) in cut for e in zip(w, w[1:])):
                out.append((hs, ht))
    return out[:16]


def _brief(u: dict) -> dict:
    keys = ("ok", "prepared", "mode", "reason", "from", "to", "version", "switches", "phases",
            "verified", "failed", "repairs")
    out = {k: u.get(k) for k in keys}
    if u.get("t_last_flow_mod") and u.get("t_start"):
        out["seconds"] = round(u["t_last_flow_mod"] - u["t_start"], 4)
    return out


def _report(old: TableSet, new: TableSet, rep: dict, upd: dict, after: dict, times: dict,
            extra: dict) -> dict:
    out = {"topology": old.topo.name(), "to": new.topo.name(), "routing": old.routing}
    out.update({k: rep[k] for k in ("probes_sent", "delivered", "lost", "misrouted",
                                    "duplicated", "receiver_drops", "pairs", "rate_per_pair",
                                    "seconds", "max_gap_ms", "latency_ms", "loss_spans")})
    out["update"] = _brief(upd)
    out["controller"] = {"verified": after.get("verified"), "failed": after.get("failed"),
                         "topology": after.get("topology"), "cookie": after.get("cookie"),
                         "version": after.get("version")}
    out["times"] = {k: round(v, 3) for k, v in times.items()}
    out.update(extra)
    return out
