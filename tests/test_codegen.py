"""FFT plans and generated kernels without a GPU: plan logic, butterfly constants, and the
kernels' numerics run through the host-emulation dialect (C++, one loop step per thread)."""

from __future__ import annotations

import math

import numpy as np
import pytest
from tolerances import TOLERANCES, float32_bound, rel_l2

from specux.kernels import emulate, plan, transform_exec, tuning
from specux.kernels.codegen.butterfly import unit_root
from specux.meta import filters

if emulate.compiler() is None:
    pytest.skip("no C++ compiler for the host emulation", allow_module_level=True)


def test_factorize_and_bluestein_length():
    assert plan.factorize(1) == ()
    assert plan.factorize(4096) == (8, 8, 8, 8)
    assert plan.factorize(1000) == (8, 5, 5, 5)
    assert plan.factorize(2 * 3 * 5 * 7 * 11 * 13) == (2, 3, 5, 7, 11, 13)
    assert plan.factorize(17) is None and plan.factorize(2 * 1031) is None
    for n in (17, 31, 97, 241, 1031, 65537, 1000003):
        m = plan.bluestein_length(n)
        assert m >= 2 * n - 1 and plan.factorize(m) is not None
        smooth = next(k for k in range(2 * n - 1, 4 * n)
                      if plan.factorize(k) is not None and k % 11 and k % 13)  # fmt: skip
        power = 1 << (2 * n - 2).bit_length()  # the next power of two when <= 1.1x smooth
        assert m == (power if power <= plan.BLUESTEIN_POW2_SLACK * smooth else smooth), n
    assert plan.bluestein_length(1000003) == 2**21  # 2000376 = 2^3 3^6 7^3 is 4.8% shorter
    assert plan.bluestein_length(241) == 512 and plan.bluestein_length(65537) == 131220
    assert plan.bluestein_length(1031) == 2100
    with pytest.raises(ValueError):
        plan.factorize(0)


def test_unit_roots_are_correctly_rounded():
    assert unit_root(1, 3) == (-0.5, 0.8660254037844386)
    assert unit_root(1, 4) == (0.0, 1.0) or unit_root(1, 4) == (-0.0, 1.0)
    assert unit_root(3, 8) == (-0.7071067811865476, 0.7071067811865476)
    mpmath = pytest.importorskip("mpmath")
    mpmath.mp.dps = 40
    for den in (5, 7, 11, 13, 97):
        for num in range(den):
            angle = 2 * mpmath.pi * num / den
            assert unit_root(num, den) == (float(mpmath.cos(angle)), float(mpmath.sin(angle)))


def test_twiddle_table_is_exactly_symmetric():
    """fft_exec._roots: W^(m + n/4) = -i W^m, W^(n/4 - m) = -i conj W^m, W^(n/2 - m) =
    -conj W^m and W^(n - m) = conj W^m bit for bit, in float64 and rounded to complex64
    (the kernels derive roots by these), and every root within 2e-16 of the true one."""
    from specux.kernels.fft_exec import _roots

    for n in (1, 2, 4, 8, 12, 18, 30, 400, 1000, 1024, 2048):
        for table in (_roots(n), _roots(n).astype(np.complex64)):
            m = np.arange(n)
            w = table[m]
            np.testing.assert_array_equal(table[(n - m) % n], np.conj(w))
            if n % 2 == 0:
                np.testing.assert_array_equal(table[(n // 2 - m) % n], -np.conj(w))
            if n % 4 == 0:  # -i w = (im, -re), -i conj w = (-im, -re)
                np.testing.assert_array_equal(table[(m + n // 4) % n].real, w.imag)
                np.testing.assert_array_equal(table[(m + n // 4) % n].imag, -w.real)
                np.testing.assert_array_equal(table[(n // 4 - m) % n].real, -w.imag)
                np.testing.assert_array_equal(table[(n // 4 - m) % n].imag, -w.real)
    mpmath = pytest.importorskip("mpmath")
    mpmath.mp.dps = 40
    for n in (12, 400, 1000, 1024):
        exact = np.array([complex(mpmath.expjpi(mpmath.mpf(-2 * m) / n)) for m in range(n)])
        assert np.abs(_roots(n) - exact).max() <= TOLERANCES["unit_root64"], n


def test_four_step_twist_table():
    """fft_exec._twist_table(total, step): exp(-2 pi i step q / total) for q < total / step,
    each within 2e-16 of the true root (the twist kernel multiplies it onto each thread's
    W^(c j0) in float64: codegen.block._twist_rows)."""
    from specux.kernels.fft_exec import _twist_table

    mpmath = pytest.importorskip("mpmath")
    mpmath.mp.dps = 40
    for total, step in [(4096 * 4096, 256), (1372 * 1458, 98), (12000, 12), (96, 1)]:
        table = _twist_table(total, step)
        assert table.shape == (total // step,)
        q = np.unique(np.linspace(0, total // step - 1, 300).astype(np.int64))
        exact = np.array([complex(mpmath.expjpi(mpmath.mpf(-2 * step * int(k)) / total))
                          for k in q])  # fmt: skip
        assert np.abs(table[q] - exact).max() <= TOLERANCES["unit_root64"], (total, step)


SIZES = list(range(1, 33)) + [48, 60, 64, 97, 100, 128, 210, 243, 256, 343, 1000, 1031, 2310]


def _complex(rng, shape, dtype=np.complex128):
    return (rng.standard_normal(shape) + 1j * rng.standard_normal(shape)).astype(dtype)


@pytest.mark.parametrize("blocks", [True, False], ids=["blocks", "passes"])
@pytest.mark.parametrize("n", SIZES)
def test_emulated_c2c_r2c_c2r_float64(n, blocks, rng):
    x = _complex(rng, (3, n))
    got = emulate.fft_1d(x, "c2c", n, blocks=blocks)
    assert rel_l2(got, np.fft.fft(x)) <= TOLERANCES["float64"]
    inverse = emulate.fft_1d(x, "c2c", n, sign=1, scale=1.0 / n, blocks=blocks)
    assert rel_l2(inverse, np.fft.ifft(x)) <= TOLERANCES["float64"]
    real = rng.standard_normal((2, n))
    got = emulate.fft_1d(real, "r2c", n, blocks=blocks)
    assert rel_l2(got, np.fft.rfft(real)) <= TOLERANCES["float64"]
    got = emulate.fft_1d(real, "r2c", n, sign=1, blocks=blocks)  # the roots' conjugates
    assert rel_l2(got, np.conj(np.fft.rfft(real))) <= TOLERANCES["float64"]
    half = np.fft.rfft(real)
    back = emulate.fft_1d(half, "c2r", n, sign=1, scale=1.0 / n, blocks=blocks)
    assert rel_l2(back, np.fft.irfft(half, n)) <= TOLERANCES["float64"]


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_paired_real_loads_equal_the_scalar_loads(dtype, rng):
    """The packed r2c kernel reads sample pairs by vector loads from rows aligned for them
    (codegen.block._paired); the same rows one element off that alignment take the scalar
    loads: bit-identical results."""
    x = rng.standard_normal((3, 40)).astype(dtype)
    buffer = np.zeros(x.size + 1, dtype=dtype)
    shifted = buffer[1:].reshape(x.shape)
    shifted[:] = x
    assert x.ctypes.data % (2 * x.itemsize) == 0 and shifted.ctypes.data % (2 * x.itemsize)
    aligned = emulate.fft_1d(x, "r2c", 40)
    np.testing.assert_array_equal(aligned, emulate.fft_1d(shifted, "r2c", 40))
    ref = np.fft.rfft(x.astype(np.float64))
    if dtype == np.float64:
        assert rel_l2(aligned, ref) <= TOLERANCES["float64"]
    else:
        assert rel_l2(aligned, ref) <= float32_bound(rel_l2(np.fft.rfft(x), ref))


def _without_register_untangle(monkeypatch):
    """Render r2c kernels with the untangling through shared memory (the exchange path;
    a filterbank's values then in an area after the slots: plan.REDUCE_IN_SLOT needs the
    register path)."""
    from specux.kernels.codegen import block
    from specux.kernels.codegen.dialects import CPP

    spec = plan.block(512, -1, "float32", plan.LoadSpec(mode="real"),
                      plan.StoreSpec(mode="half"), pack="r2c")  # fmt: skip
    assert "untangled in registers" in block.render_block(spec, CPP)
    monkeypatch.setattr(block, "untangle_slots", lambda spec: 0)
    monkeypatch.setattr(plan, "REDUCE_IN_SLOT", False)
    assert "untangled in registers" not in block.render_block(spec, CPP)
    _forget_kernels()  # the programs planned with the values in the slots


def test_r2c_last_stages_untangle_in_registers():
    """Which packed real transforms untangle in their last stage's registers: those whose
    last stage has a butterfly pair for every thread (codegen.block.untangle_slots)."""
    from specux.kernels.codegen.block import untangle_slots

    def slots(n):  # n: the complex length of the packed transform
        spec = plan.block(n, -1, "float32", plan.LoadSpec(mode="real"),
                          plan.StoreSpec(mode="half"), pack="r2c")  # fmt: skip
        return untangle_slots(spec), spec.threads

    assert slots(512) == (128, 32)  # (16, 16, 2): 256 butterflies, pairs (k, 256 - k)
    assert slots(500) == (50, 50)  # (10, 10, 5)
    assert slots(1) == (1, 1) and slots(15) == (1, 1)  # one stage: butterfly 0 alone
    assert slots(256)[0] == 0 and slots(1000)[0] == 0  # (16, 16), (10, 10, 10): exchange
    c2c = plan.block(512, -1, "float32", plan.LoadSpec(), plan.StoreSpec())
    assert untangle_slots(c2c) == 0


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_register_untangle_gives_the_exchange_paths_bits(dtype, rng, monkeypatch):
    """The r2c kernels that untangle in the last stage's registers compute every bin from
    the same two values by the same arithmetic as the exchange through shared memory: the
    same bits, for plain rows (real lengths: one stage, odd and even last-stage counts,
    last stages of radix 2, 3 and 5) and for the fused filterbank stft (frames, window, dB;
    a radix-4 last stage). The register path turns one read root into the others
    (codegen.block._derived_root) where the exchange path reads each from the table: the
    same bits too, by the table's symmetry (test_twiddle_table_is_exactly_symmetric)."""
    lengths = [2, 10, 30, 40, 64, 90, 400, 1000, 1024]
    rows = {n: rng.standard_normal((3, n)).astype(dtype) for n in lengths}
    x = rng.standard_normal((2, 700)).astype(dtype)
    precision = np.dtype(dtype).name
    mel = filters.mel(sr=8000, n_fft=128, n_mels=12)
    sparse = filters.sparse_bank(mel)
    bands, weights = transform_exec.bank_tables(sparse.starts, sparse.stops,
                                                sparse.weights.astype(dtype))  # fmt: skip
    window = np.hanning(129)[:-1].astype(dtype)

    def run():
        out = {n: emulate.fft_1d(rows[n], "r2c", n) for n in lengths}
        spec = np.zeros((2, 1 + 700 // 32, 12), dtype=dtype)
        transform_exec.stft(emulate.HostBackend(), x, spec, window, signals=2, sig_len=700,
                            n_fft=128, hop=32, pad=64, mode="reflect", onesided=True,
                            value="power", eps=1e-10, scale=1.0, precision=precision,
                            src_storage=precision, dst_storage=precision,
                            bank=transform_exec.BankReduce(12, 2.0, 10.0), bands=bands,
                            weights=weights)  # fmt: skip
        return out, spec

    registers, bank_registers = run()
    _without_register_untangle(monkeypatch)
    try:
        exchange, bank_exchange = run()
    finally:
        monkeypatch.undo()
        _forget_kernels()
    for n in lengths:
        np.testing.assert_array_equal(registers[n], exchange[n], err_msg=str(n))
        ref = np.fft.rfft(rows[n].astype(np.float64))
        bound = (TOLERANCES["float64"] if dtype == np.float64
                 else float32_bound(rel_l2(np.fft.rfft(rows[n]), ref)))  # fmt: skip
        assert rel_l2(registers[n], ref) <= bound, n
    np.testing.assert_array_equal(bank_registers, bank_exchange)
    assert np.isfinite(bank_registers).all() and bank_registers.std() > 1.0


@pytest.mark.parametrize("n", [5000, 8192, 4097, 3701])
def test_emulated_four_step_float64(n, rng):
    """Beyond one block (float64 holds 4096 points): two block kernels with staged columns
    and the four-step twiddle; 4097 is Bluestein over a four-step length, 3701 over a power
    of two (8192; the smallest smooth length is 7500)."""
    x = _complex(rng, (2, n))
    assert rel_l2(emulate.fft_1d(x, "c2c", n), np.fft.fft(x)) <= TOLERANCES["float64"]
    real = rng.standard_normal((2, n))
    assert rel_l2(emulate.fft_1d(real, "r2c", n), np.fft.rfft(real)) <= TOLERANCES["float64"]
    half = np.fft.rfft(real)
    back = emulate.fft_1d(half, "c2r", n, sign=1, scale=1.0 / n)
    assert rel_l2(back, np.fft.irfft(half, n)) <= TOLERANCES["float64"]


def _forget_kernels():
    """Drop the planned programs and built kernels (after a switch of the generator or the
    planner)."""
    tuning._clear_plans()
    emulate.entry.cache_clear()
    emulate._entry_for_key.cache_clear()


@pytest.mark.parametrize("interleave", [True, False])
@pytest.mark.parametrize("n", [5000, 8192])  # float64: 50 x 100 and 64 x 128
def test_emulated_four_step_twiddles_read_ahead_give_the_same_bits(n, interleave, rng,
                                                                   monkeypatch):  # fmt: skip
    """The twist kernel's stores read their twiddles in rounds of block.TWIST_READS before
    storing or one by one as each store needs it (0): the same bits, float32 and float64.
    Staged (plan.INTERLEAVE_COLUMNS off): 10 stores a thread in rounds of 4 + 4 + 2, 16 in
    four of 4; interleaved: rounds of a last-stage butterfly's stores, its 5 (50-point
    columns, two butterflies a thread: 4 + 1) or its 4 (64-point columns, four: 2 + 2,
    half of a butterfly that one round would hold whole)."""
    from specux.kernels.codegen import block

    assert block.TWIST_READS == 4
    monkeypatch.setattr(plan, "INTERLEAVE_COLUMNS", interleave)
    x = _complex(rng, (2, n))
    got = {}
    for reads in (block.TWIST_READS, 0):
        monkeypatch.setattr(block, "TWIST_READS", reads)
        _forget_kernels()
        got[reads] = [emulate.fft_1d(x.astype(dtype), "c2c", n)
                      for dtype in (np.complex64, np.complex128)]  # fmt: skip
    _forget_kernels()
    for a, b in zip(got[4], got[0]):
        np.testing.assert_array_equal(a, b)
    assert rel_l2(got[4][1], np.fft.fft(x)) <= TOLERANCES["float64"]


@pytest.mark.parametrize("case", ["four_step", "bluestein", "strided"])
def test_emulated_staged_walks_give_the_same_bits(case, monkeypatch):
    """The staged transfers walk their elements' offsets (plan.loads_walk / stores_walk) or
    compute each anew from its index: the same bits, float32 and float64 -- a four-step's
    twist and row passes (5000 = 50 x 100 in float64; one block in float32), Bluestein's
    inverse of 4099 with its chirp table, scale and valid count in the staged store, and
    one block along a leading axis (staged loads and stores of 3 interleaved 256-point
    columns). Bluestein's passes load with the valid count and chirp table and store with
    both and the scale."""
    from specux.kernels.codegen import block
    from specux.kernels.fft_exec import Strides, transform_1d

    def run(dtype):
        rng = np.random.default_rng(7)  # the same data in both forms
        if case == "strided":
            x = _complex(rng, (256, 3)).astype(dtype)
            out = np.zeros_like(x)
            precision = "float32" if dtype == np.complex64 else "float64"
            along = Strides.along((256, 3), 0)
            transform_1d(emulate.HostBackend(), x, out, n=256, kind="c2c", sign=-1,
                         scale=1.0, precision=precision, batch=3, src_storage=precision,
                         dst_storage=precision, src_strides=along, dst_strides=along,
                         use_blocks=True)  # fmt: skip
            return out, np.fft.fft(x.astype(np.complex128), axis=0)
        n, sign = (5000, -1) if case == "four_step" else (4099, 1)
        x = _complex(rng, (2, n)).astype(dtype)
        scale = 1.0 if sign < 0 else 1.0 / n
        ref = np.fft.fft(x) if sign < 0 else np.fft.ifft(x.astype(np.complex128))
        return emulate.fft_1d(x, "c2c", n, sign=sign, scale=scale), ref

    assert plan.loads_walk(plan.block(64, -1, "float32", plan.LoadSpec(), plan.StoreSpec(),
                                      load_staged=True).load)  # fmt: skip
    monkeypatch.setattr(plan, "INTERLEAVE_COLUMNS", False)  # (interleaved kernels walk)
    got = {}
    for walk in (True, False):
        if not walk:  # the generator's view only (block imports them)
            monkeypatch.setattr(block, "loads_walk", lambda load: False)
            monkeypatch.setattr(block, "stores_walk", lambda store: False)
        _forget_kernels()
        got[walk] = [run(dtype) for dtype in (np.complex64, np.complex128)]
    _forget_kernels()
    for (a, _), (b, _) in zip(got[True], got[False]):
        np.testing.assert_array_equal(a, b)
    out, ref = got[True][1]
    assert rel_l2(out, ref) <= TOLERANCES["float64"]


@pytest.mark.parametrize("n, sign, three", [(10000, -1, False), (4099, 1, False),
                                             (2**16, -1, False), (12288, 1, True)])
def test_emulated_interleaved_columns_give_the_same_bits(n, sign, three, monkeypatch):
    """The four-step passes as interleaved block kernels (plan.INTERLEAVE_COLUMNS: the
    block's transforms alternate in the lanes and in shared memory, loaded and stored with
    no staged transfers) or with staged transfers: the same bits, float32 and float64 --
    100 x 100, Bluestein's inverse of 4099 over 84 x 98 (84 = 14 x 6 stays staged: its last
    stage's 14 butterflies are no multiple of its 6 threads), 256 x 256, and three passes
    of 12288 (16 x 24 x 32) with a scale."""
    from specux.kernels import fft_exec

    if three:
        monkeypatch.setattr(plan, "THREE_PASS_ROW_BYTES", 2**30)
    x = _complex(np.random.default_rng(3), (2, n))
    scale = 1.0 if sign < 0 else 1.0 / n
    recorder = _Recorder()
    fft_exec.transform_1d(recorder, None, None, n=n, kind="c2c", sign=sign, scale=scale,
                          precision="float32", batch=2, src_storage="float32",
                          dst_storage="float32", src_strides=fft_exec.Strides(1, n, 0, 1),
                          dst_strides=fft_exec.Strides(1, n, 0, 1))  # fmt: skip
    kinds = {(spec.interleave, spec.twist) for spec in recorder.specs if spec.split}
    assert (True, False) in kinds  # the rows' pass
    assert ((True, True) in kinds) == (n != 4099)  # the columns' (4099: 84 staged)
    got = {}
    for interleave in (True, False):
        monkeypatch.setattr(plan, "INTERLEAVE_COLUMNS", interleave)
        _forget_kernels()
        got[interleave] = [emulate.fft_1d(x.astype(dtype), "c2c", n, sign=sign, scale=scale)
                           for dtype in (np.complex64, np.complex128)]  # fmt: skip
    _forget_kernels()
    for a, b in zip(got[True], got[False]):
        np.testing.assert_array_equal(a, b)
    ref = np.fft.fft(x) if sign < 0 else np.fft.ifft(x)
    assert rel_l2(got[True][1], ref) <= TOLERANCES["float64"]


def test_interleaved_column_kernels():
    """Which four-step passes interleave (plan.interleaves) and the shape they take: the
    staged kernels' transforms a block, no pad slots, one thread a first-stage butterfly."""
    load, store = plan.LoadSpec(), plan.StoreSpec()
    assert plan.interleaves(4096, "float32", load, store)  # 16 x 16 x 16
    assert plan.interleaves(1024, "float32", load, store)  # last stage 256 = 4 x 64 threads
    assert not plan.interleaves(84, "float32", load, store)  # 14 butterflies, 6 threads
    assert not plan.interleaves(4096, "float32", plan.LoadSpec(mode="hermitian"), store)
    assert not plan.interleaves(4096, "float32", load, plan.StoreSpec(value="power"))
    spec = plan.column_block(4096, -1, "float32", load, store, twist=True)
    staged = plan.block(4096, -1, "float32", load, store, load_staged=True, store_staged=True,
                        split=True, twist=True)  # fmt: skip
    assert spec.interleave and not (spec.load_staged or spec.store_staged)
    assert (spec.threads, spec.per_block) == (staged.threads, staged.per_block) == (256, 4)
    assert spec.slot_extra == 0 and spec.shared_bytes == 4 * plan.skewed(4096, "float32") * 8
    rows = plan.column_block(84, 1, "float32", load, store, twist=False)
    assert not rows.interleave and rows.store_staged
    with pytest.raises(ValueError, match="interleaved"):
        plan.block(84, -1, "float32", load, store, split=True, interleave=True)


@pytest.mark.parametrize("n, rounds", [(4096, [4, 4, 4, 4]), (1024, [2, 2]),
                                       (2048, [4, 4])])  # fmt: skip
def test_interleaved_twist_stores_read_in_rounds(n, rounds):
    """A twist kernel's last-stage butterfly (radix 16, 4, 8) reads its twiddles in rounds
    of TWIST_READS before their stores, or of half the butterfly where one round would
    hold it whole (radix 4)."""
    from specux.kernels.codegen import block
    from specux.kernels.codegen.dialects import CUDA
    from specux.kernels.codegen.kernels import render

    spec = plan.column_block(n, -1, "float32", plan.LoadSpec(), plan.StoreSpec(), twist=True)
    assert spec.interleave and spec.radices[-1] == sum(rounds) and block.TWIST_READS == 4
    text = render(spec, CUDA)[0]
    first = text.index("= twisted(")  # the first butterfly's stores
    found, reads = [], 0
    for line in text[first:].splitlines():
        if "= twisted(" in line:
            reads += 1
        elif "store_at(" in line and reads:
            found.append(reads)
            reads = 0
        if len(found) == len(rounds):
            break
    assert found == rounds


def test_three_step_split():
    """Three column passes: balanced lengths, the largest last; none without such a split."""
    assert plan.three_step_split(2**24, "float32") == (256, 256, 256)
    assert plan.three_step_split(2**25, "float32") == (256, 256, 512)
    assert plan.three_step_split(2**27, "float32") == (512, 512, 512)
    assert plan.three_step_split(12_000_000, "float64") == (200, 240, 250)
    assert plan.three_step_split(3 * 1000003, "float32") is None  # a large prime factor
    # two passes while the first stages whole 32-byte sectors of its columns (H200 timings:
    # plan.THREE_PASS_ROW_BYTES); float64 holds 4096 points a block, float32 8192
    assert plan.column_split(2**24, "float32") == (4096, 4096)  # 4 columns a block
    assert plan.column_split(2**25, "float32") == (256, 256, 512)  # 4096 x 8192: 2 columns
    assert plan.column_split(2**27, "float32") == (512, 512, 512)  # no two-way split
    assert plan.column_split(2**24, "float64") == (4096, 4096)  # 2 columns of 16 bytes
    assert plan.column_split(2**25, "float64") == (256, 256, 512)
    assert plan.column_split(12000, "float32") == (100, 120)
    assert plan.column_split(4099 * 4099, "float32") is None
    for n in (2**23, 2**24, 2**27, 5**9, 3 * 2**23):
        n1, n2, n3 = plan.three_step_split(n, "float32")
        assert n1 * n2 * n3 == n and n1 <= n2 <= n3 and plan.block_fits(n3, "float32")


@pytest.mark.parametrize("n, sign", [(12288, -1), (20000, 1), (4099, -1)])
def test_emulated_three_pass_float64(n, sign, monkeypatch, rng):
    """Three column passes (lowered to these lengths: 16 x 24 x 32, 25 x 25 x 32, and
    Bluestein's forward transform of 4099 over 14 x 21 x 28 points, its inverse with the chirp
    store in two), against numpy in float64, forward and inverse with a scale."""
    monkeypatch.setattr(plan, "THREE_PASS_ROW_BYTES", 2**30)
    x = _complex(rng, (2, n))
    ref = np.fft.fft(x) if sign < 0 else np.fft.ifft(x)
    scale = 1.0 if sign < 0 else 1.0 / n
    got = emulate.fft_1d(x, "c2c", n, sign=sign, scale=scale)
    assert rel_l2(got, ref) <= TOLERANCES["float64"]


def test_emulated_three_pass_strided_float32(monkeypatch, rng):
    """Three passes from a strided input (a leading axis) into every other element of
    contiguous rows, in float32, within 3x numpy's float32 error."""
    from specux.kernels.fft_exec import Strides, transform_1d

    monkeypatch.setattr(plan, "THREE_PASS_ROW_BYTES", 2**30)
    n = 12000  # 20 x 24 x 25
    x = _complex(rng, (n, 3)).astype(np.complex64)
    out = np.zeros((3, 2 * n), dtype=np.complex64)
    transform_1d(emulate.HostBackend(), x, out, n=n, kind="c2c", sign=-1, scale=1.0,
                 precision="float32", batch=3, src_storage="float32", dst_storage="float32",
                 src_strides=Strides.along((n, 3), 0), dst_strides=Strides(1, 2 * n, 0, 2),
                 use_blocks=True)  # fmt: skip
    ref = np.fft.fft(x.astype(np.complex128), axis=0).T
    numpy32 = rel_l2(np.fft.fft(x, axis=0).T, ref)
    assert rel_l2(out[:, ::2], ref) <= float32_bound(numpy32)
    assert not out[:, 1::2].any()


def test_block_plans():
    """Stage radices, threads and packing the planner picks (what the kernels are built on)."""
    assert plan.stage_radices(1024) == (16, 16, 4)
    assert plan.stage_radices(1000) == (10, 10, 10)
    assert plan.stage_radices(17) is None
    spec = plan.block(1024, -1, "float32", plan.LoadSpec(), plan.StoreSpec())
    assert (spec.threads, spec.per_block) == (64, 4)
    assert spec.shared_bytes == 4 * plan.skewed(1024, "float32") * 8
    assert plan.block_fits(8192, "float32") and not plan.block_fits(8192, "float64")
    assert plan.four_step_split(2**24, "float32") == (4096, 4096)
    # staged columns read whole 32-byte sectors per row: 4 complex64 transforms a block
    staged = plan.block(4096, -1, "float32", plan.LoadSpec(), plan.StoreSpec(), load_staged=True)
    assert (staged.threads, staged.per_block, staged.block_threads) == (256, 4, 1024)
    assert staged.shared_bytes <= 150 * 1024
    assert plan.four_step_split(2**27, "float32") is None  # three factors: passes
    # 7203 = 3 7^4: one thread per radix-7 butterfly would be 1029 > 1024 threads
    assert plan.block(7203, -1, "float32", plan.LoadSpec(), plan.StoreSpec()).threads == 343


def test_even_radices():
    """The inverse real and adjoint kernels' radices: as many stages as greedy packing, the
    smallest widest radix (then the most even), largest first; the forward kernels keep the
    greedy ones."""
    assert plan.even_radices(512) == (8, 8, 8)  # greedy: 16, 16, 2
    assert plan.even_radices(1024) == (16, 16, 4)  # no narrower widest radix in 3 stages
    assert plan.even_radices(360) == (9, 8, 5)  # greedy: 15, 12, 2
    assert plan.even_radices(16) == (16,) and plan.even_radices(17) is None
    for n in range(2, 8193):
        greedy, even = plan.stage_radices(n), plan.even_radices(n)
        if greedy is None:
            assert even is None
            continue
        assert math.prod(even) == n and len(even) == len(greedy), n
        assert even == tuple(sorted(even, reverse=True)) and even[0] <= greedy[0], n
        assert even[-1] > 1
    load, store = plan.LoadSpec(), plan.StoreSpec()
    assert plan.block(512, 1, "float32", load, store, pack="c2r").radices == (8, 8, 8)
    assert plan.block(512, -1, "float32", load, store, pack="r2c").radices == (16, 16, 2)
    assert plan.block(512, -1, "float32", load, store).radices == (16, 16, 2)
    for value in ("adjoint", "cotangent"):
        spec = plan.block(512, -1, "float32", load, plan.StoreSpec(value=value), pack="r2c")
        assert spec.radices == (8, 8, 8)


def test_shared_layout_model_and_choice():
    """plan.shared_layout: power-of-two lengths keep the default layout (no bank conflicts in
    the model); others take the layout with the fewest modeled wavefronts, never padding
    more than the default; the model's counts for the 500-point real-FFT kernel (the
    1000-point rfft) are the ones the docstring quotes."""
    real, half = plan.LoadSpec(mode="real"), plan.StoreSpec(mode="half")
    for n in (64, 256, 512, 1024, 4096):
        spec = plan.block(n, -1, "float32", plan.LoadSpec(), plan.StoreSpec())
        accesses = plan._exchange_accesses(n, spec.radices, spec.threads, spec.per_block)
        ideal = len(np.unique(accesses[2])) * 2  # 32 lanes x 8 bytes: two wavefronts
        assert plan._wavefronts(accesses, n, "float32", 4, 0) == ideal, n
        assert (spec.shift, spec.slot_extra) == (4, 0)
    spec = plan.block(500, -1, "float32", real, half, pack="r2c")
    accesses = plan._exchange_accesses(500, spec.radices, spec.threads, spec.per_block)
    assert (spec.radices, spec.threads, spec.per_block) == ((10, 10, 5), 50, 5)
    assert plan._wavefronts(accesses, 500, "float32", 4, 0) == 1399
    assert (spec.shift, spec.slot_extra) == (6, 6)
    assert plan._wavefronts(accesses, 500, "float32", 6, 6) == 876
    assert spec.slot_size == 500 + 8 + 6 and spec.slot_size <= plan.skewed(500, "float32")
    assert spec.shared_bytes == 5 * spec.slot_size * 8
    for n in (21, 100, 200, 360, 1000, 1155, 2310):  # never more padding than the default
        for precision in ("float32", "float64"):
            spec = plan.block(n, -1, precision, plan.LoadSpec(), plan.StoreSpec())
            assert spec.shift >= plan.SKEW[precision]
            assert 0 <= spec.slot_extra < 32 // (plan._COMPLEX_BYTES[precision] // 4)


def test_staged_layout_spreads_the_transfers_over_the_banks():
    """plan.staged_layout: the staged transfers move point j of 8 consecutive slots in a
    warp's lanes; with the istft kernel's 544-point slots (a multiple of 32 banks) they take
    4x the wavefronts of a conflict-free access, with 2 pad slots after each transform none
    more (the stage exchanges, a slot per warp, unchanged); other lengths take the extra
    with the fewest modeled wavefronts of transfers and exchanges together."""
    load, store = plan.LoadSpec(mode="hermitian"), plan.StoreSpec(ola_hop=256)
    spec = plan.block(512, 1, "float32", load, store, load_staged=True, pack="c2r")
    assert (spec.radices, spec.threads, spec.per_block) == ((16, 16, 2), 32, 8)  # a warp each
    transfers = plan._transfer_accesses(512, spec.threads, spec.per_block)
    ideal = transfers[3] * 2  # 32 lanes x 8 bytes: two wavefronts a group
    assert plan._wavefronts(transfers, 512, "float32", 4, 0) == 4 * ideal
    assert (spec.shift, spec.slot_extra) == (4, 2)
    assert plan._wavefronts(transfers, 512, "float32", 4, 2) == ideal
    exchanges = plan._exchange_accesses(512, spec.radices, spec.threads, spec.per_block)
    assert plan._wavefronts(exchanges, 512, "float32", 4, 2) == plan._wavefronts(
        exchanges, 512, "float32", 4, 0)
    assert spec.shared_bytes == 8 * (544 + 2) * 8
    for n, precision in ((64, "float32"), (128, "float32"), (1000, "float32"),
                         (512, "float64"), (2048, "float32")):  # fmt: skip
        spec = plan.block(n, -1, precision, plan.LoadSpec(), plan.StoreSpec(), load_staged=True)
        both = plan._merged(plan._transfer_accesses(n, spec.threads, spec.per_block),
                            plan._exchange_accesses(n, spec.radices, spec.threads,
                                                    spec.per_block))  # fmt: skip
        counts = [plan._wavefronts(both, n, precision, plan.SKEW[precision], extra)
                  for extra in range(128 // plan._COMPLEX_BYTES[precision])]  # fmt: skip
        assert spec.shift == plan.SKEW[precision]
        assert counts[spec.slot_extra] == min(counts) < counts[0], (n, precision)


def test_register_bound_of_the_radix_16_block_kernels():
    """Plain transforms with a radix-16 first stage and <= 256 threads a block ask the compiler
    for 1024 threads per SM (__launch_bounds__'s second argument); the others are unbounded."""
    from specux.kernels.codegen.dialects import CPP, CUDA
    from specux.kernels.codegen.kernels import render

    def source(n, precision="float32", **kw):
        load = plan.LoadSpec(frames=kw.pop("frames", ""))
        reduce = kw.pop("reduce", "")
        store = plan.StoreSpec(reduce=reduce, bins=n + 1 if reduce else 0,
                               bands=80 if reduce else 0)  # fmt: skip
        spec = plan.block(n, -1, precision, load, store, **kw)
        return spec, render(spec, CUDA)[0]

    spec, text = source(1024)
    assert spec.min_blocks == 4 and "__launch_bounds__(256, 4)" in text
    for n, kw in [(4096, {}), (1000, {}), (512, {"frames": "constant"}),
                  (512, {"reduce": "bank"}), (1024, {"precision": "float64"})]:  # fmt: skip
        spec, text = source(n, **kw)
        assert spec.min_blocks == 1, (n, kw)
        assert f"__launch_bounds__({spec.block_threads})" in text
    assert "__launch_bounds__" not in render(plan.block(1024, -1, "float32", plan.LoadSpec(),
                                                        plan.StoreSpec()), CPP)[0]  # fmt: skip


def test_warp_local_transforms_exchange_under_the_warp_barrier():
    """A transform whose threads lie in one warp (codegen.block.warp_local) exchanges its
    stages under the warp's barrier; the block's barrier stays wherever other warps read
    next: after staged loads, after the last stage's writes before staged stores, and
    before the filterbank reduce and the overlap-add. Others keep the block barrier
    throughout. (The host emulation gives each warp a barrier of its own, so the emulated
    kernels run their warps as independently as the GPU does; the GPU's racecheck runs
    tools/sanitize_transforms.py over these kernels.)"""
    from specux.kernels.codegen.block import warp_local
    from specux.kernels.codegen.dialects import CUDA
    from specux.kernels.codegen.kernels import render

    def found(spec):  # the kernel's barriers in order
        text = render(spec, CUDA)[0]
        return [line.split("(")[0].strip() for line in text.splitlines() if "__sync" in line]

    def barriers(n, load=None, store=None, **kw):
        spec = plan.block(n, -1, "float32", load or plan.LoadSpec(), store or plan.StoreSpec(),
                          **kw)  # fmt: skip
        return spec.threads, warp_local(spec), found(spec)

    framed = plan.LoadSpec(frames="reflect", mode="real")
    warp, block = "__syncwarp", "__syncthreads"
    # n_fft 1024, the mel kernel: radices (16, 16, 2), 32 threads, untangled in registers
    assert barriers(512, framed, plan.StoreSpec(mode="half", reduce="bank", bins=513, bands=80),
                    pack="r2c") == (
        32, True, [warp, warp, warp, block])
    assert barriers(512, framed, plan.StoreSpec(mode="half"), pack="r2c") == (
        32, True, [warp, warp, warp])
    # 16 threads a transform (two a warp), staged through other transforms' slots
    assert barriers(256, load_staged=True, store_staged=True) == (
        16, True, [block, warp, warp, warp, block])
    # two warps a transform; the last stage stores to global memory: no barrier after its
    # reads (it writes no shared memory)
    assert barriers(1024) == (64, False, [block] * 3)
    assert barriers(8) == (1, True, [])  # one stage, no exchange
    # n_fft 512's fused adjoint with the overlap-add (16 threads a frame): the forward
    # stages, the block barrier after the last (kept as in every r2c kernel), the tangling
    # of the transform's own slot and the inverse stages under the warp's, the block's before
    # the overlap-add reads the neighbouring frames
    from specux.kernels.fft_exec import _adjoint_ola_spec, _ola_spec

    args = (512, 128, "float32", "float32", "float32", False, False)
    assert found(_adjoint_ola_spec(*args, "reflect", 0)) == [warp, warp, block] + [warp] * 4 + [
        block]
    # n_fft 1024's (64 threads a frame: radices 8, 8, 8) keeps the block barrier throughout
    assert set(found(_adjoint_ola_spec(1024, 256, *args[2:], "reflect", 0))) == {block}
    # the istft's c2r: staged loads through other frames' slots, then the overlap-add
    assert found(_ola_spec(*args)) == [block, warp, warp, warp, block]


@pytest.mark.parametrize("n", [2, 7, 17, 64, 97, 1000, 1031, 7203, 12000])
def test_emulated_float32_within_3x_numpy(n, rng):
    """(12000 points: the four-step pair of block kernels in float32.)"""
    x = _complex(rng, (4, n))
    ref = np.fft.fft(x)
    numpy32 = rel_l2(np.fft.fft(x.astype(np.complex64)), ref)
    ours = rel_l2(emulate.fft_1d(x.astype(np.complex64), "c2c", n), ref)
    assert ours <= float32_bound(numpy32)


def test_emulated_c2r_drops_imaginary_dc_and_nyquist(rng):
    half = _complex(rng, (2, 9))
    back = emulate.fft_1d(half, "c2r", 16, sign=1, scale=1 / 16)
    assert rel_l2(back, np.fft.irfft(half, 16)) <= TOLERANCES["float64"]


@pytest.mark.parametrize("axis", [0, 1])
def test_emulated_strided_axes(axis, rng):
    x = _complex(rng, (12, 5, 7))
    got = emulate.fft_1d(x, "c2c", x.shape[axis], axis=axis)
    assert rel_l2(got, np.fft.fft(x, axis=axis)) <= TOLERANCES["float64"]


@pytest.mark.parametrize("n", [8, 12, 17])
def test_emulated_float16_storage(n, rng):
    real = rng.standard_normal((2, n)).astype(np.float16)
    got = emulate.fft_1d(real, "r2c", n)  # (..., bins, 2) float16 pairs
    ref = np.fft.rfft(real.astype(np.float64))
    got_c = got[..., 0].astype(np.float64) + 1j * got[..., 1].astype(np.float64)
    # computed in float32, rounded once to float16 on store: half an ulp of float16 at the peak
    assert np.max(np.abs(got_c - ref)) <= np.abs(ref).max() * TOLERANCES["float16_store"]


# --------------------------------------------------------------------------------------------
# NVRTC compile-only: every kernel family the planner emits, without a GPU


class _Recorder:
    """An fft_exec backend that records the passes a transform would launch."""

    def __init__(self):
        self.specs = set()

    def scratch(self, count, precision):
        return None

    def table(self, key, values, precision):
        return None

    def constant(self, key, values):
        return None

    def pointer(self, buffer):
        return 0

    def launch(self, spec, grid, block, shared, args):
        self.specs.add(spec)


def _families():
    from specux.kernels.codegen.kernels import source_key
    from specux.kernels.fft_exec import Strides, transform_1d

    recorder = _Recorder()
    rows, columns = Strides(1, 0, 0, 1), Strides(8, 0, 1, 8)
    # (kind, source storage, destination storage): bfloat16 is real storage only, so its
    # transforms read bfloat16 signals into complex64 spectra (r2c)
    combos = [(kind, storage, storage) for kind in ("c2c", "r2c", "c2r")
              for storage in ("float16", "float32", "float64")] + [("r2c", "bfloat16", "float32")]
    for kind, storage, dst_storage in combos:
        precision = "float64" if storage == "float64" else "float32"
        # block sizes (radices 2..16, pack), Bluestein, four-step (2 * 4096 * 3), three
        # column passes (2 ** 27 c2c rows with blocks; its real and strided ones: passes)
        for n in (1, 2, 3, 4, 5, 7, 8, 11, 13, 16, 17, 1000, 1024, 4096 * 6, 5003, 2**27):
            for sign in (-1, 1):
                for strides in (rows, columns):
                    for use_blocks in (True, False):
                        if n == 2**27 and not use_blocks:
                            continue
                        transform_1d(recorder, None, None, n=n, kind=kind, sign=sign,
                                     scale=1.0, precision=precision, batch=1,
                                     src_storage=storage, dst_storage=dst_storage,
                                     src_strides=strides, dst_strides=strides,
                                     use_blocks=use_blocks)  # fmt: skip
    _transform_families(recorder)
    # the filterbank reduce's values in an area after the slots (plan.REDUCE_IN_SLOT off; the
    # families above hold them in the slots): mel's kernel in each storage, power and dB,
    # and magnitude and pow values
    in_slot, plan.REDUCE_IN_SLOT = plan.REDUCE_IN_SLOT, False
    try:
        for storage, value, reduce in (("float32", "power", "bank"),
                                       ("float32", "power", "bank_db"),
                                       ("float16", "power", "bank"), ("bfloat16", "pow", "bank"),
                                       ("float64", "magnitude", "bank")):  # fmt: skip
            precision = "float64" if storage == "float64" else "float32"
            load = plan.LoadSpec(plan.USER, "real", storage, frames="indexed", window=True)
            store = plan.StoreSpec(plan.USER, "half", storage, logical=1024, value=value,
                                   reduce=reduce, bins=513, bands=80)  # fmt: skip
            recorder.specs.add(plan.block(512, -1, precision, load, store, pack="r2c"))
    finally:
        plan.REDUCE_IN_SLOT = in_slot
    return sorted({source_key(spec) for spec in recorder.specs}, key=repr)


def _transform_families(recorder):
    """The spectral transforms' kernels: framing FFTs (every output value, padding kind,
    packed / plain / Bluestein) and every gather kind."""
    from specux.kernels import transform_exec
    from specux.kernels.codegen.gather import FOLD_MMA_MAX_NB, GatherSpec, project_option

    for storage in ("float16", "bfloat16", "float32", "float64"):
        precision = "float64" if storage == "float64" else "float32"
        for n_fft, onesided in ((1024, True), (1000, False), (17, True)):
            for value in ("complex", "magnitude", "power", "db"):
                # complex values of bfloat16 signals are complex64
                dst = "float32" if storage == "bfloat16" and value == "complex" else storage
                for mode in ("constant", "reflect"):
                    transform_exec.stft(recorder, None, None, None, signals=1, sig_len=4 * n_fft,
                                        n_fft=n_fft, hop=n_fft // 4, pad=n_fft // 2, mode=mode,
                                        onesided=onesided, value=value, eps=1e-10, scale=1.0,
                                        precision=precision, src_storage=storage,
                                        dst_storage=dst)  # fmt: skip
            if onesided:  # the cotangent store of power_adjoint (dst: the compute precision)
                transform_exec.stft(recorder, None, None, None, signals=1, sig_len=4 * n_fft,
                                    n_fft=n_fft, hop=n_fft // 4, pad=n_fft // 2, mode="reflect",
                                    onesided=True, value="cotangent", eps=0.0, scale=1.0,
                                    precision=precision, src_storage=storage,
                                    dst_storage=precision, exponent=1.5)  # fmt: skip
            if onesided and transform_exec.adjoint_fusable(n_fft, precision):  # all of it
                # its factors given, or through a bank's transpose (its terms a bin unrolled
                # or not known: a loop)
                for width, terms in ((0, 0), (8, 0), (8, 2)):
                    # its frames stored, or overlap-added in it (and the seam gather)
                    for mode, overlap_add in (("reflect", False), ("constant", True),
                                              ("reflect", True)):  # (its fold: edges)
                        transform_exec.stft(recorder, None, None, None, signals=1,
                                            sig_len=4 * n_fft, n_fft=n_fft, hop=n_fft // 4,
                                            pad=n_fft // 2, mode=mode, onesided=True,
                                            value="adjoint", eps=0.0, scale=1.0,
                                            precision=precision, src_storage=storage,
                                            dst_storage=precision, exponent=1.5,
                                            expand_width=width, expand_terms=terms,
                                            overlap_add=overlap_add)  # fmt: skip
            for power, db in ((2.0, None), (1.0, 20.0), (1.5, None)):  # the fused filterbank
                transform_exec.stft(recorder, None, None, None, signals=1, sig_len=4 * n_fft,
                                    n_fft=n_fft, hop=n_fft // 4, pad=n_fft // 2, mode="constant",
                                    onesided=True, value="power", eps=1e-10, scale=1.0,
                                    precision=precision, src_storage=storage,
                                    dst_storage=storage,
                                    bank=transform_exec.BankReduce(8, power, db))  # fmt: skip
        for kind, options in (("frame", ("constant", "indexed", "pairs")),
                              ("ola", ("", "window")),
                              ("fold", ("", "edges")), ("istft", ("",)),
                              ("seam", ("", "x4", "flat", "x4flat", "flatedges", "x4flatedges")),
                              ("bank", ("power", "db", "powerpow", "dbpow"))):  # fmt: skip
            for option in options:
                recorder.specs.add(GatherSpec(kind, storage, precision, option))
        # the torch-free route's array kinds
        for kind, options in (("map", ("clip", "threshold", "db", "window")),
                              ("value", ("magnitude", "power", "db")), ("rowmax", ("",)),
                              ("colnorm", ("inf", "min", "count", "1", "p"))):  # fmt: skip
            for option in options:
                recorder.specs.add(GatherSpec(kind, storage, precision, option))
        recorder.specs.add(GatherSpec("cmul", precision, precision))
        if storage != "bfloat16":  # the istft's c2r with the overlap-add, both layouts
            for strides in ((513 * 40, 40, 1), (513 * 40, 1, 513)):
                transform_exec.istft(recorder, None, None, None, None, signals=2,
                                     strides=strides, count=40, n_fft=1024, hop=256, start=512,
                                     stop=10496, out_len=9984, scale=1 / 1024, storage=storage,
                                     precision=precision)  # fmt: skip
        if storage == precision:  # fftconvolve's overlap-save: one kernel a frame
            block = 16384 if precision == "float32" else 8192
            transform_exec.overlap_save(recorder, None, None, None, signals=2,
                                        sig_len=4 * block, short=block // 4, block=block,
                                        precision=precision, storage=storage)  # fmt: skip
        for columns in (1, 2, 12, 24, 40, 72, 200):  # the planner's tiles for these widths
            for rows in (1, 8, 64):
                option = transform_exec.correlate_option(rows, 400, columns, 2000, 512,
                                                         precision)  # fmt: skip
                recorder.specs.add(GatherSpec("correlate", precision, precision, option))
                if precision == "float32":  # and the tensor-core tiles (sm_80 and later)
                    option = transform_exec.correlate_option(rows, 400, columns, 2000, 512,
                                                             precision, True)  # fmt: skip
                    recorder.specs.add(GatherSpec("correlate", precision, precision, option))
        for frames, n_out, n_in in ((40064, 20, 80), (37, 13, 40)):  # the clipped DCTs
            option = transform_exec.correlate_option(1, frames, n_out, n_in, n_in, precision)
            recorder.specs.add(GatherSpec("correlate_clip", precision, precision, option))
        # the dense projections: DCTs (mfcc's 80 -> 20), their transposes, the widest
        for n_in, n_out in ((80, 20), (20, 80), (40, 13), (3, 128), (1, 1)):
            for kind in ("project", "project_clip"):
                option = project_option(n_in, n_out, precision)
                recorder.specs.add(GatherSpec(kind, precision, precision, option))
        recorder.specs.add(GatherSpec("partsum", precision, precision))
        for bins, columns in ((12, 2), (36, 64), (48, 80), (60, 200)):  # cqt's spectral path
            option = transform_exec.fold_option(bins, columns)
            recorder.specs.add(GatherSpec("fold_product", precision, precision, option))
        if precision == "float32":  # and every tensor-core tile the kernel takes (t1 .. t8)
            for nb in range(1, FOLD_MMA_MAX_NB + 1):
                recorder.specs.add(GatherSpec("fold_product", precision, precision, f"t{nb}"))
        recorder.specs.add(GatherSpec("fold_idft", precision, precision))
        for hop in (1, 64, 512):  # the adjoint's tiles
            for blocks in (10, 1000, 10000):
                option = transform_exec.correlate_t_option(blocks, hop, precision)
                recorder.specs.add(GatherSpec("correlate_t", precision, precision, option))
    names = ("float16", "float32", "float64", "complex32", "complex64", "complex128")
    for src in names:
        for dst in names:
            precision = "float64" if any(n in ("float64", "complex128") for n in (src, dst)) \
                else "float32"  # fmt: skip
            conj = "~" if dst.startswith("complex") else ""
            recorder.specs.add(GatherSpec("convert", precision, precision, f"{src}>{dst}{conj}"))
            recorder.specs.add(GatherSpec("convert", precision, precision, f"{src}>{dst}"))


def test_every_kernel_family_compiles_with_nvrtc():
    pytest.importorskip("cuda.bindings")
    from concurrent.futures import ThreadPoolExecutor

    from specux.compat import cuda
    from specux.kernels.codegen.dialects import CUDA
    from specux.kernels.codegen.kernels import render
    from specux.kernels.cuda.compiler import compile_cubin
    from specux.kernels.plan import BlockSpec

    if cuda.nvrtc_location()[0] is None:
        pytest.skip("no NVRTC library (pip install nvidia-cuda-nvrtc)")
    families = _families()
    blocks = [spec for spec in families if isinstance(spec, BlockSpec)]
    assert len(families) > 100  # radices x modes x storages x directions
    # every block feature is among them: pack both ways, staged both ways, four-step twist
    assert {spec.pack for spec in blocks} == {"", "r2c", "c2r"}
    assert any(spec.load_staged and spec.store_staged and spec.twist for spec in blocks)
    assert any(spec.store_staged and spec.split and not spec.twist for spec in blocks)
    # and the framing loads / value stores of the stft kernels
    assert {spec.load.frames for spec in blocks} == {"", "constant", "indexed"}
    assert {spec.store.value for spec in blocks} == {"complex", "magnitude", "power", "db", "pow",
                                                     "cotangent", "adjoint", "convolve"}
    assert {spec.store.reduce for spec in blocks} == {"", "bank", "bank_db"}
    for in_slot in (True, False):  # the reduce's values in the slots, and in an area after
        assert any(spec.reduce_in_slot == in_slot and spec.store.reduce == "bank_db"
                   for spec in blocks)  # fmt: skip
    assert {spec.store.expand for spec in blocks} == {0, 2, plan.EXPAND_UNROLLED + 1}
    assert any(spec.store.ola_hop and spec.load_staged for spec in blocks)
    assert any(spec.store.ola_hop and spec.unit_in for spec in blocks)
    assert any(spec.store.ola_hop and spec.store.value == "adjoint" and spec.store.expand
               for spec in blocks)  # fmt: skip

    def compile_one(spec):
        source, name, _ = render(spec, CUDA)
        return compile_cubin(source, name=name, arch="sm_90")

    with ThreadPoolExecutor() as pool:  # NVRTC compiles programs concurrently
        for cubin in pool.map(compile_one, families):
            assert cubin[:4] == b"\x7fELF"


@pytest.mark.parametrize("option, raises", [("power", False), ("db", False), ("powerpow", True),
                                            ("dbpow", True)])  # fmt: skip
def test_bank_gather_calls_pow_only_when_asked(option, raises):
    """Only the "...pow" options raise the input to ``exponent`` (a substring test once made
    "power" call pow() per element: the DCT gather of mfcc was compute-bound, ~0.2 ms)."""
    from specux.kernels.codegen.dialects import CUDA
    from specux.kernels.codegen.gather import GatherSpec, render_gather

    body = render_gather(GatherSpec("bank", "float32", "float32", option), CUDA)
    body = body[body.index('extern "C"'):]
    assert ("pow(" in body) == raises


def test_block_stage_twiddles_are_laid_out_in_butterfly_order():
    # Each stage after the first reads root (k * q * step) for butterfly k, input q; the table
    # keeps them at offset + (q - 1) * stride + k so a warp's k's read consecutive entries.
    from specux.kernels.plan import LoadSpec, StoreSpec, block

    for n, pack in ((1024, ""), (1000, ""), (512, "r2c"), (12, "c2r"), (1, "")):
        spec = block(n, -1, "float32", LoadSpec(), StoreSpec(), pack=pack)
        index = spec.twiddle_index()
        assert index[: spec.table_n] == tuple(range(spec.table_n))
        stride, expected_end = 1, spec.table_n
        for radix, offset in zip(spec.radices, spec.stage_offsets):
            if stride > 1:
                assert offset == expected_end
                step = spec.table_n // (stride * radix)
                for q in range(1, radix):
                    run = index[offset + (q - 1) * stride : offset + q * stride]
                    assert run == tuple((k * q * step) % spec.table_n for k in range(stride))
                expected_end = offset + (radix - 1) * stride
            stride *= radix
        assert len(index) == expected_end


def test_block_index_arithmetic_folds_into_constant_offsets():
    """The shapes of the block kernels' accesses that let the compiler fold constants into
    addresses (the fused stft kernels are bound by instruction issue, docs/benchmarks.md):
    a stage's shared reads and writes from one skewed address (codegen.block._skew_step,
    checked against the skew itself), a butterfly's roots from one table row, the packed
    r2c store without the half's and the reduce's bounds (its untangle writes bins 0 .. n
    only), and no multiply for a scale of 1."""
    from specux.kernels.codegen import block
    from specux.kernels.codegen.dialects import CPP

    def skew(j, shift):
        return j + (j >> shift)

    for n, precision in ((512, "float32"), (1024, "float64"), (1000, "float32"), (64, "float32")):
        spec = plan.block(n, -1, precision, plan.LoadSpec(), plan.StoreSpec())
        stride = 1
        for radix in spec.radices:
            quarter = n // radix
            read = block._skew_step(spec, quarter, n)
            write = block._skew_step(spec, stride, radix * stride)
            for i in range(quarter):
                if read is not None:  # i + q n / radix at skew(i) + q read
                    assert all(skew(i + q * quarter, spec.shift) - skew(i, spec.shift)
                               == q * read for q in range(radix))  # fmt: skip
                k = i % stride
                j0 = (i - k) * radix + k
                if write is not None:  # j0 + q stride at skew(j0) + q write
                    assert all(skew(j0 + q * stride, spec.shift) - skew(j0, spec.shift)
                               == q * write for q in range(radix))  # fmt: skip
            stride *= radix
    # the mel kernel's stages (16, 16, 2) all take constant offsets
    spec = plan.block(512, -1, "float32", plan.LoadSpec(), plan.StoreSpec())
    assert spec.radices == (16, 16, 2)
    text = block.render_block(spec, CPP)
    assert "my[skew(" not in text and "tw(k, " in text

    def fused(scale, bank):
        recorder = _Recorder()
        transform_exec.stft(recorder, None, None, None, signals=1, sig_len=4096, n_fft=1024,
                            hop=256, pad=512, mode="constant", onesided=True, value="power",
                            eps=1e-10, scale=scale, precision="float32",
                            src_storage="float32", dst_storage="float32", bank=bank)  # fmt: skip
        (spec,) = recorder.specs
        assert spec.pack == "r2c"
        return spec, block.render_block(spec, CPP)

    for bank in (None, transform_exec.BankReduce(40, 2.0)):
        spec, text = fused(1.0, bank)
        assert not spec.store.scaled and "*= (real_t)scale" not in text
        assert "logical" not in text.split("auto store")[1].split("};")[0]
        assert "if (at >= " not in text  # neither the reduce's bins nor a valid count
        spec, text = fused(1 / 32, bank)
        assert spec.store.scaled and "*= (real_t)scale" in text
