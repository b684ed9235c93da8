"""The live fabric map (``fabroute controller --web``) in real Chromium (Debian's
``chromium``, driven by Playwright pointed at it: nothing downloads a browser) against the
real controller serving Slim Fly q = 5 with adaptive UGAL-L under Mininet + Open vSwitch,
with ``--metrics`` scraped by a real Prometheus (Debian's ``prometheus``, on loopback, ended
by PID).  Before any switch connects the page already shows every switch and cable; then
every switch turns verified; a cable taken down is marked within two polls; under
adversarial load the UGAL-L shares on the page equal ``/metrics``'
``fabroute_ugal_share_ratio`` and Prometheus' at the same decision round.  With ``FABROUTE_LIVE_MAP_PNG=PATH`` the
screenshot of the map under load is written there too (docs/figures/live-map.png).
docs/operations.md."""

from __future__ import annotations

import json
import os
import threading
import time
import urllib.request
from pathlib import Path

import pytest
from prometheus_client.parser import text_string_to_metric_families

from emulation.mininet.ctl import Controller, free_port
from emulation.mininet.grow import set_link
from emulation.mininet.loadrun import controller_args
from emulation.mininet.net import emulate, ensure_ovs
from emulation.mininet.traffic import run_traffic
from emulation.prometheus import Prometheus
from tablegen.exports.files import write_table_set
from tablegen.routing.build import build_tables
from tablegen.topologies.spec import build
from tablegen.verify import verify

pytestmark = [pytest.mark.ovs, pytest.mark.xdist_group("ovs")]

PREFIX = "wm"
CHROMIUM = "/usr/bin/chromium"
POLL = 1.0
ADAPTIVE = {"poll": POLL, "split_bits": 3, "hysteresis": 0.25}
LINK_MBIT = 1.0
LOAD = 0.8
HOSTS = 2               # per switch: two hosts' adversarial flows overload a minimal first hop
TRAFFIC_S = 45.0


def page_shares(page) -> tuple[int, dict]:
    """The decision round the page shows and its non-minimal shares ``{(src, dst): share}``,
    read in one go (the page's script runs between events, never during one)."""
    got = page.evaluate("""() => [document.getElementById('ugal-summary').dataset.rounds,
        [...document.querySelectorAll('tr.share')].map(
            r => [+r.dataset.src, +r.dataset.dst, r.dataset.share])]""")
    return int(got[0] or -1), {(u, k): float(v) for u, k, v in got[1]}


def scrape(port: int) -> tuple[int, dict]:
    """``/metrics``' decision round and its non-zero ``fabroute_ugal_share_ratio``."""
    text = urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10).read()
    rounds, shares = -1, {}
    for fam in text_string_to_metric_families(text.decode()):
        for s in fam.samples:
            if s.name == "fabroute_ugal_rounds_total":
                rounds = int(s.value)
            elif s.name == "fabroute_ugal_share_ratio" and s.value > 0:
                shares[(int(s.labels["switch"]), int(s.labels["destination"]))] = s.value
    return rounds, shares


def prometheus_shares(prom: Prometheus) -> tuple[int, dict]:
    """The newest scrape's round and non-zero shares as Prometheus stored them."""
    rounds = prom.query("fabroute_ugal_rounds_total")
    shares = prom.query("fabroute_ugal_share_ratio > 0")
    return (int(float(rounds[0]["value"][1])) if rounds else -1,
            {(int(r["metric"]["switch"]), int(r["metric"]["destination"])):
             float(r["value"][1]) for r in shares})


def same_round(read_a, read_b, timeout: float = 60.0):
    """Read both sides until they show the same decision round with shares detouring;
    returns ``(round, shares_a, shares_b)``."""
    deadline = time.monotonic() + timeout
    last = None
    while time.monotonic() < deadline:
        ra, a = read_a()
        rb, b = read_b()
        ra2, _ = read_a()
        last = (ra, rb, ra2, len(a), len(b))
        if ra == rb == ra2 and a:
            return ra, a, b
        time.sleep(0.1)
    raise AssertionError(f"never the same round with shares: {last}")


def save_small(png: Path, out: Path) -> None:
    """``png`` with a 256-colour palette at ``out`` (the docs' figure: a third of the size)."""
    from PIL import Image

    Image.open(png).convert("RGB").quantize(256, method=Image.Quantize.MAXCOVERAGE).save(
        out, optimize=True)


def cable_down(fnet, ctl, page, a: int, b: int, updates: int = 1) -> dict:
    """Take the cable ``a``-``b`` down; assert the page marks it within two polls of the
    controller hearing the port go down (Open vSwitch's own delay in reporting the veth down
    is not the map's), after the push, and that the repair is verified (the ``updates``-th
    live update).  Returns the delays in seconds: ``ovs`` (set down to the controller's port
    event), ``push`` (event to the state pushed), ``shown`` (pushed to shown in Chromium),
    ``page`` (set down to the test seeing it marked)."""
    sel = f'line[data-cable="{min(a, b)}-{max(a, b)}"]'
    assert page.locator(sel).get_attribute("data-failed") == "0"
    t_down = set_link(fnet, a, b, False)
    wall_down = time.time()
    page.wait_for_selector(f'{sel}[data-failed="1"]', timeout=10_000)
    marked = time.monotonic() - t_down
    pushed = float(page.locator(sel).get_attribute("data-failed-since"))
    shown = float(page.locator(sel).get_attribute("data-failed-shown"))
    st = ctl.wait_for(lambda s: s.get("updates", 0) >= updates and (
        s.get("update") or {}).get("t_verified"), 120, "the repair verified")
    t_event = st["update"]["t_event"]
    delays = {"ovs": t_event - wall_down, "push": pushed - t_event, "shown": shown - pushed,
              "page": marked}
    assert 0 <= pushed - t_event and marked - (t_event - wall_down) <= 2 * POLL, delays
    return delays


@pytest.fixture
def browser():
    if not Path(CHROMIUM).exists():
        pytest.skip("Debian's chromium is not installed (make test installs it)")
    from playwright.sync_api import sync_playwright

    with sync_playwright() as p:
        b = p.chromium.launch(executable_path=CHROMIUM)
        try:
            yield b
        finally:
            b.close()


def test_live_map_in_chromium_switches_cables_shares_and_a_cable_down(tmp_path, browser):
    ensure_ovs()
    topo = build("slimfly:q=5")
    ts = build_tables(topo, "ugal-l")
    write_table_set(ts, verify(ts), tmp_path / "tables", ("openflow",))
    mport, wport = free_port(), free_port()
    ctl = Controller(tmp_path / "tables", free_port(), tmp_path, args=(
        *controller_args(ADAPTIVE, LINK_MBIT, tmp_path / "decisions.jsonl"),
        "--metrics", f"127.0.0.1:{mport}", "--web", f"127.0.0.1:{wport}"))
    prom = Prometheus([f"127.0.0.1:{mport}"], tmp_path / "prometheus", free_port(), 0.5)
    page = browser.new_page(viewport={"width": 1280, "height": 800})
    errors = []
    page.on("pageerror", lambda e: errors.append(str(e)))
    try:
        prom.wait_ready()
        # the page answers as soon as the controller listens, before any switch
        deadline = time.monotonic() + 60
        while True:
            try:
                page.goto(f"http://127.0.0.1:{wport}/", timeout=5000)
                break
            except Exception:               # noqa: BLE001  (not listening yet)
                if time.monotonic() > deadline or ctl.proc.poll() is not None:
                    raise AssertionError(f"no page: {ctl.log_tail()}") from None
                time.sleep(0.3)
        page.wait_for_selector("body[data-seq]", timeout=30_000)
        assert page.locator("circle[data-switch]").count() == 50
        assert page.locator("line[data-cable]").count() == 175
        cables = {page.locator("line[data-cable]").nth(i).get_attribute("data-cable")
                  for i in range(175)}
        assert cables == {f"{min(a, b)}-{max(a, b)}" for a, _, b, _ in topo.links.tolist()}
        assert page.locator('circle[data-state="absent"]').count() == 50
        with emulate(topo, controller_port=ctl.port, hosts_per_switch=HOSTS, prefix=PREFIX,
                     link_mbit=LINK_MBIT) as fnet:
            ctl.wait_verified(50, timeout=240)
            page.wait_for_function("document.querySelectorAll("
                                   "'circle[data-verified=\"1\"]').length == 50",
                                   timeout=3 * POLL * 1000)
            assert page.locator("#counts").get_attribute("data-verified") == "50"
            # a cable taken down is marked within two polls of the controller hearing it
            a = 0
            b = int(topo.adj[0][topo.adj[0] >= 0][0])
            sel = f'line[data-cable="{min(a, b)}-{max(a, b)}"]'
            delays = [cable_down(fnet, ctl, page, a, b)]
            report = {}
            load = threading.Thread(target=lambda: report.update(run_traffic(
                fnet, [("adversarial", TRAFFIC_S)], load=LOAD, link_mbit=LINK_MBIT)))
            load.start()
            try:
                page.wait_for_selector("tr.share", timeout=30_000)
                # the page's shares are /metrics' at the same decision round, and Prometheus'
                r, on_page, in_metrics = same_round(lambda: page_shares(page),
                                                    lambda: scrape(mport))
                assert on_page == in_metrics and len(on_page) > 0, (r, on_page, in_metrics)
                r2, on_page2, in_prom = same_round(lambda: page_shares(page),
                                                   lambda: prometheus_shares(prom))
                assert on_page2 == pytest.approx(in_prom, abs=0), (r2, on_page2, in_prom)
                # loads coloured from UGAL-L's estimator: every working cable, some beyond
                # half (a failed one is no port's peer any more: no load).  Waited for: a
                # switch whose statistics reply is late under the load has none for a round
                page.wait_for_function("[...document.querySelectorAll('line[data-cable]')]"
                                       ".filter(l => l.dataset.load !== '').length == 174",
                                       timeout=20_000)
                loads = page.evaluate("[...document.querySelectorAll('line[data-cable]')]"
                                      ".map(l => l.dataset.load).filter(x => x !== '')"
                                      ".map(Number)")
                assert len(loads) == 174 and max(loads) > 0.5
                assert page.locator(sel).get_attribute("data-load") == ""
                assert page.locator(f'{sel}[data-failed="1"]').count() == 1
                page.wait_for_timeout(2000)
                shot = tmp_path / "live-map.png"
                page.screenshot(path=str(shot))
                if os.environ.get("FABROUTE_LIVE_MAP_PNG"):
                    save_small(shot, Path(os.environ["FABROUTE_LIVE_MAP_PNG"]))
                assert float(page.locator("#age").get_attribute("data-age")) < 3 * POLL
                # and a cable taken down under the load, with the shares moving (its repair is
                # verified after the load: the read-backs queue behind the traffic)
                c = int(topo.adj[5][topo.adj[5] >= 0][-1])
                delays.append(cable_down(fnet, ctl, page, 5, c, updates=2))
                assert page.locator("#failed-count").get_attribute("data-count") == "2"
            finally:
                load.join()
        assert report["misrouted"] == 0, json.dumps(report)[:2000]
        assert not errors, errors
    finally:
        prom.stop()
        ctl.stop()
    print(json.dumps({"delays": delays, "round": r, "shares": len(on_page)}))
