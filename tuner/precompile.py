"""Compile candidates ahead on the host's CPU cores while the GPU times the previous one.

A pool of compile-only processes writes into the worker's Triton cache folder; when the
worker then launches the candidate, Triton finds it there and loads it instead of compiling.
Each pool process runs the family's own launcher on ``meta`` tensors of the workload's
shapes with three things swapped (``install``): Triton's driver (it reports the worker's
GPU and touches none: ``CUDA_VISIBLE_DEVICES`` is empty there), ``Target.of`` (the worker's
target, so launches are planned as on that GPU) and ``JITFunction.run`` (a warm-up: compile,
launch nothing). The kernels are specialized by the JIT's own binder from the same shapes,
dtypes, integer values and 16-byte alignment (a meta tensor's address is its offset, a CUDA
allocation is aligned), so the cache key is the one the worker's first launch looks up.

Nothing depends on the pool: a candidate it has not finished, or could not compile, is
compiled by the worker as always (a compile error is recorded there, never here).
"""
from __future__ import annotations

import logging
import multiprocessing as mp
import os
import signal
import time
from concurrent.futures import Future, ProcessPoolExecutor
from concurrent.futures import TimeoutError as FutureTimeout
from typing import Any

from tuner.runtime.target import Target
from tuner.spec import config_key
from tuner.worker import SLICE_S

log = logging.getLogger(__name__)


class _Driver:
    """Triton's driver as far as the JIT's compile path asks: the device, its stream, its target."""

    def __init__(self, target: Target) -> None:
        self.target = target

    def get_current_device(self) -> int:
        return 0

    def get_current_stream(self, device: Any = None) -> int:
        return 0

    def get_current_target(self):
        from triton.backends.compiler import GPUTarget

        return GPUTarget("cuda", self.target.cc, 32)


def install(target: Target) -> None:
    """Make this process compile for ``target`` without a GPU: launches plan for it and compile
    (as the JIT specializes them) without launching. For compile-only processes: irreversible."""
    if target.interpret:
        raise ValueError("compiling ahead needs a GPU target, not the interpreter")
    from triton.runtime import driver, jit

    import tuner.runtime.target as tgt

    driver.set_active(_Driver(target))
    tgt.Target.of = staticmethod(lambda device=None: target)  # type: ignore[method-assign]
    run = jit.JITFunction.run
    if getattr(run, "_compile_only", False):
        return

    def compile_only(self, *args: Any, grid: Any, warmup: bool, **kwargs: Any) -> Any:
        return run(self, *args, grid=grid, warmup=True, **kwargs)

    compile_only._compile_only = True  # type: ignore[attr-defined]
    jit.JITFunction.run = compile_only  # type: ignore[method-assign]


_INPUTS: dict[tuple[str, str], dict[str, Any]] = {}


def compile_config(kernel: str, workload: dict[str, Any], config: dict[str, Any]) -> dict[str, Any]:
    """Compile what a launch of ``config`` on ``workload`` compiles, in a process set up by
    ``install``: ``{"status": "ok" | "failed", "seconds", "error"}``. The meta inputs of the
    last workload are kept (engram's host tables fill a CPU buffer of the table's size)."""
    from tuner import registry
    from tuner.spec import workload_from_dict

    t0 = time.perf_counter()
    try:
        k = registry.get(kernel)
        key = (kernel, repr(sorted(workload.items())))
        if key not in _INPUTS:
            _INPUTS.clear()
            _INPUTS[key] = k.spec.make_inputs(workload_from_dict(k.spec.workload, workload), "meta", 0)
        k.spec.launch(config=config, **_INPUTS[key])
        return {"status": "ok", "seconds": time.perf_counter() - t0, "error": None}
    except Exception as e:  # noqa: BLE001 - the worker compiles it again and records why it fails
        return {"status": "failed", "seconds": time.perf_counter() - t0, "error": f"{type(e).__name__}: {e}"[:300]}


def _init(cache_dir: str | None, target: Target) -> None:
    os.environ.pop("TRITON_INTERPRET", None)
    os.environ["CUDA_VISIBLE_DEVICES"] = ""  # a launcher asking CUDA fails here, never takes the timed GPU
    if cache_dir:
        os.environ["TRITON_CACHE_DIR"] = cache_dir
    os.environ.setdefault("TRITON_DEFAULT_FP_FUSION", "1")  # as the worker: the variable is in the cache key
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C is the study's
    logging.basicConfig(level=logging.WARNING)
    install(target)


class Precompiler:
    """Compiles a study's candidates ahead in ``processes`` processes into ``cache_dir``.

    Inert (every call returns at once) with no processes or for the interpreter. ``submit``
    as soon as a candidate is known; ``wait`` before the worker measures it: the seconds
    waited for its compile (0 when done, never submitted, or failed)."""

    def __init__(self, kernel: str, target: Target, *, processes: int, cache_dir: str | None = None) -> None:
        self.kernel, self.target, self.cache_dir = kernel, target, cache_dir
        self.processes = 0 if target.interpret else max(0, processes)
        self._pool: ProcessPoolExecutor | None = None
        self._jobs: dict[str, Future] = {}
        self.stats = {"submitted": 0, "compiled": 0, "failed": 0}

    @property
    def active(self) -> bool:
        return self.processes > 0

    def _executor(self) -> ProcessPoolExecutor:
        if self._pool is None:
            self._pool = ProcessPoolExecutor(self.processes, mp_context=mp.get_context("spawn"),
                                             initializer=_init, initargs=(self.cache_dir, self.target))
        return self._pool

    def submit(self, workload: dict[str, Any], config: dict[str, Any]) -> None:
        if not self.active:
            return
        key = config_key({"workload": workload, "config": config})
        if key in self._jobs:
            return
        try:
            fut = self._executor().submit(compile_config, self.kernel, workload, config)
        except Exception as e:  # noqa: BLE001 - a broken pool (a process died): start another next time
            log.warning("compile-ahead pool unavailable (%s): the worker compiles", e)
            self._drop_pool()
            return
        fut.add_done_callback(self._count)
        self._jobs[key] = fut
        self.stats["submitted"] += 1

    def _count(self, fut: Future) -> None:
        ok = not fut.cancelled() and fut.exception() is None and fut.result()["status"] == "ok"
        self.stats["compiled" if ok else "failed"] += 1

    def wait(self, workload: dict[str, Any], config: dict[str, Any], timeout_s: float) -> float:
        fut = self._jobs.pop(config_key({"workload": workload, "config": config}), None)
        if fut is None or fut.done():
            return 0.0
        t0 = time.perf_counter()
        try:
            end = time.monotonic() + timeout_s
            while True:  # in slices: a Ctrl-C handed to another thread is acted on within one
                try:
                    fut.result(timeout=min(SLICE_S, max(0.0, end - time.monotonic())))
                    break
                except FutureTimeout:
                    if time.monotonic() >= end:
                        raise
        except FutureTimeout:
            log.warning("compile-ahead of %s took over %.0f s: the worker compiles it", config, timeout_s)
        except Exception as e:  # noqa: BLE001 - the worker compiles it and says why it fails
            log.debug("compile-ahead of %s failed: %s", config, e)
        return time.perf_counter() - t0

    def _drop_pool(self) -> None:
        pool, self._pool = self._pool, None
        self._jobs.clear()
        if pool is None:
            return
        procs = list(getattr(pool, "_processes", {}).values())  # a compile may run for minutes: stop it
        pool.shutdown(wait=False, cancel_futures=True)
        for p in procs:
            try:
                p.kill()
            except (OSError, AttributeError):
                pass

    def close(self) -> None:
        self._drop_pool()

    def __enter__(self) -> "Precompiler":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()


def default_cache(store_url: str) -> str | None:
    """A campaign's Triton cache folder by default: ``<database>.triton-cache`` beside a SQLite
    file (it travels with the database, and a later run loads what an earlier one compiled);
    None (Triton's own folder) for other databases."""
    from tuner.store.db import _sqlite_path

    path = _sqlite_path(store_url)
    return str(path.with_name(path.name + ".triton-cache")) if path is not None else None


def default_processes() -> int:
    """Compile-ahead processes by default: half the host's cores (the worker and the study keep
    the rest), at most 8, at least 1."""
    return max(1, min(8, (os.cpu_count() or 2) // 2))
