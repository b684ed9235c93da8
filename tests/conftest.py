import functools
import shutil

import pytest

from tablegen.topologies.dragonfly import build_dragonfly
from tablegen.topologies.slimfly import build_slimfly


@functools.lru_cache(maxsize=None)
def slimfly(q, **kw):
    return build_slimfly(q, **kw)


@functools.lru_cache(maxsize=None)
def dragonfly(p=2, a=4, h=2, **kw):
    return build_dragonfly(p, a, h, **kw)


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
