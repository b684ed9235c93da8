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
