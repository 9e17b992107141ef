"""Where a generated kernel's time goes: ncu's source-level SASS counters, summed by region.

A block kernel's SASS falls into regions between its barriers (loads and the first stage,
each exchange, the last stage and stores, a filterbank reduce): this sums, per region, the
warp instructions executed, the stall samples and their top reasons, the shared-memory
wavefronts against their conflict-free count and the L1 requests of global loads, and
counts the instructions by opcode. docs/benchmarks.md quotes its output.

On the GPU machine (ncu needs the hardware counters: ``--clock-control none`` there):

    PYTHONPATH=. python tools/ncu_regions.py run mel $OUT     # profile, export, summarize
    PYTHONPATH=. python tools/ncu_regions.py profiled mel     # what `run` profiles

Anywhere, on an exported page (``ncu -i R.ncu-rep --page source --csv --print-source sass``):

    python tools/ncu_regions.py regions mel_sass.csv

Workloads: ../shared/PERF.md's, as bench/transforms.py and bench/fft.py run them (mel_bwd:
the forward and ``sum().backward()``).

Written after the 2026-12-03 profiles of docs/benchmarks.md: their ncu commands (a scratch
script's) are the ones ``run`` issues, and ``regions`` reproduces their tables from the pages
they exported; ``run`` itself has not yet run on the GPU machine in this form.

``survey`` profiles one call of each PERF.md workload whole -- every kernel it launches,
specux's and torch's, between ``cudaProfilerStart`` and ``Stop`` after two warm-up calls --
with ncu's SpeedOfLight, Occupancy, LaunchStats, WarpStateStats and ComputeWorkloadAnalysis
sections, and prints a line a kernel: time, SM / DRAM / L1 throughput, issue slots busy,
achieved / theoretical occupancy, registers, launch shape and the top stall reasons (warps
stalled per issued instruction). The issues ask for a profile of every workload short of
its target; this is it, in one command:

    PYTHONPATH=. python tools/ncu_regions.py survey $OUT [--only mel,cqt]
"""

from __future__ import annotations

import argparse
import collections
import csv
import re
import subprocess
import sys
from pathlib import Path

# bench/transforms.py's workloads (mel_bwd: forward and backward) and bench/fft.py's
WORKLOADS = ("mel", "mel_bwd", "stft_c", "stft_p", "istft", "mfcc", "cqt", "conv", "fft_b",
             "fft_big", "fft_prime", "rfft_odd")
# ncu's raw metrics ``survey`` prints: (column, metric)
_SURVEY_METRICS = (
    ("SM%", "sm__throughput.avg.pct_of_peak_sustained_elapsed"),
    ("mem%", "gpu__compute_memory_throughput.avg.pct_of_peak_sustained_elapsed"),
    ("DRAM%", "gpu__dram_throughput.avg.pct_of_peak_sustained_elapsed"),
    ("L1%", "l1tex__throughput.avg.pct_of_peak_sustained_active"),
    ("issue%", "sm__inst_issued.avg.pct_of_peak_sustained_elapsed"),
    ("occ%", "sm__warps_active.avg.pct_of_peak_sustained_active"),
    ("max%", "sm__maximum_warps_per_active_cycle_pct"),
    ("regs", "launch__registers_per_thread"),
)
_STALL = re.compile(r"^smsp__average_warps_issue_stalled_(\w+?)_per_issue_active\.ratio$")


def _call(name: str):
    """A zero-argument call of workload ``name`` (WORKLOADS) on the GPU."""
    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "bench"))
    if name.startswith(("fft_", "rfft_")):  # bench/fft.py's
        import fft

        host, ours = fft.workload(name)
        x = host.cuda()
        return lambda: ours(x)
    import transforms

    run, inputs = transforms._runnable(name, "cuda", 1.0)
    return lambda: run(inputs)


def profiled(name: str) -> None:
    """Two warm-up calls of ``name``, then one between cudaProfilerStart and Stop (the call
    ``run`` and ``survey`` profile)."""
    import torch

    call = _call(name)
    for _ in range(2):
        call()
    torch.cuda.synchronize()
    torch.cuda.profiler.start()
    call()
    torch.cuda.synchronize()
    torch.cuda.profiler.stop()


def run(name: str, out: Path) -> None:
    """Profile the specux kernels of one call of ``name`` (:func:`profiled`) with ncu, export
    the source and details pages to ``out`` and print the region table."""
    out.mkdir(parents=True, exist_ok=True)
    me = [sys.executable, str(Path(__file__).resolve())]
    report = out / name
    subprocess.run(["ncu", "--clock-control", "none", "--set", "full", "--import-source", "no",
                    "--profile-from-start", "off", "-k", "regex:specux_", "-f", "-o",
                    str(report), *me, "profiled", name],
                   check=True, stdout=subprocess.DEVNULL)  # fmt: skip
    pages = {"source": ["--page", "source", "--csv", "--print-source", "sass"],
             "details": ["--page", "details", "--csv"]}  # fmt: skip
    for page, flags in pages.items():
        text = subprocess.run(["ncu", "-i", f"{report}.ncu-rep", *flags], check=True,
                              capture_output=True, text=True).stdout  # fmt: skip
        (out / f"{name}_{page}.csv").write_text(text)
    regions(out / f"{name}_source.csv")


def _number(text: str) -> float:
    try:
        return float(text.replace(",", ""))
    except ValueError:
        return 0.0


def kernels(path: Path) -> list[tuple[str, list[dict[str, str]]]]:
    """The kernels of an exported source page: (name, its SASS rows as dicts)."""
    found: list[tuple[str, list[dict[str, str]]]] = []
    header: list[str] | None = None
    with open(path, newline="") as f:
        for row in csv.reader(f):
            if row and row[0] == "Kernel Name":
                found.append((row[1] if len(row) > 1 else "?", []))
                header = None
            elif header is None:
                header = row
            elif found and len(row) == len(header):
                found[-1][1].append(dict(zip(header, row)))
    return found


def split(rows: list[dict[str, str]]) -> list[list[dict[str, str]]]:
    """SASS rows cut after each barrier and exit (a block kernel's phases)."""
    parts: list[list[dict[str, str]]] = [[]]
    for row in rows:
        parts[-1].append(row)
        if re.search(r"\bBAR\.|\bEXIT\b", row["Source"]):
            parts.append([])
    return [part for part in parts if part]


def _opcode(source: str) -> str:
    return re.sub(r"^\s*(@!?U?P\w+\s+)?", "", source).split()[0].split(".")[0]


def summarize(rows: list[dict[str, str]]) -> dict:
    """One region's sums (see the module docstring)."""
    executed = [_number(r["Instructions Executed"]) for r in rows]
    stalls = [k for k in rows[0] if k.startswith("stall_") and "Not Issued" not in k]
    ops: collections.Counter = collections.Counter()
    for row, n in zip(rows, executed):
        ops[_opcode(row["Source"])] += n
    reasons = collections.Counter({k[6:]: sum(_number(r[k]) for r in rows) for k in stalls})
    return {
        "instructions": sum(executed),
        "samples": sum(_number(r["Warp Stall Sampling (All Samples)"]) for r in rows),
        "shared": sum(_number(r["L1 Wavefronts Shared"]) for r in rows),
        "shared_ideal": sum(_number(r["L1 Wavefronts Shared Ideal"]) for r in rows),
        "global_requests": sum(_number(r["L1 Tag Requests Global"]) for r in rows),
        "ops": ops,
        "reasons": reasons,
    }


def regions(path: Path) -> None:
    """Print each kernel's region table."""
    for name, rows in kernels(Path(path)):
        parts = [summarize(part) for part in split(rows)]
        total = sum(p["instructions"] for p in parts) or 1.0
        samples = sum(p["samples"] for p in parts) or 1.0
        print(f"{name}: {total / 1e6:.2f}M warp instructions, {samples:.0f} stall samples")
        for i, p in enumerate(parts):
            if p["instructions"] < 0.005 * total and p["samples"] < 0.02 * samples:
                continue  # a guard or tail path that never ran
            top = ", ".join(f"{k} {v / max(p['samples'], 1):.0%}"
                            for k, v in p["reasons"].most_common(3))  # fmt: skip
            ops = ", ".join(f"{k} {v / 1e6:.2f}M" for k, v in p["ops"].most_common(6))
            share = p["instructions"] / total
            print(f"  region {i}: {p['instructions'] / 1e6:6.2f}M ({share:4.0%})"
                  f"  samples {p['samples'] / samples:4.0%}  shared wavefronts "
                  f"{p['shared'] / 1e6:.2f}M (conflict-free {p['shared_ideal'] / 1e6:.2f}M)"
                  f"  global L1 requests {p['global_requests'] / 1e6:.2f}M")  # fmt: skip
            print(f"    stalls: {top}")
            print(f"    ops: {ops}")


def survey_rows(text: str) -> list[dict]:
    """The kernels of ncu's raw page (``--page raw --csv``: a header row, a units row, a row
    a kernel): name, grid and block, time in microseconds, _SURVEY_METRICS by column (None
    where ncu did not give one) and the stall reasons, most stalled first."""
    rows = list(csv.reader(text.splitlines()))
    start = next((i for i, r in enumerate(rows) if "Kernel Name" in r), None)
    if start is None or len(rows) < start + 2:
        return []
    header, units = rows[start], rows[start + 1]
    scale = {"nsecond": 1e-3, "usecond": 1.0, "msecond": 1e3, "second": 1e6}
    found = []
    for r in rows[start + 2:]:
        if len(r) != len(header):
            continue
        value = dict(zip(header, r))
        unit = dict(zip(header, units))
        row = {"kernel": value["Kernel Name"], "grid": value.get("Grid Size", ""),
               "block": value.get("Block Size", "")}  # fmt: skip
        duration = value.get("gpu__time_duration.sum", "")
        row["us"] = (_number(duration) * scale.get(unit.get("gpu__time_duration.sum", ""), 1.0)
                     if duration else None)  # fmt: skip
        for column, metric in _SURVEY_METRICS:
            row[column] = _number(value[metric]) if value.get(metric, "") else None
        stalls = [(m.group(1), _number(v)) for k, v in value.items()
                  if (m := _STALL.match(k)) and v and m.group(1) != "selected"]  # fmt: skip
        row["stalls"] = sorted(stalls, key=lambda kv: -kv[1])
        found.append(row)
    return found


def survey_table(name: str, rows: list[dict]) -> list[str]:
    """``survey``'s lines for one workload (see :func:`survey_rows`)."""
    total = sum(r["us"] or 0.0 for r in rows)
    lines = [f"{name}: {len(rows)} kernel(s), {total:.1f} us under ncu"]
    for r in rows:
        kernel = re.sub(r"\(.*", "", r["kernel"])[:40]
        metrics = "  ".join(f"{c} {'-' if r[c] is None else f'{r[c]:.0f}'}"
                            for c, _ in _SURVEY_METRICS)  # fmt: skip
        stalls = ", ".join(f"{k} {v:.1f}" for k, v in r["stalls"][:3]) or "-"
        us = "-" if r["us"] is None else f"{r['us']:.1f}"
        lines.append(f"  {kernel:40s} {r['grid']:>14s} x {r['block']:<12s} {us:>7s} us  "
                     f"{metrics}  stalls/issue: {stalls}")  # fmt: skip
    return lines


def survey(names: list[str], out: Path) -> int:
    """Profile one call of each workload of ``names`` whole with ncu (see the module
    docstring); reports and raw pages go to ``out``. Returns how many failed."""
    out.mkdir(parents=True, exist_ok=True)
    me = [sys.executable, str(Path(__file__).resolve())]
    sections = [a for s in ("SpeedOfLight", "Occupancy", "LaunchStats", "WarpStateStats",
                            "ComputeWorkloadAnalysis") for a in ("--section", s)]  # fmt: skip
    failed = 0
    for name in names:
        report = out / f"survey_{name}"
        done = subprocess.run(["ncu", "--clock-control", "none", "--profile-from-start", "off",
                               *sections, "-f", "-o", str(report), *me, "profiled", name],
                              capture_output=True, text=True)  # fmt: skip
        if done.returncode != 0:
            failed += 1
            print(f"{name}: ncu failed ({done.returncode}): {done.stderr[-600:].strip()}")
            continue
        text = subprocess.run(["ncu", "-i", f"{report}.ncu-rep", "--page", "raw", "--csv"],
                              check=True, capture_output=True, text=True).stdout  # fmt: skip
        (out / f"survey_{name}_raw.csv").write_text(text)
        print("\n".join(survey_table(name, survey_rows(text))), flush=True)
    return failed


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = parser.add_subparsers(dest="command", required=True)
    p = sub.add_parser("run", help="profile a workload with ncu and summarize it")
    p.add_argument("workload", choices=WORKLOADS)
    p.add_argument("out", type=Path, help="folder for the report and its CSV pages")
    p = sub.add_parser("regions", help="summarize an exported source page")
    p.add_argument("csv", type=Path)
    p = sub.add_parser("survey", help="profile every kernel of each workload's call")
    p.add_argument("out", type=Path, help="folder for the reports and their raw pages")
    p.add_argument("--only", help="comma-separated workloads (default: all)")
    p = sub.add_parser("profiled", help="a workload's call between profiler start and stop")
    p.add_argument("workload", choices=WORKLOADS)
    args = parser.parse_args(argv)
    if args.command == "run":
        run(args.workload, args.out)
    elif args.command == "survey":
        names = args.only.split(",") if args.only else list(WORKLOADS)
        unknown = [n for n in names if n not in WORKLOADS]
        if unknown:
            parser.error(f"--only: unknown workload(s) {unknown}; known: {','.join(WORKLOADS)}")
        return 1 if survey(names, args.out) else 0
    elif args.command == "profiled":
        profiled(args.workload)
    else:
        regions(args.csv)
    return 0


if __name__ == "__main__":
    sys.exit(main())
