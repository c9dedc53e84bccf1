"""Warm-up before serving: compile the kernels a server will run, at the shapes it will run them.

Triton compiles a kernel on its first launch with a new config or shape class. A server that
captures CUDA graphs (one per batch size) or answers its first requests must not compile then:
``warmup(pack, shapes)`` selects, for each (kernel, workload) of ``shapes``, the config the pack
gives there, exactly as a call of that shape will (the selection is cached and marked warm), and
launches it once on inputs of that shape, one progress line per kernel.
"""
from __future__ import annotations

import dataclasses
import importlib
import logging
import os
import time
from collections import Counter
from collections.abc import Callable, Iterable, Mapping
from typing import Any

from tuner.runtime.workloads import short, workload_problem
from tuner.spec import config_key, workload_dict

__all__ = ["register_warmup", "warmup"]

log = logging.getLogger("tuner.runtime")

_WARMERS: dict[str, Callable[[dict[str, Any], dict[str, Any], Any], None]] = {}


def register_warmup(kernel: str, fn: Callable[[dict[str, Any], dict[str, Any], Any], None]) -> None:
    """A family's own warm-up launch ``fn(workload dict, config, device)``, where launching its
    ``SPEC`` on ``make_inputs`` of the workload would cost too much (an Engram table of the
    workload's full size, say)."""
    _WARMERS[kernel] = fn


def _pairs(shapes: Mapping[str, Iterable[Mapping[str, Any]]] | Iterable[tuple[str, Mapping[str, Any]]]
           ) -> dict[str, list[Mapping[str, Any]]]:
    out: dict[str, list[Mapping[str, Any]]] = {}
    items = ((k, w) for k, ws in shapes.items() for w in ws) if isinstance(shapes, Mapping) else shapes
    for kernel, w in items:
        if not isinstance(kernel, str) or not isinstance(w, Mapping):
            raise TypeError("warmup shapes: {kernel: [workload dict, ...]} or [(kernel, workload dict), ...]")
        out.setdefault(kernel, []).append(w)
    return out


def warmup(pack: Any = None, shapes: Any = (), *, device: Any = None,
           progress: Callable[[str], None] | None = None) -> dict[str, dict[str, Any]]:
    """Compile, before serving, the kernels a server will run.

    ``pack``: the pack the server selects through (a ``Pack``, a pack's path or a folder of
    packs; None: the active pack, else the defaults). ``shapes``: ``{kernel: [workload, ...]}``
    or ``[(kernel, workload), ...]``, each workload a dict of the family's axes (``{"tokens":
    64, "profile": "dsv4-flash"}`` for ``moe_routing``). For each, the config the pack selects
    (not counted in ``stats()``) runs once on the family's inputs of that shape on ``device``
    (None: the current GPU, else the CPU under the interpreter); the device is synchronised
    after each kernel and ``progress`` (default: the ``tuner.runtime`` logger at INFO) gets one
    line per kernel. Returns per kernel: ``shapes``, ``configs`` (distinct), ``exact`` /
    ``nearest`` / ``default`` and ``seconds``. Raises RuntimeError inside a CUDA graph capture,
    ValueError (one line) for a kernel that is no family (naming the families) or a workload its
    family does not take (naming the axis missing, unknown or of the wrong type), before
    launching anything of that kernel.
    """
    import torch

    from tuner import runtime

    if runtime._capturing():
        raise RuntimeError("warmup launches kernels: call it before capturing a CUDA graph, not during one")
    if isinstance(pack, (str, os.PathLike)):
        pack = runtime.load_pack(pack)
    elif pack is None:
        pack = runtime.active_pack()
    if device is None:
        device = torch.device("cuda", torch.cuda.current_device()) \
            if torch.cuda.is_available() and not runtime.Target.of().interpret else torch.device("cpu")
    device = torch.device(device)
    target = runtime.Target.of(device)
    say = progress or (lambda line: log.info("%s", line))
    report: dict[str, dict[str, Any]] = {}
    todo: dict[str, list[dict[str, Any]]] = {}
    for kernel, workloads in _pairs(shapes).items():  # every kernel and workload checked before any launch
        runtime._family(kernel)  # ValueError listing the families for a name that is none
        cls = importlib.import_module(f"kernel_templates.{kernel}").SPEC.workload
        axes = ", ".join(f.name for f in dataclasses.fields(cls))
        todo[kernel] = []
        for w in workloads:
            try:
                why = workload_problem(kernel, w)  # an axis missing, unknown or of the wrong type
                wd = None if why else workload_dict(cls(**w))  # the axes in the order the family's calls use
            except (TypeError, ValueError) as e:
                why = str(e).splitlines()[0] if str(e) else type(e).__name__
            if why:
                raise ValueError(f"warmup: a {kernel} workload has the axes {axes}; got {short(dict(w))}: "
                                 f"{why}") from None
            todo[kernel].append(wd)
    for kernel, wds in todo.items():
        t0 = time.perf_counter()
        spec = importlib.import_module(f"kernel_templates.{kernel}").SPEC
        hows: Counter = Counter()
        configs = set()
        for wd in wds:
            sel = pack.select(kernel, wd, target, count=False) if pack is not None \
                else runtime.select(kernel, wd, target, count=False)
            hows[sel.how] += 1
            configs.add(config_key(sel.config))
            warm = _WARMERS.get(kernel)
            if warm is not None:
                warm(wd, sel.config, device)
            else:
                spec.launch(config=sel.config, **spec.make_inputs(spec.workload(**wd), device, 0))
            if device.type == "cuda":
                torch.cuda.synchronize(device)
        dt = time.perf_counter() - t0
        report[kernel] = {"shapes": len(wds), "configs": len(configs), **{h: hows[h] for h in
                                                                                  ("exact", "nearest", "default")},
                          "seconds": round(dt, 3)}
        say(f"warmup {kernel}: {len(wds)} shapes, {len(configs)} configs ({hows['exact']} exact, "
            f"{hows['nearest']} nearest, {hows['default']} default) compiled and run in {dt:.1f} s")
    return report
