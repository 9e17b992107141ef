"""Spectral-transform benchmark: specux vs torch.stft/istft, torchaudio and nnAudio, side by side.

Workloads of ../shared/PERF.md, float32, on CUDA, every contender in this one process:

    mel      melspectrogram(sr=16000, n_fft=1024, hop_length=256, n_mels=80) of x (64, 160000)
             vs torchaudio.transforms.MelSpectrogram
    mel_bwd  the same with x.requires_grad and ``.sum().backward()`` included
    stft_c   stft(n_fft=1024, hop_length=256), complex, vs torch.stft
    stft_p   the same with output="power" vs torch.stft + abs + pow
    istft    istft of the stft_c result, length=160000, vs torch.istft
    mfcc     mfcc(sr=16000, n_mfcc=20, n_fft=1024, hop_length=256, n_mels=80)
             vs torchaudio.transforms.MFCC
    cqt      cqt(sr=22050, hop_length=512, fmin=32.70, n_bins=84) of x (16, 220500)
             vs nnAudio's CQT2010v2 and CQT1992v2 (one row each)
    conv     fftconvolve(x (64, 160000), k (64, 4096)), mode full,
             vs torchaudio.functional.fftconvolve

specux runs each workload as PERF.md writes it (its defaults: periodic hann, pad_mode
"constant", librosa's Slaney mel bank); the peers are given the arguments that make them compute
the same thing: torch.hann_window (periodic), pad_mode="constant", and for torchaudio
``norm="slaney", mel_scale="slaney"`` (its mel grid ``linspace(0, sr // 2, n_fft // 2 + 1)``
equals the DFT bins for these even sizes). torchaudio's MFCC clips at 80 dB below the max of the
whole batch where specux clips per signal; on these noise inputs the clip never bites. nnAudio's
CQT returns magnitudes (pad_mode="constant"), compared with specux's ``abs``; CQT2010v2 works
on downsampled octaves, so its difference column measures that approximation. fwd+bwd rows
(``--backward``) differentiate the sum of the result (real and imaginary parts for complex
results; for cqt the sum of magnitudes on both sides, so specux's call includes an ``abs``) with
respect to the signal (the spectrogram for istft; for conv both the signal and the kernel, as
in training a filter).

Columns: ``specux ms`` and ``peer ms`` are the GPU time of one call, timed with CUDA events
around ``--calls`` back-to-back calls after ``--warmup`` calls, median of ``--repeats`` such
samples; ``ratio`` is peer ms / specux ms (above 1: specux is faster); ``target`` is PERF.md's
target for specux and ``met`` whether it is met (for mel also "scratch <= output size", read
as: scratch minus the output <= the output); ``first ms`` (specux) and ``peer 1st`` are the wall
time of each contender's first call of that workload in this process (kernel compile or disk-cache
load, plan creation; workloads run in order, so a later one may find kernels an earlier one
built: ``--only X`` in a fresh process gives the clean figure, ``--cold-cache`` points
SPECUX_CACHE_DIR at an empty folder); ``scratch`` / ``peer MB`` is
``torch.cuda.max_memory_allocated()`` minus the live allocation just before one call (the
result included; peak stats reset before each contender) and ``out MB`` the result's size;
``diff`` is max |specux - peer| / max |peer| where both compute the same thing (the gradients
for fwd+bwd rows). A contender that is not installed or fails shows '-' and the exception's
class in ``notes``; a specux BackendUnavailableError (a transform not on CUDA yet) prints its
reason under the row. Exit status: 0; 1 when specux raised anything else (tracebacks with
SPECUX_BENCH_TRACEBACK=1); 2 without a CUDA GPU (or on bad arguments).

``--graph`` times replays of a CUDA graph of each contender's call instead (captured once
after two warm-up calls on a side stream, torch's recipe): the GPU time without the host's
per-call cost (Python, torch's dispatcher and autograd engine), which at these sizes exceeds
the kernels' time for the fwd+bwd rows; ``first ms`` and ``scratch`` stay the eager call's. A
peer that cannot be captured (one that waits for the device inside the call, as
torch.istft's window check does) is timed eagerly instead, and so is specux for that row's
ratio: ``peer ms`` is then the peer's eager time, ``specux ms`` stays the graph replay's,
and ``notes`` says so with specux's eager time (the ratio is eager / eager). specux itself
must capture: its failure is an error.

    python bench/transforms.py                         # every workload, forward (+ mel_bwd)
    python bench/transforms.py --only mel,stft_c --backward --json out.json --plot out.png
    python bench/transforms.py --backward --graph      # the same, as CUDA graph replays

Debug: ``--device cpu`` runs the same code on CPU tensors at ``--scale`` (default 0.05) times
the batch and signal lengths, timed with time.perf_counter (no targets, no memory figures).
"""

from __future__ import annotations

import argparse
import atexit
import datetime
import json
import os
import platform
import shutil
import sys
import tempfile
import time
import traceback
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from typing import Any

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, REPO)
from timing import graphed, median_ms  # noqa: E402  (bench/timing.py, beside this script)

WORKLOADS = ("mel", "mel_bwd", "stft_c", "stft_p", "istft", "mfcc", "cqt", "conv")

# PERF.md's targets for specux on the H200 (ms), and the peers' figures measured there.
TARGET_MS = {
    "mel": 0.045,
    "mel_bwd": 0.15,
    "stft_c": 0.06,
    "stft_p": 0.04,
    "istft": 0.07,
    "mfcc": 0.05,
    "cqt": 0.15,
    "conv": 0.10,
}
SCRATCH_TARGET = {"mel"}  # "scratch <= output size"

MEL = dict(n_fft=1024, hop_length=256)
SR_MEL = 16000
TORCHAUDIO_MEL = dict(n_fft=1024, hop_length=256, n_mels=80, pad_mode="constant", norm="slaney",
                      mel_scale="slaney")  # fmt: skip
CQT = dict(sr=22050, hop_length=512, fmin=32.70, n_bins=84)


# ---------------------------------------------------------------------------------------------
# timing and measuring


def _sync(device: str) -> None:
    import torch

    if device == "cuda":
        torch.cuda.synchronize()


def _first_call(fn: Callable, device: str) -> tuple[float, Any]:
    """Wall time (ms) of one call, synchronized: the first call pays compile / cache load."""
    _sync(device)
    t0 = time.perf_counter()
    out = fn()
    _sync(device)
    return (time.perf_counter() - t0) * 1e3, out


def _scratch_call(fn: Callable, device: str) -> tuple[float | None, Any]:
    """(peak minus live allocation before the call in MB, or None off CUDA; the result)."""
    import torch

    if device != "cuda":
        return None, fn()
    torch.cuda.synchronize()
    torch.cuda.reset_peak_memory_stats()
    before = torch.cuda.memory_allocated()
    out = fn()
    torch.cuda.synchronize()
    return (torch.cuda.max_memory_allocated() - before) / 1e6, out


def _tensors(out: Any) -> tuple:
    return tuple(out) if isinstance(out, (tuple, list)) else (out,)


def _nbytes(out: Any) -> int:
    return sum(t.numel() * t.element_size() for t in _tensors(out))


def _rel_diff(ours: Any, theirs: Any) -> tuple[float | None, str | None]:
    """max |ours - theirs| / max |theirs| over all result tensors, or (None, why not)."""
    import torch

    a, b = _tensors(ours), _tensors(theirs)
    if len(a) != len(b) or any(x.shape != y.shape for x, y in zip(a, b)):
        shapes = [tuple(x.shape) for x in a], [tuple(y.shape) for y in b]
        return None, f"shapes differ: {shapes[0]} vs {shapes[1]}"
    err, peak = 0.0, 0.0
    with torch.no_grad():
        for x, y in zip(a, b):
            if x.numel() == 0:
                continue
            err = max(err, float((x.detach() - y.detach()).abs().max()))
            peak = max(peak, float(y.detach().abs().max()))
    return (err / peak if peak > 0 else err), None


def _free(device: str) -> None:
    import gc

    import torch

    gc.collect()
    if device == "cuda":
        torch.cuda.empty_cache()


# ---------------------------------------------------------------------------------------------
# workloads


@dataclass
class Case:
    """One workload: specux's call, its peers' calls (built lazily: a peer may be missing),
    how to view each result for the difference, and which inputs take gradients."""

    name: str
    inputs: dict
    ours: Callable[[dict], Any]
    peers: list[tuple[str, Callable[[dict], Callable[[dict], Any]]]]
    grad: tuple[str, ...] = ("x",)
    view_ours: Callable[[Any], Any] | None = None  # specux's result as the peers give it
    backward: bool = False


def _scaled(shape: tuple[int, int], scale: float) -> tuple[int, int]:
    return max(1, round(shape[0] * scale)), max(1, round(shape[1] * scale))


def _randn(shape, device: str, seed: int):
    import torch

    g = torch.Generator().manual_seed(seed)
    return torch.randn(shape, generator=g).to(device)


def _hann(device: str):
    import torch

    return torch.hann_window(MEL["n_fft"], periodic=True, device=device)


def _torchaudio_mel(device: str):
    import torchaudio

    module = torchaudio.transforms.MelSpectrogram(sample_rate=SR_MEL, **TORCHAUDIO_MEL)
    module = module.to(device)
    return lambda d: module(d["x"])


def _torchaudio_mfcc(device: str):
    import torchaudio

    module = torchaudio.transforms.MFCC(sample_rate=SR_MEL, n_mfcc=20, norm="ortho",
                                        melkwargs=dict(TORCHAUDIO_MEL))  # fmt: skip
    module = module.to(device)
    return lambda d: module(d["x"])


def _torch_stft(power: bool, device: str):
    import torch

    window = _hann(device)

    def run(d):
        S = torch.stft(d["x"], window=window, center=True, pad_mode="constant",
                       return_complex=True, **MEL)  # fmt: skip
        return S.abs().pow(2) if power else S

    return run


def _torch_istft(device: str, length: int):
    import torch

    window = _hann(device)
    return lambda d: torch.istft(d["S"], window=window, center=True, length=length, **MEL)


def _torchaudio_conv(device: str):
    import torchaudio

    fftconvolve = torchaudio.functional.fftconvolve
    return lambda d: fftconvolve(d["x"], d["k"], mode="full")


def _nnaudio_cqt(kind: str, device: str):
    try:
        from nnAudio import features
    except ImportError:  # nnAudio < 0.3
        from nnAudio import Spectrogram as features  # type: ignore[no-redef]

    kwargs = dict(sr=CQT["sr"], hop_length=CQT["hop_length"], fmin=CQT["fmin"],
                  n_bins=CQT["n_bins"], bins_per_octave=12, filter_scale=1, window="hann",
                  pad_mode="constant", output_format="Magnitude", verbose=False)  # fmt: skip
    if kind == "CQT1992v2":  # direct: centered frames, librosa's filter norm
        kwargs.update(center=True, norm=1)
    else:  # CQT2010v2 (downsampled octaves) is always centered; its filter norm is basis_norm
        kwargs.update(basis_norm=1)
    module = getattr(features, kind)(**kwargs)
    module = module.to(device)
    return lambda d: module(d["x"])


def _case(name: str, device: str, scale: float) -> Case:
    """The workload ``name`` (a PERF.md id, mel_bwd included) in forward form."""
    import specux

    if name in ("mel", "mel_bwd"):
        x = _randn(_scaled((64, 160000), scale), device, 0)
        return Case(
            name, {"x": x},
            lambda d: specux.melspectrogram(d["x"], sr=SR_MEL, n_mels=80, **MEL),
            [("torchaudio.MelSpectrogram", lambda: _torchaudio_mel(device))],
            backward=name == "mel_bwd",
        )  # fmt: skip
    if name in ("stft_c", "stft_p"):
        x = _randn(_scaled((64, 160000), scale), device, 0)
        power = name == "stft_p"
        output = "power" if power else "complex"
        return Case(
            name, {"x": x},
            lambda d: specux.stft(d["x"], output=output, **MEL),
            [("torch.stft" + (" abs pow" if power else ""),
              lambda: _torch_stft(power, device))],
        )  # fmt: skip
    if name == "istft":
        import torch

        x = _randn(_scaled((64, 160000), scale), device, 0)
        length = x.shape[-1]
        # the stft_c result, computed by torch so this row does not depend on specux's stft
        S = torch.stft(x, window=_hann(device), center=True, pad_mode="constant",
                       return_complex=True, **MEL)  # fmt: skip
        del x
        return Case(
            name, {"S": S},
            lambda d: specux.istft(d["S"], length=length, **MEL),
            [("torch.istft", lambda: _torch_istft(device, length))],
            grad=("S",),
        )  # fmt: skip
    if name == "mfcc":
        x = _randn(_scaled((64, 160000), scale), device, 0)
        return Case(
            name, {"x": x},
            lambda d: specux.mfcc(d["x"], sr=SR_MEL, n_mfcc=20, n_mels=80, **MEL),
            [("torchaudio.MFCC", lambda: _torchaudio_mfcc(device))],
        )  # fmt: skip
    if name == "cqt":
        x = _randn(_scaled((16, 220500), scale), device, 0)
        return Case(
            name, {"x": x},
            lambda d: specux.cqt(d["x"], **CQT),
            [("nnAudio.CQT2010v2", lambda: _nnaudio_cqt("CQT2010v2", device)),
             ("nnAudio.CQT1992v2", lambda: _nnaudio_cqt("CQT1992v2", device))],
            view_ours=lambda y: y.abs(),
        )  # fmt: skip
    if name == "conv":
        x = _randn(_scaled((64, 160000), scale), device, 0)
        k = _randn(_scaled((64, 4096), scale), device, 1)
        return Case(
            name, {"x": x, "k": k},
            lambda d: specux.fftconvolve(d["x"], d["k"], mode="full"),
            [("torchaudio.fftconvolve", lambda: _torchaudio_conv(device))],
            grad=("x", "k"),
        )  # fmt: skip
    raise KeyError(name)


def _loss(y):
    """A real scalar, linear in the result: sum over it (real and imaginary parts)."""
    import torch

    return torch.view_as_real(y).sum() if y.is_complex() else y.sum()


def _forward_backward(run: Callable[[dict], Any], inputs: dict, grad: tuple[str, ...],
                      view: Callable[[Any], Any] | None = None):  # fmt: skip
    """``run`` (then ``view``) plus ``sum().backward()``; returns the gradients (fresh each
    call). ``view`` makes specux's result the peer's (cqt: ``abs``) so both differentiate the
    same loss."""
    leaves = [inputs[k] for k in grad]

    def call(d):
        for t in leaves:
            t.grad = None
        y = run(d)
        _loss(y if view is None else view(y)).backward()
        return tuple(t.grad for t in leaves)

    return call


def _runnable(name: str, device: str, scale: float) -> tuple[Callable[[dict], Any], dict]:
    """specux's call of workload ``name`` and its inputs: a WORKLOADS id, or any of them with
    ``_bwd`` (mel_bwd is one already) for the forward plus ``sum().backward()``, whose call
    returns the gradients. tools/ab.py times these; tools/ncu_regions.py profiles them."""
    backward = name.endswith("_bwd") and name != "mel_bwd"
    case = _case(name.removesuffix("_bwd") if backward else name, device, scale)
    if not (backward or case.backward):
        return case.ours, case.inputs
    inputs = {k: (v.detach().clone().requires_grad_(True) if k in case.grad else v)
              for k, v in case.inputs.items()}  # fmt: skip
    return _forward_backward(case.ours, inputs, case.grad), inputs


# ---------------------------------------------------------------------------------------------
# running one row


@dataclass
class Row:
    workload: str
    mode: str
    peer: str
    specux_ms: float | None = None
    specux_first_ms: float | None = None
    specux_scratch_mb: float | None = None
    out_mb: float | None = None
    peer_ms: float | None = None
    peer_first_ms: float | None = None
    peer_scratch_mb: float | None = None
    ratio: float | None = None
    target_ms: float | None = None
    target_met: bool | None = None
    max_rel_diff: float | None = None
    notes: list[str] = field(default_factory=list)
    reasons: list[str] = field(default_factory=list)


@dataclass
class Result:
    ms: float | None = None
    first_ms: float | None = None
    scratch_mb: float | None = None
    out: Any = None
    error: str | None = None  # exception class name
    reason: str | None = None  # its message, first line
    uncaptured: str | None = None  # why --graph timed this contender eagerly


def _measure(run: Callable[[dict], Any], inputs: dict, args, device: str, *,
             eager_fallback: bool = False, capture: Callable = graphed) -> Result:  # fmt: skip
    """One contender's first call, scratch and median time (graph replays with ``--graph``;
    with ``eager_fallback``, a contender whose capture fails is timed eagerly and
    ``uncaptured`` says why)."""
    res = Result()
    try:
        res.first_ms, out = _first_call(lambda: run(inputs), device)
        del out
        res.scratch_mb, res.out = _scratch_call(lambda: run(inputs), device)
        timed = lambda: run(inputs)  # noqa: E731
        if args.graph:
            try:
                timed = capture(timed)
            except Exception as exc:  # noqa: BLE001 - reported in the row
                if not eager_fallback:
                    raise
                first = (str(exc).strip().splitlines() or [""])[0][:200]
                res.uncaptured = f"{type(exc).__name__}: {first}"
                _sync(device)
        res.ms = median_ms(timed, args.warmup, args.repeats, args.calls, device)
    except Exception as exc:  # noqa: BLE001 - a benchmark row, not a crash
        res.error = type(exc).__name__
        res.reason = (str(exc).strip().splitlines() or [""])[0][:300]
        res.out = None
        if os.environ.get("SPECUX_BENCH_TRACEBACK"):
            traceback.print_exc()
    _free(device)
    return res


def _eager_ratio(row: Row) -> bool:
    """Whether the row's ratio is of eager times (its peer could not be captured)."""
    return any(note.startswith("peer eager") for note in row.notes)


def _run_case(case: Case, backward: bool, args, device: str,
              capture: Callable = graphed) -> list[Row]:  # fmt: skip
    import torch

    mode = "fwd+bwd" if backward else "fwd"
    inputs = dict(case.inputs)
    if backward:
        for k in case.grad:
            inputs[k] = inputs[k].detach().clone().requires_grad_(True)

    def prepare(run, view=None):
        return _forward_backward(run, inputs, case.grad, view) if backward else run

    # specux first, then each peer; every measurement in this process.
    ours = _measure(prepare(case.ours, case.view_ours), inputs, args, device, capture=capture)
    if ours.out is not None and not backward and case.view_ours is not None:
        with torch.no_grad():
            ours.out = case.view_ours(ours.out)

    label = case.name if (backward == case.backward) else f"{case.name}+bwd"
    target = TARGET_MS.get(case.name) if backward == case.backward else None
    rows = []
    ours_eager: list[Result] = []  # specux timed eagerly, once, for a peer that is

    def eager_ours() -> Result:
        if not ours_eager:
            eager = argparse.Namespace(**{**vars(args), "graph": False})
            ours_eager.append(_measure(prepare(case.ours, case.view_ours), inputs, eager,
                                       device))  # fmt: skip
        return ours_eager[0]
    for peer_name, build in case.peers:
        row = Row(label, mode, peer_name, target_ms=target)
        row.specux_ms, row.specux_first_ms = ours.ms, ours.first_ms
        row.specux_scratch_mb = ours.scratch_mb
        if ours.out is not None:
            row.out_mb = _nbytes(ours.out) / 1e6
        if ours.error:
            row.notes.append(f"specux {ours.error}")
            row.reasons.append(f"specux: {ours.error}: {ours.reason}")
        try:
            run = build()
        except Exception as exc:  # noqa: BLE001 - not installed, or refuses the arguments
            theirs = Result(error=type(exc).__name__, reason=str(exc).strip()[:300])
        else:
            theirs = _measure(prepare(run), inputs, args, device, eager_fallback=True,
                              capture=capture)  # fmt: skip
        row.peer_ms, row.peer_first_ms = theirs.ms, theirs.first_ms
        row.peer_scratch_mb = theirs.scratch_mb
        if row.out_mb is None and theirs.out is not None:
            row.out_mb = _nbytes(theirs.out) / 1e6
        if theirs.error:
            row.notes.append(f"peer {theirs.error}")
            row.reasons.append(f"{peer_name}: {theirs.error}: {theirs.reason}")
        if theirs.uncaptured and theirs.ms:
            mine = eager_ours()
            row.reasons.append(f"{peer_name}: not capturable ({theirs.uncaptured}); both "
                               "timed eagerly for the ratio")  # fmt: skip
            if mine.ms:
                row.ratio = theirs.ms / mine.ms
                row.notes.append(f"peer eager; ratio eager/eager, specux eager {mine.ms:.3f}")
            else:
                row.notes.append(f"peer eager; specux eager {mine.error}")
        elif row.specux_ms and row.peer_ms:
            row.ratio = row.peer_ms / row.specux_ms
        if ours.out is not None and theirs.out is not None:
            row.max_rel_diff, why = _rel_diff(ours.out, theirs.out)
            if why:
                row.notes.append(why)
        if args.check_targets and target is not None and row.specux_ms is not None:
            met = row.specux_ms <= target
            if case.name in SCRATCH_TARGET and row.specux_scratch_mb is not None:
                met = met and row.specux_scratch_mb - row.out_mb <= row.out_mb
            row.target_met = met
        rows.append(row)
        del theirs
        _free(device)
    del ours
    _free(device)
    return rows


# ---------------------------------------------------------------------------------------------
# output


def _f(value: float | None, fmt: str) -> str:
    return "-" if value is None else format(value, fmt)


HEADER = (
    f"{'workload':11s} {'peer':26s} {'specux ms':>10s} {'peer ms':>9s} {'ratio':>7s} "
    f"{'target':>7s} {'met':>4s} {'first ms':>9s} {'peer 1st':>9s} {'scratch':>8s} "
    f"{'peer MB':>8s} {'out MB':>7s} {'diff':>8s}  notes"
)


def _line(row: Row, check_targets: bool) -> str:
    if row.target_met is None:
        met = "n/a" if not check_targets and row.target_ms is not None else "-"
    else:
        met = "yes" if row.target_met else "no"
    ratio = "-" if row.ratio is None else f"{row.ratio:6.2f}x"
    return (
        f"{row.workload:11s} {row.peer[:26]:26s} {_f(row.specux_ms, '10.3f'):>10s} "
        f"{_f(row.peer_ms, '9.3f'):>9s} {ratio:>7s} {_f(row.target_ms, '7.3f'):>7s} "
        f"{met:>4s} {_f(row.specux_first_ms, '9.1f'):>9s} {_f(row.peer_first_ms, '9.1f'):>9s} "
        f"{_f(row.specux_scratch_mb, '8.3g'):>8s} {_f(row.peer_scratch_mb, '8.3g'):>8s} "
        f"{_f(row.out_mb, '7.3g'):>7s} {_f(row.max_rel_diff, '8.1e'):>8s}  "
        f"{'; '.join(row.notes)}"
    )


def _plot(rows: list[Row], path: str) -> None:
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
        import matplotlib.ticker
    except ImportError:
        print(f"--plot: matplotlib is not importable, {path} not written")
        return
    points = [(f"{r.workload}  {r.peer}" + (" (eager)" if _eager_ratio(r) else ""), r.ratio)
              for r in rows if r.ratio is not None]  # fmt: skip
    if not points:
        print(f"--plot: no row has a ratio (specux and a peer both timed), {path} not written")
        return
    labels, ratios = zip(*points)
    fig, ax = plt.subplots(figsize=(8.0, 1.2 + 0.35 * len(points)))
    ys = range(len(points))[::-1]  # first row on top
    ax.barh(ys, ratios, color=["tab:green" if r >= 1 else "tab:red" for r in ratios])
    for y, r in zip(ys, ratios):
        ax.annotate(f"{r:.2f}x", (r, y), xytext=(3, 0), textcoords="offset points",
                    va="center", fontsize=8)  # fmt: skip
    ax.axvline(1.0, color="black", linewidth=0.8)
    ax.set_yticks(list(ys), labels, fontsize=8)
    if max(ratios) / min(ratios) > 20:  # a wide spread reads better in log
        ax.set_xscale("log")
    ax.xaxis.set_major_formatter(matplotlib.ticker.FuncFormatter(lambda v, _: f"{v:g}x"))
    ax.set_xlabel("peer ms / specux ms (above 1: specux faster)")
    ax.set_title("specux vs peers, spectral transforms")
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)
    print(f"wrote {path}")


# ---------------------------------------------------------------------------------------------
# main


def _selection(only: str | None, backward: bool) -> list[tuple[str, bool]]:
    """(workload id, fwd+bwd?) pairs in PERF.md's order."""
    names = list(WORKLOADS)
    if only:
        names = [n.strip() for n in only.split(",") if n.strip()]
        unknown = [n for n in names if n not in WORKLOADS]
        if unknown:
            raise ValueError(f"--only: unknown workload(s) {unknown}; known: {','.join(WORKLOADS)}")
        names = [n for n in WORKLOADS if n in names]
    pairs = [(n, n == "mel_bwd") for n in names]
    if backward:
        extra = []
        for n in names:
            if n == "mel" and "mel_bwd" not in names:
                extra.append(("mel_bwd", True))
            elif n not in ("mel", "mel_bwd"):
                extra.append((n, True))
        pairs += extra
    order = {n: i for i, n in enumerate(WORKLOADS)}
    return sorted(pairs, key=lambda p: (order[p[0]] if p[0] != "mel_bwd" else order["mel"], p[1]))


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        description=__doc__.splitlines()[0],
        epilog="Workloads: " + ", ".join(WORKLOADS) + " (../shared/PERF.md).",
    )
    parser.add_argument("--only", metavar="W1,W2", help="comma-separated workloads to run")
    parser.add_argument(
        "--backward",
        action="store_true",
        help="also time forward+backward (sum().backward()) of every workload",
    )
    parser.add_argument("--warmup", type=int, default=3, help="untimed calls first (default 3)")
    parser.add_argument(
        "--repeats",
        "--repeat",
        dest="repeats",
        type=int,
        default=20,
        help="timed samples, the median is reported (default 20)",
    )
    parser.add_argument(
        "--calls", type=int, default=10, help="back-to-back calls per timed sample (default 10)"
    )
    parser.add_argument(
        "--graph",
        action="store_true",
        help="time replays of each call captured in a CUDA graph (the GPU time without the "
        "host's per-call Python / dispatcher / autograd-engine cost)",
    )
    parser.add_argument("--json", metavar="PATH", help="write the rows as JSON")
    parser.add_argument("--plot", metavar="PNG", help="bar chart of the ratios (matplotlib)")
    parser.add_argument(
        "--cold-cache",
        action="store_true",
        help="point SPECUX_CACHE_DIR at a new empty folder (cold first calls)",
    )
    parser.add_argument(
        "--autotune",
        action="store_true",
        help="specux.autotune(True): each workload's first specux call tunes its block "
        "kernels (forward calls; winners stored in the cache folder)",
    )
    # debug: the same code paths on CPU tensors at a reduced size
    parser.add_argument("--device", choices=("cuda", "cpu"), default="cuda", help=argparse.SUPPRESS)
    parser.add_argument("--scale", type=float, default=None, help=argparse.SUPPRESS)
    return parser  # fmt: skip


def main(argv: list[str] | None = None) -> int:
    parser = _parser()
    args = parser.parse_args(argv)
    for name in ("warmup", "repeats", "calls"):
        if getattr(args, name) < (0 if name == "warmup" else 1):
            parser.error(f"--{name} must be >= {0 if name == 'warmup' else 1}")
    device = args.device
    scale = args.scale if args.scale is not None else (1.0 if device == "cuda" else 0.05)
    if not scale > 0:
        parser.error("--scale must be > 0")
    try:
        selection = _selection(args.only, args.backward)
    except ValueError as exc:
        parser.error(str(exc))
    args.check_targets = device == "cuda" and scale == 1.0  # PERF.md's sizes, on the GPU

    try:
        import torch
    except ImportError as exc:
        print(f"bench/transforms.py needs torch ({type(exc).__name__}: {exc})", file=sys.stderr)
        return 2
    if device == "cuda" and not torch.cuda.is_available():
        print(
            f"bench/transforms.py needs a CUDA GPU: torch.cuda.is_available() is False "
            f"(torch {torch.__version__}, CUDA build: {torch.version.cuda or 'none'}). "
            "Nothing was measured. For a CPU smoke run of the code paths: "
            "--device cpu [--scale 0.05].",
            file=sys.stderr,
        )
        return 2
    if args.cold_cache:
        cold = tempfile.mkdtemp(prefix="specux-cold-cache-")
        atexit.register(shutil.rmtree, cold, ignore_errors=True)
        os.environ["SPECUX_CACHE_DIR"] = cold
    import specux
    from specux.options import cache_dir, disk_cache_enabled

    specux.autotune(args.autotune)

    if device == "cuda":
        torch.zeros(1, device="cuda")  # the CUDA context, outside every first call
        where = (
            f"{torch.cuda.get_device_name()}, torch {torch.__version__} + CUDA {torch.version.cuda}"
        )
    else:
        where = f"CPU ({platform.processor() or platform.machine()}), torch {torch.__version__}"
    if args.graph and device != "cuda":
        parser.error("--graph needs --device cuda")
    clock = "CUDA events" if device == "cuda" else "time.perf_counter"
    if args.graph:
        clock += " around CUDA graph replays"
    cache = cache_dir() if disk_cache_enabled() else "disabled"
    print(f"specux {specux.__version__} transforms benchmark on {where}")
    print(f"{clock}, median of {args.repeats} samples of {args.calls} calls after {args.warmup} "
          f"warm-ups; scale {scale:g}; specux disk cache: {cache}"
          f"{' (cold)' if args.cold_cache else ''}"
          f"{'; autotuned (first calls tune)' if args.autotune else ''}")  # fmt: skip
    if device != "cuda":
        print("debug run on CPU: PERF.md's targets are H200 figures and are not checked")
    elif not args.check_targets:
        print(f"--scale {scale:g}: not PERF.md's sizes, targets are not checked")
    print(HEADER)

    rows: list[Row] = []
    specux_broke = False
    for name, backward in selection:
        try:
            case = _case(name, device, scale)
        except Exception as exc:  # noqa: BLE001 - e.g. out of memory making the inputs
            row = Row(name if backward == (name == "mel_bwd") else f"{name}+bwd",
                      "fwd+bwd" if backward else "fwd", "-",
                      notes=[f"setup {type(exc).__name__}"],
                      reasons=[f"setup: {type(exc).__name__}: {exc}"])  # fmt: skip
            new = [row]
        else:
            new = _run_case(case, backward, args, device)
            del case
            _free(device)
        for row in new:
            print(_line(row, args.check_targets), flush=True)
            for reason in row.reasons:
                print(f"    {reason}", flush=True)
            specux_broke |= any(
                n.startswith("specux ") and n != "specux BackendUnavailableError" for n in row.notes
            )
        rows.extend(new)

    if args.json:
        meta = {
            "specux": specux.__version__,
            "torch": torch.__version__,
            "cuda": torch.version.cuda,
            "device": where,
            "clock": clock,
            "warmup": args.warmup,
            "repeats": args.repeats,
            "calls": args.calls,
            "scale": scale,
            "cold_cache": args.cold_cache,
            "graph": args.graph,
            "autotune": args.autotune,
            "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
            "argv": sys.argv[1:] if argv is None else argv,
        }
        with open(args.json, "w") as fh:
            json.dump({"meta": meta, "rows": [asdict(r) for r in rows]}, fh, indent=1)
        print(f"wrote {args.json}")
    if args.plot:
        _plot(rows, args.plot)
    if specux_broke:
        print("specux raised something other than BackendUnavailableError (see notes); "
              "set SPECUX_BENCH_TRACEBACK=1 for tracebacks")  # fmt: skip
        return 1
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
