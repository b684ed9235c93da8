import functools

import pytest

from tablegen.dragonfly import build_dragonfly
from tablegen.slimfly import build_slimfly


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
