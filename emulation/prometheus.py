"""A real Prometheus (Debian's ``prometheus``) scraping controllers' ``--metrics``: for
tests, benchmarks and a look at a running emulation.

:class:`Prometheus` writes a ``prometheus.yml`` scraping the given ``host:port`` targets every
``interval`` seconds, starts the server on a free loopback port with its storage in the
work directory, answers PromQL through the HTTP API (``/api/v1/query``) and ends exactly the
process it started (by PID).  Nothing is left behind but the work directory.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import time
import urllib.parse
import urllib.request
from pathlib import Path

from emulation.mininet.ctl import terminate
from tablegen.errors import RunFailed

__all__ = ["Prometheus", "config_text", "values"]


def config_text(targets: list[str], interval: float, job: str = "fabroute") -> str:
    """``prometheus.yml``: one scrape job of ``targets`` (``host:port``, path ``/metrics``)
    every ``interval`` seconds, each allowed the whole interval (a busy machine)."""
    ms = max(int(interval * 1000), 100)
    return (f"global:\n  scrape_interval: {ms}ms\n  scrape_timeout: {ms}ms\n"
            f"  evaluation_interval: {ms}ms\nscrape_configs:\n  - job_name: {job}\n"
            f"    static_configs:\n      - targets: {json.dumps(list(targets))}\n")


class Prometheus:
    """``prometheus`` scraping ``targets`` every ``interval`` seconds, listening on
    ``127.0.0.1:port``, data and log under ``workdir``; :meth:`stop` ends it (use it as a
    context manager)."""

    def __init__(self, targets: list[str], workdir, port: int, interval: float = 0.5):
        exe = shutil.which("prometheus")
        if exe is None:
            raise RunFailed("prometheus is not installed (apt-get install prometheus)")
        self.workdir = Path(workdir)
        self.workdir.mkdir(parents=True, exist_ok=True)
        self.port = port
        self.url = f"http://127.0.0.1:{port}"
        cfg = self.workdir / "prometheus.yml"
        cfg.write_text(config_text(targets, interval))
        self.log_path = self.workdir / "prometheus.log"
        with open(self.log_path, "ab") as log:
            self.proc = subprocess.Popen(
                [exe, f"--config.file={cfg}", f"--web.listen-address=127.0.0.1:{port}",
                 f"--storage.tsdb.path={self.workdir / 'data'}",
                 "--storage.tsdb.retention.time=1d", "--log.level=warn"],
                stdout=log, stderr=log, start_new_session=True)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.stop()

    def log_tail(self, n: int = 2000) -> str:
        try:
            return self.log_path.read_text()[-n:]
        except OSError:
            return ""

    def _get(self, path: str, timeout: float = 5.0) -> bytes:
        with urllib.request.urlopen(self.url + path, timeout=timeout) as r:
            return r.read()

    def wait_ready(self, timeout: float = 60.0) -> None:
        """Wait until the server answers ``/-/ready``; :class:`RunFailed` if it died."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RunFailed(f"prometheus exited ({self.proc.returncode}): "
                                f"{self.log_tail()}")
            try:
                self._get("/-/ready", 2.0)
                return
            except OSError:
                time.sleep(0.2)
        raise RunFailed(f"prometheus not ready after {timeout:.0f} s: {self.log_tail()}")

    def query(self, expr: str) -> list[dict]:
        """The result vector of an instant PromQL query (``[{"metric": {...}, "value":
        [t, "v"]}, ...]``); :class:`RunFailed` on an error answer."""
        body = json.loads(self._get("/api/v1/query?" + urllib.parse.urlencode({"query": expr})))
        if body.get("status") != "success":
            raise RunFailed(f"prometheus: {expr}: {body.get('error', body)}")
        data = body["data"]
        return data["result"] if data["resultType"] in ("vector", "matrix") else [
            {"metric": {}, "value": data["result"]}]

    def wait_for(self, expr: str, cond=bool, timeout: float = 60.0) -> list[dict]:
        """Query ``expr`` until ``cond(result)`` holds; that result.  :class:`RunFailed` with
        the last result on the timeout."""
        deadline = time.monotonic() + timeout
        got = None
        while time.monotonic() < deadline:
            got = self.query(expr)
            if cond(got):
                return got
            time.sleep(0.25)
        raise RunFailed(f"prometheus: {expr} after {timeout:.0f} s: {json.dumps(got)[:800]}")

    def stop(self) -> None:
        """End the server started here (SIGTERM, SIGKILL after 10 s), by its PID."""
        terminate(self.proc)


def values(result: list[dict]) -> list[float]:
    """The sample values of a query result."""
    return [float(r["value"][1]) for r in result]
