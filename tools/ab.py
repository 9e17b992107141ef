"""A/B timing of kernel variants on a GPU machine, in one command:

    PYTHONPATH=. python3 tools/ab.py --only mfcc,mfcc_bwd --rounds 2 \\
        --variant base \\
        --variant proj:specux.kernels.transform_exec._PROJECT_KERNEL=True

Each variant is a name, optionally a tree (``NAME@PATH``: a copy of the repository, e.g.
an older revision unpacked with ``git archive``; its ``specux`` and ``bench`` are imported
instead of this checkout's) and module attributes to set before anything runs
(``:module.attr=value``, several joined by ``;``, values Python literals). Every variant
runs in a fresh process, in turn, ``--rounds`` times (``base proj base proj``), so that
the processes alternate on the same GPU and a drift of the machine shows as a drift of the
base's rows. A process times bench/transforms.py's workloads (``--only``; ``NAME_bwd``
adds ``sum().backward()``) and bench/fft.py's (fft_b, fft_big, fft_prime, rfft_odd at
PERF.md's shapes, which ``--scale`` leaves alone) as CUDA graph replays, specux alone, and
saves its results. E.g. the four-step kernels staged against interleaved:

    PYTHONPATH=. python3 tools/ab.py --only fft_big,fft_prime --rounds 2 \\
        --variant base --variant staged:specux.kernels.plan.INTERLEAVE_COLUMNS=False

The table gives each variant's median of the rounds' times (ms) and, per round, the
times themselves; ``bits`` says whether its results equal the first variant's, bit for
bit (outputs, and the gradients of a ``_bwd`` row). Performance claims come from
bench/transforms.py and bench/fft.py, whose peers run in the same process; this compares
specux with itself.
"""

from __future__ import annotations

import argparse
import ast
import importlib
import json
import os
import statistics
import subprocess
import sys
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


@dataclass
class Variant:
    """A variant: its name, the tree it imports (None: this checkout) and the attributes
    it sets, ``(module, attribute, value)``."""

    name: str
    tree: Path | None = None
    overrides: list[tuple[str, str, object]] = field(default_factory=list)


def parse_variant(text: str) -> Variant:
    """``NAME[@PATH][:module.attr=value;...]`` (see the module docstring)."""
    head, _, sets = text.partition(":")
    name, _, tree = head.partition("@")
    if not name.isidentifier():
        raise ValueError(f"variant {text!r}: its name must be an identifier, got {name!r}")
    overrides = []
    for item in filter(None, (s.strip() for s in sets.split(";"))):
        target, eq, value = item.partition("=")
        module, dot, attr = target.strip().rpartition(".")
        if not (eq and dot and module and attr.isidentifier()):
            raise ValueError(f"variant {text!r}: {item!r} is not module.attr=value")
        try:
            parsed = ast.literal_eval(value.strip())
        except (ValueError, SyntaxError) as exc:
            raise ValueError(f"variant {text!r}: {value.strip()!r} is not a Python literal"
                             ) from exc  # fmt: skip
        overrides.append((module, attr, parsed))
    return Variant(name, Path(tree).resolve() if tree else None, overrides)


def _child(args: argparse.Namespace) -> None:
    """One variant's process: set its attributes, time the workloads, save the results."""
    variant = parse_variant(args.child)
    tree = variant.tree or ROOT
    sys.path[:0] = [str(tree), str(tree / "bench")]
    import torch

    import specux

    if not Path(specux.__file__).resolve().is_relative_to(tree):
        raise SystemExit(f"specux was imported from {specux.__file__}, not from {tree}")
    for module, attr, value in variant.overrides:
        mod = importlib.import_module(module)
        if not hasattr(mod, attr):
            raise SystemExit(f"{module} has no attribute {attr!r} to set")
        setattr(mod, attr, value)
    times, results = {}, {}
    for name in args.only.split(","):
        times[name], outs = _time_one(name, args)
        if args.save:  # the first round's results, compared bit for bit
            results[name] = [t.detach().cpu().contiguous() for t in outs]
        del outs
    if args.save:
        torch.save(results, args.save)
    print(json.dumps(times), flush=True)


def _time_one(name: str, args: argparse.Namespace) -> tuple[float, tuple]:
    """(median ms, the results) of one workload, specux alone, measured as
    bench/transforms.py measures it (``_measure``: graph replays on CUDA), or as bench/
    fft.py does for its workloads."""
    import fft
    import transforms

    if name in fft.SHAPES:
        return _time_fft(name, args)
    run, inputs = transforms._runnable(name, args.device, args.scale)
    settings = argparse.Namespace(graph=args.device == "cuda", warmup=args.warmup,
                                  repeats=args.repeats, calls=args.calls)  # fmt: skip
    res = transforms._measure(run, inputs, settings, args.device)
    if res.error is not None:
        raise SystemExit(f"{name}: {res.error}: {res.reason}")
    return res.ms, res.out if isinstance(res.out, tuple) else (res.out,)


def _time_fft(name: str, args: argparse.Namespace) -> tuple[float, tuple]:
    """bench/fft.py's workload ``name`` (its shape, not scaled), timed as that script times
    it: median_ms of graph replays on CUDA (``graphed``), eager calls on the host."""
    import fft
    from timing import graphed, median_ms

    host, ours = fft.workload(name)
    x = host.to(args.device)
    out = ours(x)
    call = graphed(lambda: ours(x)) if args.device == "cuda" else (lambda: ours(x))
    ms = median_ms(call, args.warmup, args.repeats, args.calls, args.device)
    return ms, (out,)


def _same_bits(a: list, b: list) -> bool:
    import torch

    return len(a) == len(b) and all(x.shape == y.shape and x.dtype == y.dtype
                                    and torch.equal(x.view(torch.uint8), y.view(torch.uint8))
                                    for x, y in zip(a, b))  # fmt: skip


def _rounds(args: argparse.Namespace, variants: list[Variant], folder: Path):
    """Every round's processes, variant by variant: (times per variant, the first round's
    results per variant, exit status)."""
    times: dict[str, list[dict]] = {v.name: [] for v in variants}
    saved: dict[str, Path] = {}
    status = 0
    for r in range(args.rounds):
        for text, v in zip(args.variant, variants):
            save = folder / f"{v.name}.pt"
            cmd = [sys.executable, str(Path(__file__).resolve()), "--child", text,
                   "--only", args.only, "--warmup", str(args.warmup),
                   "--repeats", str(args.repeats), "--calls", str(args.calls),
                   "--device", args.device, "--scale", str(args.scale)]  # fmt: skip
            if r == 0:
                cmd += ["--save", str(save)]
            if args.dry_run:
                print(" ".join(cmd))
                continue
            env = dict(os.environ, PYTHONPATH=str(v.tree or ROOT))
            try:
                done = subprocess.run(cmd, capture_output=True, text=True, env=env,
                                      timeout=args.timeout, check=False)  # fmt: skip
            except subprocess.TimeoutExpired:
                print(f"{v.name} round {r}: ran past {args.timeout} s", flush=True)
                status = 1
                continue
            lines = done.stdout.strip().splitlines()
            if done.returncode or not lines:
                print(f"{v.name} round {r} failed (exit {done.returncode}):\n"
                      f"{done.stderr[-3000:]}", flush=True)  # fmt: skip
                status = 1
                continue
            times[v.name].append(json.loads(lines[-1]))
            if r == 0:
                saved[v.name] = save
            print(f"{v.name} round {r}: {lines[-1]}", flush=True)
    if args.dry_run:
        return times, {}, status
    import torch

    return times, {name: torch.load(path) for name, path in saved.items()}, status


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--variant", action="append", default=[],
                        help="NAME[@TREE][:module.attr=value;...] (at least two)")
    parser.add_argument("--only", default="mel,mfcc",
                        help="bench/transforms.py workloads (NAME_bwd for forward + "
                        "backward) and bench/fft.py's")  # fmt: skip
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--warmup", type=int, default=5)
    parser.add_argument("--repeats", type=int, default=20)
    parser.add_argument("--calls", type=int, default=20)
    parser.add_argument("--timeout", type=float, default=300.0, help="seconds a process")
    parser.add_argument("--dry-run", action="store_true", help="print the processes only")
    # the host's smoke test (tests/test_tools.py): eager calls on the CPU, workloads scaled
    parser.add_argument("--device", default="cuda", help=argparse.SUPPRESS)
    parser.add_argument("--scale", type=float, default=1.0, help=argparse.SUPPRESS)
    parser.add_argument("--child", help=argparse.SUPPRESS)
    parser.add_argument("--save", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.child:
        _child(args)
        return 0
    variants = [parse_variant(v) for v in args.variant]
    if len(variants) < 2 or len({v.name for v in variants}) != len(variants):
        parser.error("give two --variant or more, with distinct names")
    if args.rounds < 1:
        parser.error(f"--rounds must be at least 1, got {args.rounds}")
    with tempfile.TemporaryDirectory(prefix="specux-ab-") as folder:  # first round's results
        times, results, status = _rounds(args, variants, Path(folder))
    if args.dry_run:
        return 0
    base = variants[0].name
    print(f"\n{'workload':<14}{'variant':<12}{'median ms':>10}{'vs ' + base:>10}  bits  rounds")
    for work in args.only.split(","):
        ref = statistics.median([t[work] for t in times[base]]) if times[base] else None
        for v in variants:
            runs = [t[work] for t in times[v.name]]
            if not runs:
                print(f"{work:<14}{v.name:<12}{'-':>10}")
                continue
            med = statistics.median(runs)
            ratio = f"{med / ref:.3f}" if ref else "-"
            bits = "-" if v.name == base or base not in results or v.name not in results else (
                "same" if _same_bits(results[base][work], results[v.name][work]) else "DIFF")
            print(f"{work:<14}{v.name:<12}{med:>10.4f}{ratio:>10}  {bits:<5} "
                  + " / ".join(f"{t:.4f}" for t in runs))  # fmt: skip
    return status


if __name__ == "__main__":
    raise SystemExit(main())
