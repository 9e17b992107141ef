"""``python -m specux info`` and ``python -m specux demo``."""

from __future__ import annotations

import argparse
import importlib
import os
import platform
import sys
import time


def _version(module: str) -> str:
    try:
        return getattr(importlib.import_module(module), "__version__", "installed")
    except Exception as exc:  # noqa: BLE001 - report any import failure as the reason
        return f"not available ({type(exc).__name__}: {exc})"


def info() -> int:
    """Print versions, which backends can run here and why any cannot."""
    import specux
    from specux import options, routing

    print(f"specux {specux.__version__} (python {platform.python_version()}, {sys.platform})")
    for module in ("numpy", "scipy", "mkl_fft", "torch", "cupy", "librosa"):
        print(f"  {module:8s} {_version(module)}")
    print("backends:")
    for backend in ("cpu", "cuda", "metal"):
        reason = routing.backend_unavailable_reason(backend)
        status = "available" if reason is None else f"unavailable: {reason}"
        print(f"  {backend:6s} {status}")
    from specux.kernels.cpu import fft as cpu_fft

    try:
        choices = ", ".join(("auto", *cpu_fft.PROVIDERS))
        chosen = os.environ.get("SPECUX_CPU_FFT") or "unset: auto"
        print(f"CPU FFT: {cpu_fft.provider()} (SPECUX_CPU_FFT {chosen}; one of {choices})")
    except ValueError as error:
        print(f"CPU FFT: {error}")
    from specux.compat import cuda

    print(f"NVRTC: {cuda.nvrtc_summary()}")
    print("torch ops:", "registered (torch.ops.specux.*)" if "torch" in sys.modules else "no torch")
    print(f"deterministic: {options.is_deterministic()}")
    tensor_cores = "allowed" if options.tensor_cores_enabled() else "off (SPECUX_TENSOR_CORES=0)"
    print(f"tensor cores (float32 cqt / vqt, compute capability 8.0+): {tensor_cores}")
    spectral = "on" if options.cqt_spectral_enabled() else "off (SPECUX_CQT_SPECTRAL=0)"
    print(f"cqt / vqt spectral path for long filters (CUDA): {spectral}")
    cache = options.cache_dir()
    if not options.disk_cache_enabled():
        cache = "disabled (SPECUX_DISK_CACHE=0)"
    print(f"kernel cache: {cache}")
    print(f"autotune: {'on' if options.is_autotuning() else 'off'} (specux.autotune, "
          f"SPECUX_AUTOTUNE); {_autotune_winners()}")
    return 0


def _autotune_winners() -> str:
    """The stored autotune winners: each GPU model's file and its count."""
    import glob
    import json
    import os

    from specux import options
    from specux.kernels import tuning

    if not options.disk_cache_enabled():
        return "winners kept in memory only"
    files = sorted(glob.glob(os.path.join(tuning.folder(), "*.json")))
    counts = []
    for path in files:
        try:
            with open(path, encoding="utf-8") as f:
                count = len(json.load(f).get("entries", {}))
        except (OSError, ValueError, AttributeError, TypeError):
            count = "unreadable"
        counts.append(f"{os.path.basename(path)[:-5]}: {count}")
    return "winners stored: " + (", ".join(counts) if counts else "none")


def demo(png: str | None) -> int:
    """A chirp's spectrogram on the best available backend, timed."""
    import numpy as np

    import specux
    from specux import routing, transport

    sr, seconds = 16000, 2.0
    t = np.arange(int(sr * seconds)) / sr
    # Linear chirp 100 Hz -> 6 kHz plus a steady 1 kHz tone.
    x = np.sin(2 * np.pi * (100 * t + (6000 - 100) / (2 * seconds) * t**2)).astype(np.float32)
    x += 0.25 * np.sin(2 * np.pi * 1000 * t).astype(np.float32)
    # a numpy array runs on the GPU when one can (transport): say so, not the array's device
    on_gpu = transport.numpy_runs_on_cuda("auto")
    backend = "cuda" if on_gpu else routing.route(x, "auto").backend
    specux.stft(x, n_fft=1024, hop_length=256, output="db")  # warm-up
    start = time.perf_counter()
    S = specux.stft(x, n_fft=1024, hop_length=256, output="db")
    elapsed = time.perf_counter() - start
    start = time.perf_counter()
    M = specux.melspectrogram(x, sr=sr, n_fft=1024, hop_length=256, n_mels=80, output="db")
    mel_elapsed = time.perf_counter() - start
    peak_bin = np.argmax(S, axis=0)
    print(f"signal: {x.shape[0]} samples, chirp 100 Hz -> 6 kHz at {sr} Hz")
    print(f"stft(n_fft=1024, hop_length=256, output='db'): shape {S.shape}, dtype {S.dtype}")
    detail = "numpy" if isinstance(S, np.ndarray) else str(type(S))
    if on_gpu:
        route = "through torch" if transport._torch_on_cuda() else "torch-free"
        detail += f" in and out, computed by the generated CUDA kernels ({route})"
    elif backend == "cpu":
        from specux.kernels.cpu import fft as cpu_fft

        detail += f", FFTs by {cpu_fft.provider()}"
    print(f"backend: {backend} ({detail})")
    print(f"time: {elapsed * 1e3:.3f} ms")
    print(f"melspectrogram(n_mels=80, output='db'): shape {M.shape}, "
          f"time {mel_elapsed * 1e3:.3f} ms (first call, filterbank built)")  # fmt: skip
    f_start, f_end = peak_bin[2] * sr / 1024, peak_bin[-3] * sr / 1024
    print(f"loudest bin: {f_start:.0f} Hz at the start, {f_end:.0f} Hz at the end")
    if png:
        try:
            import matplotlib

            matplotlib.use("Agg")
            import matplotlib.pyplot as plt
        except ImportError:
            print("matplotlib is not installed: no PNG written")
            return 0
        fig, ax = plt.subplots(figsize=(8, 4))
        ax.imshow(S, origin="lower", aspect="auto", extent=(0, seconds, 0, sr / 2))
        ax.set(xlabel="time (s)", ylabel="frequency (Hz)", title=f"specux stft ({backend})")
        try:
            fig.savefig(png, dpi=100, bbox_inches="tight")
        except OSError as error:  # a read-only folder, a missing one: say so, no traceback
            print(f"python -m specux demo: could not write the plot to {png!r} ({error}); "
                  "pass --png PATH for another place, or --png '' for none", file=sys.stderr)
            return 1
        finally:
            plt.close(fig)
        print(f"wrote {png}")
    return 0


def main(argv: list[str] | None = None) -> int:
    from specux._version import __version__

    parser = argparse.ArgumentParser(prog="python -m specux")
    parser.add_argument("-V", "--version", action="version", version=f"specux {__version__}")
    sub = parser.add_subparsers(dest="command", required=True)
    sub.add_parser("info", help="versions, backends and why any is missing")
    d = sub.add_parser("demo", help="spectrogram of a generated chirp on the best backend")
    d.add_argument("--png", default="specux-demo.png",
                   help="where to write the plot when matplotlib is installed (default: "
                   "%(default)s in the current folder; --png '' writes none)")  # fmt: skip
    args = parser.parse_args(argv)
    if args.command == "info":
        return info()
    return demo(args.png)


if __name__ == "__main__":
    raise SystemExit(main())
