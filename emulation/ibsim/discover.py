"""Start a :class:`~tablegen.fabrics.fabric.Fabric` in ibsim and run real ``ibnetdiscover``
(infiniband-diags) against it through umad2sim, the way an operator discovers a real fabric
(issue 26, docs/real-fabrics.md).

No subnet manager runs: ``ibnetdiscover`` walks the fabric with directed-route SMPs from the
first HCA of the net file, so the LIDs it prints are the net file's.  ibsim is stopped by its
PID on every way out, and the scratch directory removed unless ``keep`` is given.
"""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

from emulation.ibsim import apply as ib
from tablegen.errors import BadInput, RunFailed
from tablegen.fabrics.fabric import Fabric
from tablegen.fabrics.ibsim_net import ibsim_limits, net_names, net_text

DISCOVER_TIMEOUT = 120.0


def ibnetdiscover(env: dict, cwd: Path, timeout: float, report: dict) -> str:
    """What real ``ibnetdiscover`` prints, run as the umad2sim client ``env`` against the
    ibsim fabric running under that environment's socket (a subnet manager may be running
    too); :class:`RunFailed` when it fails or outlasts ``timeout``."""
    try:
        run = subprocess.run([ib._which("ibnetdiscover")], env=env, cwd=cwd,
                             stdin=subprocess.DEVNULL, capture_output=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        raise RunFailed(f"ibnetdiscover did not finish within {timeout:.0f} s",
                        report) from None
    if run.returncode != 0:
        tail = run.stderr.decode(errors="replace").strip().splitlines()[-3:]
        raise RunFailed(f"ibnetdiscover exited with status {run.returncode}: "
                        + " | ".join(tail), report)
    return run.stdout.decode(errors="replace")


def discover(fabric: Fabric, *, timeout: float = DISCOVER_TIMEOUT,
             keep: Path | None = None) -> str:
    """The text ``ibnetdiscover`` prints for ``fabric`` simulated by ibsim.  ``keep``: a
    directory that receives the net file, ibsim's log and the output.  :class:`BadInput`
    when a tool is missing or the fabric has no host to run from, :class:`RunFailed` when
    ibsim or ibnetdiscover fail."""
    missing = [b for b in ib.binaries_missing() if b != "opensm"] + (
        [] if shutil.which(ib._which("ibnetdiscover")) else ["ibnetdiscover"])
    if missing:
        raise BadInput(f"missing {', '.join(missing)}; expected {ib.APT_HINT}")
    if not fabric.hosts:
        raise BadInput("fabric: no host; expected an HCA for ibnetdiscover to run from")
    sock, scratch = ib.new_scratch()
    report: dict = {}
    ibsim = None
    try:
        net = scratch / "fabric.net"
        net.write_text(net_text(fabric))
        env, client, _ = ib.run_envs(sock, scratch, {"hosts": [
            {"name": net_names(fabric)[min(fabric.hosts)]}]}, scratch)
        ibsim = ib.start_ibsim(net, ibsim_limits(fabric), scratch, env, timeout, report)
        out = ibnetdiscover(client, scratch, timeout, report)
        (scratch / "ibnetdiscover.txt").write_text(out)
        return out
    finally:
        ib._stop(ibsim)
        if keep is not None:
            shutil.copytree(scratch, keep, dirs_exist_ok=True)
        shutil.rmtree(scratch, ignore_errors=True)
