import os
import sys

import numpy as np
import pytest

sys.path.insert(0, os.path.dirname(__file__))

from hypothesis import settings  # noqa: E402

settings.register_profile("ci", max_examples=40, deadline=None, derandomize=True)
settings.register_profile("dev", max_examples=20, deadline=None)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "ci"))


@pytest.fixture(autouse=True)
def _numpy_on_the_cpu(request, monkeypatch):
    """On a CUDA machine numpy inputs run on the GPU (specux.transport); the CPU tests compare
    the CPU backend with references and with torch CPU tensors bit for bit, so outside tests
    marked ``cuda`` numpy inputs stay on the CPU, as on a machine without a GPU."""
    if request.node.get_closest_marker("cuda") is None:
        import specux.transport

        monkeypatch.setattr(specux.transport, "numpy_runs_on_cuda", lambda backend: False)


@pytest.fixture
def rng():
    return np.random.default_rng(1234)


def pytest_collection_modifyitems(config, items):
    """Without torch (the torch-less CI job), skip tests whose own code uses torch."""
    try:
        import torch  # noqa: F401
    except ImportError:
        skip = pytest.mark.skip(reason="torch is not installed")
        for item in items:
            function = getattr(item, "function", None)
            code = getattr(function, "__code__", None)
            if code is not None and "torch" in code.co_names:
                item.add_marker(skip)
