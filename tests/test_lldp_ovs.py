"""Real switches (issue 26): Slim Fly q = 5 under Mininet + Open vSwitch wired like a real
fabric — random datapath ids, every switch's ports permuted, one cable left out.  The
controller (``--lldp``) learns the cabling, maps it, installs the degraded proven tables on
the switches' own port numbers; every host pair is delivered and sampled pairs (all those
the missing cable detours among them) take exactly their promised paths.  Then the cable is
plugged in: LLDP hears it and the full tables come back live, verified.  docs/openflow.md,
*Real switches*."""

from __future__ import annotations

import json
import time

import pytest

from emulation.mininet.ctl import Controller, free_port
from emulation.mininet.grow import add_cables
from emulation.mininet.net import cleanup_leftovers, emulate, ensure_ovs
from emulation.mininet.pathcheck import PathChecker, sample_pairs
from emulation.mininet.probes import Prober
from emulation.mininet.topo import random_wiring
from tablegen.exports.files import write_table_set
from tablegen.fabrics.fabric import Fabric
from tablegen.routing.build import build_tables
from tablegen.topologies.failures import without_links
from tablegen.topologies.spec import build
from tablegen.verify import same_routing, verify

pytestmark = [pytest.mark.ovs, pytest.mark.xdist_group("ovs")]

PREFIX = "ld"


def real_looking(spec: str, seed: int, tmp_path):
    """MIN tables of ``spec`` written to ``tmp_path/tables``, a wiring with random datapath
    ids, permuted ports and one cable left out, and the proven tables without that cable."""
    ensure_ovs()
    topo = build(spec)
    ts = build_tables(topo, "min")
    write_table_set(ts, verify(ts), tmp_path / "tables", ("openflow",))
    wiring = random_wiring(topo, seed=seed, leave_out=1)
    (a, _, b, _), = wiring.left_out
    deg, rep = same_routing(without_links(topo, [(a, b)]), ts)
    assert rep.ok
    return topo, ts, wiring, deg


def proof(fnet, ts, prober, extra_pairs=(), n=24):
    """All-pairs delivery and the exact path of sampled pairs (plus ``extra_pairs``)."""
    rep = prober.all_pairs()
    pairs = list(dict.fromkeys(list(extra_pairs) + list(sample_pairs(fnet, n, seed=2))))
    with PathChecker(fnet, ts, prober) as pc:
        results = [pc.check(s, d) for s, d in pairs]
    bad = [r.to_dict() for r in results if not r.ok]
    return rep, len(results), bad


def test_lldp_learns_a_real_looking_slim_fly_and_restores_the_missing_cable(tmp_path):
    topo, ts, wiring, deg = real_looking("slimfly:q=5", 7, tmp_path)
    (a, pa, b, pb), = wiring.left_out
    fab_out = tmp_path / "fabric.json"
    ctl = Controller(tmp_path / "tables", free_port(), tmp_path,
                     args=("--lldp", "--fabric-out", str(fab_out), "--settle", "5"))
    try:
        with emulate(topo, controller_port=ctl.port, prefix=PREFIX, wiring=wiring) as fnet:
            with Prober(fnet) as prober:
                # the hosts speak (as real ones do: ARP, DHCP) so their MACs are heard: one
                # broadcast frame each (local experimental ethertype), built by hand — scapy
                # takes ~30 ms a frame, 200 of them outlast the settle time
                hosts = fnet.host_ids
                hello = [b"\xff" * 6 + bytes.fromhex(fnet.mac[h].replace(":", ""))
                         + b"\x88\xb5" + bytes(46) for h in hosts]
                ctl.wait_for(lambda st: (st.get("cabling") or {}).get("switches") == 50,
                             60, "every switch connected")
                # (again until all are heard: a frame that reaches its switch before the
                # controller's discovery entries is dropped, as the switch's table is empty)
                deadline = time.monotonic() + 30
                while (ctl.status()["cabling"]["hosts_heard"] < len(hosts)
                       and time.monotonic() < deadline):
                    for h, fr in zip(hosts, hello):
                        prober.tx[h].send(fr)
                    time.sleep(0.3)
                t_verified = ctl.wait_verified(topo.n_switches, 120)
                st = ctl.status()
                cab = st["cabling"]
                times = cab["times"]
                print("\nLLDP learned", json.dumps({
                    "connect_to_learned_s": round(times["learned"] - times["first_switch"], 2),
                    "connect_to_verified_s": round(time.time() - times["first_switch"], 2),
                    "controller_start_to_verified_s": round(t_verified, 2),
                    "cables": cab["cables"], "hosts_heard": cab["hosts_heard"],
                    "by": cab["map"]["by"], "absent": cab["map"]["absent"]}))
                # the map is the true one (the hosts' MACs chose it among the automorphisms)
                assert cab["map"]["by"] == "hosts"
                assert cab["map"]["switches"] == {f"0x{d:016x}": s for s, d in
                                                  enumerate(wiring.dpids)}
                assert cab["map"]["absent"] == [[a, pa, b, pb]]
                assert st["topology"] == deg.topo.name() and st["failed_links"] == [[a, b]]
                assert st["verified"] == 50 and st["failed"] == 0
                learned = Fabric.load(fab_out)
                assert len(learned.cables) == len(topo.links) - 1
                assert len(learned.hosts) == topo.n_hosts
                # every switch pair whose intact path used the missing cable is detoured: one
                # host pair of each checked exactly, with a sample of the rest
                first = {}
                for h, s_, _ in topo.host_table().tolist():
                    first.setdefault(s_, h)
                detoured = []
                for u in range(topo.n_switches):
                    for v in range(topo.n_switches):
                        sw = ts.walk(u, v, ts.classes[0])["switches"] if u != v else []
                        if any({x, y} == {a, b} for x, y in zip(sw, sw[1:])):
                            detoured.append((first[u], first[v]))
                assert detoured
                dr, n_checked, bad = proof(fnet, deg, prober, detoured)
                print("LLDP degraded", json.dumps({"pairs": dr.pairs, "delivered":
                                                   dr.delivered, "path_checks": n_checked,
                                                   "mismatches": len(bad)}))
                assert dr.delivered == dr.pairs and dr.lost == 0 and dr.misdelivered == 0
                assert not bad, bad[:2]

                # the missing cable is plugged in: LLDP hears it, the full tables come back
                t0 = time.time()
                add_cables(fnet, [(a, pa, b, pb)])
                st = ctl.wait_for(lambda s: s.get("updates", 0) >= 1 and not s["updating"]
                                  and s["verified"] == 50, 90, "the restoring update")
                upd = st["update"]
                print("LLDP restored", json.dumps({
                    "plug_to_verified_s": round(upd["t_verified"] - t0, 2),
                    "plug_to_in_force_s": round(upd["t_in_force"] - t0, 2),
                    "mode": upd["mode"], "ok": upd["ok"]}))
                assert upd["ok"] and upd["mode"] == "two-phase"
                assert st["topology"] == topo.name() and st["failed_links"] == []
                assert st["cabling"]["map"]["absent"] == []
                assert len(Fabric.load(fab_out).cables) == len(topo.links)
                fr, n_checked, bad = proof(fnet, ts, prober, detoured)
                print("LLDP full", json.dumps({"pairs": fr.pairs, "delivered": fr.delivered,
                                               "path_checks": n_checked,
                                               "mismatches": len(bad)}))
                assert fr.delivered == fr.pairs and fr.lost == 0 and not bad, bad[:2]
                # the restored paths are the intact tables' own: the detoured pairs are back
                with PathChecker(fnet, ts, prober) as pc:
                    r = pc.check(*detoured[0])
                    hops = r.measured["switches"]
                    assert r.ok and any({x, y} == {a, b} for x, y in zip(hops, hops[1:]))
    finally:
        ctl.stop()
        cleanup_leftovers(PREFIX)


def test_a_fabric_file_maps_real_datapaths_without_lldp(tmp_path):
    """``--fabric FILE`` (an operator's inventory of the cabling, here Slim Fly q = 3 with
    random datapath ids, permuted ports and one cable absent): every datapath gets its
    planned switch's degraded program on its own port numbers, every host pair is delivered
    and the sampled and detoured pairs take their promised paths."""
    topo, ts, wiring, deg = real_looking("slimfly:q=3", 5, tmp_path)
    (a, _, b, _), = wiring.left_out
    fab = tmp_path / "inventory.json"
    wiring.fabric(topo).save(fab)
    ctl = Controller(tmp_path / "tables", free_port(), tmp_path, args=("--fabric", str(fab)))
    try:
        with emulate(topo, controller_port=ctl.port, prefix=PREFIX, wiring=wiring) as fnet:
            ctl.wait_verified(topo.n_switches, 120)
            st = ctl.status()
            assert st["topology"] == deg.topo.name() and st["failed_links"] == [[a, b]]
            assert st["verified"] == topo.n_switches and st["failed"] == 0
            with Prober(fnet) as prober:
                rep, n_checked, bad = proof(fnet, deg, prober, n=40)
            assert rep.delivered == rep.pairs == len(fnet.host_ids) * (len(fnet.host_ids) - 1)
            assert rep.lost == 0 and rep.misdelivered == 0 and not bad, bad[:2]
            assert n_checked == 40
    finally:
        ctl.stop()
        cleanup_leftovers(PREFIX)
