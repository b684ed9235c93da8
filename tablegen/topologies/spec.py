"""Topology SPEC strings: ``kind:key=value,key=value``.

========== ======================================== ==========================================
kind       keys (defaults)                          example
========== ======================================== ==========================================
slimfly    q, p (⌈k'/2⌉), xi (paper / smallest)      ``slimfly:q=5``
dragonfly  p, a, h, g (a*h+1), arrangement           ``dragonfly:p=2,a=4,h=2``
           (absolute | relative)
dsnf       n, hosts (1)                              ``dsnf:n=32``
torus      x, y, hosts (1)                           ``torus:x=8,y=8``
dsn        n, x (p-1), hosts (1)                     ``dsn:n=128``
dln        n, x (4), seed (1), hosts (1)             ``dln:n=128,x=4,seed=7``
========== ======================================== ==========================================
"""

from __future__ import annotations

from tablegen.errors import TopologyError
from tablegen.topology import Topology

_KEYS = {
    "slimfly": ({"q"}, {"p", "xi"}),
    "dragonfly": ({"p", "a", "h"}, {"g", "arrangement"}),
    "dsnf": ({"n"}, {"hosts"}),
    "torus": ({"x", "y"}, {"hosts"}),
    "dsn": ({"n"}, {"x", "hosts"}),
    "dln": ({"n"}, {"x", "seed", "hosts"}),
}


def parse_spec(spec: str) -> tuple[str, dict]:
    """Split a SPEC into its kind and parameters (integers where they look like integers)."""
    kind, _, rest = spec.partition(":")
    kind = kind.strip().lower()
    if kind not in _KEYS:
        raise TopologyError(f"topology {kind!r} is unknown; expected one of {', '.join(_KEYS)}")
    params: dict = {}
    for item in filter(None, (s.strip() for s in rest.split(","))):
        key, eq, value = item.partition("=")
        if not eq or not value:
            raise TopologyError(f"{kind}: {item!r} is not key=value")
        key = key.strip()
        try:
            params[key] = int(value)
        except ValueError:
            params[key] = value.strip()
    required, optional = _KEYS[kind]
    missing = required - params.keys()
    unknown = params.keys() - required - optional
    if missing:
        raise TopologyError(f"{kind}: missing {', '.join(sorted(missing))}; expected keys "
                            f"{', '.join(sorted(required | optional))}")
    if unknown:
        raise TopologyError(f"{kind}: unknown key {', '.join(sorted(unknown))}; expected keys "
                            f"{', '.join(sorted(required | optional))}")
    for k, v in params.items():
        if k != "arrangement" and not isinstance(v, int):
            raise TopologyError(f"{kind}: {k}={v!r} is not an integer")
    return kind, params


def build(spec: str) -> Topology:
    """Build the topology a SPEC names."""
    kind, params = parse_spec(spec)
    if kind == "slimfly":
        from tablegen.topologies.slimfly import build_slimfly

        return build_slimfly(**params)
    if kind == "dragonfly":
        from tablegen.topologies.dragonfly import build_dragonfly

        return build_dragonfly(**params)
    if kind == "dsnf":
        from tablegen.topologies.dsnf import build_dsnf

        return build_dsnf(**params)
    from tablegen.topologies import baselines

    return {"torus": baselines.build_torus, "dsn": baselines.build_dsn,
            "dln": baselines.build_dln}[kind](**params)
