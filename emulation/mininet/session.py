"""``fabroute emulate``: one whole emulation run, from a table set to a JSON report.

Start OVS if needed, hand the table set to ``fabroute controller`` (a separate process on
loopback), build the Mininet net with the controller as its remote controller, wait until
every switch's tables are read back and verified, probe every host pair (or a sample), prove
the exact switch path and VC sequence of sampled probes (per-flow counters,
:mod:`emulation.mininet.pathcheck`), and tear everything down — also on errors and Ctrl-C.
"""

from __future__ import annotations

import tempfile
import time
from pathlib import Path

import numpy as np

from controller.tls import Pki, make_pki
from emulation.mininet.ctl import Controller, free_port
from emulation.mininet.net import cleanup_leftovers, emulate, ensure_ovs
from emulation.mininet.pathcheck import PathChecker, sample_pairs
from emulation.mininet.probes import Prober
from tablegen.errors import BadInput, NotExpressible
from tablegen.exports.files import write_table_set
from tablegen.exports.openflow import dpid, plan
from tablegen.tables import TableSet
from tablegen.verify import verify

__all__ = ["PREFIX", "run", "run_pki"]

PREFIX = "e"          # bridge / host name prefix of `fabroute emulate` nets


def run(ts: TableSet, *, check: str = "all-pairs", samples: int = 12, targets: int = 2,
        hosts_per_switch: int | None = None, keep: bool = False, seed: int = 1,
        log=print, on_report=None, tls: bool = False,
        controller_extra: tuple[str, ...] = ()) -> dict:
    """Emulate ``ts`` and return the report (JSON-ready): ``pairs``, ``delivered``, ``lost``,
    ``path_checks``, ``path_mismatches``, the longest path, whether a path revisited a switch,
    and the times of every step.  ``check``: ``all-pairs`` probes every ordered host pair,
    ``sample`` only the path-checked pairs.  ``on_report(report)`` is called as soon as the
    checks are done; ``keep`` then leaves the net and the controller up until Ctrl-C.
    ``tls``: OpenFlow over TLS with mutual certificates made for this run (a CA, the
    controller's, and one for the fabric's datapath ids that Open vSwitch presents).
    ``controller_extra``: more ``fabroute controller`` options (e.g. ``--metrics HOST:PORT``,
    docs/operations.md).
    Tables the OpenFlow pipeline cannot express raise :class:`~tablegen.errors.BadInput`
    before anything is started."""
    try:
        plan(ts)
    except NotExpressible as e:
        raise BadInput(f"emulate: {e}") from None
    topo = ts.topo
    t0 = time.perf_counter()
    times = {}
    ensure_ovs()
    times["ovs"] = time.perf_counter() - t0
    with tempfile.TemporaryDirectory(prefix="fabroute-emulate-") as tmp:
        d = Path(tmp)
        # the controller serves only proven sets: hand it one written as fabroute tables does
        write_table_set(ts, verify(ts), d / "tables", ("openflow",))
        port = free_port()
        pki_dir, ovs_tls = run_pki(d, topo) if tls else (None, None)
        ctl = Controller(d / "tables", port, d, tls=pki_dir,
                         args=controller_extra)
        try:
            with emulate(topo, controller_port=port, hosts_per_switch=hosts_per_switch,
                         prefix=PREFIX, tls=ovs_tls) as fnet:
                times.update({f"net_{k}": float(v) for k, v in fnet.times.items()})
                log(f"net up: {topo.n_switches} switches, {len(fnet.host_ids)} hosts; "
                    "waiting for the controller to verify every switch…")
                times["verified_after"] = ctl.wait_verified(topo.n_switches)
                # the bridges connect from net.start() on; the controller was up before
                times["start_to_verified"] = time.perf_counter() - fnet.started
                per = ctl.status()["per_switch"].values()
                report = {"topology": topo.name(), "routing": ts.routing, "tls": tls,
                          "switches": topo.n_switches, "hosts": len(fnet.host_ids),
                          "flow_mods": sum(v["flow_mods"] for v in per),
                          "group_mods": sum(v["group_mods"] for v in per)}
                with Prober(fnet) as prober:
                    pairs = sample_pairs(fnet, samples, seed=seed)
                    if check == "all-pairs":
                        rep = prober.all_pairs()
                    else:
                        rep = prober.all_pairs(pairs=list(pairs))
                    log(f"probes: {rep.delivered} of {rep.pairs} delivered")
                    report.update({k: v for k, v in rep.to_dict().items() if k != "lost_pairs"})
                    report.update(path_proofs(fnet, ts, prober, pairs, targets, seed))
                times["total"] = time.perf_counter() - t0
                report["times"] = {k: round(v, 3) for k, v in times.items()}
                # VAL may pass a switch twice, VAL_3h when the source's choice (blind to the
                # destination) turns back, group VAL when a pair inside one group detours via
                # another group; MIN, VAL_nta and DSN-F never do
                revisit_ok = any(c.name in ("val", "val-3h", "val-group") for c in ts.classes)
                report["hop_bound"] = max(c.max_hops for c in ts.classes)
                report["ok"] = (report["delivered"] == report["pairs"]
                                and report["path_mismatches"] == 0
                                and not report.get("misdelivered")
                                and report["max_hops"] <= report["hop_bound"]
                                and (revisit_ok or not report["revisits"]))
                if on_report is not None:
                    on_report(report)
                if keep:
                    log(f"--keep: net '{PREFIX}*' and controller (log {ctl.log_path}) stay up; "
                        "Ctrl-C ends them")
                    _wait_forever()
                return report
        finally:
            ctl.stop()
            cleanup_leftovers(PREFIX)


def run_pki(d: Path, topo) -> tuple[Path, tuple[str, str, str]]:
    """Certificates for one run over TLS, in ``d/pki``: the CA and the controller's, and one
    switch certificate for the one ``ovs-vswitchd`` carrying all the fabric's datapath ids.
    Returns the PKI directory (the controller's ``--tls``) and Open vSwitch's ``set-ssl``
    arguments (key, certificate, CA certificate)."""
    pki = Pki(d / "pki")
    make_pki(pki.dir, [(dpid(0), dpid(topo.n_switches - 1))], "ovs")
    cert, key = pki.switch("ovs")
    return pki.dir, (str(key), str(cert), str(pki.ca))


def path_proofs(fnet, ts: TableSet, prober, pairs, targets: int, seed: int) -> dict:
    """Exact path + VC checks: every sampled pair, and for a routing with a source choice
    ``targets`` intermediates per pair (chosen by the probe's UDP source port)."""
    results = []
    rng = np.random.default_rng(seed)
    with PathChecker(fnet, ts, prober) as pc:
        for s, d in pairs:
            if pc.choice is None:
                results.append(pc.check(s, d))
                continue
            tg = pc.targets(ts.topo.host_of(s)[0])
            for i in rng.choice(len(tg), min(targets, len(tg)), replace=False).tolist():
                results.append(pc.check(s, d, target=tg[i]))
    bad = [r for r in results if not r.ok]
    return {"path_checks": len(results), "path_mismatches": len(bad),
            "max_hops": max((r.hops for r in results), default=0),
            "revisits": sum(bool(r.measured) and len(set(r.measured["switches"]))
                            != len(r.measured["switches"]) for r in results),
            "first_mismatches": [r.to_dict() for r in bad[:3]]}


def _wait_forever():
    try:
        while True:
            time.sleep(3600)
    except KeyboardInterrupt:
        pass
