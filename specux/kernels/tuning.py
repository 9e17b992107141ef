"""Autotuning of the block kernels: variants of a planned kernel, the winners' table, timing.

The planner (:func:`specux.kernels.plan.block`) picks each block kernel's shape by rule: how
many transforms a thread block holds (``per_block``) and how many blocks an SM the compiler
must leave registers for (``min_blocks``). Those rules were timed on one GPU (docs/
benchmarks.md); :func:`autotune_call` times their alternatives on the user's GPU and call.

- :func:`variants` lists a kernel's alternatives the generator supports: ``per_block``
  halved or doubled (not for the four-step columns, whose launch maps rows to blocks, nor
  for the overlap-add kernels, whose ``per_block`` is their frames), within a block's 1024
  threads and the planner's shared-memory caps; and ``bound`` (``BlockSpec.bound``: the
  register bound as blocks an SM) at 1024, 1536 and 2048 threads an SM, or none.
- :func:`tuned` is the planner's last step: the rule's spec, or the winner recorded for it.
  The table is empty unless autotuning ran (or loaded winners from disk), so the planner's
  cost is one dict test.
- :func:`autotune_call` runs a call once recording the block kernels it launches, then for
  each kernel times every variant (coordinate descent: one kernel at a time, the others at
  their best so far) and keeps the fastest -- only when it gives the same output bits as the
  rule's kernel (changing ``per_block`` or the register bound changes no arithmetic), and
  only when it is faster by more than :data:`MARGIN`.
- Winners are stored per GPU model (name, architecture, SM count) and specux version in
  ``<cache dir>/autotune/<model>.json`` (atomic writes; an unreadable or malformed file is
  ignored with one warning, and an entry applies only as one of its rule's variants;
  ``SPECUX_DISK_CACHE=0`` keeps them in memory), and loaded when a CUDA backend first meets
  a device, before it plans (``runtime.load_winners``). A machine with GPUs of different
  models uses the first loaded model's winners for all (they are correct on any GPU, only
  timed on that one).
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import os
import re
import statistics
import tempfile
import threading
import time
import warnings
from collections.abc import Callable, Iterator
from typing import Any

from specux import options as _options
from specux._version import __version__
from specux.kernels import cache as _cache
from specux.kernels import plan as _plan

# A variant replaces the rule's kernel only when its call runs at least this much faster.
MARGIN = 0.02

_lock = threading.Lock()
# repr(rule's spec) -> (per_block, bound) of the winner, for the active GPU model
_table: dict[str, tuple[int, int]] = {}
_model: str | None = None
_warned = False
# while autotune_call records a call: tuned spec -> the rule's spec, and the launched specs
_recording: dict | None = None
_launched: list | None = None


def _key(spec: _plan.BlockSpec) -> str:
    return repr(spec)


def _with(spec: _plan.BlockSpec, per_block: int, bound: int) -> _plan.BlockSpec:
    """``spec`` with ``per_block`` transforms a block and register ``bound`` (its shared
    memory layout chosen for that many transforms, as the planner does)."""
    if per_block == spec.per_block:
        shift, extra = spec.skew_shift, spec.slot_extra
    elif spec.load_staged or spec.store_staged:  # (as plan.block writes them)
        shift = _plan.SKEW[spec.precision]
        extra = _plan.staged_layout(spec.n, spec.radices, spec.threads, per_block,
                                    spec.precision)  # fmt: skip
    else:
        shift, extra = _plan.shared_layout(spec.n, spec.radices, spec.threads, per_block,
                                           spec.precision)  # fmt: skip
    return dataclasses.replace(spec, per_block=per_block, bound=bound, skew_shift=shift,
                               slot_extra=extra)  # fmt: skip


def _per_block_fixed(spec: _plan.BlockSpec) -> bool:
    return spec.split or spec.twist or bool(spec.store.ola_hop)


def variants(spec: _plan.BlockSpec) -> list[_plan.BlockSpec]:
    """The alternatives of a rule's block kernel ``spec`` (module doc), ``spec`` excluded."""
    out: list[_plan.BlockSpec] = []
    staged = spec.load_staged or spec.store_staged
    cap = (150 if staged else 100) * 1024
    if not _per_block_fixed(spec):
        for per_block in (spec.per_block // 2, spec.per_block * 2):
            if per_block < 1 or per_block * spec.threads > _plan.MAX_THREADS:
                continue
            candidate = _with(spec, per_block, 0)
            if candidate.shared_bytes <= cap:
                out.append(candidate)
    rule = spec.min_blocks
    for per_sm in (1024, 1536, 2048, 0):
        bound = max(1, per_sm // spec.block_threads) if per_sm else 1
        if bound != rule and bound * spec.block_threads <= 2048:
            candidate = _with(spec, spec.per_block, bound)
            if candidate not in out:
                out.append(candidate)
    return out


def tuned(spec: _plan.BlockSpec) -> _plan.BlockSpec:
    """The planner's last step: ``spec`` (the rule's) or its recorded winner."""
    out = spec
    if _table:
        winner = _table.get(_key(spec))
        if winner is not None:
            candidate = _with(spec, *winner)
            if candidate in variants(spec):  # (a stored entry is only trusted as one)
                out = candidate
    recording = _recording  # (read once: another thread's tuning may end meanwhile)
    if recording is not None:
        recording[out] = spec
    return out


def launched(spec: _plan.BlockSpec) -> None:
    """Called for every block kernel launch while a call is recorded (fft_exec)."""
    recording, specs = _recording, _launched
    if recording is not None and specs is not None:
        specs.append(recording.get(spec, spec))


def _clear_plans() -> None:
    """Drop the planned programs (fft_exec's caches), which hold the specs planned before."""
    from specux.kernels import fft_exec

    for value in list(vars(fft_exec).values()):
        clear = getattr(value, "cache_clear", None)
        if clear is not None:
            clear()


def set_entry(rule: _plan.BlockSpec, winner: _plan.BlockSpec | None) -> None:
    """Make ``winner`` (None: the rule itself) the kernel planned for ``rule``."""
    global _table
    with _lock:
        table = dict(_table)
        if winner is None or winner == rule:
            table.pop(_key(rule), None)
        else:
            table[_key(rule)] = (winner.per_block, winner.bound)
        _table = table
    _clear_plans()


def entries() -> dict[str, tuple[int, int]]:
    """The active winners: repr(rule's spec) -> (per_block, bound)."""
    return dict(_table)


def forget() -> None:
    """Drop the active winners (in memory; the disk file stays)."""
    global _table
    with _lock:
        _table = {}
    _clear_plans()


def clear() -> None:
    """Forget the winners: in memory, and the stored ones of every model (specux.clear_cache)."""
    forget()
    root = folder()
    if not os.path.isdir(root):
        return
    for name in _cache.listing(root):
        if name.endswith((".json", ".tmp")):
            with contextlib.suppress(OSError):
                os.remove(os.path.join(root, name))
    with contextlib.suppress(OSError):
        os.rmdir(root)


# -- persistence ---------------------------------------------------------------------------


def model_name(name: str, arch: str, sms: int) -> str:
    """The file stem of a GPU model's winners: ``NVIDIA-H200-sm_90-132sm``."""
    return re.sub(r"[^A-Za-z0-9_.-]+", "-", f"{name}-{arch}-{sms}sm").strip("-")


def folder() -> str:
    """Where the winners' files are: ``<cache dir>/autotune``."""
    return os.path.join(_options.cache_dir(), "autotune")


def path(model: str) -> str:
    return os.path.join(folder(), model + ".json")


def _warn_once(message: str) -> None:
    global _warned
    if not _warned:
        _warned = True
        warnings.warn(message, RuntimeWarning, stacklevel=3)


def _read(model: str) -> dict[str, tuple[int, int]]:
    if not _options.disk_cache_enabled():
        return {}
    try:
        with open(path(model), encoding="utf-8") as f:
            data = json.load(f)
    except FileNotFoundError:
        return {}
    except (OSError, ValueError) as exc:
        _warn_once(f"specux: ignoring the autotune winners in {path(model)} ({exc})")
        return {}
    if not isinstance(data, dict) or data.get("version") != __version__:
        return {}  # another version's planner: its rules (and keys) may differ
    entries = data.get("entries")
    if not isinstance(entries, dict):
        _warn_once(f"specux: ignoring the autotune winners in {path(model)} (no entries table)")
        return {}
    out = {}
    for key, value in entries.items():
        # (tuned() applies an entry only if it names one of its rule's variants)
        if (isinstance(value, list) and len(value) == 2
                and all(type(v) is int and 0 <= v <= 1024 for v in value)):  # fmt: skip
            out[key] = (value[0], value[1])
    return out


def _write(model: str, results: dict[str, tuple[int, int] | None]) -> None:
    """Store tuning results (None: the rule won) over the model's file's other entries."""
    if not _options.disk_cache_enabled():
        return
    target = path(model)
    try:
        os.makedirs(os.path.dirname(target), exist_ok=True)
        merged = _read(model)
        for key, value in results.items():
            if value is None:
                merged.pop(key, None)
            else:
                merged[key] = value
        fd, temp = tempfile.mkstemp(dir=os.path.dirname(target), suffix=".tmp")
        try:
            with os.fdopen(fd, "w", encoding="utf-8") as f:
                json.dump({"version": __version__, "entries": {k: list(v) for k, v in
                                                               merged.items()}}, f)  # fmt: skip
            os.replace(temp, target)
        except BaseException:
            with contextlib.suppress(OSError):
                os.remove(temp)
            raise
    except OSError as exc:
        _warn_once(f"specux: cannot store autotune winners in {target} ({exc}); they stay in "
                   "memory for this process")  # fmt: skip


def activate(model: str) -> None:
    """Load a GPU model's stored winners (``runtime.load_winners``, when a backend first meets
    a device); the first model loaded is the one whose winners apply."""
    global _model, _table
    with _lock:
        if _model is not None:
            return
        _model = model
        try:
            stored = _read(model)
        except Exception as exc:  # noqa: BLE001 - winners are an optimization
            _warn_once(f"specux: ignoring the autotune winners in {path(model)} ({exc})")
            stored = {}
        if not stored:
            return
        _table = {**stored, **_table}
    _clear_plans()


def active_model() -> str | None:
    return _model


# -- timing --------------------------------------------------------------------------------


@contextlib.contextmanager
def _record() -> Iterator[list]:
    global _recording, _launched
    with _lock:  # (autotune_call's lock keeps recordings one at a time)
        _recording, _launched = {}, []
    _clear_plans()  # so the call plans (and records) every kernel it launches
    try:
        yield _launched
    finally:
        _recording = _launched = None


def _same(a: Any, b: Any) -> bool:
    """Bitwise-equal outputs (tensors, cupy arrays or tuples of them)."""
    if isinstance(a, (tuple, list)):
        return len(a) == len(b) and all(_same(u, v) for u, v in zip(a, b))
    module = type(a).__module__.split(".")[0]
    if module == "torch":
        import torch

        return a.shape == b.shape and a.dtype == b.dtype and bool(
            torch.equal(torch.view_as_real(a) if a.is_complex() else a,
                        torch.view_as_real(b) if b.is_complex() else b))  # fmt: skip
    import numpy as np

    get = (lambda v: v.get()) if module == "cupy" else np.asarray
    x, y = get(a), get(b)
    return x.shape == y.shape and x.dtype == y.dtype and x.tobytes() == y.tobytes()


class Timer:
    """Times a zero-argument CUDA call (milliseconds, median of ``rounds``): as a CUDA graph
    replay where torch can capture it (the kernels' time without the host's), else eager
    calls between CUDA events on the current stream."""

    def __init__(self, library: str, device_index: int, rounds: int = 5,
                 target_ms: float = 20.0) -> None:  # fmt: skip
        self.library, self.device_index = library, device_index
        self.rounds, self.target_ms = rounds, target_ms

    def __call__(self, run: Callable[[], Any]) -> float:
        if self.library == "torch":
            graph = self._graph(run)
            if graph is not None:
                return self._time(graph.replay)
        return self._time(run)

    def _graph(self, run):
        import torch

        try:
            side = torch.cuda.Stream(self.device_index)
            side.wait_stream(torch.cuda.current_stream(self.device_index))
            with torch.cuda.stream(side):
                run()
            torch.cuda.current_stream(self.device_index).wait_stream(side)
            graph = torch.cuda.CUDAGraph()
            with torch.cuda.graph(graph):
                run()
            return graph
        except Exception:  # noqa: BLE001 - a call that cannot be captured is timed eagerly
            torch.cuda.synchronize(self.device_index)
            return None

    def _events(self):
        if self.library == "torch":
            import torch

            def make():
                return torch.cuda.Event(enable_timing=True)

            sync = torch.cuda.synchronize
        else:
            import cupy

            def make():
                return cupy.cuda.Event()

            def sync(_index):
                cupy.cuda.Device(self.device_index).synchronize()

        return make, sync

    def _time(self, step: Callable[[], Any]) -> float:
        make, sync = self._events()
        for _ in range(3):
            step()
        sync(self.device_index)
        start, end = make(), make()
        t0 = time.perf_counter()
        start.record()
        step()
        end.record()
        end.synchronize()
        once = max(self._elapsed(start, end), (time.perf_counter() - t0) * 1e3 * 0.1, 1e-3)
        reps = max(1, min(1000, int(self.target_ms / once)))
        samples = []
        for _ in range(self.rounds):
            start.record()
            for _ in range(reps):
                step()
            end.record()
            end.synchronize()
            samples.append(self._elapsed(start, end) / reps)
        return statistics.median(samples)

    def _elapsed(self, start, end) -> float:
        if self.library == "torch":
            return start.elapsed_time(end)
        import cupy

        return cupy.cuda.get_elapsed_time(start, end)


@dataclasses.dataclass
class Report:
    """What :func:`autotune_call` did: per kernel (the rule's spec) the rule's time, the
    winner (None: the rule) and its time; ``rejected``: variants whose output bits differed
    from the rule's (never kept)."""

    kernels: list = dataclasses.field(default_factory=list)
    rejected: list = dataclasses.field(default_factory=list)

    def __str__(self) -> str:
        lines = []
        for rule, base, winner, best in self.kernels:
            what = "rule kept" if winner is None else (
                f"per_block {rule.per_block}->{winner.per_block}, bound {rule.min_blocks}->"
                f"{winner.min_blocks}")  # fmt: skip
            lines.append(f"{rule.n}-point {rule.pack or 'c2c'} kernel: {base:.4f} ms -> "
                         f"{best:.4f} ms ({what})")  # fmt: skip
        return "\n".join(lines) or "no block kernels launched"


_tuning_lock = threading.Lock()  # one autotune_call at a time (the table is process-wide)


def autotune_call(run: Callable[[], Any], timer: Callable[[Callable[[], Any]], float],
                  model: str | None = None) -> Report:  # fmt: skip
    """Tune the block kernels ``run()`` launches (module doc) and store the winners in
    ``model``'s file (default: the active model's). While it runs, other threads' calls
    plan with the kernel being timed (the same bits, checked here after the fact)."""
    with _tuning_lock:
        with _record() as launched_specs:
            reference = run()
        rules = list(dict.fromkeys(launched_specs))  # each kernel once, in launch order
        report = Report()
        for rule in rules:
            set_entry(rule, None)
            winner = None
            try:
                base = best = timer(run)
                for candidate in variants(rule):
                    set_entry(rule, candidate)
                    try:
                        out = run()
                    except Exception as exc:  # noqa: BLE001 - one that cannot run is skipped
                        report.rejected.append((candidate, f"{type(exc).__name__}: {exc}"))
                        continue
                    if not _same(out, reference):
                        report.rejected.append((candidate, "different output bits"))
                        continue
                    elapsed = timer(run)
                    if elapsed < best * (1 - MARGIN) and elapsed < base * (1 - MARGIN):
                        winner, best = candidate, elapsed
            finally:
                set_entry(rule, winner)  # (the rule's own kernel if timing failed)
            report.kernels.append((rule, base, winner, best))
        model = model or _model
        if model is not None:
            _write(model, {_key(r): _table.get(_key(r)) for r in rules})
        return report


__all__ = ["Report", "Timer", "activate", "autotune_call", "clear", "entries", "forget", "tuned",
           "variants"]  # fmt: skip
