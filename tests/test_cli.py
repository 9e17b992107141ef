"""python -m specux info / demo."""

from __future__ import annotations

import os
import re
import subprocess
import sys
import types

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def _run(*args, cwd=None, **variables):
    env = dict(os.environ, PYTHONPATH=ROOT, **variables)
    return subprocess.run(
        [sys.executable, "-m", "specux", *args], capture_output=True, text=True, env=env,
        cwd=cwd, timeout=300,
    )  # fmt: skip


def test_info_names_backends_and_reasons():
    result = _run("info")
    assert result.returncode == 0, result.stderr
    out = result.stdout
    assert "specux" in out and "numpy" in out
    assert "cpu    available" in out
    for backend in ("cuda", "metal"):
        line = next(line for line in out.splitlines() if line.strip().startswith(backend))
        assert "available" in line  # "available" or "unavailable: <reason>"
        if "unavailable" in line:
            assert len(line.split("unavailable:", 1)[1].strip()) > 10  # a reason is given
    assert "kernel cache:" in out
    assert "autotune: off" in out and "winners stored:" in out
    assert "CPU FFT: " in out
    assert "(SPECUX_CPU_FFT unset: auto; one of auto, mkl, scipy, numpy)" in out


def test_info_counts_stored_autotune_winners(tmp_path):
    folder = tmp_path / "autotune"
    folder.mkdir()
    (folder / "GPU-A-sm_90-4sm.json").write_text('{"version": "x", "entries": {"k": [2, 0]}}')
    (folder / "GPU-B-sm_80-8sm.json").write_text('{"version": "x", "entries": 5}')
    result = _run("info", SPECUX_CACHE_DIR=str(tmp_path))
    assert result.returncode == 0, result.stderr
    assert "winners stored: GPU-A-sm_90-4sm: 1, GPU-B-sm_80-8sm: unreadable" in result.stdout


def test_info_reports_a_bad_cpu_fft_choice_instead_of_failing():
    result = _run("info", SPECUX_CPU_FFT="fftw")
    assert result.returncode == 0, result.stderr
    expected = "CPU FFT: SPECUX_CPU_FFT='fftw': expected one of auto, mkl, scipy, numpy"
    assert expected in result.stdout
    numpy_only = _run("info", SPECUX_CPU_FFT="numpy")
    assert "CPU FFT: numpy (SPECUX_CPU_FFT numpy; one of" in numpy_only.stdout


def test_demo_reports_shape_backend_and_time(tmp_path):
    result = _run("demo", "--png", str(tmp_path / "demo.png"), cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    out = result.stdout
    assert "shape (513, 126)" in out
    assert "melspectrogram(n_mels=80, output='db'): shape (80, 126)" in out
    assert "backend: cpu (numpy, FFTs by " in out
    assert "time:" in out and " ms" in out


def test_version_flag_and_a_plot_that_cannot_be_written(tmp_path, monkeypatch, capsys):
    """``-V`` prints the version; a plot the demo cannot write (a missing folder, a read-only
    one) is a one-line error and exit status 1, not a traceback after the work is done."""
    from specux.__main__ import main
    from specux._version import __version__

    with pytest.raises(SystemExit) as done:
        main(["-V"])
    assert done.value.code == 0 and capsys.readouterr().out.strip() == f"specux {__version__}"
    target = str(tmp_path / "missing" / "demo.png")
    # matplotlib stands in as a stub whose savefig fails as the real one does on a missing
    # folder (CI does not install matplotlib; the demo's own handling is what is tested)
    closed = []

    class Figure:
        def savefig(self, path, **kwargs):
            raise FileNotFoundError(2, "No such file or directory", path)

    class Axes:
        def imshow(self, *args, **kwargs):
            pass

        def set(self, **kwargs):
            pass

    pyplot = types.ModuleType("matplotlib.pyplot")
    pyplot.subplots = lambda **kwargs: (Figure(), Axes())
    pyplot.close = closed.append
    stub = types.ModuleType("matplotlib")
    stub.use = lambda backend: None
    stub.pyplot = pyplot
    with monkeypatch.context() as patch:
        patch.setitem(sys.modules, "matplotlib", stub)
        patch.setitem(sys.modules, "matplotlib.pyplot", pyplot)
        assert main(["demo", "--png", target]) == 1
    captured = capsys.readouterr()
    assert "backend: cpu" in captured.out and len(closed) == 1
    assert f"could not write the plot to {target!r}" in captured.err
    assert "--png ''" in captured.err
    with monkeypatch.context() as patch:  # matplotlib missing: no PNG, said, exit status 0
        patch.setitem(sys.modules, "matplotlib", None)
        assert main(["demo", "--png", target]) == 0
    assert "matplotlib is not installed: no PNG written" in capsys.readouterr().out


def test_demo_names_the_gpu_when_numpy_input_runs_there(monkeypatch, capsys):
    """On a GPU machine the demo's numpy signal runs on CUDA (transport): the demo said
    "backend: cpu", the array's device. Here the GPU route is simulated (the calls counted,
    then computed on the CPU)."""
    import specux.transport as transport
    from specux.__main__ import demo

    routed = []

    def staged(fn, bound, *rest):
        routed.append(fn.__name__)
        return fn(*bound.args, **{**bound.kwargs, "backend": "cpu"})

    monkeypatch.setattr(transport, "numpy_runs_on_cuda", lambda backend: True)
    monkeypatch.setattr(transport, "_through_torch", staged)
    monkeypatch.setattr(transport, "_through_native", staged)
    assert demo(None) == 0
    out = capsys.readouterr().out
    assert "backend: cuda (numpy in and out, computed by the generated CUDA kernels" in out
    assert routed and set(routed) <= {"stft", "melspectrogram"}


def test_cpu_benchmark_script_runs_and_prints_ratios():
    # bench/cpu.py end to end on one workload, one round of one call (a smoke test: no
    # timing is asserted, only that every contender ran and the table is complete)
    pytest.importorskip("torch")
    import librosa  # noqa: F401 - bench/cpu.py's peer, a test dependency
    env = dict(os.environ, PYTHONPATH=ROOT, SPECUX_CPU_FFT="scipy")
    result = subprocess.run(
        [sys.executable, os.path.join(ROOT, "bench", "cpu.py"), "--only", "stft_p", "--rounds",
         "1", "--repeat", "1", "--warmup", "0"],
        capture_output=True, text=True, env=env, timeout=600,
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    row = next(line for line in result.stdout.splitlines() if line.startswith("stft_p"))
    assert len(re.findall(r"\b\d+\.\d\dx\b", row)) == 2, row  # vs librosa, vs torch
    assert re.search(r"\d+\.\d / \d+\.\d / \d+\.\d$", row.rstrip()), row  # CPU ms, all three
    assert "failed" not in result.stdout
    assert "specux's CPU FFTs ran on: scipy" in result.stdout


def test_transforms_benchmark_script_cpu_smoke_and_graph_needs_cuda():
    # bench/transforms.py's debug run on CPU tensors (the same code paths as on the GPU, at
    # 5% of the sizes): specux's row prints a time and a difference to torch.stft; --graph
    # (CUDA graph replays) refuses a CPU run with a clear message and exit status 2
    pytest.importorskip("torch")
    env = dict(os.environ, PYTHONPATH=ROOT)
    script = os.path.join(ROOT, "bench", "transforms.py")
    result = subprocess.run(
        [sys.executable, script, "--device", "cpu", "--only", "stft_p", "--repeats", "1",
         "--calls", "1", "--warmup", "0"],
        capture_output=True, text=True, env=env, timeout=600,
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    row = next(line for line in result.stdout.splitlines() if line.startswith("stft_p"))
    assert "torch.stft abs pow" in row and re.search(r"\d\.\de-\d\d", row), row  # the diff
    refused = subprocess.run(
        [sys.executable, script, "--device", "cpu", "--graph"],
        capture_output=True, text=True, env=env, timeout=600,
    )  # fmt: skip
    assert refused.returncode == 2
    assert "--graph needs --device cuda" in refused.stderr


def test_transforms_benchmark_times_an_uncapturable_peer_eagerly(monkeypatch):
    # --graph: a peer whose capture fails (torch.istft syncs inside the call) is timed
    # eagerly, and so is specux for that row's ratio (eager / eager, said in the notes);
    # specux's own capture failing stays an error. The capture is injected so that this
    # runs on CPU tensors.
    torch = pytest.importorskip("torch")
    import argparse
    import importlib.util

    monkeypatch.syspath_prepend(os.path.join(ROOT, "bench"))
    spec = importlib.util.spec_from_file_location(
        "bench_transforms", os.path.join(ROOT, "bench", "transforms.py"))  # fmt: skip
    bench = importlib.util.module_from_spec(spec)
    monkeypatch.setitem(sys.modules, "bench_transforms", bench)  # its dataclasses look it up
    spec.loader.exec_module(bench)
    seen: list[str] = []

    def ours(inputs):
        seen.append("ours")
        return inputs["x"] * 2

    def peer(inputs):
        seen.append("peer")
        return inputs["x"] + inputs["x"]

    def capture_refusing(who):
        def capture(fn):
            seen.clear()
            fn()
            if who in seen:
                raise RuntimeError("operation not permitted when stream is capturing")
            return fn

        return capture

    args = argparse.Namespace(graph=True, warmup=0, repeats=1, calls=1, check_targets=False)
    case = bench.Case("demo", {"x": torch.ones(64)}, ours, [("peerlib.f", lambda: peer)])
    (row,) = bench._run_case(case, False, args, "cpu", capture=capture_refusing("peer"))
    assert row.peer_ms is not None and row.ratio is not None and row.specux_ms is not None
    assert any(n.startswith("peer eager; ratio eager/eager, specux eager ") for n in row.notes)
    assert bench._eager_ratio(row)  # the plot labels such a row's bar "(eager)"
    assert any("not capturable (RuntimeError: operation not permitted" in r
               for r in row.reasons)  # fmt: skip
    assert row.max_rel_diff == 0.0
    (row,) = bench._run_case(case, False, args, "cpu", capture=capture_refusing("ours"))
    assert "specux RuntimeError" in row.notes and row.specux_ms is None and row.ratio is None
    (row,) = bench._run_case(case, False, args, "cpu", capture=capture_refusing("nobody"))
    assert row.ratio is not None and not any("eager" in n for n in row.notes)
    assert not bench._eager_ratio(row)
