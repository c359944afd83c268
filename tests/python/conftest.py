"""Shared fixtures of the Python package's tests (scripts/test-python.sh runs them against the
installed wheel)."""
import os
import pathlib
import shutil
import subprocess
import sys

import numpy as np
import pytest

REPO = pathlib.Path(__file__).resolve().parents[2]
DATA = REPO / "tests" / "data"


@pytest.fixture(autouse=True)
def _cache(tmp_path_factory, monkeypatch):
    # padfold.torch compiles into a cache: one per test session, never the user's.
    monkeypatch.setenv("PADFOLD_CACHE_DIR", str(tmp_path_factory.getbasetemp() / "cache"))


@pytest.fixture(scope="session")
def cli():
    """The padfold program the wheel installed, as a function returning (rc, stdout, stderr)."""
    exe = shutil.which("padfold", path=os.path.dirname(sys.executable))
    assert exe, "the wheel's padfold console script is not beside " + sys.executable

    def run(*args):
        p = subprocess.run([exe, *map(str, args)], capture_output=True, text=True)
        return p.returncode, p.stdout, p.stderr
    return run


@pytest.fixture
def rng():
    return np.random.default_rng(1234)
