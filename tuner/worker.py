"""Runs candidates in an isolated process: compile, run on fresh inputs, verify, time.

The study talks to one long-lived worker process per GPU. A candidate that hangs is
killed at its timeout; one that crashes the process (or the CUDA context) is recorded as
``crashed`` and the worker is restarted: the study goes on either way.
"""
from __future__ import annotations

import logging
import multiprocessing as mp
import os
import signal
import traceback
from typing import Any

from tuner.spec import TrialResult

log = logging.getLogger(__name__)

_POISON_BYTES = 64 * 2**20


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

    def _inputs(self, kernel, workload, seed: int):
        key = (kernel.name, repr(workload), seed)
        if key not in self.cache:
            if len(self.cache) >= 2:
                self.cache.pop(next(iter(self.cache)))
            inputs = kernel.spec.make_inputs(workload, self.device, seed)
            self.cache[key] = (inputs, kernel.spec.reference(**inputs))
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

    def evaluate(self, name: str, workload: dict, config: dict, seed: int, reps: int) -> dict:
        from tuner import registry, timing
        from tuner.spec import workload_from_dict

        kernel = registry.get(name)
        spec = kernel.spec
        w = workload_from_dict(spec.workload, workload)
        inputs, ref = self._inputs(kernel, w, seed)
        try:
            self._poison()
            out = spec.launch(config=config, **inputs)
            self._sync()
        except Exception as e:  # noqa: BLE001 - every failure is a recorded status
            return TrialResult(_classify(e), error=_one_line(e)).__dict__
        try:
            spec.verify(out, ref, inputs)
        except AssertionError as e:
            return TrialResult("mismatch", error=str(e)[:500]).__dict__
        del out
        t = timing.bench_kernel(spec, lambda: spec.launch(config=config, **inputs), reps=reps)
        return TrialResult("ok", t.median_us, t.p20_us, t.p80_us, None, t.meaningful).__dict__

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


def _serve(conn) -> None:
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

    def __init__(self, timeout_s: float = 120.0, reps: int = 100) -> None:
        self.timeout_s = timeout_s
        self.reps = reps
        self._proc: mp.Process | None = None
        self._conn = None

    def _ensure(self) -> None:
        if self._proc is None or not self._proc.is_alive():
            ctx = mp.get_context("spawn")
            parent, child = ctx.Pipe()
            self._proc = ctx.Process(target=_serve, args=(child,), daemon=True)
            self._proc.start()
            child.close()
            self._conn = parent

    def _call(self, op: str, args: tuple, timeout_s: float) -> dict | list:
        self._ensure()
        assert self._conn is not None
        self._conn.send((op, args))
        if not self._conn.poll(timeout_s):
            self.kill()
            return {"status": "timeout", "error": f"no answer within {timeout_s:.0f} s"}
        try:
            return self._conn.recv()
        except (EOFError, ConnectionResetError):
            code = self._proc.exitcode if self._proc else None
            self.kill()
            return {"status": "crashed", "error": f"worker process died (exit code {code})"}

    def evaluate(self, kernel: str, workload: dict, config: dict, seed: int) -> TrialResult:
        r = self._call("evaluate", (kernel, workload, config, seed, self.reps), self.timeout_s)
        assert isinstance(r, dict)
        r.pop("trace", None)
        return TrialResult(**r)

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
