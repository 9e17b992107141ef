import importlib.util
import os
import re
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


# The references the test extra installs. Both CI jobs have them, and there a test file that
# imports one must fail to import when it is missing. The GPU machine has no network and may
# lack librosa; there, the GPU suite (``-m cuda`` exactly, as tools/gpu_check.py runs it)
# leaves out the files that import a missing reference and names them at the end of the run.
_REFERENCES = ("librosa", "scipy")
_LEFT_OUT: list[str] = []


def _installed(module: str) -> bool:
    try:
        return importlib.util.find_spec(module) is not None
    except (ImportError, ValueError):
        return False


def _imports_missing_reference(path) -> str | None:
    text = path.read_text(encoding="utf-8")
    for module in _REFERENCES:
        if re.search(rf"^(import|from) {module}\b", text, re.MULTILINE) and not _installed(
                module):  # fmt: skip
            return module
    return None


def pytest_ignore_collect(collection_path, config):
    if config.getoption("markexpr") != "cuda" or collection_path.suffix != ".py":
        return None
    if not collection_path.name.startswith("test_"):
        return None
    module = _imports_missing_reference(collection_path)
    if module is None:
        return None
    entry = f"{collection_path.name} ({module})"
    if entry not in _LEFT_OUT:  # pytest may ask about a path more than once
        _LEFT_OUT.append(entry)
    return True


def pytest_terminal_summary(terminalreporter):
    if _LEFT_OUT:
        # tools/gpu_check.py looks for this line (its LEFT_OUT)
        terminalreporter.write_line("not collected, a reference is not installed: "
                                    + ", ".join(_LEFT_OUT))  # fmt: skip
