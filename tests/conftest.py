import os
import sys

import numpy as np
import pytest

sys.path.insert(0, os.path.dirname(__file__))

from hypothesis import settings  # noqa: E402

settings.register_profile("ci", max_examples=40, deadline=None, derandomize=True)
settings.register_profile("dev", max_examples=20, deadline=None)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "ci"))


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
