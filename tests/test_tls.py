"""Switch authentication: OpenFlow over TLS with mutual certificates, the datapath id bound to
the certificate, one controller per port, a bounded log and status.  The controller runs for
real (``fabroute controller`` in its own process); the "switches" here speak OpenFlow 1.3's
handshake over TLS themselves, so no Open vSwitch is needed (the emulation over TLS is in
tests/test_emulation.py)."""

from __future__ import annotations

import logging
import socket
import ssl
import struct
import time

import pytest

from controller.openflow.fabric import MAX_REFUSED, Fabric
from controller.openflow.launcher import RateLimit, bind
from controller.tls import Pki, dpid_ranges, make_pki, parse_dpids
from emulation.mininet.ctl import Controller, free_port
from fabroute.cli import main
from tablegen.errors import BadInput
from tablegen.routing.build import build_tables
from tablegen.topologies.spec import build

OFP13, HELLO, FEATURES_REQUEST, FEATURES_REPLY = 4, 0, 5, 6


@pytest.fixture(scope="module")
def served(tmp_path_factory):
    """A proven Slim Fly q=5 MIN set served over TLS; a PKI with a certificate for dpids 1-50
    (the fabric's), one for dpid 7 only, and a second CA nobody trusts."""
    d = tmp_path_factory.mktemp("tls")
    assert main(["tables", "slimfly:q=5", "--routing", "min", "--formats", "json,openflow",
                 "--out", str(d / "set")]) == 0
    make_pki(d / "pki", parse_dpids("1-50"), "fabric")
    make_pki(d / "pki", parse_dpids("7"), "seven")
    make_pki(d / "rogue", parse_dpids("1-50"), "fabric")
    ctl = Controller(d / "set", free_port(), d, "tls", tls=d / "pki")
    deadline = time.monotonic() + 60        # the port is bound before os-ken starts; the
    while "OFPHandler" not in ctl.log_tail() and time.monotonic() < deadline:  # backlog waits
        time.sleep(0.1)
    yield ctl, Pki(d / "pki"), Pki(d / "rogue")
    ctl.stop()


def _msg(kind: int, body: bytes = b"", xid: int = 1) -> bytes:
    return struct.pack("!BBHI", OFP13, kind, 8 + len(body), xid) + body


def _read_msg(s) -> tuple[int, bytes] | None:
    head = b""
    while len(head) < 8:
        chunk = s.recv(8 - len(head))
        if not chunk:
            return None
        head += chunk
    _, kind, length, _ = struct.unpack("!BBHI", head)
    body = b""
    while len(body) < length - 8:
        chunk = s.recv(length - 8 - len(body))
        if not chunk:
            return None
        body += chunk
    return kind, body


def _switch(port: int, pki: Pki, cert_name: str | None, claim: int) -> str:
    """Connect over TLS (with the certificate ``cert_name`` of ``pki``, or none), say hello,
    answer the features request claiming datapath id ``claim``; ``"handshake"`` when TLS
    fails, ``"closed"`` when the controller hangs up after the features reply, ``"open"`` when
    it keeps talking (the port description request and echoes of an accepted switch)."""
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    ctx.check_hostname = False
    ctx.load_verify_locations(pki.ca)
    if cert_name is not None:
        ctx.load_cert_chain(*pki.switch(cert_name))
    with socket.create_connection(("127.0.0.1", port), timeout=20) as raw:
        try:
            s = ctx.wrap_socket(raw)
            s.sendall(_msg(HELLO))
            replied = False
            while (m := _read_msg(s)) is not None:
                if m[0] == FEATURES_REQUEST:
                    s.sendall(_msg(FEATURES_REPLY, struct.pack("!QIBB2xII", claim, 0, 254, 0,
                                                               0, 0)))
                    replied = True
                    s.settimeout(3)
            return "closed" if replied else "handshake"
        except socket.timeout:
            return "open"
        except (ssl.SSLError, ConnectionError):
            return "handshake"


def test_a_switch_claims_only_the_dpids_its_certificate_carries(served):
    ctl, pki, _ = served
    assert _switch(ctl.port, pki, "seven", 7) == "open"         # its certificate carries 7
    assert _switch(ctl.port, pki, "fabric", 9) == "open"
    before = ctl.status().get("refusals", 0)
    assert _switch(ctl.port, pki, "seven", 1) == "closed"       # an impostor of dpid 1
    st = ctl.wait_for(lambda st: st.get("refusals", 0) > before, 20, "the refusal")
    assert any("0000000000000001" in r and "impostor" in r for r in st["refused"])


def test_no_certificate_or_another_ca_gets_no_openflow(served):
    ctl, pki, rogue = served
    assert _switch(ctl.port, pki, None, 1) == "handshake"
    assert _switch(ctl.port, rogue, "fabric", 1) == "handshake"


def test_a_second_controller_on_the_port_refuses_to_start(served, capsys):
    ctl, pki, _ = served
    code = main(["controller", str(ctl.table_dir), "--listen", f"127.0.0.1:{ctl.port}",
                 "--tls", str(pki.dir)])
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 2 and len(err) == 1 and "the port is in use" in err[0]


def test_plain_tcp_off_loopback_and_a_foreign_address_are_refused(served, capsys):
    ctl, _, _ = served
    for listen, words in (("0.0.0.0:16653", "plain TCP leaves switches unauthenticated"),
                          ("203.0.113.9:16653", "not one of this machine's")):
        extra = ["--insecure-tcp"] if "203" in listen else []
        assert main(["controller", str(ctl.table_dir), "--listen", listen, *extra]) == 2
        assert words in capsys.readouterr().err


def test_bind_takes_the_port_alone():
    s = bind("127.0.0.1", 0)
    port = s.getsockname()[1]
    try:
        with pytest.raises(BadInput, match="the port is in use"):
            bind("127.0.0.1", port)
    finally:
        s.close()


# -- plain logic -------------------------------------------------------------------------------
def test_certificate_dpids_and_the_decision():
    cert = {"subjectAltName": (("URI", "urn:fabroute:dpids:0000000000000001-0000000000000032"),
                               ("URI", "urn:other:x"), ("DNS", "switch"))}
    assert dpid_ranges(cert) == [(1, 50)] and dpid_ranges(None) == []
    fab = Fabric(build_tables(build("slimfly:q=5"), "min"))
    assert fab.check_certificate(7, None) is None                  # plain TCP
    assert fab.check_certificate(50, [(1, 50)]) is None
    assert "impostor" in fab.check_certificate(51, [(1, 50)])
    assert "none" in fab.check_certificate(3, [])
    with pytest.raises(BadInput, match="'0-3'"):
        parse_dpids("0-3")


def test_refusals_are_counted_and_the_list_stays_bounded():
    fab = Fabric(build_tables(build("slimfly:q=5"), "min"))
    for i in range(3 * MAX_REFUSED):
        fab.note_refusal(f"refused datapath {i:016x}")
    fab.note_refusal("refused datapath 0000000000000000")
    st = fab.status()
    assert st["refusals"] == 3 * MAX_REFUSED + 1 and len(st["refused"]) == MAX_REFUSED
    assert st["refused"][-1] == "refused datapath 0000000000000000"


def test_the_log_passes_a_burst_of_each_warning_then_counts():
    now = [0.0]
    f = RateLimit(burst=3, kind_burst=10, period=60, clock=lambda: now[0])

    def rec(msg, args=(), level=logging.ERROR, exc=False):
        r = logging.LogRecord("os_ken", level, __file__, 1, msg, args, None)
        if exc:
            r.exc_info = (ValueError, ValueError("x"), None)
        return r

    same = [f.filter(rec("bad message from %s", ("a",), exc=True)) for _ in range(100)]
    assert same == [True] * 3 + [False] * 97
    records = [rec("bad message from %s", (str(i),)) for i in range(100)]
    varied = [f.filter(r) for r in records]
    assert sum(varied) == 10 - 3                    # the kind's cap, whatever the arguments
    assert "97 like it suppressed" in records[0].msg    # the drops so far, said once
    assert all(f.filter(rec("switch %d verified", (i,), logging.INFO)) for i in range(100))
    now[0] = 61.0
    r = rec("bad message from %s", ("a",), exc=True)
    assert f.filter(r) and "93 like it suppressed" in r.msg
    assert r.exc_info is not None                   # a new period: the traceback once more
    r2 = rec("bad message from %s", ("b",), exc=True)
    assert f.filter(r2) and r2.exc_info is None
