"""``fabroute emulate SPEC --standby --kill-master``: two controllers on every bridge, the master
killed under the probe stream, the standby taking over, then a link repaired by it.

Every bridge has two controllers (``ovs-vsctl set-controller BR tcp:…:P1 tcp:…:P2``):
``fabroute controller DIR --role master --peer 127.0.0.1:H`` and ``… --role standby --peer
127.0.0.1:H`` (``controller/openflow/roles.py``).  Once the master has verified every switch
and the standby holds every switch as ``SLAVE`` and reads each as holding its program, a
probe stream starts, the master gets ``SIGKILL``, and the standby claims ``MASTER`` with a
newer generation and re-verifies every switch (repairing only what differs).  Then, under a
second stream, a cable goes down: the new master routes around it, and restores the tables
when it comes back.  Last, the killed master is started again as it was (``--role master``,
its old generation): every switch refuses its claim as stale (``OFPET_ROLE_REQUEST_FAILED``
/ ``OFPRRFC_STALE``), and it steps down to reading only.
"""

from __future__ import annotations

import tempfile
import time
from pathlib import Path

from emulation.mininet.ctl import Controller, free_port
from emulation.mininet.grow import set_link
from emulation.mininet.liverun import (
    IN_FORCE_SLACK_MS,
    PREPARE_WAIT_S,
    STREAM_PAIRS,
    check_expressible,
    counter_delta,
    crossing_pairs,
    ovs_counters,
)
from emulation.mininet.net import cleanup_leftovers, emulate, ensure_ovs
from emulation.mininet.session import PREFIX
from emulation.mininet.stream import ProbeStream, default_pairs
from tablegen.errors import BadInput
from tablegen.exports.files import write_table_set
from tablegen.tables import TableSet
from tablegen.verify import verify

__all__ = ["run_standby"]

TAKEOVER_LIMIT_S = 3.0      # the bound: the standby is master within this


def _role(st: dict) -> dict:
    return st.get("role") or {}


def _mods(st: dict) -> int:
    return sum(s["flow_mods"] + s["group_mods"] for s in st.get("per_switch", {}).values())


def run_standby(ts: TableSet, link: tuple[int, int] | None = None, *, rate: float = 200.0,
                down_s: float = 1.0, prepare_mib: int | None = None, log=print,
                controller_extra: tuple[str, ...] = ()) -> dict:
    """The module doc's run on the fabric of ``ts`` (MIN or any routing served
    ``--static``); ``link``: the cable taken down after the takeover (default: switch 0 and
    its first neighbour).  The JSON-ready report: the takeover stream's ``lost``,
    ``misrouted``; ``takeover_s`` (the kill → every switch holds the standby as master),
    ``flow_mods_after_takeover`` (flow- and group-mods the new master sent until every
    switch was verified), the repair under the second stream, the deposed master's
    refusals; ``ok``.  ``prepare_mib``: both controllers' ``--prepare-mib`` (``None``: the
    controller's default); the standby makes the repairs ready while it only reads, and the
    kill waits until they are, so the new master's repair is a prepared one.
    ``controller_extra``: more options of the first master (e.g. ``--metrics HOST:PORT``:
    what it shows ends with the kill)."""
    from tablegen.topologies.failures import without_links

    check_expressible(ts)
    topo = ts.topo
    if link is None:
        link = (0, int(next(int(t) for t in topo.adj[0] if t >= 0)))
    try:
        without_links(topo, [link])
    except Exception as e:
        raise BadInput(f"emulate --kill-master: {e}") from None
    ensure_ovs()
    with tempfile.TemporaryDirectory(prefix="fabroute-standby-") as tmp:
        d = Path(tmp)
        write_table_set(ts, verify(ts), d / "tables", ("openflow",))
        p1, p2, hb, hb2 = free_port(), free_port(), free_port(), free_port()
        master_args = ("--static", "--role", "master", "--peer", f"127.0.0.1:{hb}")
        ctls = [Controller(d / "tables", p1, d, name="master",
                           args=master_args + controller_extra, prepare_mib=prepare_mib)]
        try:
            time.sleep(0.5)            # the master's heartbeat listens before the standby looks
            ctls.append(Controller(d / "tables", p2, d, name="standby", args=(
                "--static", "--role", "standby", "--peer", f"127.0.0.1:{hb}",
                "--serve-peer", f"127.0.0.1:{hb2}"),
                prepare_mib=prepare_mib))
            master, standby = ctls
            with emulate(topo, controller_port=p1, standby_port=p2, prefix=PREFIX) as fnet:
                return _run(ts, fnet, master, standby, ctls, link, rate, down_s, log,
                            (d, p1, master_args, hb2), prepare_mib != 0)
        finally:
            for c in ctls:
                c.stop()
            cleanup_leftovers(PREFIX)


def _run(ts, fnet, master, standby, ctls, link, rate, down_s, log, restart,
         prepared: bool) -> dict:
    n = ts.topo.n_switches
    t_verified = master.wait_verified(n)
    standby.wait_for(lambda st: st.get("verified") == n and _role(st).get("master_heard")
                     and _role(st).get("switches") == {"slave": n}, 60,
                     f"the standby reading all {n} switches as SLAVE")
    if prepared:
        standby.wait_for(lambda st: (st.get("prepared") or {}).get("complete"),
                         PREPARE_WAIT_S, "the standby's prepared repairs")
    log(f"net up: {n} switches verified by the master in {t_verified:.1f} s; the standby "
        "holds every switch as SLAVE; probe stream on; kill -9 of the master")
    pairs = list(dict.fromkeys(crossing_pairs(ts, fnet.host_ids, [link])
                               + default_pairs(fnet.host_ids, STREAM_PAIRS)))[:STREAM_PAIRS + 16]
    c0 = ovs_counters()
    with ProbeStream(fnet, pairs, rate=rate) as stream:
        time.sleep(1.0)
        t_kill, wall_kill = time.monotonic(), time.time()
        master.proc.kill()
        master.proc.wait(10)
        st = standby.wait_for(lambda s: "t_verified" in (_role(s).get("takeover") or {}), 30,
                              "takeover")
        time.sleep(1.0)
    kill = stream.report(t_ref=t_kill)
    tk = _role(st)["takeover"]
    after_takeover = _mods(st)
    log(f"standby is master {tk['t_master'] - wall_kill:.3f} s after the kill "
        f"({tk['by']}); {after_takeover} flow/group-mods; cable {link[0]}-{link[1]} down next")
    with ProbeStream(fnet, pairs, rate=rate) as stream:
        time.sleep(1.0)
        t_down = set_link(fnet, *link, False)
        wall_down = time.time() - (time.monotonic() - t_down)
        down = standby.wait_for(lambda s: s.get("updates", 0) >= 1, 60, "the repair")["update"]
        time.sleep(down_s)
        set_link(fnet, *link, True)
        up = standby.wait_for(lambda s: s.get("updates", 0) >= 2, 60, "the restore")["update"]
        time.sleep(1.0)
    fail = stream.report(t_ref=t_down)
    counters = counter_delta(c0, ovs_counters())
    log("the old master comes back with its old generation")
    d, p1, master_args, hb2 = restart
    deposed = Controller(d / "tables", p1, d, name="deposed", args=master_args)
    ctls.append(deposed)
    deposed.wait_for(lambda s: _role(s).get("state") == "deposed"
                     and _role(s).get("switches") == {"slave": n}, 60,
                     "the old master deposed on every switch")
    time.sleep(0.5)
    dep, after = deposed.status(), standby.status()
    stale_logged = deposed.log_tail(10 ** 6).count("OFPET_ROLE_REQUEST_FAILED/OFPRRFC_STALE")
    deposed.stop()
    log("the old master started again as the new master's standby")
    again = Controller(d / "tables", p1, d, name="new-standby", args=(
        "--static", "--role", "standby", "--peer", f"127.0.0.1:{hb2}"))
    ctls.append(again)
    new_sb = again.wait_for(lambda s: _role(s).get("master_heard")
                            and _role(s).get("switches") == {"slave": n}
                            and s.get("verified") == n, 60,
                            "the new standby reading every switch as SLAVE")

    def ms(t):
        return round((t - wall_down) * 1e3, 1)

    in_force = ms(down["t_in_force"]) if down.get("t_in_force") else None
    takeover_s = round(tk["t_master"] - wall_kill, 3)
    rep = {"topology": ts.topo.name(), "routing": ts.routing, "switches": n,
           "lost": kill["lost"], "misrouted": kill["misrouted"],
           "duplicated": kill["duplicated"], "probes_sent": kill["probes_sent"],
           "pairs": kill["pairs"], "rate_per_pair": kill["rate_per_pair"],
           "max_gap_ms": kill["max_gap_ms"],
           "takeover_s": takeover_s,
           "takeover_verified_s": round(tk["t_verified"] - wall_kill, 3),
           "takeover_by": tk["by"], "generation": {"master": 1, "standby": tk["generation"]},
           "flow_mods_after_takeover": after_takeover,
           "switches_repaired_after_takeover": tk["repaired"],
           "repair": {"link": list(link), "ok": bool(down.get("ok")),
                      "reason": down.get("reason"), "in_force_ms": in_force,
                      "prepared": bool(down.get("prepared")),
                      "lost": fail["lost"], "misrouted": fail["misrouted"],
                      "lost_from_ms": fail["first_lost_ms"], "lost_to_ms": fail["last_lost_ms"],
                      "restored": bool(up.get("ok")) and after.get("cookie") == st.get("cookie")},
           "deposed_master": {"state": _role(dep).get("state"),
                              "stale_refusals": _role(dep).get("stale_refusals"),
                              "stale_errors_logged": stale_logged,
                              "switches": _role(dep).get("switches"),
                              "flow_mods": _mods(dep)},
           "new_standby": {"state": _role(new_sb).get("state"),
                           "known": _role(new_sb).get("known"),
                           "master_heard": bool(_role(new_sb).get("master_heard")),
                           "switches": _role(new_sb).get("switches"),
                           "verified": new_sb.get("verified"), "flow_mods": _mods(new_sb)},
           "controller": {"verified": after.get("verified"), "failed": after.get("failed"),
                          "cookie": after.get("cookie"),
                          "openflow_errors": sum(s["errors"] for s in
                                                 after.get("per_switch", {}).values())},
           "ovs": counters}
    rep["ok"] = (rep["lost"] == rep["misrouted"] == rep["duplicated"] == 0
                 and takeover_s < TAKEOVER_LIMIT_S and after_takeover == 0
                 and rep["repair"]["ok"] and rep["repair"]["misrouted"] == 0
                 and rep["repair"]["restored"]
                 and (fail["last_lost_ms"] is None or in_force is None
                      or fail["last_lost_ms"] <= in_force + IN_FORCE_SLACK_MS)
                 and rep["deposed_master"]["stale_refusals"] >= 1
                 and rep["deposed_master"]["flow_mods"] == 0
                 and rep["new_standby"]["state"] == "standby"
                 and rep["new_standby"]["flow_mods"] == 0
                 and after.get("verified") == n and not counters.get("table_misses")
                 and rep["controller"]["openflow_errors"] == 0)
    if not rep["ok"]:
        log(f"not ok; the standby's log: {standby.log_tail()}")
    return rep
