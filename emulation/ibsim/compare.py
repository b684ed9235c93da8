"""``fabroute ib compare SPEC``: OpenSM's own routing engines against fabroute's routings on one
ibsim fabric, each read back from the simulated switches and measured the same way.

For the fabric ``fabroute ib export SPEC`` writes (``fabric.net``, our GUIDs and LIDs):

* every OpenSM engine (``--engines``) runs as :func:`emulation.ibsim.engines.run_engine` runs
  it (``opensm -R <engine>``, QoS on, fallback to minhop allowed and detected in the log);
* every fabroute routing (``--routings``) is exported
  (:func:`tablegen.exports.infiniband.write.export_ib`) and loaded with our plugin by
  :func:`emulation.ibsim.apply.apply` (the engine ``fabroute-<routing>``, or
  where only an IB variant fits 8 VLs, ``fabroute-min-ib-climb`` for MIN and
  ``fabroute-<routing>-ib-native`` for the others), which also
  proves the read-back equal to the files;
* what each engine left in the fabric — every LFT, SL2VL row and PathRecord SL — is written as
  IB files (:func:`~emulation.ibsim.engines.write_readback`), imported into a table set
  (:mod:`tablegen.exports.infiniband.imports`) and measured: IB verification of the files
  (delivery, acyclic CDG over (switch, out port, VL)), switch hops over every (source HCA,
  destination HCA, LID offset) path, and the analytic throughput bound
  (:func:`simulator.bound.throughput_bound`) under uniform and adversarial traffic.

:func:`compare` returns ``{"engines": [...]}`` (keys in :data:`KEYS`); with ``out`` it writes
``compare.json``, ``compare.png`` and per engine the imported table set (``OUT/<engine>/``, the
read-back files in its ``ib/``), the exports loaded (``OUT/exports/``) and OpenSM's logs
(``OUT/logs/``), crash-safe in one rename (:func:`tablegen.exports.outdir.replaced_dir`).
"""

from __future__ import annotations

import contextlib
import json
import shutil
import tempfile
import time
from pathlib import Path

from emulation.ibsim import apply as ib
from emulation.ibsim.engines import (DEFAULT_ENGINES, OPENSM_ENGINES, parse_log, run_engine,
                                     write_readback)
from tablegen.errors import BadInput, NotExpressible, RunFailed
from tablegen.exports.infiniband.climb import CLIMB
from tablegen.exports.infiniband.native import VARIANT
from tablegen.exports.infiniband.phases import PHASE

KEYS = ("engine", "subnet_up", "fell_back_to", "seconds", "sls", "vls", "deadlock_free",
        "max_hops", "avg_hops", "bound_uniform", "bound_adversarial")
#: the adversarial pattern of each topology kind (simulator/traffic.py): Yébenes et al.'s for
#: Slim Fly, Kim et al.'s worst case for Dragonfly, the DSN-F paper's transpose for DSN-F;
#: elsewhere half the hosts away (shift)
ADVERSARIAL = {"slimfly": "adversarial", "dragonfly": "worst-case", "dsnf": "transpose"}
ADVERSARIAL_DEFAULT = "shift"
EXPORTABLE = ("min", "val", "val-nta", "val-3h", "ugal-l", "dsnf")   # PAR is simulator-only
FABROUTE = "fabroute-"


def default_routings(kind: str, lmc: int) -> list[str]:
    """fabroute's routings compared by default: MIN, the topology's own (DSN-F), and with
    LMC >= 1 its Valiant variant (VAL_3h on a Slim Fly, group VAL on a Dragonfly, VAL
    elsewhere): at LMC 0 a Valiant export has only its minimal layer, i.e. is MIN again."""
    out = ["min"] + (["dsnf"] if kind == "dsnf" else [])
    if lmc >= 1 and kind != "dsnf":
        out.append({"slimfly": "val-3h"}.get(kind, "val"))
    return out


def adversarial_traffic(kind: str) -> str:
    return ADVERSARIAL.get(kind, ADVERSARIAL_DEFAULT)


def check_args(topo, engines, routings, lmc: int, adversarial: str) -> None:
    """Bad input before anything runs: unknown or repeated engines and routings, a routing the
    topology has not, an LMC the LID space cannot hold, a traffic the topology has not."""
    from simulator.traffic import pattern
    from tablegen.exports.infiniband.lids import lid_plan
    from tablegen.routing.build import check_routing

    for what, names, known in (("--engines", engines, OPENSM_ENGINES),
                               ("--routings", routings, EXPORTABLE)):
        bad = [x for x in names if x not in known]
        if bad:
            raise BadInput(f"ib compare: {what} {bad[0]!r}; expected some of "
                           f"{','.join(known)}")
        if len(set(names)) < len(names):
            raise BadInput(f"ib compare: {what} {','.join(names)} names one twice; expected "
                           "distinct names")
    for r in routings:
        try:
            check_routing(topo.kind, r)
        except BadInput as e:
            raise BadInput(f"ib compare: --routings {r}: {e}") from None
    if not engines and not routings:
        raise BadInput("ib compare: no engine; expected --engines or --routings to name one")
    try:
        lid_plan(topo, lmc)
    except NotExpressible as e:
        raise BadInput(f"ib compare: --lmc {lmc}: {e}") from None
    try:
        pattern(topo, adversarial)
    except ValueError as e:
        raise BadInput(f"ib compare: --adversarial: {e}") from None


def export_routing(topo, routing: str, lmc: int, seed: int, dest: Path,
                   variant: str | None = None) -> None:
    """What ``fabroute ib export`` writes for ``routing`` (tables built, verified, tightened,
    layers and SLs proven, then :func:`export_ib` and the table set beside it) into the new
    directory ``dest``; ``variant``: its IB variant (``ib export --ib-native``).
    :class:`NotExpressible` when InfiniBand cannot carry the routing (e.g. more than 8 VLs);
    :class:`RunFailed` when the tables fail verification."""
    from tablegen.exports.files import TABLES_NPZ, TOPOLOGY_FILE
    from tablegen.exports.infiniband.write import export_ib, ib_layers
    from tablegen.exports.manifest import write_manifest
    from tablegen.exports.writer import json_chunks, write_in_place
    from tablegen.routing.build import build_tables
    from tablegen.verify import tighten, verify

    ts = build_tables(topo, routing)
    rep = verify(ts)
    if not rep.ok:
        raise RunFailed(f"{routing} on {topo.name()} fails verification: {rep.errors[0]}")
    tighten(ts, rep)
    layers = ib_layers(ts, lmc, seed, variant)
    dest.mkdir(parents=True)
    export_ib(ts, dest, lmc=lmc, seed=seed, flat=True, ib=layers)
    ts.save_npz(dest / TABLES_NPZ)
    write_in_place(str(dest / TOPOLOGY_FILE), json_chunks(topo.to_dict()))
    write_manifest(dest, rep, {"json": False, "report": False, "openflow": False,
                               "ib": dict({"lmc": lmc, "seed": seed, "prefix": ""},
                                          **({"variant": variant} if variant else {}))},
                   kind="ib-export")


def _export_variant(topo, routing: str, exports: Path) -> str:
    """Export the IB variant of a routing whose own paths do not fit 8 VLs at LMC 0 and
    return its engine name: MIN as ``ib-climb`` (near-minimal), else on DSN-F as
    ``ib-phase``, falling back to ``ib-native`` where neither fits; any other routing as
    ``ib-native`` (nearest its own paths)."""
    for variant in ((CLIMB, PHASE) if routing == "min" else ()):
        name = f"{FABROUTE}{routing}-{variant}"
        try:
            export_routing(topo, routing, 0, 1, exports / name, variant)
            return name
        except NotExpressible:
            continue
    name = f"{FABROUTE}{routing}-{VARIANT}"
    export_routing(topo, routing, 0, 1, exports / name, VARIANT)
    return name


def _export(topo, routing: str, lmc: int, seed: int, exports: Path, named: dict,
            skipped: dict, log) -> None:
    """Export ``routing`` into ``exports`` for the comparison: its engine name goes into
    ``named``, why it was not exported into ``skipped``.  At LMC 0 a routing whose own paths
    do not fit 8 VLs is exported as its IB variant (:func:`_export_variant`)."""
    t0 = time.perf_counter()
    named[routing] = FABROUTE + routing
    try:
        export_routing(topo, routing, lmc, seed, exports / named[routing])
    except NotExpressible as e:
        if lmc:
            skipped[routing] = str(e)
        else:
            named[routing] = _export_variant(topo, routing, exports)
    except RunFailed as e:
        skipped[routing] = str(e)
    log(f"export {named[routing]}: {time.perf_counter() - t0:.2f} s")


def measure(name: str, values: dict, base, pairs, work: Path, adversarial: str) -> dict:
    """Write ``values`` (what was read back) as IB files, import them as a table set into
    ``work/<name>/`` and measure it: the IB files' verification (``deadlock_free``, SLs and VLs
    of the walked paths), switch hops, the throughput bounds.  A read-back that cannot be
    loaded, imported or proven delivering gets ``deadlock_free`` false and ``error``."""
    from simulator.bound import throughput_bound
    from tablegen.exports.infiniband.imports import (hop_stats, import_files, verify_imported,
                                                     write_imported)
    from tablegen.exports.infiniband.read import load_ib_files
    from tablegen.verify import verify_stored

    out: dict = {"sls": ib.sls_used(values["path_sls"]), "vls": None,
                 "deadlock_free": False, "max_hops": None, "avg_hops": None,
                 "bound_uniform": None, "bound_adversarial": None}
    rb = work / f".readback-{name}"
    failed = write_readback(values, base, pairs, rb, name)
    try:
        f = load_ib_files(rb)
        imp = import_files(f, name)
    except BadInput as e:
        _keep_files(rb, work / name)
        return dict(out, error=f"read-back files: {e}")
    rep = verify_stored(imp.ts)
    if imp.problems or not rep.ok:
        _keep_files(rb, work / name)
        why = imp.problems[0] if imp.problems else rep.errors[0]
        return dict(out, error=f"the read-back LFTs do not deliver "
                               f"({imp.problem_count or len(rep.errors)} problems): {why}")
    v = verify_imported(f, imp.ts)
    write_imported(imp, rep, work / name)
    shutil.rmtree(rb)
    hops = hop_stats(imp.ts)
    out.update(sls=v.get("sls_used", out["sls"]), vls=v.get("vls_used"),
               deadlock_free=bool(v["ok"]) and not failed, max_hops=hops["max_hops"],
               avg_hops=round(hops["avg_hops"], 4),
               bound_uniform=round(throughput_bound(imp.ts, "uniform")["bound"], 4),
               bound_adversarial=round(throughput_bound(imp.ts, adversarial)["bound"], 4))
    if failed:
        out["error"] = "read-back incomplete: " + "; ".join(failed)
    elif not v["ok"]:
        out["verify_error"] = v["errors"][0]
    return out


def _keep_files(rb: Path, dest: Path) -> None:
    """The read-back files of a failed engine, kept for a look at ``dest/ib``."""
    dest.mkdir(parents=True, exist_ok=True)
    rb.rename(dest / "ib")


def opensm_engine(engine: str, base, pairs, work: Path, timeout: float, options: dict,
                  adversarial: str, total: int) -> dict:
    """One OpenSM engine: run, read back, measure (:func:`measure`).  When only a sample of
    the ``total`` path SLs was read and the engine uses several SLs, the SLs assumed for the
    others decide the proof: ``deadlock_free`` is then ``None`` (not proven either way) and
    ``not_proven`` says why."""
    r = run_engine(base, engine, timeout=timeout, pairs=pairs, options=options,
                   log_copy=work / "logs" / f"{engine}.opensm.log")
    head = {"engine": engine, "subnet_up": r["subnet_up"], "fell_back_to": r["fell_back_to"],
            "seconds": r["seconds"]}
    if r["readback"] is None:
        return _failed(head, r["error"] or "nothing read back")
    res = {**head, **measure(engine, r["readback"], base, pairs, work, adversarial)}
    if len(pairs) < total and (res["sls"] or 0) > 1 and res["max_hops"] is not None:
        res["deadlock_free"] = None
        res.pop("verify_error", None)
        res["not_proven"] = (f"path SLs read for {len(pairs)} of {total} (HCA, LID) pairs "
                             f"(--max-paths) and the engine uses {res['sls']} SLs: the others' "
                             f"SLs are unknown")
    return res


def fabroute_engine(name: str, export: Path, base, pairs, work: Path, timeout: float,
                    max_paths: int, adversarial: str, total: int) -> dict:
    """One fabroute routing: loaded by ``ib apply`` (plugin engine), read back, measured.
    ``mismatches`` (extra key) when OpenSM or the switches hold other than the files.  When
    only a sample of the ``total`` path SLs was read and it matched the files, the files
    themselves — every path SL — are what the fabric holds: ``deadlock_free`` is their proof
    (:func:`~tablegen.exports.infiniband.verify_files.verify_ib_files`)."""
    values: dict = {}
    head = {"engine": name, "subnet_up": False, "fell_back_to": None, "seconds": None}
    logs = err = rep = None
    try:
        rep = ib.apply(export, keep_logs=True, timeout=timeout, max_paths=max_paths,
                       readback=values)
        logs = rep.get("logs")
    except RunFailed as e:
        logs, err = e.report.get("logs"), e
    finally:
        if logs:        # keep_logs kept apply's scratch directory for its log: ours to remove
            log = Path(logs) / "opensm.log"
            if log.exists():
                parsed = parse_log(log.read_text(errors="replace"), "fabroute")
                head.update(seconds=parsed["seconds"], subnet_up=parsed["subnet_up"])
                (work / "logs").mkdir(exist_ok=True)
                shutil.copyfile(log, work / "logs" / f"{name}.opensm.log")
            shutil.rmtree(logs, ignore_errors=True)
    if err is not None:
        return _failed(head, str(err))
    res = {**head, **measure(name, values, base, pairs, work, adversarial)}
    if not rep["ok"]:
        res["mismatches"] = rep["mismatches"]
    elif len(pairs) < total and (res["sls"] or 0) > 1 and res["max_hops"] is not None:
        from tablegen.exports.files import load_table_dir
        from tablegen.exports.infiniband.read import load_ib_files
        from tablegen.exports.infiniband.verify_files import verify_ib_files

        v = verify_ib_files(load_ib_files(export), load_table_dir(export))
        res.pop("verify_error", None)
        res["deadlock_free"] = bool(v["ok"])
        if not v["ok"]:
            res["verify_error"] = v["errors"][0]
    return res


def _failed(head: dict, why: str) -> dict:
    return {**head, "sls": None, "vls": None, "deadlock_free": False, "max_hops": None,
            "avg_hops": None, "bound_uniform": None, "bound_adversarial": None, "error": why}


@contextlib.contextmanager
def _work_dir(out: Path | None, force: bool = False):
    """``out`` built crash-safe (temporary sibling, fsync, one rename), or a scratch
    directory removed at the end."""
    if out is not None:
        from tablegen.exports.outdir import replaced_dir

        with replaced_dir(out, kind="ib-compare", force=force) as tmp:
            yield tmp
        return
    tmp = Path(tempfile.mkdtemp(prefix="fabroute-compare-"))
    try:
        yield tmp
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def compare(spec: str, engines=DEFAULT_ENGINES, routings=None, *, lmc: int = 0,
            seed: int = 1, timeout: float = 60.0, out: Path | None = None,
            max_paths: int = ib.MAX_PATHS, options: dict | None = None,
            adversarial: str | None = None, log=lambda msg: None,
            force: bool = False) -> dict:
    """Run every engine on the ibsim fabric of ``spec`` and measure it (module doc).
    ``routings`` None: :func:`default_routings`.  A routing InfiniBand cannot carry at LMC 0
    runs as its IB variant (:func:`_export_variant`: engine ``fabroute-min-ib-climb`` or
    ``fabroute-<routing>-ib-native``); at a higher LMC
    it is left out, or reported with ``error`` when named explicitly.  ``timeout``:
    seconds from OpenSM's start to ``SUBNET UP`` per engine; ``options``: opensm.conf lines
    for every OpenSM engine; ``adversarial``: the traffic of ``bound_adversarial`` (default
    :func:`adversarial_traffic`); ``force``: ``out`` may replace a fabroute output of
    another kind.  :class:`BadInput` before anything runs.

    Complexity: per engine one OpenSM run and read-back (``ib apply``'s costs), the IB walk
    ``O(H · T · D)``, and two bounds ``O(hosts per switch · 2^LMC · N² · D)``."""
    from tablegen.exports.infiniband.read import load_ib_files
    from tablegen.exports.outdir import check_out_dir
    from tablegen.topologies.spec import build

    topo = build(spec)
    explicit = routings is not None
    routings = list(routings) if explicit else default_routings(topo.kind, lmc)
    engines = list(engines)
    adversarial = adversarial or adversarial_traffic(topo.kind)
    check_args(topo, engines, routings, lmc, adversarial)
    if out is not None:
        check_out_dir(out, kind="ib-compare", force=force)
    missing = ib.binaries_missing()
    if missing:
        raise BadInput(f"ib compare: not installed: {', '.join(missing)}; {ib.APT_HINT}")
    ib.build_tools()
    results, skipped = [], {}
    with _work_dir(Path(out) if out is not None else None, force) as work:
        exports = work / "exports"
        exports.mkdir()
        named = {}          # routing -> engine name of what was exported
        for r in routings:
            _export(topo, r, lmc, seed, exports, named, skipped, log)
        # The fabric files every engine shares (fabric.net, GUIDs, LIDs) come from the first
        # routing exported; only when there is none is MIN exported for them alone.
        done = [r for r in routings if r not in skipped]
        if not done:
            _export(topo, "min", lmc, seed, exports, named, skipped, log)
            if "min" in skipped:
                raise RunFailed(f"ib compare: the fabric itself cannot be exported: "
                                f"{skipped['min']}")
            done = ["min"]
        base = load_ib_files(exports / named[done[0]])
        pairs, total, _ = ib.path_pairs(base, max_paths)
        for e in engines:
            t0 = time.perf_counter()
            results.append(opensm_engine(e, base, pairs, work, timeout, options or {},
                                         adversarial, total))
            log(f"{e}: {time.perf_counter() - t0:.2f} s")
        for r in routings:
            if r in skipped:
                if explicit:
                    results.append(_failed({"engine": FABROUTE + r, "subnet_up": False,
                                            "fell_back_to": None, "seconds": None},
                                           f"not exported: {skipped[r]}"))
                continue
            t0 = time.perf_counter()
            results.append(fabroute_engine(named[r], exports / named[r], base, pairs, work,
                                           timeout, max_paths, adversarial, total))
            log(f"{named[r]}: {time.perf_counter() - t0:.2f} s")
        doc = {"engines": results}
        if out is not None:
            (work / "compare.json").write_text(json.dumps({"kind": "ib-compare", **doc},
                                                          indent=1) + "\n")
            plot(doc, work / "compare.png", f"{topo.name()}, LMC {lmc}; adversarial = "
                                            f"{adversarial}")
    return doc


def plot(doc: dict, png: Path, title: str) -> None:
    """Two bar panels per engine: max and average switch hops; the throughput bounds under
    uniform and adversarial traffic.  Engines not deadlock-free are marked ``*``, not proven
    either way ``?``, engines without a measurement ``(failed)``."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import numpy as np

    rows = doc["engines"]
    mark = {True: "", False: " *", None: " ?"}
    names = [r["engine"] + mark[r["deadlock_free"]] if r["max_hops"] is not None
             else r["engine"] + " (failed)" for r in rows]
    x = np.arange(len(rows))
    fig, axes = plt.subplots(1, 2, figsize=(max(8.0, 1.3 * len(rows) + 3), 4.2))
    for ax, keys, label in ((axes[0], ("max_hops", "avg_hops"), "switch hops"),
                            (axes[1], ("bound_uniform", "bound_adversarial"),
                             "throughput bound (of injection bandwidth)")):
        for i, k in enumerate(keys):
            vals = [r[k] if r[k] is not None else 0.0 for r in rows]
            bars = ax.bar(x + (i - 0.5) * 0.4, vals, 0.4, label=k.replace("_", " "))
            ax.bar_label(bars, fmt="%.2f" if "avg" in k or "bound" in k else "%d", fontsize=7)
        ax.set_xticks(x, names, rotation=30, ha="right", fontsize=8)
        ax.set_ylabel(label)
        ax.grid(axis="y", alpha=0.3)
        ax.legend(fontsize=8)
    fig.suptitle(f"fabroute ib compare: {title}  (* not deadlock-free under IB, ? not proven: "
                 f"path SLs sampled)", fontsize=9)
    fig.tight_layout()
    fig.savefig(png, dpi=110)
    plt.close(fig)
