"""The GPU checks of a change, in one command that fits a time-limited GPU machine:

    PYTHONPATH=. python3 tools/gpu_check.py --out /tmp/gpu-check [--jobs 6] [--budget 540]
        [--steps tests,sanitize,bench] [--only mel,mel_bwd] [-k EXPR]

- ``tests``: every test marked ``cuda`` (``pytest -m cuda``), its test ids dealt round-robin
  into ``--jobs`` pytest processes that run side by side (one GPU serves them all; a file's
  parametrized cases, the slow ones among them, spread over every process). Each process
  gets the time that is left of ``--budget``; one that runs past it is stopped and reported.
- ``sanitize``: ``compute-sanitizer --tool racecheck`` and ``--tool memcheck`` over
  tools/sanitize_transforms.py and tools/sanitize_fft.py (skipped, and said so, where
  compute-sanitizer is not on PATH), in parallel with the tests.
- ``bench``: ``bench/transforms.py --graph`` (``--only``'s workloads, or all), first and
  alone on the GPU, the peers side by side in its process, so its ratios are the ones to
  quote.

The test processes share one GPU's memory: a test that checks for free memory before a
large allocation (tests/test_cuda_transforms.py's 2 ** 31-sample signals) can pass its check
and then find the memory taken by the others; rerun such a failure alone.

Every step's output goes to a log under ``--out`` (one file a step, nothing else); the
summary at the end prints each step's last lines (pytest's counts, the sanitizer's error
summary, the bench's table) and the exit status is non-zero when any step failed or ran
out of time. ``--dry-run`` prints the commands without running them (no GPU needed).
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
STEPS = ("tests", "sanitize", "bench")


def deal(ids: list[str], jobs: int) -> list[list[str]]:
    """``ids`` dealt round-robin into at most ``jobs`` non-empty shards (every id once, in
    its collection order within a shard)."""
    if jobs < 1:
        raise ValueError(f"jobs must be at least 1, got {jobs}")
    shards = [ids[i::jobs] for i in range(jobs)]
    return [shard for shard in shards if shard]


def collect(python: str, keyword: str | None) -> list[str]:
    """The ids of the tests marked ``cuda`` (``pytest --collect-only``)."""
    cmd = [python, "-m", "pytest", "--collect-only", "-q", "-m", "cuda", "tests"]
    if keyword:
        cmd += ["-k", keyword]
    done = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, check=False)
    ids = [line for line in done.stdout.splitlines() if line.startswith("tests/") and "::" in line]
    if done.returncode not in (0, 5):  # 5: none collected
        sys.stderr.write(done.stdout[-4000:] + done.stderr[-4000:])
        raise SystemExit(f"collecting the cuda tests failed (pytest exit {done.returncode})")
    for line in left_out(done.stdout):
        print(line, flush=True)
    return ids


def left_out(output: str) -> list[str]:
    """The lines of pytest's ``output`` that name test files tests/conftest.py left out of a
    ``-m cuda`` run (a reference such as librosa not installed on the GPU machine)."""
    return [line for line in output.splitlines() if line.startswith(LEFT_OUT)]


LEFT_OUT = "not collected, a reference is not installed:"  # tests/conftest.py's summary line


def _commands(args: argparse.Namespace, ids: list[str]) -> dict[str, list[str]]:
    py = args.python
    commands: dict[str, list[str]] = {}
    if "tests" in args.steps:
        # (no file of each shard's ids: a device machine returns few files, and the logs
        # are what must come back; pytest -q prints the failing ids)
        for i, shard in enumerate(deal(ids, args.jobs)):
            commands[f"tests-{i}"] = [py, "-m", "pytest", "-q", "-p", "no:cacheprovider",
                                      "-m", "cuda", *shard]  # fmt: skip
    if "sanitize" in args.steps:
        for workload in ("sanitize_transforms", "sanitize_fft"):
            for tool in ("racecheck", "memcheck"):
                commands[f"{tool}-{workload}"] = [
                    "compute-sanitizer", "--tool", tool, py, f"tools/{workload}.py"]  # fmt: skip
    return commands


def _bench_command(args: argparse.Namespace) -> list[str]:
    cmd = [args.python, "bench/transforms.py", "--graph", "--repeats", str(args.repeats)]
    if args.only:
        cmd += ["--only", args.only]
    return cmd


def _tail(path: Path, lines: int) -> str:
    text = path.read_text(errors="replace").rstrip().splitlines() if path.exists() else []
    return "\n".join(text[-lines:]) if text else "(no output)"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, required=True, help="folder for the logs")
    parser.add_argument(
        "--steps",
        default=",".join(STEPS),
        help=f"comma-separated steps among {', '.join(STEPS)} (default all)",
    )
    parser.add_argument("--jobs", type=int, default=6, help="pytest processes (default 6)")
    parser.add_argument(
        "--budget",
        type=float,
        default=540.0,
        help="seconds for the whole run; steps still running then are "
        "stopped and reported (default 540)",
    )
    parser.add_argument("-k", dest="keyword", help="pytest -k expression for the tests")
    parser.add_argument("--only", help="bench/transforms.py --only workloads")
    parser.add_argument("--repeats", type=int, default=10, help="bench samples (default 10)")
    parser.add_argument("--python", default=sys.executable, help=argparse.SUPPRESS)
    parser.add_argument("--dry-run", action="store_true", help="print the commands only")
    args = parser.parse_args(argv)
    steps = [s for s in args.steps.split(",") if s]
    unknown = sorted(set(steps) - set(STEPS))
    if unknown:
        parser.error(f"--steps: unknown {', '.join(unknown)}; allowed: {', '.join(STEPS)}")
    if args.jobs < 1:
        parser.error(f"--jobs must be at least 1, got {args.jobs}")
    args.steps = steps
    args.out.mkdir(parents=True, exist_ok=True)
    start = time.monotonic()

    ids = collect(args.python, args.keyword) if "tests" in steps else []
    commands = _commands(args, ids)
    if "sanitize" in steps and shutil.which("compute-sanitizer") is None and not args.dry_run:
        print("sanitize: compute-sanitizer is not on PATH; skipped")
        commands = {
            k: v for k, v in commands.items() if not k.startswith(("racecheck", "memcheck"))
        }
    bench = _bench_command(args) if "bench" in steps else None
    if args.dry_run:
        for name, cmd in commands.items():
            shown = cmd if len(cmd) < 12 else [*cmd[:8], f"... ({len(cmd) - 8} test ids)"]
            print(f"{name}: {' '.join(shown)}")
        if bench:
            print(f"bench: {' '.join(bench)}")
        return 0

    env = dict(os.environ, PYTHONPATH=f"{ROOT}{os.pathsep}{os.environ.get('PYTHONPATH', '')}")
    status: dict[str, str] = {}

    def wait(name: str, proc: subprocess.Popen) -> None:
        left = args.budget - (time.monotonic() - start)
        try:
            code = proc.wait(timeout=max(left, 1.0))
            status[name] = "ok" if code == 0 else f"exit {code}"
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
            status[name] = "stopped: out of time"

    def launch(name: str, cmd: list[str]):
        log = open(args.out / f"{name}.log", "w")
        return subprocess.Popen(cmd, cwd=ROOT, env=env, stdout=log, stderr=subprocess.STDOUT), log

    names = (["bench"] if bench else []) + list(commands)
    if bench:  # alone on the GPU
        proc, log = launch("bench", bench)
        wait("bench", proc)
        log.close()
    running = {name: launch(name, cmd) for name, cmd in commands.items()}
    print(
        f"{len(ids)} cuda tests in {sum(k.startswith('tests') for k in commands)} processes; "
        f"{len(running)} processes started",
        flush=True,
    )
    for name, (proc, log) in running.items():
        wait(name, proc)
        log.close()

    for name in names:
        lines = 40 if name == "bench" else 3
        print(f"== {name}: {status[name]}\n{_tail(args.out / f'{name}.log', lines)}")
    print(f"gpu_check: {time.monotonic() - start:.0f} s")
    return 0 if all(s == "ok" for s in status.values()) else 1


if __name__ == "__main__":
    sys.exit(main())
