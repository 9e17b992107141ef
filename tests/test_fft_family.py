"""The FFT family (fft, ifft, rfft, irfft, hfft, ihfft and the 2-D / n-D versions) against
numpy.fft: values, dtypes, shapes, norms, n / s / dim handling, layouts and input errors."""

from __future__ import annotations

import inspect

import numpy as np
import pytest

try:
    import torch
except ImportError:  # the torch-less CI job runs the numpy half of this file
    torch = None

from hypothesis import given
from hypothesis import strategies as st
from tolerances import TOLERANCES, float32_bound, rel_l2, rel_peak

import specux
from specux import routing

LIBS = ["numpy", "torch"] if torch is not None else ["numpy"]

NORMS = [None, "backward", "ortho", "forward"]
SIZES = [1, 2, 3, 17, 97, 1000, 1031, 65537]

# name -> (input kind, output kind)
FN1D = {
    "fft": ("complex", "complex"),
    "ifft": ("complex", "complex"),
    "rfft": ("real", "complex"),
    "ihfft": ("real", "complex"),
    "irfft": ("complex", "real"),
    "hfft": ("complex", "real"),
}
FNND = {
    "fftn": ("complex", "complex"),
    "ifftn": ("complex", "complex"),
    "rfftn": ("real", "complex"),
    "irfftn": ("complex", "real"),
}
FN2D = {
    "fft2": ("complex", "complex"),
    "ifft2": ("complex", "complex"),
    "rfft2": ("real", "complex"),
    "irfft2": ("complex", "real"),
}
ALL_FNS = {**FN1D, **FNND, **FN2D}
C2R = ("irfft", "hfft", "irfftn", "irfft2")

WIDE = {
    np.dtype(np.float32): np.float64,
    np.dtype(np.float64): np.float64,
    np.dtype(np.complex64): np.complex128,
    np.dtype(np.complex128): np.complex128,
}
REAL_OF = {"float32": "float32", "float64": "float64", "complex64": "float32",
           "complex128": "float64"}  # fmt: skip
COMPLEX_OF = {"float32": "complex64", "float64": "complex128", "complex64": "complex64",
              "complex128": "complex128"}  # fmt: skip


# ---------------------------------------------------------------------------------------------
# helpers


def make(rng, shape, kind, precision):
    """Random data of ``kind`` ("real"/"complex") in float32/float64 (complex64/complex128)."""
    x = rng.uniform(-1.0, 1.0, shape)
    if kind == "complex":
        x = x + 1j * rng.uniform(-1.0, 1.0, shape)
        return x.astype(np.complex64 if precision == 32 else np.complex128)
    return x.astype(np.float32 if precision == 32 else np.float64)


def to_lib(x, lib):
    return torch.from_numpy(np.ascontiguousarray(x)) if lib == "torch" else x


def to_np(out):
    if (torch is not None and isinstance(out, torch.Tensor)):
        if out.dtype in (torch.complex32,):
            out = out.to(torch.complex64)
        elif out.dtype in (torch.float16, torch.bfloat16):
            out = out.to(torch.float32)
        return out.detach().resolve_conj().numpy()
    return np.asarray(out)


def dtype_name(out):
    if (torch is not None and isinstance(out, torch.Tensor)):
        return str(out.dtype).removeprefix("torch.")
    return out.dtype.name


def expected_dtype(fn, x_dtype):
    name = np.dtype(x_dtype).name
    return REAL_OF[name] if fn in C2R else COMPLEX_OF[name]


def check(out, fn, x, lib, ref_kwargs):
    """``out`` (specux's result for ``x``) vs numpy.fft in float64 on the same data.

    float64: rel_l2 <= TOLERANCES["float64"]; float32: at most float32_bound(numpy's own
    float32 error on the same data)."""
    assert isinstance(out, np.ndarray if lib == "numpy" else torch.Tensor), type(out)
    if lib == "torch":
        assert out.device.type == "cpu"
    assert dtype_name(out) == expected_dtype(fn, x.dtype), (dtype_name(out), x.dtype)
    np_fn = getattr(np.fft, fn)
    ref = np_fn(x.astype(WIDE[x.dtype]), **ref_kwargs)
    got = to_np(out)
    assert got.shape == ref.shape, (got.shape, ref.shape)
    err = rel_l2(got, ref)
    if x.dtype in (np.float64, np.complex128):
        assert err <= TOLERANCES["float64"], err
    else:
        numpy_err = rel_l2(np_fn(x, **ref_kwargs), ref)
        assert err <= float32_bound(numpy_err), (err, numpy_err)


# ---------------------------------------------------------------------------------------------
# 1-D: sizes x norms x precision x library


@pytest.mark.parametrize("lib", LIBS)
@pytest.mark.parametrize("precision", [32, 64])
@pytest.mark.parametrize("norm", NORMS)
@pytest.mark.parametrize("size", SIZES)
@pytest.mark.parametrize("fn", list(FN1D))
def test_1d_sizes_norms(fn, size, norm, precision, lib, rng):
    batch = (2,) if size > 10000 else (3,)
    kind = FN1D[fn][0]
    if fn in C2R:
        # size is the output length; the input holds size // 2 + 1 bins
        x = make(rng, batch + (size // 2 + 1,), kind, precision)
        kwargs = {"n": size, "norm": norm}
    else:
        x = make(rng, batch + (size,), kind, precision)
        kwargs = {"norm": norm}
    out = getattr(specux, fn)(to_lib(x, lib), **kwargs)
    check(out, fn, x, lib, kwargs)


@pytest.mark.parametrize("lib", LIBS)
@pytest.mark.parametrize("precision", [32, 64])
@pytest.mark.parametrize("fn", ["fft", "ifft"])
def test_real_input_to_complex_transforms(fn, precision, lib, rng):
    x = make(rng, (3, 97), "real", precision)
    out = getattr(specux, fn)(to_lib(x, lib))
    check(out, fn, x, lib, {})


@pytest.mark.parametrize("lib", LIBS)
@pytest.mark.parametrize("precision", [32, 64])
@pytest.mark.parametrize("fn", ["irfft", "hfft"])
def test_real_input_to_c2r(fn, precision, lib, rng):
    x = make(rng, (3, 9), "real", precision)
    out = getattr(specux, fn)(to_lib(x, lib), n=16)
    check(out, fn, x, lib, {"n": 16})


@pytest.mark.parametrize("lib", LIBS)
@pytest.mark.parametrize("fn", ["irfft", "hfft"])
@pytest.mark.parametrize("bins", [1, 2, 5, 9, 501])
def test_c2r_default_n(fn, bins, lib, rng):
    x = make(rng, (3, bins), "complex", 64)
    if bins == 1:  # 2 * (1 - 1) = 0 output samples: numpy raises too
        with pytest.raises(ValueError, match="n"):
            getattr(specux, fn)(to_lib(x, lib))
        return
    out = getattr(specux, fn)(to_lib(x, lib))
    assert out.shape[-1] == 2 * (bins - 1)
    check(out, fn, x, lib, {})


# ---------------------------------------------------------------------------------------------
# n: trim and zero-pad


@pytest.mark.parametrize("lib", LIBS)
@pytest.mark.parametrize("precision", [32, 64])
@pytest.mark.parametrize("n", [1, 5, 8, 17, 40, 1031])
@pytest.mark.parametrize("fn", list(FN1D))
def test_n_trims_and_pads(fn, n, precision, lib, rng):
    length = 17 if fn not in C2R else 9  # c2r: 9 bins (default n 16)
    x = make(rng, (2, length), FN1D[fn][0], precision)
    out = getattr(specux, fn)(to_lib(x, lib), n=n, norm="ortho")
    check(out, fn, x, lib, {"n": n, "norm": "ortho"})


def test_n_accepts_numpy_integer(rng):
    x = make(rng, (2, 17), "real", 64)
    check(specux.rfft(x, n=np.int64(20)), "rfft", x, "numpy", {"n": 20})


# ---------------------------------------------------------------------------------------------
# batch shapes, axes and the dim / axis alias


@pytest.mark.parametrize("lib", LIBS)
@pytest.mark.parametrize("alias", ["dim", "axis"])
@pytest.mark.parametrize("where", ["last", "first"])
@pytest.mark.parametrize("batch", [(), (3,), (2, 3)], ids=str)
@pytest.mark.parametrize("fn", list(FN1D))
def test_batch_and_axis(fn, batch, where, alias, lib, rng):
    length = 12 if fn not in C2R else 7
    if where == "last":
        shape, axis = batch + (length,), -1
    else:
        shape, axis = (length,) + batch, 0
    x = make(rng, shape, FN1D[fn][0], 64)
    out = getattr(specux, fn)(to_lib(x, lib), **{alias: axis})
    check(out, fn, x, lib, {"axis": axis})


@pytest.mark.parametrize("fn", list(FN1D))
def test_dim_and_axis_both_given(fn, rng):
    """dim's documented default is -1, so axis= alone picks the axis; a dim and an axis that
    disagree raise, ones that agree are the same request."""
    x = make(rng, (3, 8), FN1D[fn][0], 64)
    with pytest.raises(ValueError, match="axis"):
        getattr(specux, fn)(x, dim=1, axis=0)
    same = getattr(specux, fn)(x, dim=0, axis=0)
    assert np.array_equal(same, getattr(specux, fn)(x, dim=0))


def test_fft_signatures_have_the_documented_dim_defaults():
    """API.md: dim=-1 for the 1-D transforms, (-2, -1) for the 2-D ones, None for N-D."""
    for name in FN1D:
        assert inspect.signature(getattr(specux, name)).parameters["dim"].default == -1
    for name in ("fft2", "ifft2", "rfft2", "irfft2"):
        assert inspect.signature(getattr(specux, name)).parameters["dim"].default == (-2, -1)
    for name in ("fftn", "ifftn", "rfftn", "irfftn"):
        assert inspect.signature(getattr(specux, name)).parameters["dim"].default is None


def test_2d_axes_alias_with_the_default_dim(rng):
    x = rng.standard_normal((3, 4, 5))
    assert rel_l2(specux.fft2(x, axes=(0, 2)), np.fft.fft2(x, axes=(0, 2))) <= TOLERANCES["float64"]
    with pytest.raises(ValueError, match="axes"):
        specux.fft2(x, dim=(0, 1), axes=(0, 2))


@pytest.mark.parametrize("fn", list(FN1D))
@pytest.mark.parametrize("axis", [2, -3])
def test_axis_out_of_range(fn, axis, rng):
    x = make(rng, (3, 8), FN1D[fn][0], 64)
    with pytest.raises(ValueError, match="dim"):
        getattr(specux, fn)(x, axis=axis)


# ---------------------------------------------------------------------------------------------
# layouts: non-contiguous, transposed, negative stride, offset views


def _views(rng, kind, length, lib):
    base = make(rng, (5, 2 * length), kind, 64)
    views = {
        "stride2": lambda b: b[:, ::2],
        "offset": lambda b: b[1:, :length],
    }
    tbase = make(rng, (length, 4), kind, 64)
    out = []
    for name, f in views.items():
        arr = f(base)
        src = f(torch.from_numpy(base)) if lib == "torch" else arr
        out.append((name, arr, src))
    arr = tbase.T
    out.append(("transposed", arr, torch.from_numpy(tbase).T if lib == "torch" else arr))
    if lib == "numpy":
        arr = base[..., ::-1]
        out.append(("negstride", arr, arr))
        arr = base[::-1, ::-2]
        out.append(("negstride2", arr, arr))
    return out


@pytest.mark.parametrize("lib", LIBS)
@pytest.mark.parametrize("fn", list(FN1D))
def test_noncontiguous_inputs(fn, lib, rng):
    length = 16 if fn not in C2R else 9
    for name, arr, src in _views(rng, FN1D[fn][0], length, lib):
        if lib == "torch":
            assert not src.is_contiguous(), name
        else:
            assert not (arr.flags.c_contiguous and arr.ctypes.data == arr.base.ctypes.data), name
        before = to_np(src).copy()
        out = getattr(specux, fn)(src)
        check(out, fn, np.array(arr), lib, {})
        np.testing.assert_array_equal(to_np(src), before)  # input untouched


@pytest.mark.parametrize("lib", LIBS)
@pytest.mark.parametrize("fn", list(FNND) + list(FN2D))
def test_noncontiguous_inputs_nd(fn, lib, rng):
    kind = ALL_FNS[fn][0]
    base = make(rng, (6, 4, 10), kind, 64)
    arr = base[::2, :, ::2].transpose(2, 0, 1)  # (5, 3, 4), strided and permuted
    src = torch.from_numpy(base)[::2, :, ::2].permute(2, 0, 1) if lib == "torch" else arr
    check(getattr(specux, fn)(src), fn, np.array(arr), lib, {})
    if lib == "numpy":
        neg = base[::-1, :, ::-3]
        check(getattr(specux, fn)(neg), fn, np.array(neg), lib, {})


# ---------------------------------------------------------------------------------------------
# n-D: s and dim / axes combinations


ND_CASES = [
    (None, None),
    ((5, 8), None),
    ((3, 9, 4), None),
    ((2,), None),
    (None, (0, 2)),
    (None, (2, 0)),
    ((7, 3), (2, 0)),
    ((3,), (1,)),
    (None, (-1,)),
    (None, (1, 0, 2)),
    ((6, 2, 9), (2, -3, 1)),
]


def _np_axes(x, s, dim):
    if dim is None and s is not None:
        return tuple(range(x.ndim - len(s), x.ndim))  # numpy's (deprecated) implicit axes
    return dim


@pytest.mark.parametrize("lib", LIBS)
@pytest.mark.parametrize("precision", [32, 64])
@pytest.mark.parametrize("alias", ["dim", "axes"])
@pytest.mark.parametrize("case", ND_CASES, ids=str)
@pytest.mark.parametrize("fn", list(FNND))
def test_nd_s_and_dim(fn, case, alias, precision, lib, rng):
    s, dim = case
    x = make(rng, (4, 5, 6), FNND[fn][0], precision)
    kwargs = {"s": s, "norm": "ortho"}
    if dim is not None:
        kwargs[alias] = dim
    out = getattr(specux, fn)(to_lib(x, lib), **kwargs)
    check(out, fn, x, lib, {"s": s, "axes": _np_axes(x, s, dim), "norm": "ortho"})


FN2D_CASES = [
    (None, None),
    ((5, 8), None),
    (None, (0, 2)),
    (None, (2, 0)),
    ((7, 3), (2, 0)),
    ((3, 11), (-3, -1)),
]


@pytest.mark.parametrize("lib", LIBS)
@pytest.mark.parametrize("precision", [32, 64])
@pytest.mark.parametrize("alias", ["dim", "axes"])
@pytest.mark.parametrize("case", FN2D_CASES, ids=str)
@pytest.mark.parametrize("fn", list(FN2D))
def test_2d_s_and_dim(fn, case, alias, precision, lib, rng):
    s, dim = case
    x = make(rng, (4, 5, 6), FN2D[fn][0], precision)
    kwargs = {"s": s}
    if dim is not None:
        kwargs[alias] = dim
    out = getattr(specux, fn)(to_lib(x, lib), **kwargs)
    check(out, fn, x, lib, {"s": s, "axes": dim if dim is not None else (-2, -1)})


@pytest.mark.parametrize("norm", NORMS)
@pytest.mark.parametrize("fn", list(FNND) + list(FN2D))
def test_nd_norms(fn, norm, rng):
    x = make(rng, (3, 6, 7), ALL_FNS[fn][0], 64)
    check(getattr(specux, fn)(x, norm=norm), fn, x, "numpy", {"norm": norm})


@pytest.mark.parametrize("lib", LIBS)
def test_irfftn_default_last_size(lib, rng):
    x = make(rng, (3, 4, 5), "complex", 64)
    out = specux.irfftn(to_lib(x, lib))
    assert tuple(out.shape) == (3, 4, 8)
    check(out, "irfftn", x, lib, {})
    out = specux.irfftn(to_lib(x, lib), dim=(2, 0))  # last listed axis (0) is the half axis
    assert tuple(out.shape) == (4, 4, 5)
    check(out, "irfftn", x, lib, {"axes": (2, 0)})
    out = specux.irfft2(to_lib(x, lib))
    assert tuple(out.shape) == (3, 4, 8)
    check(out, "irfft2", x, lib, {})
    out = specux.irfftn(to_lib(x, lib), axes=(0, 1))
    assert tuple(out.shape) == (3, 6, 5)
    check(out, "irfftn", x, lib, {"axes": (0, 1)})


@pytest.mark.parametrize("fn", list(FNND))
def test_nd_dim_and_axes_both_given(fn, rng):
    x = make(rng, (3, 8), FNND[fn][0], 64)
    with pytest.raises(ValueError, match="axes"):
        getattr(specux, fn)(x, dim=(0, 1), axes=(1,))  # agreeing ones are the same request


@pytest.mark.parametrize("fn", list(FN2D))
def test_2d_dim_and_axes_both_given(fn, rng):
    x = make(rng, (3, 8, 4), FN2D[fn][0], 64)
    with pytest.raises(ValueError, match="axes"):
        getattr(specux, fn)(x, dim=(0, 1), axes=(1, 2))


@pytest.mark.parametrize("fn", list(FNND) + list(FN2D))
def test_nd_bad_s_and_dim(fn, rng):
    x = make(rng, (3, 8, 4), ALL_FNS[fn][0], 64)
    f = getattr(specux, fn)
    with pytest.raises(ValueError, match="s="):
        f(x, s=(4, 4), dim=(0, 1, 2))  # lengths differ
    with pytest.raises(ValueError, match="dim"):
        f(x, dim=(0, 0))  # repeated axis
    with pytest.raises(ValueError, match="dim"):
        f(x, dim=(0, 3))  # out of range
    with pytest.raises(ValueError, match=r"s=0 is out of range: each entry must be >= 1, or -1"):
        f(x, s=(4, 0))
    with pytest.raises(specux.ParameterError, match="s"):
        f(x, s=(4, 8.0))
    if fn in FNND:
        with pytest.raises(ValueError, match="s="):
            f(x, s=(2, 2, 2, 2))  # more entries than dimensions


@pytest.mark.parametrize("lib", LIBS)
@pytest.mark.parametrize("fn", list(FNND) + list(FN2D))
def test_nd_s_entries_of_minus_one_and_array_arguments(fn, lib, rng):
    # an s entry of -1 keeps the axis's size (numpy and torch), or on a c2r transform's last
    # axis its default length 2 (m - 1) (torch; numpy would take m); s and dim may be arrays
    x = make(rng, (3, 8, 6), ALL_FNS[fn][0], 64)
    f, ref = getattr(specux, fn), getattr(np.fft, fn)
    kept = 2 * (x.shape[1] - 1) if fn in C2R else x.shape[1]
    got = to_np(f(to_lib(x, lib), s=(5, -1), dim=(2, 1)))
    assert rel_l2(got, ref(x, s=(5, kept), axes=(2, 1))) <= TOLERANCES["float64"]
    got = to_np(f(to_lib(x, lib), s=(-1, 5), dim=(2, 1)))
    assert rel_l2(got, ref(x, s=(x.shape[2], 5), axes=(2, 1))) <= TOLERANCES["float64"]
    got = to_np(f(to_lib(x, lib), s=np.array([4, 5]), dim=np.array([0, 2])))
    assert rel_l2(got, ref(x, s=(4, 5), axes=(0, 2))) <= TOLERANCES["float64"]
    if lib == "torch":  # 1-D tensors too (their entries, 0-d tensors, were refused)
        got = to_np(f(to_lib(x, lib), s=torch.tensor([4, 5]), dim=torch.tensor([0, 2])))
        assert rel_l2(got, ref(x, s=(4, 5), axes=(0, 2))) <= TOLERANCES["float64"]


@pytest.mark.parametrize("lib", LIBS)
def test_nd_transforms_of_no_axis(lib):
    # fftn / ifftn of a 0-d array or over dim=() are complex copies (torch.fft); the real
    # transforms need an axis and say so
    for fn in ("fftn", "ifftn"):
        scalar = torch.tensor(2.5, dtype=torch.float64) if lib == "torch" else np.array(2.5)
        got = getattr(specux, fn)(scalar)
        assert tuple(got.shape) == () and complex(to_np(got)) == 2.5
        x = to_lib(np.arange(6.0).reshape(2, 3), lib)
        got = getattr(specux, fn)(x, dim=())
        assert to_np(got).dtype == np.complex128 and np.array_equal(to_np(got), to_np(x))
    for fn in ("rfftn", "irfftn"):
        with pytest.raises(ValueError, match=f"{fn} must transform at least one axis"):
            getattr(specux, fn)(torch.tensor(2.5) if lib == "torch" else np.array(2.5))


@pytest.mark.parametrize("lib", LIBS)
@pytest.mark.parametrize("fn", ["irfftn", "irfft2"])
def test_c2r_nd_empty_axis_raises(fn, lib):
    # an empty transformed axis other than the last (numpy and torch raise; it returned zeros)
    with pytest.raises(ValueError, match="axis 0 is empty"):
        getattr(specux, fn)(to_lib(np.zeros((0, 5), np.complex128), lib))


def test_rfft2_of_complex_input_names_rfft2():
    with pytest.raises(TypeError, match="rfft2 takes a real input"):
        specux.rfft2(np.ones((2, 2), np.complex128))


# ---------------------------------------------------------------------------------------------
# float16 / bfloat16 storage


def _half_result_close(got, ref32):
    """A result stored in half precision, computed in float32, vs the float32 reference.

    float32_peak (relative to the peak) bounds the float32 computation; the rounding to the
    half storage format adds at most one float16 spacing per real / imaginary component."""
    got = np.asarray(got, np.complex128)
    ref = np.asarray(ref32, np.complex128)
    peak = np.max(np.abs(ref))
    excess = 0.0
    for g, r in ((got.real, ref.real), (got.imag, ref.imag)):
        spacing = np.spacing(np.maximum(np.abs(g), np.abs(r)).astype(np.float16)).astype(float)
        excess = max(excess, float(np.max(np.maximum(np.abs(g - r) - spacing, 0.0))))
    return excess / peak if peak else excess


HALF_FNS = ["fft", "ifft", "rfft", "ihfft", "irfft", "hfft", "fftn", "rfftn", "irfftn",
            "fft2", "ifft2", "rfft2", "irfft2"]  # fmt: skip


@pytest.mark.filterwarnings("ignore:ComplexHalf support is experimental")
@pytest.mark.parametrize("source", ["numpy-f16"] + (["torch-f16", "torch-c32"] if torch else []))
@pytest.mark.parametrize("fn", HALF_FNS)
def test_float16_storage(fn, source, rng):
    if source == "torch-c32":
        if ALL_FNS[fn][0] == "real":
            pytest.skip("complex input to a real-input transform")
        x32 = make(rng, (3, 4, 16), "complex", 32).astype(np.complex64)
        half = torch.from_numpy(x32).to(torch.complex32)
        data32 = half.to(torch.complex64).numpy()  # the half-valued data in float32
    else:
        x32 = make(rng, (3, 4, 16), "real", 32)
        h = x32.astype(np.float16)
        half = torch.from_numpy(h) if source == "torch-f16" else h
        data32 = h.astype(np.float32)
    out = getattr(specux, fn)(half)
    real_out = fn in C2R
    if source == "numpy-f16":
        assert isinstance(out, np.ndarray)
        want = "float16" if real_out else "complex64"
    else:
        assert (torch is not None and isinstance(out, torch.Tensor))
        want = "float16" if real_out else "complex32"
    assert dtype_name(out) == want
    ref32 = getattr(np.fft, fn)(data32)
    got = to_np(out)
    assert got.shape == ref32.shape
    if want == "complex64":
        assert rel_peak(got, ref32) <= TOLERANCES["float32_peak"]
    else:
        assert _half_result_close(got, ref32) <= TOLERANCES["float32_peak"]


def test_bfloat16_storage(rng):
    x = torch.from_numpy(make(rng, (3, 16), "real", 32)).to(torch.bfloat16)
    spec = specux.rfft(x)
    assert spec.dtype == torch.complex64
    ref = np.fft.rfft(x.float().numpy())
    assert rel_peak(spec.numpy(), ref) <= TOLERANCES["float32_peak"]
    back = specux.irfft(spec)
    assert back.dtype == torch.float32  # complex64 in -> float32 out
    assert specux.irfft(x).dtype == torch.bfloat16  # real bfloat16 in -> bfloat16 out


# ---------------------------------------------------------------------------------------------
# round trips (hypothesis)

batch_shapes = st.lists(st.integers(1, 3), max_size=2).map(tuple)


@given(
    batch=batch_shapes,
    n=st.integers(1, 300),
    norm=st.sampled_from(NORMS),
    seed=st.integers(0, 2**32 - 1),
    lib=st.sampled_from(LIBS),
)
def test_roundtrip_fft_ifft(batch, n, norm, seed, lib):
    x = make(np.random.default_rng(seed), batch + (n,), "complex", 64)
    back = specux.ifft(specux.fft(to_lib(x, lib), norm=norm), norm=norm)
    assert dtype_name(back) == "complex128"
    assert rel_l2(to_np(back), x) <= TOLERANCES["float64"]


@given(
    batch=batch_shapes,
    n=st.integers(1, 300),
    norm=st.sampled_from(NORMS),
    seed=st.integers(0, 2**32 - 1),
    lib=st.sampled_from(LIBS),
)
def test_roundtrip_rfft_irfft(batch, n, norm, seed, lib):
    x = make(np.random.default_rng(seed), batch + (n,), "real", 64)
    spec = specux.rfft(to_lib(x, lib), norm=norm)
    assert tuple(spec.shape) == batch + (n // 2 + 1,)
    back = specux.irfft(spec, n, norm=norm)
    assert dtype_name(back) == "float64"
    assert tuple(back.shape) == x.shape
    assert rel_l2(to_np(back), x) <= TOLERANCES["float64"]


@given(
    batch=batch_shapes,
    n=st.integers(1, 300),
    norm=st.sampled_from(NORMS),
    seed=st.integers(0, 2**32 - 1),
)
def test_roundtrip_ihfft_hfft(batch, n, norm, seed):
    x = make(np.random.default_rng(seed), batch + (n,), "real", 64)
    back = specux.hfft(specux.ihfft(x, norm=norm), n, norm=norm)
    assert rel_l2(back, x) <= TOLERANCES["float64"]


@given(
    shape=st.lists(st.integers(1, 9), min_size=1, max_size=3).map(tuple),
    norm=st.sampled_from(NORMS),
    seed=st.integers(0, 2**32 - 1),
)
def test_roundtrip_rfftn_irfftn(shape, norm, seed):
    x = make(np.random.default_rng(seed), shape, "real", 64)
    back = specux.irfftn(specux.rfftn(x, norm=norm), s=shape, norm=norm)
    assert rel_l2(back, x) <= TOLERANCES["float64"]


# ---------------------------------------------------------------------------------------------
# empty inputs and bad n


EMPTY_1D = {
    "fft": ((0, 8), (0, 8)),
    "ifft": ((0, 8), (0, 8)),
    "rfft": ((0, 8), (0, 5)),
    "ihfft": ((0, 8), (0, 5)),
    "irfft": ((0, 5), (0, 8)),
    "hfft": ((0, 5), (0, 8)),
    "fft2": ((0, 4, 8), (0, 4, 8)),
    "ifft2": ((0, 4, 8), (0, 4, 8)),
    "rfft2": ((0, 4, 8), (0, 4, 5)),
    "irfft2": ((0, 4, 5), (0, 4, 8)),
}


@pytest.mark.parametrize("lib", LIBS)
@pytest.mark.parametrize("fn", list(EMPTY_1D))
def test_empty_leading_axes(fn, lib):
    shape, want = EMPTY_1D[fn]
    dtype = np.complex128 if ALL_FNS[fn][0] == "complex" else np.float64
    out = getattr(specux, fn)(to_lib(np.zeros(shape, dtype), lib))
    assert tuple(out.shape) == want
    assert dtype_name(out) == expected_dtype(fn, np.dtype(dtype))
    assert isinstance(out, np.ndarray if lib == "numpy" else torch.Tensor)


@pytest.mark.parametrize("lib", LIBS)
@pytest.mark.parametrize("fn", list(FN1D))
def test_empty_leading_axes_with_n(fn, lib):
    dtype = np.complex128 if FN1D[fn][0] == "complex" else np.float64
    out = getattr(specux, fn)(to_lib(np.zeros((2, 0, 8), dtype), lib), n=6)
    want = {"rfft": 4, "ihfft": 4}.get(fn, 6)
    assert tuple(out.shape) == (2, 0, want)


@pytest.mark.parametrize("lib", LIBS)
@pytest.mark.parametrize("fn", list(ALL_FNS))
def test_empty_transform_axis(fn, lib):
    dtype = np.complex128 if ALL_FNS[fn][0] == "complex" else np.float64
    with pytest.raises(ValueError, match=r"is empty|n must be >= 1|output samples: pass s"):
        getattr(specux, fn)(to_lib(np.zeros((4, 0), dtype), lib))


@pytest.mark.parametrize("fn", list(FN1D))
def test_bad_n(fn, rng):
    x = make(rng, (3, 8), FN1D[fn][0], 64)
    f = getattr(specux, fn)
    for bad in (0, -3):
        with pytest.raises(ValueError, match="n"):
            f(x, n=bad)
    with pytest.raises(specux.ParameterError, match="n must be an integer") as info:
        f(x, n=8.0)
    assert isinstance(info.value, ValueError) and isinstance(info.value, TypeError)
    with pytest.raises((ValueError, TypeError), match="n"):
        f(x, n=True)
    with pytest.raises((ValueError, TypeError), match="n"):
        f(x, n="8")


def test_parameter_error_hierarchy():
    assert issubclass(specux.ParameterError, ValueError)
    assert issubclass(specux.ParameterError, TypeError)


@pytest.mark.parametrize("fn", list(ALL_FNS))
def test_bad_norm(fn, rng):
    x = make(rng, (3, 8), ALL_FNS[fn][0], 64)
    with pytest.raises(ValueError, match="norm"):
        getattr(specux, fn)(x, norm="bogus")
    with pytest.raises((ValueError, TypeError), match="norm"):
        getattr(specux, fn)(x, norm=1)


# ---------------------------------------------------------------------------------------------
# input types


BAD_DTYPES = [
    np.zeros((3, 8), np.int64),
    np.zeros((3, 8), np.int16),
    np.zeros((3, 8), bool),
    np.zeros((3, 8), object),
] + (
    [torch.zeros((3, 8), dtype=torch.int32), torch.zeros((3, 8), dtype=torch.bool)]
    if torch is not None
    else []
)


@pytest.mark.parametrize("bad", BAD_DTYPES, ids=lambda b: f"{type(b).__module__}-{b.dtype}")
@pytest.mark.parametrize("fn", list(ALL_FNS))
def test_unsupported_dtypes(fn, bad):
    with pytest.raises(TypeError, match="dtype"):
        getattr(specux, fn)(bad)


@pytest.mark.parametrize("bad", [[1.0, 2.0, 3.0, 4.0], (1.0, 2.0), 3.0, "abcd", None],
                         ids=lambda b: type(b).__name__)  # fmt: skip
@pytest.mark.parametrize("fn", list(ALL_FNS))
def test_not_an_array(fn, bad):
    with pytest.raises(TypeError, match="numpy.ndarray"):
        getattr(specux, fn)(bad)


@pytest.mark.parametrize("lib", LIBS)
@pytest.mark.parametrize("fn", ["rfft", "ihfft", "rfftn", "rfft2"])
def test_complex_input_to_real_transform(fn, lib, rng):
    x = make(rng, (3, 8), "complex", 64)
    with pytest.raises(TypeError, match="real"):
        getattr(specux, fn)(to_lib(x, lib))


# ---------------------------------------------------------------------------------------------
# backends


@pytest.mark.parametrize("lib", LIBS)
@pytest.mark.parametrize("fn", list(ALL_FNS))
def test_backend_cpu(fn, lib, rng):
    x = make(rng, (3, 6, 8), ALL_FNS[fn][0], 64)
    out = getattr(specux, fn)(to_lib(x, lib), backend="cpu")
    check(out, fn, x, lib, {})


@pytest.mark.parametrize("lib", LIBS)
@pytest.mark.parametrize("backend", ["cuda", "metal"])
@pytest.mark.parametrize("fn", ["fft", "rfft", "irfft", "fftn", "rfft2"])
def test_backend_unavailable(fn, backend, lib, rng):
    if routing.backend_unavailable_reason(backend) is None:
        pytest.skip(f"{backend} is available on this machine")
    x = make(rng, (3, 8, 8), ALL_FNS[fn][0], 64)
    with pytest.raises(specux.BackendUnavailableError) as info:
        getattr(specux, fn)(to_lib(x, lib), backend=backend)
    assert isinstance(info.value, RuntimeError)
    msg = str(info.value)
    assert f"backend={backend!r}" in msg
    if lib == "numpy":  # says why the backend is missing here
        assert routing.backend_unavailable_reason(backend) in msg
    else:  # a CPU tensor with a GPU backend: says it does not match and will not copy
        assert "does not match" in msg and "cpu" in msg


@pytest.mark.parametrize("backend", ["bogus", "CUDAX", "", "gpu"])
@pytest.mark.parametrize("fn", ["fft", "irfft", "fftn", "rfft2"])
def test_backend_unknown(fn, backend, rng):
    x = make(rng, (3, 8), ALL_FNS[fn][0], 64)
    with pytest.raises(ValueError, match="backend"):
        getattr(specux, fn)(x, backend=backend)
    with pytest.raises((ValueError, TypeError), match="backend"):
        getattr(specux, fn)(x, backend=None)


@pytest.mark.parametrize("lib", LIBS)
@pytest.mark.parametrize("fn", list(FN1D))
def test_empty_transform_axis_with_n_zero_pads(fn, lib):
    dtype = np.complex128 if FN1D[fn][0] == "complex" else np.float64
    x = np.zeros((4, 0), dtype)
    out = getattr(specux, fn)(to_lib(x, lib), n=8)
    check(out, fn, x, lib, {"n": 8})  # numpy zero-pads an empty axis when n is given


@pytest.mark.parametrize("fn", [fn for fn in ALL_FNS if fn not in ("fftn", "ifftn")])
def test_zero_dim_input(fn):
    # (fftn / ifftn of a 0-d array are complex copies: test_nd_transforms_of_no_axis)
    dtype = np.complex128 if ALL_FNS[fn][0] == "complex" else np.float64
    with pytest.raises(ValueError, match=r"0 dimension|at least one axis"):
        getattr(specux, fn)(np.ones((), dtype))


@pytest.mark.parametrize("lib", LIBS)
def test_an_axis_out_of_range_is_an_index_error_as_in_numpy_and_torch(lib, rng):
    # specux.AxisError is a ValueError (API.md's errors) and an IndexError (numpy.fft and
    # torch.fft raise one), so code written against either catches it
    x = to_lib(make(rng, (3, 8), "complex128", 64), lib)
    calls = [
        lambda: specux.fft(x, dim=2),
        lambda: specux.rfft(x.real, axis=-3),
        lambda: specux.fftn(x, dim=(0, 2)),
        lambda: specux.irfft2(x, axes=(-3, -1)),
        lambda: specux.fftconvolve(x.real, x.real, dim=2),
    ]
    for call in calls:
        for kind in (IndexError, ValueError, specux.AxisError):
            with pytest.raises(kind, match="out of range for an input with 2 dimensions"):
                call()
