"""Autotuning of the block kernels (specux.kernels.tuning): the variants, the search (run on
the host emulation with a scripted timer), the winners' file and the switches."""

from __future__ import annotations

import json
import warnings

import numpy as np
import pytest

import specux
from specux.kernels import emulate, plan, tuning
from specux.kernels.plan import LoadSpec, StoreSpec


@pytest.fixture(autouse=True)
def _fresh_table():
    tuning.forget()
    yield
    tuning.forget()


def _rules():
    """Rule specs of the kernel kinds the planner makes (plain, staged, framed + reduce, fused
    adjoint, four-step column, overlap-add)."""
    frames = LoadSpec(mode="real", frames="constant", window=True)
    return {
        "c2c 1024": plan.block(1024, -1, "float32", LoadSpec(), StoreSpec()),
        "c2c 64 f64": plan.block(64, -1, "float64", LoadSpec(), StoreSpec()),
        "staged 200": plan.block(200, -1, "float32", LoadSpec(), StoreSpec(),
                                 load_staged=True, store_staged=True),
        "mel 512": plan.block(256, -1, "float32", frames,
                              StoreSpec(mode="half", value="power", reduce="bank", bins=257,
                                        bands=40),
                              pack="r2c"),
        "adjoint 512": plan.block(256, 1, "float32", frames,
                                  StoreSpec(mode="half", value="adjoint"), pack="r2c"),
        "column 4096": plan.block(4096, -1, "float32", LoadSpec(), StoreSpec(),
                                  load_staged=True, store_staged=True, split=True, twist=True),
        "istft 1024": plan.block(512, 1, "float32", LoadSpec(mode="hermitian"),
                                 StoreSpec(mode="real", ola_hop=256), pack="c2r"),
    }  # fmt: skip


@pytest.mark.parametrize("name", list(_rules()))
def test_variants_stay_within_the_planners_limits_and_render(name):
    """Each variant keeps the rule's transform and changes only per_block (with the shared
    layout the planner gives that many transforms) or the register bound, within a block's
    threads and the planner's shared-memory caps, and renders in the CUDA dialect with its
    bound. (Their outputs: the emulated tests below, and autotune_call's bit check.)"""
    from specux.kernels.codegen.dialects import CUDA
    from specux.kernels.codegen.kernels import render

    rule = _rules()[name]
    found = tuning.variants(rule)
    assert found and rule not in found
    cap = (150 if rule.load_staged or rule.store_staged else 100) * 1024
    for v in found:
        assert (v.per_block, v.min_blocks) != (rule.per_block, rule.min_blocks)
        assert v.block_threads <= plan.MAX_THREADS
        assert v.min_blocks * v.block_threads <= 2048
        assert v.per_block == rule.per_block or v.shared_bytes <= cap
        # the four-step columns map rows to blocks, the overlap-add kernels' blocks are frames
        if rule.split or rule.store.ola_hop:
            assert v.per_block == rule.per_block
        # everything else is the rule's
        same = ("n", "radices", "sign", "precision", "threads", "load", "store", "pack")
        assert all(getattr(v, f) == getattr(rule, f) for f in same)
        if v.per_block != rule.per_block:  # the layout the planner picks for that per_block
            staged = v.load_staged or v.store_staged
            layout = ((plan.SKEW[v.precision], plan.staged_layout(v.n, v.radices, v.threads,
                                                                  v.per_block, v.precision))
                      if staged else plan.shared_layout(v.n, v.radices, v.threads, v.per_block,
                                                        v.precision))  # fmt: skip
            assert (v.skew_shift, v.slot_extra) == layout
        source = render(v, CUDA)[0]
        bound = f"__launch_bounds__({v.block_threads}, {v.min_blocks})"
        assert (bound in source) == (v.min_blocks > 1)


def test_the_planner_takes_a_recorded_winner_and_forgets_it():
    rule = plan.block(1024, -1, "float32", LoadSpec(), StoreSpec())
    winner = tuning.variants(rule)[0]
    tuning.set_entry(rule, winner)
    assert plan.block(1024, -1, "float32", LoadSpec(), StoreSpec()) == winner
    assert plan.block(1024, 1, "float32", LoadSpec(), StoreSpec()) != winner  # another rule
    tuning.set_entry(rule, None)
    assert plan.block(1024, -1, "float32", LoadSpec(), StoreSpec()) == rule
    tuning.set_entry(rule, winner)
    tuning.forget()
    assert plan.block(1024, -1, "float32", LoadSpec(), StoreSpec()) == rule


needs_compiler = pytest.mark.skipif(emulate.compiler() is None, reason="needs a C++ compiler")


class _ScriptedTimer:
    """Times by the active winners: the call is fastest with ``favourite`` (per_block,
    bound) on its kernel, and each variant timed is remembered."""

    def __init__(self, favourite):
        self.favourite, self.seen = favourite, []

    def __call__(self, run):
        run()
        entries = tuning.entries()
        self.seen.append(dict(entries))
        return 0.5 if self.favourite in entries.values() else 1.0


@needs_compiler
def test_emulated_variants_give_the_rules_bits(rng):
    """Every variant of an FFT's block kernels, run on the host emulation, gives the rule
    kernel's output bits (what autotune_call requires of a winner). The emulation ignores
    register bounds, so the variants that matter here are the per_block ones."""
    x = (rng.standard_normal((70, 64)) + 1j * rng.standard_normal((70, 64)))
    reference = emulate.fft_1d(x, "c2c", 64)
    report = tuning.autotune_call(lambda: emulate.fft_1d(x, "c2c", 64), _ScriptedTimer(None))
    (kernel,) = report.kernels
    rule = kernel[0]
    assert (rule.n, rule.precision, kernel[2]) == (64, "float64", None)  # the rule stays
    assert not report.rejected and len(tuning.variants(rule)) >= 3
    for variant in tuning.variants(rule):
        tuning.set_entry(rule, variant)
        np.testing.assert_array_equal(emulate.fft_1d(x, "c2c", 64), reference)


def _every_variant_gives_the_rules_bits(run):
    reference = run()
    with tuning._record() as launched:
        run()
    rules = list(dict.fromkeys(launched))
    assert rules
    for rule in rules:
        for variant in tuning.variants(rule):
            tuning.set_entry(rule, variant)
            for got, want in zip(run(), reference):
                np.testing.assert_array_equal(got, want, err_msg=repr(variant))
        tuning.set_entry(rule, None)


@needs_compiler
@pytest.mark.parametrize("pad_mode", ["constant", "reflect"])
def test_emulated_filterbank_stft_variants_give_the_rules_bits(pad_mode, rng):
    """The framed stft kernel with the filterbank reduce (mel's forward: the reduce groups
    frames by per_block) and the real transforms, every variant on the host emulation."""
    from specux.kernels import transform_exec
    from specux.meta import filters

    x = rng.standard_normal((2, 700)).astype(np.float32)
    sparse = filters.sparse_bank(filters.mel(sr=8000, n_fft=128, n_mels=12))
    bands, weights = transform_exec.bank_tables(sparse.starts, sparse.stops,
                                                sparse.weights.astype(np.float32))  # fmt: skip
    window = np.hanning(129)[:-1].astype(np.float32)
    rows = rng.standard_normal((5, 200)).astype(np.float32)
    half = np.fft.rfft(rows).astype(np.complex64)

    def run():
        spec = np.zeros((2, 1 + 700 // 32, 12), dtype=np.float32)
        transform_exec.stft(emulate.HostBackend(), x, spec, window, signals=2, sig_len=700,
                            n_fft=128, hop=32, pad=64, mode=pad_mode, onesided=True,
                            value="power", eps=1e-10, scale=1.0, precision="float32",
                            src_storage="float32", dst_storage="float32",
                            bank=transform_exec.BankReduce(12, 2.0, 10.0), bands=bands,
                            weights=weights)  # fmt: skip
        return spec, emulate.fft_1d(rows, "r2c", 200), emulate.fft_1d(half, "c2r", 200)

    _every_variant_gives_the_rules_bits(run)


@needs_compiler
@pytest.mark.parametrize("value", ["adjoint", "cotangent"])
def test_emulated_backward_stft_variants_give_the_rules_bits(value, rng):
    """The backward's framed kernels (plan.autotune(backward=True) tunes them): the fused
    adjoint without the overlap-add (frames of the gradient) and the cotangent store, every
    per_block variant on the host emulation."""
    from specux.kernels import transform_exec

    n_fft, hop, length = 64, 16, 200
    x = rng.standard_normal((2, length)).astype(np.float32)
    window = np.hanning(n_fft + 1)[:-1].astype(np.float32)
    count = 1 + length // hop
    factors = rng.standard_normal((2, count, n_fft // 2 + 1)).astype(np.float32)
    if value == "adjoint":
        extra = dict(factors=factors, exponent=2.0, inverse_scale=1.0 / n_fft)
        shape, dtype = (2, count, n_fft), np.float32
    else:
        extra = dict(factors=factors, exponent=1.5)
        shape, dtype = (2, count, n_fft // 2 + 1), np.complex64

    def run():
        out = np.zeros(shape, dtype)
        transform_exec.stft(emulate.HostBackend(), x, out, window, signals=2, sig_len=length,
                            n_fft=n_fft, hop=hop, pad=n_fft // 2, mode="reflect",
                            onesided=True, value=value, eps=1e-10, scale=1.0,
                            precision="float32", src_storage="float32",
                            dst_storage="float32", **extra)  # fmt: skip
        return (out,)

    _every_variant_gives_the_rules_bits(run)


@needs_compiler
def test_autotune_call_keeps_the_fastest_variant(rng, tmp_path, monkeypatch):
    monkeypatch.setenv("SPECUX_CACHE_DIR", str(tmp_path))
    monkeypatch.setattr(tuning, "_model", "Test-GPU-sm_90-4sm")
    real = rng.standard_normal((5, 96)).astype(np.float32)
    reference = emulate.fft_1d(real, "r2c", 96)
    with tuning._record() as launched:
        emulate.fft_1d(real, "r2c", 96)
    (rule,) = set(launched)
    favourite = tuning.variants(rule)[-1]
    timer = _ScriptedTimer((favourite.per_block, favourite.bound))
    report = tuning.autotune_call(lambda: emulate.fft_1d(real, "r2c", 96), timer)
    assert report.kernels == [(rule, 1.0, favourite, 0.5)]
    assert str(report).startswith("48-point r2c kernel: 1.0000 ms -> 0.5000 ms")
    # every variant was timed, the rule first
    assert len(timer.seen) == 1 + len(tuning.variants(rule)) and timer.seen[0] == {}
    assert plan.block(rule.n, rule.sign, rule.precision, rule.load, rule.store,
                      pack=rule.pack, unit_in=rule.unit_in, unit_out=rule.unit_out) == favourite
    np.testing.assert_array_equal(emulate.fft_1d(real, "r2c", 96), reference)
    # stored for the model, and loaded by a process that opens a GPU of that model
    stored = json.loads((tmp_path / "autotune" / "Test-GPU-sm_90-4sm.json").read_text())
    assert stored["version"] == specux.__version__
    assert stored["entries"] == {repr(rule): [favourite.per_block, favourite.bound]}
    tuning.forget()
    monkeypatch.setattr(tuning, "_model", None)
    tuning.activate("Test-GPU-sm_90-4sm")
    assert tuning.entries() == {repr(rule): (favourite.per_block, favourite.bound)}
    # tuned again where the rule wins: its entry leaves the file
    tuning.autotune_call(lambda: emulate.fft_1d(real, "r2c", 96), _ScriptedTimer(None))
    stored = json.loads((tmp_path / "autotune" / "Test-GPU-sm_90-4sm.json").read_text())
    assert stored["entries"] == {} and tuning.entries() == {}


@needs_compiler
def test_a_variant_with_other_bits_is_never_kept(rng, monkeypatch):
    x = rng.standard_normal((4, 64)) + 0j

    def run():
        out = emulate.fft_1d(x, "c2c", 64)
        if tuning.entries():  # any variant "differs" from the rule
            out[0, 0] += 1
        return out

    report = tuning.autotune_call(run, lambda run_: 0.1 if tuning.entries() else 1.0)
    (kernel,) = report.kernels
    assert kernel[2] is None and len(report.rejected) == len(tuning.variants(kernel[0]))
    assert all(why == "different output bits" for _, why in report.rejected)
    assert tuning.entries() == {}


def test_winners_file_problems_are_ignored(tmp_path, monkeypatch):
    monkeypatch.setenv("SPECUX_CACHE_DIR", str(tmp_path))
    folder = tmp_path / "autotune"
    folder.mkdir()
    (folder / "A.json").write_text("{not json")
    monkeypatch.setattr(tuning, "_warned", False)
    with pytest.warns(RuntimeWarning, match="ignoring the autotune winners"):
        tuning.activate("A")
    assert tuning.entries() == {}
    # another version's planner, or malformed entries: ignored without a word
    (folder / "B.json").write_text(json.dumps({"version": "0.0.0", "entries": {"k": [2, 0]}}))
    (folder / "C.json").write_text(json.dumps({"version": specux.__version__,
                                               "entries": {"k": [2, 0], "j": ["x", 0],
                                                           "i": [1, 2, 3]}}))  # fmt: skip
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert tuning._read("B") == {}
        assert tuning._read("C") == {"k": (2, 0)}
    # SPECUX_DISK_CACHE=0: nothing read or written
    monkeypatch.setenv("SPECUX_DISK_CACHE", "0")
    assert tuning._read("C") == {}
    tuning._write("D", {"k": (2, 0)})
    assert not (folder / "D.json").exists()


@pytest.mark.parametrize("entries", [5, [["k", [2, 0]]], "k"])
def test_winners_files_without_an_entries_table_are_ignored(entries, tmp_path, monkeypatch):
    monkeypatch.setenv("SPECUX_CACHE_DIR", str(tmp_path))
    (tmp_path / "autotune").mkdir()
    (tmp_path / "autotune" / "E.json").write_text(
        json.dumps({"version": specux.__version__, "entries": entries}))
    monkeypatch.setattr(tuning, "_warned", False)
    monkeypatch.setattr(tuning, "_model", None)
    with pytest.warns(RuntimeWarning, match="no entries table"):
        tuning.activate("E")
    assert tuning.entries() == {}


@pytest.mark.parametrize("winner", [(0, 0), (1024, 0), (3, 0), (4, 7)])
def test_stored_entries_that_are_not_variants_are_not_planned(winner, monkeypatch):
    """A stored entry is trusted only as one of its rule's variants: a per_block of 0 (a
    division by zero when planned), of 1024 (a 65536-thread block) or one the tuner never
    offers leaves the rule's kernel."""
    rule = plan.block(1024, -1, "float32", LoadSpec(), StoreSpec())
    monkeypatch.setattr(tuning, "_table", {repr(rule): winner})
    assert plan.block(1024, -1, "float32", LoadSpec(), StoreSpec()) == rule
    legal = tuning.variants(rule)[0]
    monkeypatch.setattr(tuning, "_table", {repr(rule): (legal.per_block, legal.bound)})
    assert plan.block(1024, -1, "float32", LoadSpec(), StoreSpec()) == legal


def test_configurations_key_numpy_scalars_arrays_and_extra_parameters(rng):
    """The switch's once-a-configuration key: numpy scalars by value, arrays by layout, the
    extra keyword parameters of mfcc / lfcc / chroma one by one (they were an unhashable
    dict, so those calls were never tuned)."""
    import inspect

    from specux import plans

    def key(fn, *args, **kwargs):
        signature = inspect.signature(fn)
        return plans._configuration(fn, signature, signature.bind(*args, **kwargs))

    x, y = rng.standard_normal((2, 100)), rng.standard_normal((2, 100))
    k = key(specux.melspectrogram, x, sr=np.float64(16000), n_fft=np.int64(64))
    assert k == key(specux.melspectrogram, y, sr=np.float64(16000), n_fft=np.int64(64))
    assert k != key(specux.melspectrogram, x[:1], sr=16000.0, n_fft=64)
    a = key(specux.mfcc, x, sr=16000, n_fft=64, n_mels=20)
    assert a is not None and a != key(specux.mfcc, x, sr=16000, n_fft=64, n_mels=24)
    assert key(specux.stft, x, n_fft=64, window=np.hanning(64)) == key(
        specux.stft, y, n_fft=64, window=np.hanning(64) + 1)
    assert key(specux.stft, x, n_fft=64, window=[0.5] * 64) is None  # unhashable: not tuned


def test_an_unwritable_cache_keeps_winners_in_memory(tmp_path, monkeypatch):
    blocker = tmp_path / "file"
    blocker.write_text("")
    monkeypatch.setenv("SPECUX_CACHE_DIR", str(blocker))  # a file: no folder can be made
    monkeypatch.setattr(tuning, "_warned", False)
    with pytest.warns(RuntimeWarning, match="cannot store autotune winners"):
        tuning._write("M", {"k": (2, 0)})


def test_clear_cache_forgets_the_winners(tmp_path, monkeypatch):
    monkeypatch.setenv("SPECUX_CACHE_DIR", str(tmp_path))
    tuning._write("M", {"k": (2, 0)})
    (tmp_path / "autotune" / "notes.txt").write_text("not ours")
    rule = plan.block(1024, -1, "float32", LoadSpec(), StoreSpec())
    tuning.set_entry(rule, tuning.variants(rule)[0])
    specux.clear_cache()
    assert tuning.entries() == {} and not (tmp_path / "autotune" / "M.json").exists()
    assert (tmp_path / "autotune" / "notes.txt").exists()


def test_model_names_are_file_names():
    assert tuning.model_name("NVIDIA H200", "sm_90", 132) == "NVIDIA-H200-sm_90-132sm"
    assert tuning.model_name("GPU/../x", "sm_80", 8) == "GPU-..-x-sm_80-8sm"


def test_cpu_plans_refuse_autotune_and_the_switch_is_a_flag(rng):
    p = specux.plan("rfft", rng.standard_normal(64))
    with pytest.raises(specux.BackendUnavailableError, match="runs on the CPU"):
        p.autotune()
    from specux import options

    try:
        specux.autotune(True)
        assert options.is_autotuning()
    finally:
        specux.autotune(False)
    assert not options.is_autotuning()
    with pytest.raises(ValueError, match="flag must be True or False"):
        specux.autotune("yes")


try:
    import torch
except ImportError:  # the torch-less CI job
    torch = None

needs_cuda = pytest.mark.skipif(torch is None or not torch.cuda.is_available(),
                                reason="needs a CUDA GPU")  # fmt: skip


@pytest.mark.cuda
@needs_cuda
@pytest.mark.parametrize("op, shape, params", [
    ("melspectrogram", (8, 32000), dict(sr=16000, n_fft=512, hop_length=160, n_mels=64)),
    ("rfft", (4096, 1000), dict()),
    ("fft", (2, 2**20), dict()),
    ("istft", (4, 257, 200), dict(n_fft=512, hop_length=128)),
])  # fmt: skip
def test_cuda_plan_autotune_keeps_the_bits(op, shape, params, tmp_path, monkeypatch):
    monkeypatch.setenv("SPECUX_CACHE_DIR", str(tmp_path))
    g = torch.Generator(device="cuda").manual_seed(0)
    dtype = torch.complex64 if op == "istft" else torch.float32
    x = torch.randn(shape, dtype=dtype, device="cuda", generator=g)
    p = specux.plan(op, x, **params)
    before = p(x)
    assert p.autotune() is p
    kernels = p.tuning.kernels
    assert kernels and all(base > 0 and best > 0 for _, base, _, best in kernels)
    # a winner was at least MARGIN faster than the rule's kernel
    assert all(w is None or best < base * (1 - tuning.MARGIN) for _, base, w, best in kernels)
    assert str(p.tuning).count("kernel:") == len(kernels)
    assert not [why for _, why in p.tuning.rejected if why != "different output bits"]
    after = p(x)
    assert torch.equal(torch.view_as_real(after) if after.is_complex() else after,
                       torch.view_as_real(before) if before.is_complex() else before)
    # the winners are on disk for this GPU model
    stored = json.loads((tmp_path / "autotune" / f"{tuning.active_model()}.json").read_text())
    winners = {repr(rule): [w.per_block, w.bound] for rule, _, w, _ in kernels if w is not None}
    assert {k: v for k, v in stored["entries"].items() if k in winners} == winners


@pytest.mark.cuda
@needs_cuda
@pytest.mark.parametrize("op, shape, params", [
    ("melspectrogram", (8, 32000), dict(sr=16000, n_fft=512, hop_length=160, n_mels=64)),
    ("stft", (8, 32000), dict(n_fft=400, hop_length=160)),
    ("istft", (4, 257, 200), dict(n_fft=512, hop_length=128)),
])  # fmt: skip
def test_cuda_plan_autotune_with_the_backward(op, shape, params, tmp_path, monkeypatch):
    monkeypatch.setenv("SPECUX_CACHE_DIR", str(tmp_path))
    dtype = torch.complex64 if op == "istft" else torch.float32
    x = torch.randn(shape, dtype=dtype, device="cuda", requires_grad=True)
    p = specux.plan(op, x, **params)

    def both():
        out = p(x)
        (grad,) = torch.autograd.grad((torch.view_as_real(out) if out.is_complex()
                                       else out).sum(), x)  # fmt: skip
        return torch.view_as_real(out) if out.is_complex() else out, grad

    before = both()
    p.autotune(backward=True)
    forward_only = specux.plan(op, x, **params).autotune()
    # the backward's kernels were recorded too
    assert len(p.tuning.kernels) > len(forward_only.tuning.kernels)
    after = both()
    assert all(torch.equal(a, b) for a, b in zip(after, before))


@pytest.mark.cuda
@needs_cuda
def test_cuda_autotune_switch_tunes_first_calls_once(tmp_path, monkeypatch):
    monkeypatch.setenv("SPECUX_CACHE_DIR", str(tmp_path))
    from specux import plans

    x = torch.randn(4, 16000, device="cuda")
    expected = specux.stft(x, n_fft=400, hop_length=160, output="power")
    calls = []
    real = tuning.autotune_call
    monkeypatch.setattr(tuning, "autotune_call", lambda *a: calls.append(1) or real(*a))
    try:
        specux.autotune(True)
        for _ in range(3):
            got = specux.stft(x, n_fft=400, hop_length=160, output="power")
            assert torch.equal(got, expected)
        assert len(calls) == 1  # once a configuration
        specux.stft(x[:2], n_fft=400, hop_length=160, output="power")  # a new layout
        assert len(calls) == 2
        # extra keyword parameters (mfcc's n_fft / n_mels) are keyed and passed through
        with warnings.catch_warnings():
            warnings.simplefilter("error")  # a failed tuning warns
            m = specux.mfcc(x, sr=16000, n_fft=512, n_mels=40)
        assert len(calls) == 3
        assert torch.equal(m, specux.mfcc(x, sr=16000, n_fft=512, n_mels=40))
        # a call being captured into a CUDA graph is not tuned (its warm-up call was)
        y = torch.randn(4, 8000, device="cuda")
        specux.stft(y, n_fft=256, hop_length=64, output="power")
        assert len(calls) == 4
        plans._tuned_configurations.clear()  # as if new
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph):
            out = specux.stft(y, n_fft=256, hop_length=64, output="power")
        graph.replay()
        assert len(calls) == 4
        assert torch.equal(out, specux.stft(y, n_fft=256, hop_length=64, output="power"))
    finally:
        specux.autotune(False)
        plans._tuned_configurations.clear()


@pytest.mark.cuda
@needs_cuda
def test_cupy_plan_autotune(tmp_path, monkeypatch):
    cupy = pytest.importorskip("cupy")
    monkeypatch.setenv("SPECUX_CACHE_DIR", str(tmp_path))
    x = cupy.random.default_rng(0).standard_normal((64, 4000)).astype(cupy.float32)
    p = specux.plan("stft", x, n_fft=256, hop_length=64, output="magnitude")
    before = p(x)
    p.autotune()
    assert p.tuning.kernels
    assert cupy.array_equal(p(x), before)
    with pytest.raises(ValueError, match=r"backward=True\) needs a torch plan"):
        p.autotune(backward=True)
    with pytest.raises(ValueError, match="backward must be True or False"):
        p.autotune(backward="yes")
    # the switch tunes cupy calls too (through the public function, which routes cupy)
    from specux import plans

    calls = []
    real = tuning.autotune_call
    monkeypatch.setattr(tuning, "autotune_call", lambda *a: calls.append(1) or real(*a))
    try:
        specux.autotune(True)
        with warnings.catch_warnings():
            warnings.simplefilter("error")  # a failed tuning warns
            got = specux.stft(x, n_fft=256, hop_length=64, output="magnitude")
            specux.stft(x, n_fft=256, hop_length=64, output="magnitude")
        assert cupy.array_equal(got, before) and len(calls) == 1
    finally:
        specux.autotune(False)
        plans._tuned_configurations.clear()


@pytest.mark.skipif(torch is None, reason="needs torch")
def test_the_switch_leaves_compiled_and_bad_calls_alone(rng):
    """With autotune on, torch.compile(fullgraph=True) still traces the transforms (the
    first-call hook is skipped while compiling), and bad inputs raise the function's own
    errors."""

    x = torch.from_numpy(rng.standard_normal((2, 1000)))
    fn = lambda t: specux.melspectrogram(t, sr=16000, n_fft=128, n_mels=16)  # noqa: E731
    expected = fn(x)
    try:
        specux.autotune(True)
        torch._dynamo.reset()
        got = torch.compile(fn, fullgraph=True, backend="aot_eager")(x)
        assert torch.equal(got, expected)
        with pytest.raises(TypeError, match="must be a numpy.ndarray, torch.Tensor"):
            specux.stft([1.0, 2.0], n_fft=2)
        with pytest.raises(TypeError):
            specux.stft()
    finally:
        specux.autotune(False)
