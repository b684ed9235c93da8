import functools
import os
import shutil
from pathlib import Path

import pytest

from tablegen.topologies.dragonfly import build_dragonfly
from tablegen.topologies.slimfly import build_slimfly


@functools.lru_cache(maxsize=None)
def slimfly(q, **kw):
    return build_slimfly(q, **kw)


@functools.lru_cache(maxsize=None)
def dragonfly(p=2, a=4, h=2, **kw):
    return build_dragonfly(p, a, h, **kw)


def ib_processes() -> list[int]:
    """Live (non-zombie) processes the IB runs of this test process started (their
    IBSIM_SOCKNAME is fabroute-<our pid>-<n>)."""
    tag = f"IBSIM_SOCKNAME=fabroute-{os.getpid()}-".encode()
    pids = []
    for p in Path("/proc").iterdir():
        if not p.name.isdigit():
            continue
        try:
            state = (p / "stat").read_bytes().rsplit(b")", 1)[1].split()[0]
            if tag in (p / "environ").read_bytes() and state != b"Z":
                pids.append(int(p.name))
        except OSError:
            pass
    return pids


@pytest.fixture(scope="module")
def ib_tools():
    """The InfiniBand tests need OpenSM, ibsim and infiniband-diags: a missing one fails the
    module with the apt line that installs it (never a silent skip)."""
    from emulation.ibsim import apply as ib_apply

    missing = ib_apply.binaries_missing()
    if missing:
        pytest.fail(f"InfiniBand tools missing: {', '.join(missing)}; {ib_apply.APT_HINT}",
                    pytrace=False)


@pytest.fixture
def sf5():
    return slimfly(5)


@pytest.fixture
def df72():
    return dragonfly()


def pytest_configure(config):
    config.addinivalue_line(
        "markers",
        "ovs: runs real Open vSwitch (userspace datapath) and Mininet hosts as root "
        "(apt: openvswitch-switch mininet); one net at a time: keep these tests in the "
        "xdist group 'ovs' (pytest -n 2 --dist loadgroup)")


def edited_copy(src, dst, name, edit):
    """``src`` copied to ``dst`` with file ``name`` rewritten by ``edit(text)``, which must
    change it (a no-op edit would make a negative test pass for nothing)."""
    shutil.copytree(src, dst)
    text = (dst / name).read_text()
    new = edit(text)
    assert new != text, f"the edit of {name} changed nothing"
    (dst / name).write_text(new)
    return dst
