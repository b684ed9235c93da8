"""Graph comparison of DSN-F with the baselines of its paper (Truong et al. Figs. 4-7).

For each network size: diameter, average shortest path length and average cable length of
DSN-F, the 2-D torus (the most square x × y with x·y = n), DSN-x (x = p − 1) and DLN-4 (seed
fixed), all of degree about 4; and DSN-F grown node by node from one size to another (Fig. 4).
Results go to JSON with a PNG beside it.
"""

from __future__ import annotations

import json
import math
from pathlib import Path

from tablegen import limits
from tablegen.analysis.layout import analyze
from tablegen.errors import BadInput
from tablegen.topologies.baselines import build_dln, build_dsn, build_torus
from tablegen.topologies.dsnf import build_dsnf

FAMILIES = ("dsnf", "torus", "dsn", "dln")


def _square(n: int) -> tuple[int, int]:
    x = max(d for d in range(1, math.isqrt(n) + 1) if n % d == 0)
    return n // x, x


def build_family(family: str, n: int):
    if family == "dsnf":
        return build_dsnf(n)
    if family == "torus":
        x, y = _square(n)
        return build_torus(x, y)
    if family == "dsn":
        return build_dsn(n)
    return build_dln(n, 4, seed=1)


def compare(sizes: list[int], progress=None) -> dict:
    """``{family: [{"n", "diameter", "aspl", "cable_m"}, …]}`` for every size.
    O(sum of n^2) for the all-pairs distances."""
    out: dict = {f: [] for f in FAMILIES}
    for n in sizes:
        for f in FAMILIES:
            a = analyze(build_family(f, n))
            out[f].append({"n": n, "diameter": a["diameter"], "aspl": a["aspl"],
                           "cable_m": a["cables"]["average_length_m"]})
            if progress:
                progress()
    return out


def expansion(start: int, stop: int, step: int, progress=None) -> list[dict]:
    """DSN-F grown from ``start`` to ``stop`` nodes (same construction, nodes appended):
    diameter and ASPL per ``step`` added nodes (the paper's Fig. 4 uses 1024 -> 2048)."""
    rows = []
    for n in range(start, stop + 1, step):
        a = analyze(build_dsnf(n))
        rows.append({"added": n - start, "n": n, "diameter": a["diameter"], "aspl": a["aspl"]})
        if progress:
            progress()
    return rows


def plot(result: dict, png: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    sizes = result["sizes"]
    panels = [("diameter", "diameter (hops)"), ("aspl", "average shortest path (hops)"),
              ("cable_m", "average cable length (m)")]
    ncol = 4 if result.get("expansion") else 3
    fig, axes = plt.subplots(1, ncol, figsize=(4.2 * ncol, 3.6))
    for ax, (key, label) in zip(axes, panels):
        for f in FAMILIES:
            ax.plot(sizes, [r[key] for r in result["families"][f]], marker="o", label=f)
        ax.set_xscale("log", base=2)
        ax.set_xlabel("switches")
        ax.set_ylabel(label)
        ax.grid(alpha=0.3)
    axes[0].legend()
    if result.get("expansion"):
        ax = axes[3]
        e = result["expansion"]
        ax.plot([r["added"] for r in e], [r["diameter"] for r in e], marker=".", label="diameter")
        ax.plot([r["added"] for r in e], [r["aspl"] for r in e], marker=".", label="ASPL")
        ax.set_xlabel(f"nodes added to DSN-F({e[0]['n']})")
        ax.set_ylabel("hops")
        ax.legend()
        ax.grid(alpha=0.3)
    fig.suptitle("DSN-F vs 2-D torus, DSN-x, DLN-4 (degree ~4)")
    fig.tight_layout()
    tmp = png.with_name(png.name + ".tmp.png")
    fig.savefig(tmp, dpi=110)
    plt.close(fig)
    tmp.replace(png)


def run(sizes: list[int], out: Path, expand: tuple[int, int, int] | None = None) -> dict:
    """Compute, then write ``out/compare.json`` (its ``kind`` is ``compare``) and
    ``out/compare.png`` into directory ``out`` (``fabroute compare`` passes the new directory
    that replaces its ``--out``).  At most :data:`tablegen.limits.MAX_POINTS` topologies are
    analysed; each size is checked by its builder (:mod:`tablegen.limits`) before any is."""
    from rich.progress import Progress

    total = len(sizes) * len(FAMILIES) + (len(range(*expand[:1], expand[1] + 1, expand[2]))
                                           if expand else 0)
    if total > limits.MAX_POINTS:
        raise BadInput(f"compare: {total:,} topologies to analyse (--sizes × {len(FAMILIES)} "
                       f"families + --expansion points), above the largest supported "
                       f"{limits.MAX_POINTS:,}; expected fewer sizes or a larger STEP")
    with Progress(transient=True) as bar:
        task = bar.add_task("analysing", total=total)
        step = lambda: bar.advance(task)  # noqa: E731
        result = {"kind": "compare", "sizes": sizes, "families": compare(sizes, step)}
        if expand:
            result["expansion"] = expansion(*expand, progress=step)
    (out / "compare.json").write_text(json.dumps(result, indent=1))
    plot(result, out / "compare.png")
    return result
