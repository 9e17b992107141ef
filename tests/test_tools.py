"""The tools' host halves: tools/ncu_regions.py's summary of ncu's source page,
tools/gpu_check.py's steps, tools/ab.py's variants (their GPU halves run on the GPU
machine)."""

from __future__ import annotations

import csv
import importlib.util
import sys
from pathlib import Path

import pytest

_PATH = Path(__file__).resolve().parents[1] / "tools" / "ncu_regions.py"
_spec = importlib.util.spec_from_file_location("ncu_regions", _PATH)
ncu_regions = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(ncu_regions)

_HEADER = ["Address", "Source", "Warp Stall Sampling (All Samples)", "Instructions Executed",
           "L1 Wavefronts Shared", "L1 Wavefronts Shared Ideal", "L1 Tag Requests Global",
           "stall_long_sb", "stall_barrier", "stall_long_sb (Not Issued)"]  # fmt: skip


def _page(path: Path, kernels: dict[str, list[tuple]]) -> None:
    """An exported source page as ncu writes it: per kernel a name row, a header, the rows."""
    with open(path, "w", newline="") as f:
        out = csv.writer(f, quoting=csv.QUOTE_ALL)
        for name, rows in kernels.items():
            out.writerow(["Kernel Name", name, ""])
            out.writerow(_HEADER)
            for i, (source, samples, executed, shared, ideal, glob, lsb, bar) in enumerate(rows):
                out.writerow([hex(i * 16), source, samples, f"{executed:,}", shared, ideal, glob,
                              lsb, bar, lsb])  # fmt: skip


def test_regions_split_at_barriers_and_sum_each(tmp_path, capsys):
    page = tmp_path / "k_source.csv"
    _page(page, {
        "specux_fft_block": [
            ("      LDG.E.64 R2, desc[UR4][R4.64]", 10, 1000, 0, 0, 1000, 9, 0),
            ("      FADD R2, R2, R3", 2, 3000, 0, 0, 0, 1, 0),
            ("      BAR.SYNC.DEFER_BLOCKING 0x0", 4, 1000, 0, 0, 0, 0, 4),
            ("      LDS.64 R6, [R8]", 1, 2000, 4000, 2000, 0, 0, 0),
            ("@P0   FFMA R6, R6, R7, R9", 3, 1000, 0, 0, 0, 0, 0),
            ("      EXIT", 0, 500, 0, 0, 0, 0, 0),
        ],
        "specux_gather": [("      STG.E [R2.64], R3", 5, 700, 0, 0, 0, 5, 0)],
    })  # fmt: skip
    found = ncu_regions.kernels(page)
    assert [name for name, _ in found] == ["specux_fft_block", "specux_gather"]
    first, second = ncu_regions.split(found[0][1])
    a, b = ncu_regions.summarize(first), ncu_regions.summarize(second)
    assert (a["instructions"], a["samples"], a["global_requests"]) == (5000, 16, 1000)
    assert a["ops"] == {"LDG": 1000, "FADD": 3000, "BAR": 1000}
    assert a["reasons"] == {"long_sb": 10, "barrier": 4}  # the "(Not Issued)" column left out
    assert (b["instructions"], b["shared"], b["shared_ideal"]) == (3500, 4000, 2000)
    assert b["ops"] == {"LDS": 2000, "FFMA": 1000, "EXIT": 500}  # a predicate is no opcode
    ncu_regions.regions(page)
    printed = capsys.readouterr().out
    assert "specux_fft_block: 0.01M warp instructions, 20 stall samples" in printed
    assert "shared wavefronts 0.00M (conflict-free 0.00M)" in printed
    assert "specux_gather" in printed


def test_survey_reads_ncus_raw_page(capsys):
    """tools/ncu_regions.py survey: a kernel a row of the raw page (a header, a units row),
    time in microseconds whatever ncu's unit, missing metrics as None, stalls sorted."""
    stall = "smsp__average_warps_issue_stalled_{}_per_issue_active.ratio"
    header = ["ID", "Kernel Name", "Grid Size", "Block Size", "gpu__time_duration.sum",
              "sm__throughput.avg.pct_of_peak_sustained_elapsed",
              "gpu__dram_throughput.avg.pct_of_peak_sustained_elapsed",
              "launch__registers_per_thread", stall.format("long_scoreboard"),
              stall.format("mio_throttle"), stall.format("selected"), stall.format("barrier")]
    units = ["", "", "", "", "usecond", "%", "%", "register/thread", "", "", "", ""]
    rows = [["0", "specux_fft_block(const void*)", "(10016, 1, 1)", "(128, 1, 1)", "78.25",
             "61.5", "11.0", "53", "1.25", "3.5", "1", "0.5"],
            ["1", "void at::native::reduce_kernel<512>", "(1, 1, 1)", "(512, 1, 1)",
             "1,250.0", "2.0", "0.5", "32", "", "", "", ""],
            ["2", "short row"]]  # fmt: skip
    text = "\n".join(",".join(f'"{c}"' for c in r) for r in [header, units, *rows])
    found = ncu_regions.survey_rows('==PROF== a line before the table\n' + text)
    assert [r["kernel"][:12] for r in found] == ["specux_fft_b", "void at::nat"]
    first, second = found
    assert (first["us"], first["SM%"], first["DRAM%"], first["regs"]) == (78.25, 61.5, 11.0, 53)
    assert first["L1%"] is None and first["occ%"] is None  # not in this page
    assert first["stalls"] == [("mio_throttle", 3.5), ("long_scoreboard", 1.25),
                               ("barrier", 0.5)]  # "selected" is no stall  # fmt: skip
    assert second["us"] == 1250.0 and second["stalls"] == []
    nanoseconds = text.replace('"usecond"', '"nsecond"')
    assert ncu_regions.survey_rows(nanoseconds)[0]["us"] == 78.25e-3
    lines = ncu_regions.survey_table("mel", found)
    assert lines[0] == "mel: 2 kernel(s), 1328.2 us under ncu"
    assert "specux_fft_block " in lines[1] and "78.2 us" in lines[1]
    assert "SM% 62" in lines[1] and "L1% -" in lines[1]
    assert "stalls/issue: mio_throttle 3.5, long_scoreboard 1.2, barrier 0.5" in lines[1]
    assert lines[2].endswith("stalls/issue: -")
    assert ncu_regions.survey_rows("no table here") == []
    with pytest.raises(SystemExit):
        ncu_regions.main(["survey", "out", "--only", "mel,nope"])
    assert "unknown workload(s) ['nope']" in capsys.readouterr().err


def test_fft_bench_workloads_are_perfs(monkeypatch):
    """bench/fft.py's workloads (which tools/ncu_regions.py profiles too): PERF.md's shapes,
    complex64 for the ffts and float32 for rfft_odd."""
    torch = pytest.importorskip("torch")
    monkeypatch.syspath_prepend(str(_PATH.parents[1] / "bench"))
    import fft

    expect = {"fft_b": ((16384, 1024), torch.complex64), "fft_big": ((2**24,), torch.complex64),
              "fft_prime": ((1000003,), torch.complex64),
              "rfft_odd": ((16384, 1000), torch.float32)}  # fmt: skip
    for name, (shape, dtype) in expect.items():
        host, call = fft.workload(name)
        assert (tuple(host.shape), host.dtype) == (shape, dtype), name
        assert call.__name__ == ("rfft" if name == "rfft_odd" else "fft"), name
    assert list(fft.SHAPES) == list(expect)


def test_fft_bench_bound_copies_move_every_value_once(monkeypatch):
    """bench/fft.py --bounds' copies (on the host, a small matrix): the strided reads take
    x's pieces column by column into consecutive places of y, the strided writes the
    reverse; each is a permutation of x; a size that is no whole matrix is refused."""
    torch = pytest.importorskip("torch")
    monkeypatch.syspath_prepend(str(_PATH.parents[1] / "bench"))
    import fft

    rows, groups, piece = 3, 5, 2
    x = torch.complex(torch.arange(30.0), -torch.arange(30.0))
    pieces = x.view(rows, groups, piece)
    expect = {"contiguous": x,
              "strided reads": pieces.transpose(0, 1).reshape(-1),
              # y's piece (r, g) is x's piece g * rows + r
              "strided writes": x.view(groups, rows, piece).transpose(0, 1).reshape(-1)}
    for label, copy in fft.bound_copies(x, y := torch.zeros_like(x), rows, piece).items():
        y.zero_()
        copy()
        assert torch.equal(y, expect[label]), label
        assert torch.equal(torch.sort(y.real).values, x.real), label
    with pytest.raises(ValueError, match="whole 4-value pieces"):
        fft.bound_copies(x, x.clone(), 4, 4)


def test_unknown_workload_is_refused():
    with pytest.raises(SystemExit):
        ncu_regions.main(["run", "nope", "out"])


_GPU_CHECK = Path(__file__).resolve().parents[1] / "tools" / "gpu_check.py"
_gspec = importlib.util.spec_from_file_location("gpu_check", _GPU_CHECK)
gpu_check = importlib.util.module_from_spec(_gspec)
_gspec.loader.exec_module(gpu_check)


def test_gpu_check_deals_every_test_once_round_robin():
    ids = [f"tests/test_a.py::test_{i}" for i in range(10)]
    shards = gpu_check.deal(ids, 3)
    assert shards == [ids[0::3], ids[1::3], ids[2::3]]
    assert sorted(sum(shards, [])) == sorted(ids)
    assert gpu_check.deal(ids[:2], 6) == [[ids[0]], [ids[1]]]  # no empty process
    assert gpu_check.deal([], 4) == []
    with pytest.raises(ValueError, match="jobs must be at least 1, got 0"):
        gpu_check.deal(ids, 0)


def test_gpu_check_dry_run_prints_the_sanitizer_and_bench_commands(tmp_path, capsys):
    code = gpu_check.main(["--out", str(tmp_path), "--steps", "sanitize,bench", "--only",
                           "mel,mfcc", "--repeats", "5", "--dry-run"])  # fmt: skip
    assert code == 0
    printed = capsys.readouterr().out
    for tool in ("racecheck", "memcheck"):
        for workload in ("sanitize_transforms", "sanitize_fft"):
            assert f"compute-sanitizer --tool {tool} " in printed
            assert f"tools/{workload}.py" in printed
    assert "bench/transforms.py --graph --repeats 5 --only mel,mfcc" in printed
    assert "tests-0" not in printed


def test_gpu_check_shows_the_files_conftest_left_out(tmp_path):
    """The line tests/conftest.py prints under ``-m cuda`` for files whose reference is
    missing is the line gpu_check passes on from its collection (run here with librosa
    blocked by an import hook, as on a GPU machine without it)."""
    import os
    import subprocess
    import sys

    hook = tmp_path / "sitecustomize.py"
    hook.write_text(
        "import importlib.abc, sys\n"
        "class Block(importlib.abc.MetaPathFinder):\n"
        "    def find_spec(self, name, path, target=None):\n"
        "        if name.split('.')[0] == 'librosa':\n"
        "            raise ModuleNotFoundError(name)\n"
        "sys.meta_path.insert(0, Block())\n"
    )  # fmt: skip
    env = {**os.environ, "PYTHONPATH": str(tmp_path)}
    done = subprocess.run([sys.executable, "-m", "pytest", "--collect-only", "-q", "-m", "cuda",
                           "tests"], cwd=_GPU_CHECK.parents[1], env=env, capture_output=True,
                          text=True, check=False)  # fmt: skip
    assert done.returncode in (0, 5), done.stdout[-2000:] + done.stderr[-2000:]
    lines = gpu_check.left_out(done.stdout)
    assert len(lines) == 1 and "test_tuning.py (librosa)" in lines[0]
    assert gpu_check.left_out("1 passed\n") == []


@pytest.mark.parametrize("argv, message", [
    (["--steps", "tests,bogus"], "--steps: unknown bogus; allowed: tests, sanitize, bench"),
    (["--jobs", "0"], "--jobs must be at least 1, got 0"),
])  # fmt: skip
def test_gpu_check_refuses_bad_arguments(tmp_path, capsys, argv, message):
    with pytest.raises(SystemExit) as raised:
        gpu_check.main(["--out", str(tmp_path), "--dry-run", *argv])
    assert raised.value.code == 2
    assert message in capsys.readouterr().err


@pytest.fixture
def ab(monkeypatch):
    """tools/ab.py as a module."""
    spec = importlib.util.spec_from_file_location("ab", _PATH.parent / "ab.py")
    module = importlib.util.module_from_spec(spec)
    monkeypatch.setitem(sys.modules, "ab", module)  # (dataclasses look their module up)
    spec.loader.exec_module(module)
    return module


def test_ab_variants_parse_and_alternate(ab, capsys):
    """tools/ab.py: a variant is a name, a tree and attributes to set (literals); malformed
    ones are refused by what is wrong; the processes alternate variant by variant, round by
    round, and only the first round saves its results (dry run: no GPU needed)."""
    v = ab.parse_variant("proj@/tmp/tree:specux.kernels.transform_exec._PROJECT_KERNEL=True;"
                         "a.b.c=(1, 'x')")  # fmt: skip
    assert v.name == "proj" and v.tree == Path("/tmp/tree").resolve()
    assert v.overrides == [("specux.kernels.transform_exec", "_PROJECT_KERNEL", True),
                           ("a.b.c".rpartition(".")[0], "c", (1, "x"))]  # fmt: skip
    assert ab.parse_variant("base") == ab.Variant("base")
    for bad, what in (("1x", "identifier"), ("v:attr=1", "module.attr=value"),
                      ("v:m.a=oops", "Python literal")):  # fmt: skip
        with pytest.raises(ValueError, match=what):
            ab.parse_variant(bad)
    assert ab.main(["--variant", "base", "--variant", "new:m.a=1", "--rounds", "2",
                    "--only", "mfcc", "--dry-run"]) == 0  # fmt: skip
    lines = capsys.readouterr().out.splitlines()
    assert [line.split("--child ")[1].split()[0] for line in lines] == [
        "base", "new:m.a=1", "base", "new:m.a=1"]
    assert ["--save" in line for line in lines] == [True, True, False, False]
    with pytest.raises(SystemExit):
        ab.main(["--variant", "base", "--dry-run"])  # one variant: nothing to compare


def test_ab_runs_its_variants_on_the_host(ab, capsys):
    """tools/ab.py end to end with its host smoke settings (eager CPU calls, a scaled
    workload): a variant setting an attribute and one naming a tree (this checkout) time
    the same results bit for bit; a variant setting a missing attribute fails and is
    reported, and the exit status says so."""
    pytest.importorskip("torch")
    common = ["--only", "mfcc", "--rounds", "1", "--device", "cpu", "--scale", "0.005",
              "--warmup", "0", "--repeats", "1", "--calls", "1"]  # fmt: skip
    root = _PATH.parents[1]
    assert ab.main(["--variant", "base", "--variant",
                    "proj:specux.kernels.transform_exec._PROJECT_KERNEL=True",
                    "--variant", f"tree@{root}", *common]) == 0  # fmt: skip
    table = capsys.readouterr().out.split("workload")[1].splitlines()
    assert [line.split()[1] for line in table[1:]] == ["base", "proj", "tree"]
    assert [line.split()[4] for line in table[2:]] == ["same", "same"]
    assert ab.main(["--variant", "base", "--variant", "bad:specux.nothing_here=1",
                    *common]) == 1  # fmt: skip
    assert "has no attribute 'nothing_here'" in capsys.readouterr().out


def test_ab_runs_bench_fft_workloads(ab, capsys):
    """tools/ab.py takes bench/fft.py's workloads too (at their PERF.md shape): rfft_odd
    on the host, the four-step switch set in one variant, the same bits in both."""
    pytest.importorskip("torch")
    assert ab.main(["--variant", "base", "--variant",
                    "staged:specux.kernels.plan.INTERLEAVE_COLUMNS=False", "--only",
                    "rfft_odd", "--rounds", "1", "--device", "cpu", "--warmup", "0",
                    "--repeats", "1", "--calls", "1"]) == 0  # fmt: skip
    table = capsys.readouterr().out.split("workload")[1].splitlines()
    assert [line.split()[:2] for line in table[1:]] == [["rfft_odd", "base"],
                                                        ["rfft_odd", "staged"]]
    assert table[2].split()[4] == "same"
