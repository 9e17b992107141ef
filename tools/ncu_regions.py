"""Where a generated kernel's time goes: ncu's source-level SASS counters, summed by region.

A block kernel's SASS falls into regions between its barriers (loads and the first stage,
each exchange, the last stage and stores, a filterbank reduce): this sums, per region, the
warp instructions executed, the stall samples and their top reasons, the shared-memory
wavefronts against their conflict-free count and the L1 requests of global loads, and
counts the instructions by opcode. docs/benchmarks.md quotes its output.

On the GPU machine (ncu needs the hardware counters: ``--clock-control none`` there):

    PYTHONPATH=. python tools/ncu_regions.py run mel $OUT     # profile, export, summarize
    PYTHONPATH=. python tools/ncu_regions.py workload mel     # what `run` profiles

Anywhere, on an exported page (``ncu -i R.ncu-rep --page source --csv --print-source sass``):

    python tools/ncu_regions.py regions mel_sass.csv

Workloads: ../shared/PERF.md's mel, mfcc, stft_c, stft_p (x (64, 160000), n_fft 1024, hop
256), fft_b (complex64 (16384, 1024)) and fft_big (complex64 2 ** 24: two kernels).

Written after the 2026-12-03 profiles of docs/benchmarks.md: their ncu commands (a scratch
script's) are the ones ``run`` issues, and ``regions`` reproduces their tables from the pages
they exported; ``run`` itself has not yet run on the GPU machine in this form.
"""

from __future__ import annotations

import argparse
import collections
import csv
import re
import subprocess
import sys
from pathlib import Path

WORKLOADS = ("mel", "mfcc", "stft_c", "stft_p", "fft_b", "fft_big")
# specux kernels a call launches (fft_big: the four-step's two; mfcc: the mel kernel and the DCT)
_KERNELS = {"fft_big": 2, "mfcc": 2}
_CALLS = 4  # ncu profiles the third call's launches (two warm-up calls skipped)


def workload(name: str) -> None:
    """Run ``name`` ``_CALLS`` times on the GPU (the process ncu profiles)."""
    import torch

    import specux

    g = torch.Generator(device="cuda").manual_seed(0)
    if name in ("mel", "mfcc", "stft_c", "stft_p"):
        x = torch.randn(64, 160000, device="cuda", generator=g)
        mel = dict(sr=16000, n_fft=1024, hop_length=256, n_mels=80)
        calls = {
            "mel": lambda: specux.melspectrogram(x, **mel),
            "mfcc": lambda: specux.mfcc(x, n_mfcc=20, **mel),
            "stft_c": lambda: specux.stft(x, n_fft=1024, hop_length=256),
            "stft_p": lambda: specux.stft(x, n_fft=1024, hop_length=256, output="power"),
        }
        call = calls[name]
    else:
        shape = (16384, 1024) if name == "fft_b" else (2**24,)
        x = torch.randn(shape, dtype=torch.complex64, device="cuda", generator=g)
        call = lambda: specux.fft(x)  # noqa: E731
    for _ in range(_CALLS):
        call()
    torch.cuda.synchronize()


def run(name: str, out: Path) -> None:
    """Profile ``name``'s specux kernel(s) with ncu, export the source and details pages to
    ``out`` and print the region table."""
    out.mkdir(parents=True, exist_ok=True)
    me = [sys.executable, str(Path(__file__).resolve())]
    subprocess.run([*me, "workload", name], check=True)  # compiles (or loads) its kernels
    count = _KERNELS.get(name, 1)
    report = out / name
    subprocess.run(["ncu", "--clock-control", "none", "--set", "full", "--import-source", "no",
                    "-k", "regex:specux_", "--launch-skip", str(2 * count), "--launch-count",
                    str(count), "-f", "-o", str(report), *me, "workload", name],
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


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = parser.add_subparsers(dest="command", required=True)
    p = sub.add_parser("run", help="profile a workload with ncu and summarize it")
    p.add_argument("workload", choices=WORKLOADS)
    p.add_argument("out", type=Path, help="folder for the report and its CSV pages")
    p = sub.add_parser("workload", help="run a workload (the process ncu profiles)")
    p.add_argument("workload", choices=WORKLOADS)
    p = sub.add_parser("regions", help="summarize an exported source page")
    p.add_argument("csv", type=Path)
    args = parser.parse_args(argv)
    if args.command == "run":
        run(args.workload, args.out)
    elif args.command == "workload":
        workload(args.workload)
    else:
        regions(args.csv)
    return 0


if __name__ == "__main__":
    sys.exit(main())
