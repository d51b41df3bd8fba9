"""conftest.py — pytest setup for the Python package: `pytest tests/python` from the repository
root after `make` (libfco.so from $FCO_LIB or build/lib/, see python/fco/_lib.py).

Ranks run as processes of a DistPool (_dist.py): gloo + the cpu transport for the CPU tests,
nccl + one GPU per rank for the tests marked `gpu` (skipped without CUDA).
"""
import os
import sys

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(ROOT, "python"))  # the source tree's fco, no install needed
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import fco  # noqa: E402
from _dist import DistPool, gpu_count  # noqa: E402


def pytest_configure(config):
    config.addinivalue_line("markers", "gpu: needs CUDA GPUs (runs on the GPU machine)")


def pytest_report_header(config):
    import torch

    try:
        where = fco.lib_path()
    except fco.FcoError as e:
        where = f"NOT FOUND ({e})"
    return [f"fco: libfco {where}; torch {torch.__version__}, {gpu_count()} GPU(s)"]


def pytest_collection_modifyitems(config, items):
    if gpu_count() == 0:
        skip = pytest.mark.skip(reason="no CUDA GPU here (runs on the GPU machine)")
        for item in items:
            if "gpu" in item.keywords:
                item.add_marker(skip)


_pools = {}


@pytest.fixture(scope="session")
def pools():
    """pools(n, backend="gloo") → a live DistPool of n ranks (made on first use, re-made after
    a test broke it)."""
    fco.lib_path()  # fail here, with the places searched, when libfco.so is not built

    def get(n, backend="gloo"):
        p = _pools.get((n, backend))
        if p is None or p.broken:
            p = DistPool(n, backend)
            _pools[(n, backend)] = p
        return p

    yield get
    for p in _pools.values():
        if not p.broken:
            p.close()


@pytest.fixture
def pool2(pools):
    return pools(2)


@pytest.fixture
def pool3(pools):
    return pools(3)
