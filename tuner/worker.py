"""Runs candidates in an isolated process: compile, run on fresh inputs, verify, time.

The study talks to one long-lived worker process per GPU. A candidate that hangs is
killed at its timeout; one that crashes the process (or the CUDA context) is recorded as
``crashed`` and the worker is restarted: the study goes on either way.

Each evaluation says where its seconds went (``tuner.cost.PHASES``): the first launch
(compile or Triton cache load, one run), the inputs and the reference (built once per
workload and seed, then cached in the process), the check against the reference, the
timing; the parent adds what the process itself cost (start, messages). A worker given a
``cache_dir`` compiles into (and loads from) that Triton cache, shared with the
compile-ahead pool (``tuner.precompile``).
"""
from __future__ import annotations

import logging
import multiprocessing as mp
import os
import signal
import time
import traceback
from typing import Any

from tuner.spec import TrialResult

log = logging.getLogger(__name__)

_POISON_BYTES = 64 * 2**20
SLICE_S = 0.25
"""Longest single wait on the worker process (signal handlers run between waits)."""


def _classify(exc: BaseException) -> str:
    """Map an exception from compile/launch to a trial status."""
    name = type(exc).__name__
    text = str(exc)
    if name in ("OutOfResources", "OutOfMemoryError") or "out of resource" in text.lower():
        return "out_of_resources"
    if name in ("CompilationError", "CompileTimeAssertionFailure", "MLIRCompilationError") or \
            "PassManager::run failed" in text or type(exc).__module__.startswith("triton.compiler"):
        return "compile_error"
    return "crashed"


def _one_line(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()
    return f"{type(exc).__name__}: {text[-1] if text else ''}"[:500]


class _Evaluator:
    """Lives in the worker process; caches inputs and reference outputs per (workload, seed)."""

    def __init__(self) -> None:
        import torch

        from tuner.runtime.target import Target

        self.torch = torch
        self.device = "cpu" if Target.of().interpret else "cuda"
        self.cache: dict[tuple, tuple[dict[str, Any], Any]] = {}
        self.kernels = {"compiled": 0, "cached": 0}
        _listen_to_compiles(self.kernels)

    def _inputs(self, kernel, workload, seed: int, phases: dict[str, float] | None = None):
        """A workload's inputs and reference outputs for ``seed``: built once, then cached (the
        two seeds a study alternates between stay; a third workload evicts the oldest)."""
        key = (kernel.name, repr(workload), seed)
        if key not in self.cache:
            if len(self.cache) >= 2:
                self.cache.pop(next(iter(self.cache)))
            t0 = time.perf_counter()
            inputs = kernel.spec.make_inputs(workload, self.device, seed)
            self._sync()
            t1 = time.perf_counter()
            ref = kernel.spec.reference(**inputs)
            self._sync()
            self.cache[key] = (inputs, ref)
            if phases is not None:
                phases["inputs"], phases["reference"] = t1 - t0, time.perf_counter() - t1
        return self.cache[key]

    def _sync(self) -> None:
        if self.device == "cuda":
            self.torch.cuda.synchronize()

    def _poison(self) -> None:
        # Freed blocks filled with 0xFF so a kernel that skips writing an output does not
        # inherit a previous run's correct values from the caching allocator.
        if self.device == "cuda":
            buf = self.torch.empty(_POISON_BYTES, dtype=self.torch.uint8, device="cuda")
            buf.fill_(0xFF)
            del buf

    def evaluate(self, name: str, workload: dict, config: dict, seed: int, reps: int,
                 precision: float | None = None) -> dict:
        """Compile and run ``config`` once, check it against the reference, time it (replays
        stop early once the median is known to ``precision``, ``tuner.timing.bench``)."""
        from tuner import registry, timing
        from tuner.spec import workload_from_dict

        t_start = time.perf_counter()
        kernel = registry.get(name)
        spec = kernel.spec
        w = workload_from_dict(spec.workload, workload)
        phases = {"inputs": 0.0, "reference": 0.0}
        inputs, ref = self._inputs(kernel, w, seed, phases)
        self._poison()
        before = dict(self.kernels)
        t0 = time.perf_counter()

        def done(res: TrialResult) -> dict:
            phases["work"] = time.perf_counter() - t_start  # the rest of the parent's wait is the process's
            phases.update({n: self.kernels[n] - before[n] for n in self.kernels})
            return dict(res.__dict__, phases=phases)

        try:
            out = spec.launch(config=config, **inputs)
            self._sync()
        except Exception as e:  # noqa: BLE001 - every failure is a recorded status
            phases["compile"] = time.perf_counter() - t0
            return done(TrialResult(_classify(e), error=_one_line(e)))
        t1 = time.perf_counter()
        phases["compile"] = t1 - t0
        try:
            spec.verify(out, ref, inputs)
        except AssertionError as e:
            phases["reference"] += time.perf_counter() - t1
            return done(TrialResult("mismatch", error=str(e)[:500]))
        del out
        t2 = time.perf_counter()
        phases["reference"] += t2 - t1
        t = timing.bench_kernel(spec, lambda: spec.launch(config=config, **inputs), reps=reps, precision=precision)
        phases["timing"] = time.perf_counter() - t2
        return done(TrialResult("ok", t.median_us, t.p20_us, t.p80_us, None, t.meaningful))

    def retime(self, name: str, workload: dict, configs: list[dict], rounds: int, seed: int, reps: int) -> list:
        """Time already-verified configs interleaved, ``rounds`` times.

        Returns, per config, one ``[median, p20, p80]`` per round.
        """
        from tuner import registry, timing
        from tuner.spec import workload_from_dict

        kernel = registry.get(name)
        spec = kernel.spec
        inputs, _ = self._inputs(kernel, workload_from_dict(spec.workload, workload), seed)
        out: list[list[list[float]]] = [[] for _ in configs]
        for _ in range(rounds):
            for i, cfg in enumerate(configs):
                t = timing.bench_kernel(spec, lambda: spec.launch(config=cfg, **inputs), reps=reps)
                out[i].append([t.median_us, t.p20_us, t.p80_us])
        return out


def _listen_to_compiles(counts: dict[str, int]) -> None:
    """Count the kernels Triton compiles and those it loads from its cache (``compiled`` /
    ``cached``), where this Triton tells (``knobs.compilation.listener``); under the
    interpreter nothing compiles."""
    try:
        from triton import knobs

        if not hasattr(knobs.compilation, "listener"):
            return

        def heard(**kw: Any) -> None:
            counts["cached" if kw.get("cache_hit") else "compiled"] += 1

        knobs.compilation.listener = heard
    except Exception:  # noqa: BLE001 - counting is a nicety, never a failure
        log.debug("no Triton compilation listener", exc_info=True)


def _serve(conn, cache_dir: str | None = None) -> None:
    if cache_dir:  # before Triton reads it: this process's kernels land in (and load from) the folder
        os.environ["TRITON_CACHE_DIR"] = cache_dir
    os.environ.setdefault("TRITON_DEFAULT_FP_FUSION", "1")
    logging.basicConfig(level=logging.WARNING)
    # Ctrl-C is the parent's to handle (it keeps the finished trials and stops this process);
    # here it would only print a second traceback
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    ev = _Evaluator()
    while True:
        try:
            msg = conn.recv()
        except (EOFError, KeyboardInterrupt):
            return
        op, args = msg
        try:
            result = getattr(ev, op)(*args)
        except Exception as e:  # noqa: BLE001
            result = {"status": "crashed", "error": _one_line(e), "trace": traceback.format_exc()[-2000:]}
        try:
            conn.send(result)
        except OSError:  # the parent is gone (interrupted): nobody waits for this result
            return
        if isinstance(result, dict) and result.get("status") == "crashed" and ev.device == "cuda" \
                and any(w in (result.get("error") or "") for w in ("CUDA", "Accelerator", "illegal")):
            return  # a broken CUDA context is unusable: exit and let the parent restart us


class Worker:
    """Handle on the isolated worker process; restarts it after a crash or a timeout."""

    def __init__(self, timeout_s: float = 120.0, reps: int = 100, *, cache_dir: str | None = None,
                 precision: float | None = None) -> None:
        self.timeout_s = timeout_s
        self.reps = reps
        self.cache_dir = cache_dir
        """Triton's cache folder for the worker process (None: Triton's own, ``TRITON_CACHE_DIR``)."""
        self.precision = precision
        """A trial's replays stop once its median is known within this fraction (None: all ``reps``)."""
        self._proc: mp.Process | None = None
        self._conn = None

    def _ensure(self) -> None:
        if self._proc is None or not self._proc.is_alive():
            ctx = mp.get_context("spawn")
            parent, child = ctx.Pipe()
            self._proc = ctx.Process(target=_serve, args=(child, self.cache_dir), daemon=True)
            self._proc.start()
            child.close()
            self._conn = parent

    def _call(self, op: str, args: tuple, timeout_s: float) -> dict | list:
        self._ensure()
        assert self._conn is not None
        self._conn.send((op, args))
        # waited in slices: a Ctrl-C that the kernel hands to another thread of this process
        # (a heartbeat, a progress bar) is acted on within a slice, not when the trial ends
        end = time.monotonic() + timeout_s
        while not self._conn.poll(min(SLICE_S, max(0.0, end - time.monotonic()))):
            if time.monotonic() >= end:
                self.kill()
                return {"status": "timeout", "error": f"no answer within {timeout_s:.0f} s"}
        try:
            return self._conn.recv()
        except (EOFError, ConnectionResetError):
            code = self._proc.exitcode if self._proc else None
            self.kill()
            return {"status": "crashed", "error": f"worker process died (exit code {code})"}

    def evaluate(self, kernel: str, workload: dict, config: dict, seed: int) -> TrialResult:
        """One trial of ``config``; its ``phases`` say where the seconds went, ``overhead`` being
        the process's share (its start where this call started it, the messages)."""
        t0 = time.perf_counter()
        r = self._call("evaluate", (kernel, workload, config, seed, self.reps, self.precision), self.timeout_s)
        assert isinstance(r, dict)
        r.pop("trace", None)
        wall = time.perf_counter() - t0
        phases = dict(r.pop("phases", None) or {})
        if r.get("status") == "timeout":  # killed while compiling or running: counted as compiling
            phases = {"compile": wall, "overhead": 0.0}
        else:
            phases["overhead"] = max(0.0, wall - phases.pop("work", 0.0))
        return TrialResult(**r, phases=phases)

    def retime(self, kernel: str, workload: dict, configs: list[dict], rounds: int, seed: int) -> list[list[list[float]]] | None:
        r = self._call("retime", (kernel, workload, configs, rounds, seed, self.reps),
                       self.timeout_s * max(1, rounds) * max(1, len(configs)) / 4)
        return r if isinstance(r, list) else None

    def kill(self) -> None:
        if self._proc is not None and self._proc.is_alive():
            self._proc.kill()
            self._proc.join(5)
        self._proc, self._conn = None, None

    def close(self) -> None:
        if self._conn is not None:
            try:
                self._conn.close()
            except OSError:
                pass
        if self._proc is not None:
            self._proc.join(2)
        self.kill()

    def __enter__(self) -> "Worker":
        return self

    def __exit__(self, *exc) -> None:
        self.close()
