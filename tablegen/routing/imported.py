"""Table sets imported from another router's forwarding tables (``fabroute ib import``).

An InfiniBand LFT forwards per destination LID, and OpenSM's engines give every LID its own
tree: two hosts behind one switch may be reached on different paths (minhop and DFSSSP
balance per LID).  Our table model is destination-*switch* based (``tables[name][u, d]``), so
an imported set carries **one path class per (host index behind the destination switch, LID
offset)**: class ``h<e>`` (LMC 0) or ``h<e>o<k>`` is the single-phase class whose table holds,
at every switch ``u``, the network port toward the ``e``-th host of switch ``d``'s LID ``k``.
A packet to host ``e`` of ``d`` uses class ``e`` (of its offset): the destination host picks the
class, as the DLID picks the tree in the fabric.  Classes with identical tables share one table
(a MIN export has a single table; a per-LID minhop has up to ``hosts x 2^LMC``).  Traffic is
spread over the LID offsets in equal shares (a source using every offset alike).

VCs are hop-indexed (each hop on the VC of its hop number; ``num_vcs`` = the longest path):
the table model cannot carry InfiniBand's VLs, which depend on the in port, the out port and a
per-path SL.  So ``verify`` and the simulator see the *routes*; deadlock freedom under IB is
proven on the imported IB files themselves (:mod:`tablegen.exports.infiniband.imports`).

The bound :func:`tablegen.verify.reference` holds an imported set to is recomputed here from
the topology alone: every class a loop-free path, at most ``N - 1`` hops.
"""

from __future__ import annotations

import numpy as np

from tablegen.limits import MAX_VCS
from tablegen.tables import PathClass, TableSet
from tablegen.topology import Topology

IMPORTED = "ib-import"           # the routing name of every imported table set
SOURCE = "infiniband"            # params["source"]: what the tables were imported from


def class_name(e: int, k: int, lmc: int) -> str:
    """The class of destination host index ``e``, LID offset ``k``."""
    return f"h{e}" if lmc == 0 else f"h{e}o{k}"


def class_names(topo: Topology, lmc: int) -> list[str]:
    """Every class of an imported set on ``topo``, host-index major: ``max hosts per switch x
    2^lmc`` of them.  O(1) each."""
    hosts = int(topo.hosts.max(initial=0))
    return [class_name(e, k, lmc) for e in range(hosts) for k in range(1 << lmc)]


def imported_classes(topo: Topology, lmc: int, table_of: list[str]) -> list[PathClass]:
    """The classes of an imported set whose ``i``-th class (in :func:`class_names` order)
    routes by table ``table_of[i]``: single-phase, first hop on VC 0, bound ``N - 1`` hops
    (the longest loop-free path).  ``ValueError`` when ``table_of`` has the wrong length."""
    names = class_names(topo, lmc)
    if len(table_of) != len(names):
        raise ValueError(f"{len(table_of)} class tables; expected {len(names)} (hosts per "
                         f"switch x 2^LMC) for {topo.name()} at LMC {lmc}")
    bound = max(1, topo.n_switches - 1)
    return [PathClass(name, table1=t, max_hops=bound) for name, t in zip(names, table_of)]


def imported_params(lmc: int, engine: str | None) -> dict:
    """``TableSet.params`` of an imported set."""
    return {"source": SOURCE, "lmc": int(lmc), "engine": engine}


def check_params(params: dict) -> int:
    """The LMC of an imported set's ``params``; ``ValueError`` naming what is wrong."""
    ok = (isinstance(params, dict) and set(params) == {"source", "lmc", "engine"}
          and params["source"] == SOURCE and isinstance(params["lmc"], int)
          and 0 <= params["lmc"] <= 7
          and (params["engine"] is None or isinstance(params["engine"], str)))
    if not ok:
        raise ValueError(f"params {params!r:.120}; expected {{'source': '{SOURCE}', 'lmc': "
                         "0..7, 'engine': a name or null}")
    return params["lmc"]


def imported_table_set(topo: Topology, tables: dict[str, np.ndarray], table_of: list[str],
                       lmc: int, engine: str | None = None, num_vcs: int = 1) -> TableSet:
    """A :class:`TableSet` of the imported per-(host index, offset) tables (``int16[N, N]``
    each, ``-1`` at the destination and where the source had no usable route).  ``num_vcs``:
    the longest path (hop-indexed VCs); capped at :data:`MAX_VCS`."""
    from tablegen.routing.build import mask_dtype

    n, r = topo.adj.shape
    return TableSet(topo=topo, routing=IMPORTED, classes=imported_classes(topo, lmc, table_of),
                    tables=tables, alternatives=np.zeros((n, n), dtype=mask_dtype(max(r, 1))),
                    vc_inc=(topo.adj >= 0).astype(np.uint8),
                    num_vcs=max(1, min(int(num_vcs), MAX_VCS)), vc_scheme="hop",
                    params=imported_params(lmc, engine))


def imported_reference(ts: TableSet) -> TableSet:
    """``ts`` as :func:`tablegen.verify.reference` recomputes an imported set: the classes'
    names and bounds from the topology and the LMC (only which stored table each class uses is
    taken from ``ts``), VC increments on every cable, hop VCs.  ``ValueError`` naming what does
    not fit."""
    lmc = check_params(ts.params)
    table_of = [c.table1 for c in ts.classes]
    ref = imported_table_set(ts.topo, ts.tables, table_of, lmc, ts.params["engine"],
                             ts.num_vcs)
    missing = sorted(set(table_of) - set(ts.tables))
    if missing:
        raise ValueError(f"class table {missing[0]!r} is not among the tables "
                         f"{sorted(ts.tables)[:8]}")
    return ref
