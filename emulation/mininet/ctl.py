"""Run ``fabroute controller DIR`` (os-ken, ``controller/``) for an emulation and wait until
every switch holds its tables.

The controller is a separate process listening on loopback; the net's bridges have it as
their ``RemoteController`` (``build_net(..., controller_port=port)``).  Its ``--status`` JSON
(``controller/openflow/app.py``) says per switch whether the flow and group tables were read back and
found equal to the program (``verified``).  :class:`Controller` starts it, :meth:`wait_verified`
polls that file, :meth:`stop` ends exactly that process (SIGTERM, then SIGKILL, by pid).
"""

from __future__ import annotations

import json
import shutil
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

from tablegen.errors import RunFailed

__all__ = ["Controller", "free_port"]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def terminate(proc: subprocess.Popen) -> None:
    """End a process started here, by its PID: SIGTERM, SIGKILL after 10 s."""
    if proc.poll() is None:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(10)


def _fabroute() -> str:
    exe = Path(sys.executable).parent / "fabroute"
    if exe.exists():
        return str(exe)
    found = shutil.which("fabroute")
    if not found:
        raise RunFailed("the fabroute command is not installed (pip install -e .)")
    return found


class Controller:
    """``fabroute controller table_dir --listen 127.0.0.1:port --status … --log …`` (and
    ``--tls PKI_DIR``, and ``args``: more options, e.g. the adaptive ones).

    ``prepare_mib``: the controller's ``--prepare-mib``; 0 by default here, because on one
    machine the repairs it would make ready compete with the emulated switches for the same
    cores (a failure run asks for them: ``None`` is the controller's own default)."""

    def __init__(self, table_dir, port: int, workdir, name: str = "controller",
                 tls=None, args: tuple[str, ...] = (), prepare_mib: int | None = 0):
        self.table_dir = Path(table_dir)
        self.port = port
        workdir = Path(workdir)
        workdir.mkdir(parents=True, exist_ok=True)
        self.status_path = workdir / f"{name}.status.json"
        self.log_path = workdir / f"{name}.log"
        self.status_path.unlink(missing_ok=True)
        self.log_path.unlink(missing_ok=True)
        self.t_start = time.perf_counter()
        # stderr (bad input, a traceback) into the log too; append mode, since the
        # controller's logging opens the same file and both must write at its end
        with open(self.log_path, "a") as err:
            self.proc = subprocess.Popen(
                [_fabroute(), "controller", str(self.table_dir), "--listen",
                 f"127.0.0.1:{port}", "--status", str(self.status_path), "--log",
                 str(self.log_path), *(["--tls", str(tls)] if tls else []),
                 *([] if prepare_mib is None else ["--prepare-mib", str(prepare_mib)]),
                 *args],
                stdout=subprocess.DEVNULL, stderr=err, start_new_session=True)

    def status(self) -> dict:
        try:
            return json.loads(self.status_path.read_text())
        except (OSError, ValueError):
            return {}

    def log_tail(self, n: int = 3000) -> str:
        try:
            return self.log_path.read_text()[-n:]
        except OSError:
            return ""

    def wait_verified(self, n_switches: int, timeout: float = 120.0) -> float:
        """Wait until ``n_switches`` switches are verified; returns the seconds since the
        controller was started.  Raises :class:`RunFailed` with the status and log tail
        on a failed switch, a dead controller or the timeout."""
        def verified(st):
            if st.get("failed"):
                raise RunFailed(f"controller: {st['failed']} switch(es) failed "
                                f"verification: {json.dumps(st)[:1500]}")
            return st.get("verified", 0) >= n_switches

        self.wait_for(verified, timeout, f"all {n_switches} switches verified")
        return time.perf_counter() - self.t_start

    def wait_for(self, cond, timeout: float = 60.0, what: str = "condition") -> dict:
        """Wait until ``cond(status)`` holds; returns that status.  Raises
        :class:`RunFailed` with the status and log tail on a dead controller or the
        timeout."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RunFailed(f"fabroute controller exited ({self.proc.returncode}): "
                                f"{self.log_tail()}")
            st = self.status()
            if st and cond(st):
                return st
            time.sleep(0.05)
        raise RunFailed(f"controller: no {what} within {timeout:.0f} s: "
                        f"{json.dumps(self.status())[:1500]}\n{self.log_tail()}")

    def stop(self) -> None:
        terminate(self.proc)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.stop()
