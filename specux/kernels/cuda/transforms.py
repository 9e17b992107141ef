"""The spectral transforms on CUDA tensors: generated kernels (:mod:`transform_exec`) on
torch's current stream, buffers from torch's caching allocator.

- stft: one launch (two for Bluestein lengths) -- framing, padding and the window in the FFT's
  loads, magnitude / power / dB in its stores. n_fft beyond a block runs as frame kernel +
  FFT + the output mapping.
- istft: the inverse FFT of every frame, then one gather kernel (window, overlap-add,
  envelope division, crop).
- bank_spectrogram: one launch -- the stft kernel keeps each frame's |X| ** power in shared
  memory and a sparse filterbank reduces it there (dB in the same kernel); the output is the
  only memory written. n_fft beyond a block: the spectrum in memory, then a bank kernel.
- frame / overlap_add: the gather kernels (the adjoints of the stft and istft use them).
- power_adjoint (the backward of |stft| ** power and of the filterbank spectrograms): the
  stft kernel storing each bin's cotangent instead of X, the inverse FFT, then the
  overlap-add weighting the frames by the window.
- cqt / cqt_adjoint: the CPU backend's exact octave kernels, one tiled correlation kernel
  (its transpose for the adjoint) per octave group over the padded signal (padded by the
  frame kernel; the adjoint's padding folded by the overlap-add gather), the lowest octaves
  of the forward as the spectral identity of transform_exec.cqt_spectral where its cost
  model prefers it. No cuBLAS.
- fftconvolve: real float32 / float64 operands whose shorter one is at most half a block FFT
  and whose output is longer than a block run by overlap-save (transform_exec.overlap_save:
  the shorter one's spectra by the stft kernel, then one kernel a frame of the longer one --
  forward transform, product, inverse transform -- storing its alias-free outputs in place).
  Others: FFTs of both zero-padded inputs, the product, one inverse FFT.
"""

from __future__ import annotations

import math

import numpy as np
import torch

from specux.compat.tensor_cache import PerVersion, capturing, fixed_values
from specux.compat.torch_compat import dtype_name, upload
from specux.kernels import transform_exec
from specux.kernels.cpu import stft as cpu_stft
from specux.kernels.cuda import fft as cuda_fft
from specux.kernels.cuda.fft import _STORAGE, TorchCudaBackend, _dense
from specux.kernels.native import (
    axis_scale,
    istft_envelope,
    named_bands,
    named_istft_envelope,
)
from specux.kernels.plan import smooth_length
from specux.meta import dtypes, matrices, shapes
from specux.meta.cqt_params import ConstantQSpec
from specux.meta.params import StftParams, WindowSpec, dual_norm
from specux.meta.windows import centered_offset


def _storage(t: torch.Tensor) -> tuple[str, str]:
    """(storage, precision) of a real tensor; raises for dtypes the kernels do not read."""
    if t.is_complex() or t.dtype not in _STORAGE:
        raise TypeError(
            "these CUDA kernels read real float16, bfloat16, float32 and float64 tensors, "
            f"not {t.dtype}"
        )
    return _STORAGE[t.dtype]


def _dtype(name: str) -> torch.dtype:
    """The torch dtype of a storage / precision name ("float16", "complex64", ...)."""
    return getattr(torch, name)


def _spectrum_dtype(storage: str, value: str) -> torch.dtype:
    """complex (complex32 for float16 storage, complex64 for bfloat16) for value "complex",
    else the storage's real."""
    return _dtype(dtypes.complex_of(storage) if value == "complex" else storage)


def _rows(x: torch.Tensor) -> tuple[torch.Tensor, int]:
    """``x`` dense, and how many rows of its last axis it holds -- also when that axis is
    empty: the ops take signals of 0 samples (constant padding makes their frames zeros),
    and counting no rows there launched nothing over an uninitialized output."""
    x = _dense(x)
    return x, math.prod(x.shape[:-1])


def named_window(backend: TorchCudaBackend, window: WindowSpec, win_length: int, n_fft: int,
                 dtype: str) -> torch.Tensor:  # fmt: skip
    """A named window of ``win_length`` samples centred in ``n_fft`` on the backend's device in
    ``dtype``: the CPU backend's (float64, rounded once), uploaded once per device (shared:
    callers must not write to it)."""
    host = cpu_stft.named_full_window(window, win_length, n_fft, dtype)
    return backend.constant(("window", window, win_length, n_fft), host)


def full_window(p: StftParams, window: torch.Tensor | None, precision: str,
                backend: TorchCudaBackend) -> torch.Tensor:  # fmt: skip
    """The n_fft-point window in the compute precision on the backend's device: a named one
    is the CPU backend's (float64, rounded once, cached) uploaded once; a tensor is padded,
    contiguous and aligned to a pair of values (the overlap-add kernels read it in pairs; a
    user's view of an odd offset is copied)."""
    if window is None:
        return named_window(backend, p.window, p.win_length, p.n_fft, precision)
    left = centered_offset(p.win_length, p.n_fft)
    full = torch.nn.functional.pad(window.to(_dtype(precision)),
                                   (left, p.n_fft - p.win_length - left)).contiguous()  # fmt: skip
    if full.data_ptr() % (2 * full.element_size()):
        full = full.clone()
    return full


# ---------------------------------------------------------------------------------------------
# frame / overlap_add


def frame(x: torch.Tensor, frame_length: int, hop: int, pad: int, mode: str) -> torch.Tensor:
    storage, precision = _storage(x)
    x, rows = _rows(x)
    length = x.shape[-1]
    count = shapes.n_frames(length, frame_length, hop, pad)
    out = torch.empty((*x.shape[:-1], count, frame_length), dtype=x.dtype, device=x.device)
    transform_exec.frame(TorchCudaBackend(x.device), x, out, rows=rows, sig_len=length,
                         frame_len=frame_length, hop=hop, pad=pad, mode=mode, count=count,
                         storage=storage, precision=precision)  # fmt: skip
    return out


def overlap_add(frames: torch.Tensor, length: int, hop: int, pad: int, mode: str) -> torch.Tensor:
    storage, precision = _storage(frames)
    frames = _dense(frames)
    *batch, count, frame_length = frames.shape
    out = torch.empty((*batch, length), dtype=frames.dtype, device=frames.device)
    rows = out.numel() // length if length else 0
    transform_exec.overlap_add(TorchCudaBackend(frames.device), frames, out, rows=rows,
                               sig_len=length, frame_len=frame_length, hop=hop, pad=pad,
                               mode=mode, count=count, storage=storage,
                               precision=precision)  # fmt: skip
    return out


# ---------------------------------------------------------------------------------------------
# stft


def _stft_into(x: torch.Tensor, window, p: StftParams, value: str, eps: float,
               storage: str | None = None) -> torch.Tensor:  # fmt: skip
    """The stft of ``x`` as a frame-major ``(..., n_frames, n_freq)`` tensor of ``value``."""
    src_storage, precision = _storage(x)
    x, rows = _rows(x)
    length = x.shape[-1]
    count = shapes.n_frames(length, p.n_fft, p.hop_length, p.pad)
    out = cuda_fft._empty((*x.shape[:-1], count, p.n_freq),
                          _spectrum_dtype(storage or src_storage, value), x.device)  # fmt: skip
    dst_storage = _STORAGE[out.dtype][0]  # what the stores write (complex64 for bfloat16)
    if out.numel() == 0:
        return out.zero_()
    backend = TorchCudaBackend(x.device)
    w = full_window(p, window, precision, backend)
    scale = axis_scale(p.n_fft, p.fft_norm, False)
    if transform_exec.stft_fusable(p.n_fft, precision, p.onesided):
        transform_exec.stft(backend, x, out, w, signals=rows,
                            sig_len=length, n_fft=p.n_fft, hop=p.hop_length, pad=p.pad,
                            mode=p.pad_mode, onesided=p.onesided, value=value, eps=eps,
                            scale=scale, precision=precision, src_storage=src_storage,
                            dst_storage=dst_storage)  # fmt: skip
        return out
    # Beyond a block: frames in memory, windowed, the FFT kernels, the output mapping (the
    # torch-free route's kernels, so both routes give the same bits).
    frames = frame(x, p.n_fft, p.hop_length, p.pad, p.pad_mode).to(_dtype(precision))
    windowed = torch.empty_like(frames)
    transform_exec.elementwise(backend, "map", "window", frames, windowed,
                               rows=frames.numel() // p.n_fft, size=p.n_fft, storage=precision,
                               precision=precision, table=w)  # fmt: skip
    norm = p.fft_norm
    if p.onesided:
        spectrum = cuda_fft.r2c(windowed, [-1], norm)
    else:
        spectrum = cuda_fft.c2c(windowed.to(_spectrum_dtype(precision, "complex")), [-1], True,
                                norm)  # fmt: skip
    if value == "complex":
        return out.copy_(spectrum)
    return apply_value(spectrum, value, eps, out, dst_storage)


def apply_value(spectrum: torch.Tensor, value: str, eps: float, out=None,
                 storage: str | None = None) -> torch.Tensor:  # fmt: skip
    """A contiguous complex spectrum -> magnitude / power / dB (10 log10 max(power, eps)) by
    the ``value`` kernel (the torch-free route's, so both routes give the same bits) into
    ``out`` (a new tensor of the precision's real dtype if None); complex stays as it is."""
    if value == "complex":
        return spectrum
    precision = _STORAGE[spectrum.dtype][1]
    if out is None:
        out = torch.empty(spectrum.shape, dtype=_dtype(precision), device=spectrum.device)
    transform_exec.elementwise(TorchCudaBackend(spectrum.device), "value", value, spectrum,
                               out, rows=1, size=spectrum.numel(), storage=storage or precision,
                               precision=precision, eps=eps)  # fmt: skip
    return out


def stft(x: torch.Tensor, window, p: StftParams, output: str, eps: float) -> torch.Tensor:
    """``(..., L)`` -> ``(..., n_freq, n_frames)`` (a transposed view of frame-major memory)."""
    return _stft_into(x, window, p, output, eps).transpose(-1, -2)


# ---------------------------------------------------------------------------------------------
# istft


def istft(spec: torch.Tensor, window, p: StftParams, length: int, nola: str = "raise"
          ) -> torch.Tensor:  # fmt: skip
    """One-sided spectra whose frames' inverse FFT is a block kernel go through the fused
    overlap-add (:func:`transform_exec.istft`); the others through the inverse FFT's frames
    and the istft gather."""
    storage, precision = _STORAGE[spec.dtype]
    count = spec.shape[-1]
    backend = TorchCudaBackend(spec.device)
    if window is None:
        env, start, stop, out_length = named_istft_envelope(p, count, length, precision, nola)
        envelope = backend.constant(("inverse envelope", p, count, length, nola), env)
    else:
        envelope, start, stop, out_length = _window_envelope(backend, window, p, count, length,
                                                             precision, nola)  # fmt: skip
    w = full_window(p, window, precision, backend)
    out = torch.empty((*spec.shape[:-2], out_length), dtype=cuda_fft._real_of(spec.dtype),
                      device=spec.device)  # fmt: skip
    rows = out.numel() // out_length if out_length else 0
    bounds = dict(count=count, start=start, stop=stop, out_len=out_length, storage=storage,
                  precision=precision)  # fmt: skip
    if transform_exec.istft_fusable(p.n_fft, p.hop_length, precision, p.onesided, count,
                                    out_length):  # fmt: skip
        # the leading axes as one (a view where they collapse), any strides of the others
        spec = spec.resolve_conj().resolve_neg().reshape(-1, *spec.shape[-2:])
        transform_exec.istft(backend, spec, out, w, envelope, signals=rows,
                             strides=tuple(spec.stride()), n_fft=p.n_fft, hop=p.hop_length,
                             scale=axis_scale(p.n_fft, p.fft_norm, True), **bounds)  # fmt: skip
        return out
    columns = spec.transpose(-1, -2)
    if p.onesided:
        frames = cuda_fft.c2r(columns, [-1], p.n_fft, p.fft_norm)
    else:
        frames = cuda_fft.c2c(columns, [-1], False, p.fft_norm).real.contiguous()
    transform_exec.istft_overlap_add(backend, frames, out, w, envelope, rows=rows,
                                     frame_len=p.n_fft, hop=p.hop_length, **bounds)  # fmt: skip
    return out


# istft's envelope of a user window, (p, count, length, precision) -> (envelope on the device,
# start, stop, out_length): its NOLA check and envelope read the window on the host
_ENVELOPES = PerVersion(16)  # variable lengths: the latest shapes


def _window_envelope(backend, window: torch.Tensor, p: StftParams, count: int, length: int,
                     precision: str, nola: str = "raise"):  # fmt: skip
    """(envelope, start, stop, out_length) of istft with a window tensor (:func:`istft_envelope`
    of its float64 values). Reading the window waits for the device, so the result is kept
    per tensor version for a window that holds fixed values; one that needs a gradient (its
    values may change without a new version: gradcheck and optimizers write through
    ``.data``) or is a view is read on every call. While a CUDA graph is captured only a
    kept one can be used."""
    fixed = fixed_values(window)
    key = (p, count, length, precision, nola)
    found = _ENVELOPES.get(window, key) if fixed else None
    if found is not None:
        return found
    if capturing(window):
        raise RuntimeError(
            "istft with a window tensor reads the window on the host once per tensor version "
            "and call shape (the NOLA check and the window envelope), and on every call when "
            "it needs a gradient or is a view, which cannot happen while a CUDA graph is "
            "captured: call istft once with this window and shapes before the capture (the "
            "usual warm-up) and capture with a window that needs no gradient, or pass the "
            "window by name"
        )
    w64 = full_window(p, window.detach(), "float64", backend).cpu().numpy()
    env, start, stop, out_length = istft_envelope(p, w64, count, length, precision, nola)
    found = (upload(torch.from_numpy(np.array(env)), window.device), start, stop, out_length)
    if fixed:
        _ENVELOPES.put(window, key, found)
    return found


# ---------------------------------------------------------------------------------------------
# power_adjoint


def power_adjoint_fused(x: torch.Tensor, p: StftParams) -> bool:
    """Whether :func:`power_adjoint` runs for ``x`` (the stft of n_fft fits one block kernel);
    otherwise the op runs the composite chain (stft, cotangent, complex adjoint)."""
    return transform_exec.stft_fusable(p.n_fft, _storage(x)[1], True)


def bank_adjoint_fused(x: torch.Tensor, p: StftParams) -> bool:
    """Whether :func:`power_adjoint` takes a filterbank's cotangent (its kernel applies the
    bank's transpose): an even n_fft whose half is a block transform."""
    return transform_exec.adjoint_fusable(p.n_fft, _storage(x)[1])


def power_adjoint(x: torch.Tensor, window, p: StftParams, power: float, grad: torch.Tensor,
                  bank: torch.Tensor | None = None, bank_spec: str = "") -> torch.Tensor:
    """The gradient of ``sum(grad * |stft(x)| ** power)`` w.r.t. ``x`` (one-sided; ``grad``
    ``(..., n_freq, n_frames)``; :func:`power_adjoint_fused` must hold): the stft kernel
    stores each bin's cotangent instead of X (X is never written), then the inverse real FFT
    of every frame and the overlap-add through the padding (weighting the frames by the
    window). For an even n_fft whose half is a block transform the stft kernel does the
    inverse FFT and the window too (transform_exec.stft's value "adjoint": the cotangent
    never leaves the block), and where a block holds enough frames
    (transform_exec.adjoint_ola_fusable) the overlap-add as well (the frames never leave the
    block either; the padding's sums fold back in a gather); else the cotangent store and a
    c2r kernel.

    With a filterbank (``bank``, or one named by ``bank_spec``; :func:`bank_adjoint_fused`
    must hold), ``grad`` is the cotangent ``(..., n_bands, n_frames)`` of ``bank @ |stft(x)|
    ** power`` and the kernel forms each bin's ``bank^T grad`` itself."""
    expand = bank is not None or bool(bank_spec)
    if not (bank_adjoint_fused(x, p) if expand else power_adjoint_fused(x, p)):
        raise ValueError(f"power_adjoint: a {p.n_fft}-point stft does not fit one block kernel")
    src_storage, precision = _storage(x)
    factors = grad.transpose(-1, -2).to(_dtype(precision)).contiguous()  # frame-major
    backend = TorchCudaBackend(x.device)
    tables = {}
    if expand:
        n_bands = grad.shape[-2]
        bands, weights = _transposed_bands(backend, bank, bank_spec, precision, n_bands)
        tables = dict(bands=bands, weights=weights, expand_width=n_bands,
                      expand_terms=weights.numel() // p.n_freq)  # the tables' padded width
    xd, rows = _rows(x)
    length = x.shape[-1]
    w = full_window(p, window, precision, backend)
    common = dict(signals=rows, sig_len=length, n_fft=p.n_fft, hop=p.hop_length, pad=p.pad,
                  mode=p.pad_mode, onesided=True, eps=0.0,
                  scale=axis_scale(p.n_fft, p.fft_norm, False), precision=precision,
                  src_storage=src_storage, dst_storage=precision, factors=factors,
                  exponent=power)  # fmt: skip
    count = factors.shape[-2]
    if transform_exec.adjoint_ola_fusable(p.n_fft, p.hop_length, p.pad, precision, count,
                                          length):  # fmt: skip
        out = torch.empty((*factors.shape[:-2], length), dtype=_dtype(precision),
                          device=x.device)  # fmt: skip
        if out.numel() and count:
            transform_exec.stft(backend, xd, out, w, value="adjoint", overlap_add=True,
                                inverse_scale=axis_scale(p.n_fft, dual_norm(p.fft_norm), True),
                                **common, **tables)  # fmt: skip
        else:
            out.zero_()
        return out.to(x.dtype)
    if transform_exec.adjoint_fusable(p.n_fft, precision):
        frames = torch.empty((*factors.shape[:-1], p.n_fft), dtype=_dtype(precision),
                             device=x.device)  # fmt: skip
        if frames.numel():
            transform_exec.stft(backend, xd, frames, w, value="adjoint",
                                inverse_scale=axis_scale(p.n_fft, dual_norm(p.fft_norm), True),
                                **common, **tables)  # fmt: skip
        w = None  # weighted in the kernel
    else:
        cotangent = torch.empty(factors.shape, dtype=_spectrum_dtype(precision, "complex"),
                                device=x.device)  # fmt: skip
        if cotangent.numel():
            transform_exec.stft(backend, xd, cotangent, w, value="cotangent", **common)
        frames = cuda_fft.c2r(cotangent, [-1], p.n_fft, dual_norm(p.fft_norm))
        if transform_exec.folds(p.pad, p.pad_mode):  # the fold reads unweighted frames
            frames.mul_(w)
            w = None
    out = torch.empty((*frames.shape[:-2], length), dtype=frames.dtype, device=x.device)
    transform_exec.overlap_add(backend, frames, out, rows=rows, sig_len=length,
                               frame_len=p.n_fft, hop=p.hop_length, pad=p.pad,
                               mode=p.pad_mode, count=frames.shape[-2], storage=precision,
                               precision=precision, window=w)  # fmt: skip
    return out.to(x.dtype)


# ---------------------------------------------------------------------------------------------
# bank_spectrogram


def bank_spectrogram(x, window, p: StftParams, power: float, bank, bank_spec: str,
                     output: str, eps: float) -> torch.Tensor:  # fmt: skip
    """``bank @ |stft(x)| ** power`` (dB when output is "db"), ``(..., n_bands, n_frames)``."""
    storage, precision = _storage(x)
    backend = TorchCudaBackend(x.device)
    n_in = p.n_freq
    bands, weights, n_out = _bands(backend, bank, bank_spec, precision, n_in, "the stft")
    db_factor = 20.0 / power if output == "db" else None
    x, rows = _rows(x)
    length = x.shape[-1]
    count = shapes.n_frames(length, p.n_fft, p.hop_length, p.pad)
    out = torch.empty((*x.shape[:-1], count, n_out), dtype=x.dtype, device=x.device)
    if out.numel() == 0:
        return out.transpose(-1, -2)
    common = dict(n_out=n_out, power=power, db_factor=db_factor, eps=eps, storage=storage,
                  precision=precision)  # fmt: skip
    if transform_exec.stft_fusable(p.n_fft, precision, True):
        w = full_window(p, window, precision, backend)
        transform_exec.filterbank_stft(backend, x, out, w, bands, weights, p=p, signals=rows,
                                       sig_len=length, **common)  # fmt: skip
        return out.transpose(-1, -2)
    # Beyond a block: the spectrum (compute precision) in memory, then the bank kernel.
    spectrum = _stft_into(x, window, p, transform_exec.spectrum_value(power), eps,
                          storage=precision)  # fmt: skip
    transform_exec.filterbank_of_spectrum(backend, spectrum, out, bands, weights,
                                          rows=out.numel() // n_out, n_in=n_in, **common)
    return out.transpose(-1, -2)


# ---------------------------------------------------------------------------------------------
# cqt / cqt_adjoint


def cqt(x: torch.Tensor, spec: ConstantQSpec, pad_mode: str, output: str, eps: float):
    """``(..., L)`` real -> ``(..., n_bins, n_frames)``: the CPU backend's definition (exact
    correlation with librosa's filters, no decimation), one tiled correlation kernel per
    octave group over the padded signal, the lowest octaves by the exact spectral identity
    where it is cheaper (transform_exec.cqt_correlate: the torch-free route's launches, so
    both routes give the same bits)."""
    _, precision = _storage(x)
    x = _dense(x).to(_dtype(precision))
    *batch, length = x.shape
    count = x.numel() // length if length else 0
    plan, n_frames, pad = transform_exec.cqt_plan(spec, precision, length, max(count, 1))
    out = torch.zeros((count, n_frames, 2 * spec.n_bins), dtype=x.dtype, device=x.device)
    if count and n_frames:
        flat = x.reshape(count, length)
        xp = frame(flat, length + 2 * pad, 1, pad, pad_mode).reshape(count, length + 2 * pad)
        transform_exec.cqt_correlate(TorchCudaBackend(x.device), xp, out, spec, plan,
                                     count=count, n_frames=n_frames, row_len=length + 2 * pad,
                                     pad=pad, precision=precision)  # fmt: skip
    spectrum = torch.view_as_complex(out.view(count, n_frames, spec.n_bins, 2))
    result = apply_value(spectrum, output, eps).reshape(*batch, n_frames, spec.n_bins)
    return result.transpose(-1, -2)


def cqt_adjoint(grad: torch.Tensor, spec: ConstantQSpec, pad_mode: str, length: int):
    """The exact transpose of :func:`cqt` (complex output): ``Re(A^H G)``, one transposed
    correlation kernel per octave group (each padded sample one thread's sum: no atomics,
    no cuBLAS), then the padding's fold."""
    precision = _STORAGE[grad.dtype][1]
    ctype = _spectrum_dtype(precision, "complex")
    *batch, n_bins, n_frames = grad.shape
    count = grad.numel() // (n_bins * n_frames) if n_bins * n_frames else 0
    columns = grad.transpose(-1, -2).to(ctype).contiguous().reshape(count, n_frames, n_bins)
    real = torch.view_as_real(columns).reshape(count, n_frames, 2 * n_bins)
    plan, _, pad = transform_exec.cqt_plan(spec, precision, length, max(count, 1))
    xbar = torch.zeros((count, length + 2 * pad), dtype=real.dtype, device=grad.device)
    if count and n_frames:
        transform_exec.cqt_correlate_t(TorchCudaBackend(grad.device), real, xbar, spec, plan,
                                       count=count, n_frames=n_frames,
                                       row_len=length + 2 * pad, pad=pad,
                                       precision=precision)  # fmt: skip
    folded = overlap_add(xbar.reshape(count, 1, length + 2 * pad), length, 1, pad, pad_mode)
    return folded.reshape(*batch, length)


def _dense_named(matrix: torch.Tensor | None, spec: str, precision: str) -> bool:
    return matrix is None and transform_exec.named_dense(spec, precision)


def projects_clipped(x: torch.Tensor, matrix: torch.Tensor | None, spec: str) -> bool:
    """Whether :func:`project` takes ``top_db`` for ``x`` (its kernel clips as it reads:
    transform_exec.projects_clipped); otherwise the caller clips first."""
    storage, precision = _storage(x)
    return transform_exec.projects_clipped(_dense_named(matrix, spec, precision), x.shape[-2],
                                           storage, precision)  # fmt: skip


def project(x: torch.Tensor, matrix: torch.Tensor | None, spec: str,
            top_db: float | None = None) -> torch.Tensor:  # fmt: skip
    """``matrix @ x`` along the feature axis (DCT, chroma folds, a filterbank's transpose in
    a backward); ``matrix`` None means the one ``spec`` names (its rows' nonzero extents built
    once, kept on the device). One kernel over every frame (the features arrive
    frame-major; :func:`transform_exec.project`: the tiled correlation for a dense named
    matrix, else the gather): no cuBLAS, so it is deterministic with no workspace setting;
    the result is frame-major too (the op's layout: a transposed view). With ``top_db``
    (:func:`projects_clipped` must hold), ``matrix @ max(x, peak - top_db)`` for each
    signal's peak over its last two axes (mfcc's clip): the peaks by
    :func:`transform_exec.clip_peaks` inside project (one or two short launches), then the
    projection kernel or the tiled correlation clips as it reads."""
    storage, precision = _storage(x)
    backend = TorchCudaBackend(x.device)
    n_in = x.shape[-2]
    bands, weights, n_out = _bands(backend, matrix, spec, precision, n_in, "x")
    dense = _dense_named(matrix, spec, precision)
    rows = x.transpose(-1, -2).contiguous()  # (..., T, n_in): no copy when frame-major
    signals = math.prod(x.shape[:-2])
    out = torch.empty((*rows.shape[:-1], n_out), dtype=x.dtype, device=x.device)
    # the clip's peaks in the precision: this route stores x in it
    transform_exec.project(backend, rows, out, bands, weights,
                           rows=out.numel() // max(n_out, 1), n_in=n_in, n_out=n_out,
                           storage=storage, precision=precision, dense=dense,
                           signals=signals, clip=top_db is not None,
                           top_db=0.0 if top_db is None else top_db)  # fmt: skip
    return out.transpose(-1, -2)


def _bands(backend, matrix: torch.Tensor | None, spec: str, precision: str, n_in: int,
           what: str):  # fmt: skip
    """(bands, weights, rows) of a matrix for the gather kernels: a named one sparse (each
    row's nonzero extent, built once), a tensor sparse when its values are fixed
    (:func:`_sparse_tables`), else dense (every row spans every column). The
    kernels read ``n_in`` values per row, so a matrix of another width raises here (before
    anything is uploaded or launched) instead of reading past a row there."""
    if matrix is None:
        return named_bands(backend, spec, precision, n_in, what)
    if matrix.dim() != 2:
        raise ValueError(f"the matrix / bank must be 2-D (n_out, n_in), got {tuple(matrix.shape)}")
    width = matrix.shape[1]
    if width != n_in:
        raise ValueError(f"the matrix has {width} columns but {what} has {n_in} features")
    n_out = matrix.shape[0]
    sparse = _sparse_tables(matrix, precision)
    if sparse is not None:
        return sparse[0], sparse[1], n_out
    bands = backend.constant(("dense bands", n_out, n_in),
                             lambda: transform_exec.dense_bands(n_out, n_in))  # fmt: skip
    # bin-major weights (transform_exec.bank_tables): the matrix transposed
    return bands, matrix.detach().to(_dtype(precision)).t().contiguous(), n_out


def _transposed_bands(backend, bank: torch.Tensor | None, bank_spec: str, precision: str,
                      n_bands: int):  # fmt: skip
    """(bands, weights) of a filterbank's transpose (one band per stft bin) for the fused
    adjoint: a named bank's built once, a tensor's sparse once per tensor and version when
    it holds fixed values (:func:`_sparse_tables`), else dense."""
    if bank is None:
        spec = matrices.transposed_key(bank_spec)
        return named_bands(backend, spec, precision, n_bands, "the cotangent")[:2]
    sparse = _sparse_tables(bank, precision, transposed=True)
    if sparse is not None:
        return sparse
    return _bands(backend, bank.t(), "", precision, n_bands, "the cotangent")[:2]


# user matrices' sparse tables (an nn module's filterbank buffer, passed on every call),
# (transposed, precision) -> (bands, weights); transposed: a filterbank's, for the fused adjoint
_SPARSE = PerVersion(4)


def _sparse_tables(matrix: torch.Tensor, precision: str, transposed: bool = False):
    """The sparse gather tables (each row's nonzero extent, :func:`transform_exec.bank_tables`)
    of a user matrix (``transposed``: of its transpose) that holds fixed values, built once
    per tensor and version, or None: then
    the dense tables (every row spans every column). The kernels give the same bits either way
    for finite inputs -- a row's terms are summed in column order and the dropped terms are
    exact zeros -- but a filterbank's rows span a few of its hundreds of columns, so the
    sparse reduce reads and sums a small fraction of the dense one's terms, and no transposed
    copy is made per call. Building them reads the matrix on the host (waits for the device
    once), so it is skipped for what may change every call or cannot wait: a matrix that
    needs a gradient (a learned bank), a view (a backward's transpose, new on every call),
    and, while a CUDA graph is being captured, any that were not built before the capture."""
    if not fixed_values(matrix):
        return None
    key = (transposed, precision)
    tables = _SPARSE.get(matrix, key)
    if tables is not None or capturing(matrix):
        return tables
    host = matrix.detach().to(device="cpu", dtype=torch.float64).numpy()
    bands, weights, _ = transform_exec.sparse_tables(host.T if transposed else host, precision)
    tables = (upload(torch.from_numpy(bands), matrix.device),
              upload(torch.from_numpy(weights), matrix.device))  # fmt: skip
    _SPARSE.put(matrix, key, tables)
    return tables


# ---------------------------------------------------------------------------------------------
# fftconvolve


def fftconvolve(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    """Full linear convolution along the last axis (leading axes broadcast)."""
    length = x.shape[-1] + y.shape[-1] - 1
    dtype = torch.promote_types(x.dtype, y.dtype)
    swap, block = transform_exec.overlap_save_operands(dtype_name(dtype), x.shape[-1],
                                                       y.shape[-1])  # fmt: skip
    if block:
        return _overlap_save(*((y, x) if swap else (x, y)), block, dtype)
    n = smooth_length(length)
    if dtype.is_complex:
        fx = cuda_fft.c2c(torch.nn.functional.pad(x.to(dtype), (0, n - x.shape[-1])), [-1],
                          True, "backward")  # fmt: skip
        fy = cuda_fft.c2c(torch.nn.functional.pad(y.to(dtype), (0, n - y.shape[-1])), [-1],
                          True, "backward")  # fmt: skip
        out = cuda_fft.c2c(_product(fx, fy), [-1], False, "backward")
    else:
        fx = cuda_fft.r2c(torch.nn.functional.pad(x.to(dtype), (0, n - x.shape[-1])), [-1],
                          "backward")  # fmt: skip
        fy = cuda_fft.r2c(torch.nn.functional.pad(y.to(dtype), (0, n - y.shape[-1])), [-1],
                          "backward")  # fmt: skip
        out = cuda_fft.c2r(_product(fx, fy), [-1], n, "backward")
    return out[..., :length].contiguous()


def _overlap_save(x: torch.Tensor, y: torch.Tensor, block: int,
                  dtype: torch.dtype) -> torch.Tensor:  # fmt: skip
    """The full convolution of real ``x`` with the shorter real ``y`` in ``dtype`` by
    transform_exec.overlap_save with ``block``-point FFTs."""
    x, y = x.to(dtype), y.to(dtype)
    short = y.shape[-1]
    batch = torch.broadcast_shapes(x.shape[:-1], y.shape[:-1])
    out = torch.empty((*batch, x.shape[-1] + short - 1), dtype=x.dtype, device=x.device)
    if out.numel() == 0:
        return out
    storage, precision = _storage(x)
    xd, rows = _rows(x.expand(*batch, x.shape[-1]))
    taps, _ = _rows(y.expand(*batch, short))
    transform_exec.overlap_save(TorchCudaBackend(x.device), xd, taps, out, signals=rows,
                                sig_len=x.shape[-1], short=short, block=block,
                                precision=precision, storage=storage)  # fmt: skip
    return out


def _product(fx: torch.Tensor, fy: torch.Tensor) -> torch.Tensor:
    """``fx * fy`` (leading axes broadcast) by the cmul kernel the torch-free route uses."""
    fx, fy = (t.contiguous() for t in torch.broadcast_tensors(fx, fy))
    out = cuda_fft._empty(fx.shape, fx.dtype, fx.device)
    storage, precision = _STORAGE[fx.dtype]  # complex32 (float16 inputs): half storage
    transform_exec.elementwise(TorchCudaBackend(fx.device), "cmul", "", fx, out, rows=1,
                               size=fx.numel(), storage=storage, precision=precision,
                               table=fy)  # fmt: skip
    return out


__all__ = ["apply_value", "bank_spectrogram", "cqt", "cqt_adjoint", "fftconvolve", "frame",
           "full_window", "istft", "overlap_add", "project", "stft"]  # fmt: skip
