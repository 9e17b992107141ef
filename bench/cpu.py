"""CPU benchmark: specux's CPU backend vs librosa and torch, side by side, ratios printed.

Workloads: ../shared/PERF.md's mel, mfcc, stft_c, stft_p, cqt and conv scaled to 8 signals
(conv's DSP peer is scipy.signal.fftconvolve, in the librosa column: librosa has none), and
three more on the same signals: istft of their (8, 513, 626) spectrum (freq-major, as librosa
and torch.stft give it), and mel_bwd / conv_bwd, forward plus ``sum().backward()`` of mel and
of conv with gradients to every input (torch tensors; librosa and scipy have no gradients,
so only torch's autograd is timed beside them). And three on many short signals, 10 ** 5
of 16 samples (n_fft 16, hop 4): stft_short, istft_short (of their freq-major spectrum) and
pow_bwd_short (|stft| ** 2 forward plus ``sum().backward()``, torch only beside it). Each
(workload, contender) runs in a fresh process (so no contender warms caches for another),
timed as the median of --repeat calls after --warmup calls, all in float32 (wall time; the
process time of the calls, all threads together, is printed beside it). The contenders
take turns for --rounds rounds and each one's best round is kept, so a slow spell of a shared
machine does not land on one contender only.

    python bench/cpu.py                     # every workload
    python bench/cpu.py --only mel cqt      # some
    python bench/cpu.py --cpu-fft scipy     # specux's FFTs by scipy.fft (SPECUX_CPU_FFT)
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time

BATCH = 8

WORKLOADS = {
    "mel": "melspectrogram(sr=16000, n_fft=1024, hop_length=256, n_mels=80) on (8, 160000)",
    "mfcc": "mfcc(sr=16000, n_mfcc=20, n_fft=1024, hop_length=256, n_mels=80) on (8, 160000)",
    "stft_c": "stft(n_fft=1024, hop_length=256), complex, on (8, 160000)",
    "stft_p": "stft(n_fft=1024, hop_length=256, output='power') on (8, 160000)",
    "cqt": "cqt(sr=22050, hop_length=512, fmin=32.70, n_bins=84) on (8, 220500)",
    "conv": "fftconvolve(x (8, 160000), k (8, 4096)), mode full",
    "istft": "istft(n_fft=1024, hop_length=256, length=160000) of the (8, 513, 626) spectrum",
    "mel_bwd": "mel forward + sum().backward() to x",
    "conv_bwd": "conv forward + sum().backward() to x and k",
    "stft_short": "stft(n_fft=16, hop_length=4), complex, on (100000, 16)",
    "istft_short": "istft(n_fft=16, hop_length=4, length=16) of the (100000, 9, 5) spectrum",
    "pow_bwd_short": "stft(n_fft=16, hop_length=4, output='power') + sum().backward()",
}
SHORT = dict(n_fft=16, hop_length=4)
CONTENDERS = ("specux", "librosa", "torch")


def _signal(workload: str):
    import numpy as np

    shape = (100000, 16) if workload.endswith("_short") else (
        BATCH, 220500 if workload == "cqt" else 160000)  # fmt: skip
    return np.random.default_rng(0).standard_normal(shape).astype(np.float32)


def _taps():
    """conv's kernel: 8 rows of 4096 taps."""
    import numpy as np

    return np.random.default_rng(1).standard_normal((BATCH, 4096)).astype(np.float32)


def _spectrum(x, n_fft=1024, hop_length=256):
    """istft's input: the stft of ``x`` (n_fft 1024, hop 256), freq-major complex64."""
    import numpy as np

    import specux

    return np.ascontiguousarray(specux.stft(x, n_fft=n_fft, hop_length=hop_length))


def _backward(forward, *leaves):
    """``forward(*leaves).sum().backward()``, the leaves' gradients cleared first."""

    def run():
        for t in leaves:
            t.grad = None
        forward(*leaves).sum().backward()

    return run


def _specux(workload: str, x):
    import specux

    if workload == "mel":
        return lambda: specux.melspectrogram(x, sr=16000, n_fft=1024, hop_length=256, n_mels=80)
    if workload == "mfcc":
        return lambda: specux.mfcc(x, sr=16000, n_mfcc=20, n_fft=1024, hop_length=256, n_mels=80)
    if workload == "stft_c":
        return lambda: specux.stft(x, n_fft=1024, hop_length=256)
    if workload == "stft_p":
        return lambda: specux.stft(x, n_fft=1024, hop_length=256, output="power")
    if workload == "cqt":
        return lambda: specux.cqt(x, sr=22050, hop_length=512, fmin=32.70, n_bins=84)
    if workload == "conv":
        k = _taps()
        return lambda: specux.fftconvolve(x, k)
    if workload == "istft":
        S = _spectrum(x)
        return lambda: specux.istft(S, n_fft=1024, hop_length=256, length=x.shape[-1])
    if workload == "stft_short":
        return lambda: specux.stft(x, **SHORT)
    if workload == "istft_short":
        S = _spectrum(x, **SHORT)
        return lambda: specux.istft(S, length=x.shape[-1], **SHORT)
    import torch

    xt = torch.from_numpy(x).requires_grad_()
    if workload == "pow_bwd_short":
        return _backward(lambda a: specux.stft(a, output="power", **SHORT), xt)
    if workload == "mel_bwd":
        kw = dict(sr=16000, n_fft=1024, hop_length=256, n_mels=80)
        return _backward(lambda a: specux.melspectrogram(a, **kw), xt)
    if workload == "conv_bwd":
        return _backward(specux.fftconvolve, xt, torch.from_numpy(_taps()).requires_grad_())
    raise KeyError(workload)


def _librosa(workload: str, x):
    import librosa

    if workload in ("mel_bwd", "conv_bwd", "pow_bwd_short"):
        return None  # no gradients
    if workload == "istft":
        S = _spectrum(x)
        return lambda: librosa.istft(S, n_fft=1024, hop_length=256, length=x.shape[-1])
    if workload == "stft_short":
        return lambda: librosa.stft(x, pad_mode="constant", **SHORT)
    if workload == "istft_short":
        S = _spectrum(x, **SHORT)
        return lambda: librosa.istft(S, length=x.shape[-1], **SHORT)

    kw = dict(sr=16000, n_fft=1024, hop_length=256, n_mels=80, pad_mode="constant")
    if workload == "mel":
        return lambda: librosa.feature.melspectrogram(y=x, **kw)
    if workload == "mfcc":
        return lambda: librosa.feature.mfcc(y=x, n_mfcc=20, **kw)
    if workload == "stft_c":
        return lambda: librosa.stft(x, n_fft=1024, hop_length=256, pad_mode="constant")
    if workload == "stft_p":
        return lambda: abs(librosa.stft(x, n_fft=1024, hop_length=256, pad_mode="constant")) ** 2
    if workload == "cqt":
        return lambda: librosa.cqt(x, sr=22050, hop_length=512, fmin=32.70, n_bins=84)
    if workload == "conv":  # librosa has no convolution: scipy's, which DSP code uses
        import scipy.signal

        k = _taps()
        return lambda: scipy.signal.fftconvolve(x, k, axes=-1)
    raise KeyError(workload)


def _torch(workload: str, x):
    """torch's CPU path: torch.stft plus matmuls (what torchaudio does)."""
    import librosa
    import torch

    xt = torch.from_numpy(x)
    if workload == "cqt":
        return None  # torch has no CQT; nnAudio is GPU-oriented and not installed here
    if workload.endswith("_short"):
        short = torch.hann_window(16)
        if workload == "istft_short":
            S = torch.from_numpy(_spectrum(x, **SHORT))
            return lambda: torch.istft(S, 16, 4, window=short, length=x.shape[-1])

        def power(a=xt):
            return torch.stft(a, 16, 4, window=short, center=True, pad_mode="constant",
                              return_complex=True).abs().pow(2)  # fmt: skip

        if workload == "stft_short":
            return lambda: torch.stft(xt, 16, 4, window=short, center=True, pad_mode="constant",
                                      return_complex=True)  # fmt: skip
        return _backward(power, xt.requires_grad_())
    window = torch.hann_window(1024)
    def conv(a, b):  # torchaudio.functional.fftconvolve's formula
        n = a.shape[-1] + b.shape[-1] - 1
        return torch.fft.irfft(torch.fft.rfft(a, n) * torch.fft.rfft(b, n), n)

    if workload == "conv":
        kt = torch.from_numpy(_taps())
        return lambda: conv(xt, kt)
    if workload == "conv_bwd":
        return _backward(conv, xt.requires_grad_(), torch.from_numpy(_taps()).requires_grad_())
    if workload == "istft":
        S = torch.from_numpy(_spectrum(x))
        return lambda: torch.istft(S, 1024, 256, window=window, length=x.shape[-1])

    def spec(a=xt):
        return torch.stft(a, 1024, 256, window=window, center=True, pad_mode="constant",
                          return_complex=True)  # fmt: skip

    if workload == "stft_c":
        return spec
    if workload == "stft_p":
        return lambda: spec().abs().pow(2)
    mel = torch.from_numpy(librosa.filters.mel(sr=16000, n_fft=1024, n_mels=80))
    if workload == "mel":
        return lambda: mel @ spec().abs().pow(2)
    if workload == "mel_bwd":
        return _backward(lambda a: mel @ spec(a).abs().pow(2), xt.requires_grad_())
    import scipy.fft

    dct = torch.from_numpy(scipy.fft.dct(torch.eye(80).numpy(), norm="ortho", axis=0)[:20])

    def mfcc():
        db = 10 * torch.log10(torch.clamp_min(mel @ spec().abs().pow(2), 1e-10))
        db = torch.maximum(db, db.amax(dim=(-2, -1), keepdim=True) - 80.0)
        return dct @ db

    return mfcc


def _time_one(workload: str, contender: str, warmup: int, repeat: int) -> dict:
    x = _signal(workload)
    fn = {"specux": _specux, "librosa": _librosa, "torch": _torch}[contender](workload, x)
    if fn is None:
        return {"ms": None}
    for _ in range(warmup):
        fn()
    times, cpu = [], []
    for _ in range(repeat):
        start, start_cpu = time.perf_counter(), time.process_time()
        fn()
        times.append(time.perf_counter() - start)
        cpu.append(time.process_time() - start_cpu)
    times.sort()
    cpu.sort()
    result = {"ms": 1e3 * times[len(times) // 2], "cpu_ms": 1e3 * cpu[len(cpu) // 2]}
    if contender == "specux":
        from specux.kernels.cpu import fft

        result["fft"] = fft.provider()
    return result


def _run_child(workload: str, contender: str, warmup: int, repeat: int) -> dict:
    cmd = [sys.executable, __file__, "--child", workload, contender, "--warmup", str(warmup),
           "--repeat", str(repeat)]  # fmt: skip
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [root, env.get("PYTHONPATH")]))
    result = subprocess.run(cmd, capture_output=True, text=True, env=env)
    if result.returncode != 0:
        return {"ms": None, "error": result.stderr.strip().splitlines()[-1:]}
    return json.loads(result.stdout.strip().splitlines()[-1])


def _fmt(value: float | None) -> str:
    return f"{value:.1f}" if value is not None else "-"


def _ratio(theirs: float | None, ours: float | None) -> str:
    return f"{theirs / ours:.2f}x" if ours and theirs else "-"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--only", nargs="*", choices=sorted(WORKLOADS))
    parser.add_argument("--warmup", type=int, default=2)
    parser.add_argument("--repeat", type=int, default=7)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--cpu-fft", choices=["auto", "mkl", "scipy", "numpy"],
                        help="specux's CPU FFT library (default: SPECUX_CPU_FFT, else auto)")
    parser.add_argument("--child", nargs=2, metavar=("WORKLOAD", "CONTENDER"))
    args = parser.parse_args()
    if args.child:
        print(json.dumps(_time_one(*args.child, args.warmup, args.repeat)))
        return 0
    import numpy
    import torch

    if args.cpu_fft:
        os.environ["SPECUX_CPU_FFT"] = args.cpu_fft

    print(
        f"specux CPU benchmark: {os.cpu_count()} cores, numpy {numpy.__version__}, "
        f"torch {torch.__version__}, float32, batch {BATCH}, best of {args.rounds} rounds of "
        f"a median of {args.repeat}"
    )
    fft_line = None
    print(f"{'workload':8s} {'specux ms':>10s} {'librosa ms':>11s} {'torch ms':>9s} "
          f"{'vs librosa':>11s} {'vs torch':>9s}   {'CPU ms s / l / t':>18s}")  # fmt: skip
    for workload in args.only or WORKLOADS:
        ms: dict = {}
        for _ in range(max(1, args.rounds)):
            for c in CONTENDERS:
                one = _run_child(workload, c, args.warmup, args.repeat)
                if c not in ms or (one["ms"] is not None and
                                   (ms[c]["ms"] is None or one["ms"] < ms[c]["ms"])):  # fmt: skip
                    ms[c] = one
        fft_line = ms["specux"].get("fft", fft_line)
        ours, librosa_ms, torch_ms = (ms[c]["ms"] for c in CONTENDERS)
        cpu = [ms[c].get("cpu_ms") for c in CONTENDERS]
        print(
            f"{workload:8s} {_fmt(ours):>10s} {_fmt(librosa_ms):>11s} {_fmt(torch_ms):>9s} "
            f"{_ratio(librosa_ms, ours):>11s} {_ratio(torch_ms, ours):>9s}   "
            f"{' / '.join(_fmt(v) for v in cpu):>18s}"
        )
        for c in CONTENDERS:
            if ms[c].get("error"):
                print(f"    {c} failed: {ms[c]['error']}")
    print("ratios are peer time / specux time: above 1 means specux is faster; CPU ms is the "
          "process time of a call (all threads) for specux / librosa / torch, from the round kept;"
          " steadier than wall time on a shared machine")
    print(f"specux's CPU FFTs ran on: {fft_line or '-'} (SPECUX_CPU_FFT; `python -m specux info`)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
