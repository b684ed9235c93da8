"""Topology SPEC strings: ``kind:key=value,key=value``.

========== ======================================== ==========================================
kind       keys (defaults)                          example
========== ======================================== ==========================================
slimfly    q, p (⌈k'/2⌉), xi (paper / smallest)      ``slimfly:q=5``
dragonfly  p, a, h, g (a*h+1), arrangement           ``dragonfly:p=2,a=4,h=2``
           (absolute | relative)
dsnf       n (>= 8), p (what n implies), hosts (1)   ``dsnf:n=32``
torus      x, y, hosts (1)                           ``torus:x=8,y=8``
dsn        n, x (p-1), hosts (1)                     ``dsn:n=128``
dln        n, x (4), seed (1), hosts (1)             ``dln:n=128,x=4,seed=7``
fattree    k (even), hosts (k/2 per edge switch)     ``fattree:k=8``
fbfly      k, n, hosts (k)                           ``fbfly:k=4,n=3``
hypercube  d, hosts (1)                              ``hypercube:d=6``
jellyfish  n, k, seed (1), hosts (1)                 ``jellyfish:n=64,k=6,seed=3``
========== ======================================== ==========================================

The last four are the baselines of the Slim Fly paper: the 3-level fat tree of Al-Fares et
al. (:mod:`tablegen.topologies.fattree`; hosts on its edge switches only), the flattened
butterfly and the hypercube (:mod:`tablegen.topologies.hamming`) and the random regular
graph Jellyfish (:mod:`tablegen.topologies.jellyfish`).

Every kind also takes ``fail`` (``fail=3-7+8-9``: the fabric without every cable between
switches 3 and 7 and between 8 and 9, :mod:`tablegen.topologies.failures`); the name of a
degraded topology carries it, so its tables are recomputed from the name like any other.

A topology's name (:meth:`~tablegen.topology.Topology.name`: every parameter that shapes
the fabric, ``hosts`` when it is not 1) is a SPEC of the same fabric: every printed name is
accepted back.  DSN-F's ``p`` follows from ``n``; given, it must be that value, or one less
at a transformation point ``n = p·2^p`` (the network just before ``p -> p + 1``).  The
smallest DSN-F is ``n = 8`` (:data:`DSNF_MIN_N`).

Every key is an integer (ASCII digits, an optional leading ``-``) except ``arrangement`` and
``fail``; a key given twice is refused.  The sizes each
key may reach are in :mod:`tablegen.limits` (e.g. ``slimfly`` q <= 41, ``dsnf`` n <= 16,384,
at most 16,384 switches and 131,072 hosts of any kind); each builder checks them before it
allocates anything, so :func:`build` either returns a topology within them or raises
:class:`~tablegen.errors.TopologyError` with a one-line message.
"""

from __future__ import annotations

import re

from tablegen.errors import TopologyError
from tablegen.topology import Topology

#: The smallest DSN-F: ``n = 2·2^2`` switches, ``p = 2``.  Below it (``p = 1``, n < 8) no
#: switch has a shortcut (shortcuts leave levels ``l < p``) and there is no level ring: a
#: ring of single switches, not the paper's network ([DSNF] §III-B).
DSNF_MIN_N = 8

#: What :func:`parse_spec` reads as an integer: ``int()`` would also take ``1_3`` and
#: non-ASCII digits (``５``), which are typos in a SPEC, not numbers.
_INT = re.compile(r"-?[0-9]+")

_KEYS = {
    "slimfly": ({"q"}, {"p", "xi"}),
    "dragonfly": ({"p", "a", "h"}, {"g", "arrangement"}),
    "dsnf": ({"n"}, {"p", "hosts"}),
    "torus": ({"x", "y"}, {"hosts"}),
    "dsn": ({"n"}, {"x", "hosts"}),
    "dln": ({"n"}, {"x", "seed", "hosts"}),
    "fattree": ({"k"}, {"hosts"}),
    "fbfly": ({"k", "n"}, {"hosts"}),
    "hypercube": ({"d"}, {"hosts"}),
    "jellyfish": ({"n", "k"}, {"seed", "hosts"}),
}


#: The SPEC grammar as ``fabroute topology --help`` prints it (README: *The command line*).
GRAMMAR = f"""\
SPEC is KIND:KEY=VALUE,... (defaults in brackets); a table directory is taken too.
  slimfly:q=Q[,p=P,xi=XI]      Slim Fly MMS(q), q a prime power 4w+d (3..41); p hosts per
                               switch [ceil(k'/2)], xi the primitive element [paper/smallest]
  dragonfly:p=P,a=A,h=H[,g=G,arrangement=absolute|relative]
                               p hosts per router, a routers per group, h global ports each,
                               g groups [a*h+1], global cabling [absolute]
  dsnf:n=N[,p=P,hosts=H]       DSN-F of n >= {DSNF_MIN_N} switches; p levels [what n implies;
                               or one less at n = p*2^p, before the p -> p+1 transformation]
  torus:x=X,y=Y[,hosts=H]      2-D torus
  dsn:n=N[,x=X,hosts=H]        DSN-x ring with shortcuts [x = p-1]
  dln:n=N[,x=X,seed=S,hosts=H] DLN-x random shortcuts [x=4, seed=1]
  fattree:k=K[,hosts=H]        3-level k-ary fat tree, k even (5k^2/4 switches of radix k);
                               H hosts on each edge switch only [k/2], 1 <= H <= k/2
  fbfly:k=K,n=N[,hosts=H]      flattened butterfly k-ary n-flat: k^(n-1) routers [H = k]
  hypercube:d=D[,hosts=H]      2^d switches
  jellyfish:n=N,k=K[,seed=S,hosts=H]
                               random k-regular graph on n switches, n*k even [seed=1]
hosts=H: hosts per switch [1] (slimfly, dragonfly: p; fattree, fbfly: as above).
Every kind also takes
  fail=A-B[+C-D...]: the fabric without every cable between switches A and B (and C, D).
Values are integers (ASCII digits) except arrangement and fail; each key at most once.
Every name fabroute prints (e.g. dsnf:n=64,p=4) is a SPEC of the same fabric."""


def parse_spec(spec: str) -> tuple[str, dict]:
    """Split a SPEC into its kind and parameters (integers where they look like integers).
    O(len(spec)); no size is checked here (the builders do, :mod:`tablegen.limits`)."""
    if not spec.strip():
        raise TopologyError("topology SPEC is empty; expected kind:key=value,... (e.g. "
                            "slimfly:q=5; `fabroute topology --help` lists every key)")
    kind, _, rest = spec.partition(":")
    kind = kind.strip().lower()
    if kind not in _KEYS:
        raise TopologyError(f"topology {kind!r} is unknown; expected one of {', '.join(_KEYS)}")
    params: dict = {}
    for item in filter(None, (s.strip() for s in rest.split(","))):
        key, eq, value = item.partition("=")
        if not eq or not value:
            raise TopologyError(f"{kind}: {item!r:.60} is not key=value; expected keys "
                                f"{', '.join(sorted(set().union(*_KEYS[kind])))}")
        key = key.strip()
        if key in params:  # the last one silently winning hid typos such as q=5,q=7
            raise TopologyError(f"{kind}: {item!r:.60} repeats key {key!r:.20} (already "
                                f"{params[key]!r:.20}); expected each key once")
        value = value.strip()
        params[key] = int(value) if _INT.fullmatch(value) else value
    required, optional = _KEYS[kind]
    missing = required - params.keys()
    unknown = params.keys() - required - optional - {"fail"}
    if missing:
        raise TopologyError(f"{kind}: missing {', '.join(sorted(missing))}; expected keys "
                            f"{', '.join(sorted(required | optional))}")
    if unknown:
        shown = (k if k.isidentifier() else repr(k) for k in sorted(unknown))  # one line
        raise TopologyError(f"{kind}: unknown key {', '.join(shown)}; expected keys "
                            f"{', '.join(sorted(required | optional))}")
    for k, v in params.items():
        if k not in ("arrangement", "fail") and not isinstance(v, int):
            raise TopologyError(f"{kind}: {k}={v!r:.40} is not an integer; expected {k}=N")
    return kind, params


def build(spec: str) -> Topology:
    """Build the topology a SPEC names (without its ``fail`` links, if it names any)."""
    kind, params = parse_spec(spec)
    from tablegen.topologies.failures import failed_pairs, without_links

    failed = failed_pairs(params)
    topo = _build(kind, {k: v for k, v in params.items() if k != "fail"})
    return without_links(topo, failed) if failed else topo


def _build(kind: str, params: dict) -> Topology:
    if kind == "slimfly":
        from tablegen.topologies.slimfly import build_slimfly

        return build_slimfly(**params)
    if kind == "dragonfly":
        from tablegen.topologies.dragonfly import build_dragonfly

        return build_dragonfly(**params)
    if kind == "dsnf":
        from tablegen.topologies.dsnf import build_dsnf

        if params["n"] < DSNF_MIN_N:
            raise TopologyError(f"dsnf: n={params['n']} is below the smallest DSN-F; expected "
                                f"n >= {DSNF_MIN_N} (p = 2: {DSNF_MIN_N} switches)")
        return build_dsnf(**params)
    if kind == "fattree":
        from tablegen.topologies.fattree import build_fattree

        return build_fattree(**params)
    if kind in ("fbfly", "hypercube"):
        from tablegen.topologies import hamming

        return (hamming.build_fbfly if kind == "fbfly" else hamming.build_hypercube)(**params)
    if kind == "jellyfish":
        from tablegen.topologies.jellyfish import build_jellyfish

        return build_jellyfish(**params)
    from tablegen.topologies import baselines

    return {"torus": baselines.build_torus, "dsn": baselines.build_dsn,
            "dln": baselines.build_dln}[kind](**params)
