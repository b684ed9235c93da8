"""OpenFlow over TLS with mutual certificates: a small PKI and the datapath ids a switch's
certificate lets it claim.

``fabroute pki DIR --dpids 1-50`` makes (once) a CA and the controller's certificate, and a
switch certificate for the given datapath ids.  The ids are written into the certificate as
URI subject-alternative names, ``urn:fabroute:dpids:<first>-<last>`` (16 hex digits each), so
the controller refuses a switch that presents a valid certificate but claims a datapath id
the certificate does not carry (an impostor).  One Open vSwitch process has one TLS identity
for all its bridges (``ovs-vsctl set-ssl``), hence ranges: the emulation's single
``ovs-vswitchd`` gets one certificate for the fabric's ids; a real switch gets its own.

Keys are ECDSA P-256 (OpenSSL, OVS and Python's ``ssl`` all accept them), written with mode
0600; certificates are valid for :data:`DAYS` days.  The ``cryptography`` package makes them:
``ovs-pki`` would work too, but it shells out to ``openssl`` per certificate and cannot add
the datapath-id names.
"""

from __future__ import annotations

import datetime
import os
import re
from dataclasses import dataclass
from pathlib import Path

from tablegen.errors import BadInput

DPIDS_URI = "urn:fabroute:dpids:"
DAYS = 3650
MAX_DPID = (1 << 64) - 1
_RANGE = re.compile(r"^(\d+)(?:-(\d+))?$")
_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,63}")


@dataclass(frozen=True)
class Pki:
    """The files of a PKI directory."""

    dir: Path

    @property
    def ca(self) -> Path:
        return self.dir / "ca.pem"

    @property
    def ca_key(self) -> Path:
        return self.dir / "ca.key"

    @property
    def controller(self) -> tuple[Path, Path]:
        return self.dir / "controller.pem", self.dir / "controller.key"

    def switch(self, name: str) -> tuple[Path, Path]:
        return self.dir / f"{name}.pem", self.dir / f"{name}.key"

    def check_controller(self) -> None:
        """:class:`BadInput` unless the CA and the controller's certificate and key exist."""
        missing = [p.name for p in (self.ca, *self.controller) if not p.is_file()]
        if missing:
            raise BadInput(f"--tls {self.dir}: {', '.join(missing)} missing; expected a "
                           "directory made by 'fabroute pki DIR --dpids ...'")


def parse_dpids(text: str) -> list[tuple[int, int]]:
    """``"1-50,64"`` -> ``[(1, 50), (64, 64)]``; :class:`BadInput` naming the bad part."""
    out = []
    for part in filter(None, (p.strip() for p in text.split(","))):
        m = _RANGE.match(part)
        lo, hi = (int(m.group(1)), int(m.group(2) or m.group(1))) if m else (0, -1)
        if not m or not 1 <= lo <= hi <= MAX_DPID:
            raise BadInput(f"--dpids {text}: {part!r}; expected datapath ids N or N-M with "
                           "1 <= N <= M < 2^64, separated by commas")
        out.append((lo, hi))
    if not out:
        raise BadInput(f"--dpids {text!r}; expected at least one datapath id")
    return out


def dpid_ranges(peercert: dict | None) -> list[tuple[int, int]]:
    """The datapath id ranges a peer certificate (``ssl.SSLSocket.getpeercert()``) carries."""
    out = []
    for kind, value in (peercert or {}).get("subjectAltName", ()):
        if kind == "URI" and value.startswith(DPIDS_URI):
            lo, _, hi = value[len(DPIDS_URI):].partition("-")
            try:
                out.append((int(lo, 16), int(hi or lo, 16)))
            except ValueError:
                continue
    return out


def _key():
    from cryptography.hazmat.primitives.asymmetric import ec

    return ec.generate_private_key(ec.SECP256R1())


def _write_key(path: Path, key) -> None:
    from cryptography.hazmat.primitives import serialization

    pem = key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                            serialization.NoEncryption())
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "wb") as f:
        f.write(pem)


def _write_cert(path: Path, cert) -> None:
    from cryptography.hazmat.primitives import serialization

    path.write_bytes(cert.public_bytes(serialization.Encoding.PEM))


def _load(cert_path: Path, key_path: Path):
    from cryptography import x509
    from cryptography.hazmat.primitives import serialization

    return (x509.load_pem_x509_certificate(cert_path.read_bytes()),
            serialization.load_pem_private_key(key_path.read_bytes(), None))


def _certificate(subject: str, key, issuer_cert, issuer_key, *, ca: bool = False,
                 uris: list[str] = (), server: bool = False):
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes
    from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, subject)])
    now = datetime.datetime.now(datetime.timezone.utc)
    b = (x509.CertificateBuilder().subject_name(name)
         .issuer_name(issuer_cert.subject if issuer_cert is not None else name)
         .public_key(key.public_key()).serial_number(x509.random_serial_number())
         .not_valid_before(now - datetime.timedelta(minutes=5))
         .not_valid_after(now + datetime.timedelta(days=DAYS))
         .add_extension(x509.BasicConstraints(ca=ca, path_length=None), critical=True))
    if not ca:
        usage = ExtendedKeyUsageOID.SERVER_AUTH if server else ExtendedKeyUsageOID.CLIENT_AUTH
        b = b.add_extension(x509.ExtendedKeyUsage([usage]), critical=False)
    if uris:
        b = b.add_extension(x509.SubjectAlternativeName(
            [x509.UniformResourceIdentifier(u) for u in uris]), critical=False)
    return b.sign(issuer_key, hashes.SHA256())


def make_pki(d: Path, dpids: list[tuple[int, int]], name: str = "switches") -> dict:
    """Make ``d``'s CA and controller certificate unless they exist, and the switch
    certificate ``name`` for ``dpids``; returns the paths written or reused."""
    if not _NAME.fullmatch(name) or name in ("ca", "controller"):
        raise BadInput(f"--name {name!r}; expected letters, digits, '_', '.', '-' (not 'ca' "
                       "or 'controller')")
    pki = Pki(Path(d))
    pki.dir.mkdir(parents=True, exist_ok=True)
    if pki.ca.is_file() and pki.ca_key.is_file():
        ca_cert, ca_key = _load(pki.ca, pki.ca_key)
    else:
        ca_key = _key()
        ca_cert = _certificate("fabroute OpenFlow CA", ca_key, None, ca_key, ca=True)
        _write_key(pki.ca_key, ca_key)
        _write_cert(pki.ca, ca_cert)
    cert, key = pki.controller
    if not (cert.is_file() and key.is_file()):
        k = _key()
        _write_key(key, k)
        _write_cert(cert, _certificate("fabroute controller", k, ca_cert, ca_key, server=True))
    cert, key = pki.switch(name)
    k = _key()
    _write_key(key, k)
    _write_cert(cert, _certificate(f"fabroute switch {name}", k, ca_cert, ca_key,
                                   uris=[f"{DPIDS_URI}{lo:016x}-{hi:016x}" for lo, hi in dpids]))
    return {"ca": str(pki.ca), "controller": [str(p) for p in pki.controller],
            "switch": [str(cert), str(key)], "dpids": [[lo, hi] for lo, hi in dpids]}
