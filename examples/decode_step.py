#!/usr/bin/env python3
"""One decode step of a DeepSeek-V4.1-Flash-shaped layer stack (random weights) through the tuned kernels.

Engram lookup (prefetched a layer ahead) -> mHC pre -> sparse MQA indexer top-k -> NVFP4 sparse
decode attention over a paged KV cache written by quantize_nvfp4 -> mHC post -> MoE routing feeding
plain PyTorch experts -> mHC seam into the next layer. The step is checked first: every kernel call
against its family's PyTorch reference by the family's own tolerance, and the whole step against
its reference twin. Then each way is timed: with the pack, with the default configs, and the
reference twin; the pack's exact / nearest / default lookups are listed.

    python3 examples/decode_step.py --batch 16 --context 131072 --graph          # a GPU
    python3 examples/decode_step.py --batch 64 --context 32768 --compile --graph
    TRITON_INTERPRET=1 python3 examples/decode_step.py --tiny                     # no GPU

Exit status: 0 when the check passed, 1 when it did not (or nothing can run the kernels here),
2 for bad input. Real dimensions and where each comes from: examples/decode/dims.py.
"""
from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

DEFAULT_PACK = ROOT / "packs" / "nvidia-h200"


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> None:  # one line, exit 2
        sys.stderr.write(f"decode_step: {message}\n")
        raise SystemExit(2)


def _size(text: str) -> int:
    """1024, 32K, 128k, 8M."""
    t = text.strip().upper()
    mult = {"K": 1 << 10, "M": 1 << 20}.get(t[-1:], 1)
    try:
        v = int(t[:-1] if mult > 1 else t) * mult
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a size (an integer, or with K / M)") from None
    if v < 1:
        raise argparse.ArgumentTypeError(f"{text!r} must be at least 1")
    return v


def parse(argv: list[str] | None) -> argparse.Namespace:
    p = _Parser(prog="decode_step.py", description=__doc__.split("\n\n")[0],
                formatter_class=argparse.RawDescriptionHelpFormatter,
                epilog="Sizes take K / M suffixes (32K = 32768). Without a GPU set TRITON_INTERPRET=1 and use --tiny.")
    p.add_argument("--batch", type=_size, help="sequences decoding one token each (default 1; --tiny: 2)")
    p.add_argument("--context", type=_size, help="tokens in each sequence, the new one included (default 32K; "
                   "--tiny: 200)")
    p.add_argument("--layers", type=_size, help="layers in the stack (default 2)")
    p.add_argument("--heads", type=_size, help="attention query heads (default 64, TP1; 16 is TP4)")
    p.add_argument("--tiny", action="store_true", help="interpreter-sized dimensions (examples/decode/dims.py TINY)")
    p.add_argument("--pack", type=Path, default=DEFAULT_PACK,
                   help=f"kernel pack folder (default {DEFAULT_PACK.relative_to(ROOT)})")
    p.add_argument("--allow-other-gpu", action="store_true",
                   help="use a pack made on another GPU of the same compute capability (an H200 pack on an H100)")
    p.add_argument("--compile", action="store_true",
                   help="torch.compile(fullgraph=True) each layer, kernels as torch.ops.tuner.* (CPU: aot_eager)")
    p.add_argument("--graph", action="store_true", help="time CUDA-graph replays of the whole step (GPU)")
    p.add_argument("--reps", type=_size, default=None, help="timed steps per way (default 50 on a GPU, 1 otherwise)")
    p.add_argument("--ref-reps", type=_size, default=None,
                   help="timed reference steps (default 3 on a GPU, 1 otherwise)")
    p.add_argument("--seed", type=int, default=0, help="random weights and caches (default 0)")
    return p.parse_args(argv)


def _device(args: argparse.Namespace) -> str:
    """cuda, or cpu under the interpreter; SystemExit with one line where neither can run."""
    import torch

    interp = os.environ.get("TRITON_INTERPRET", "0") not in ("", "0")
    if torch.cuda.is_available() and not interp:
        return "cuda"
    if not interp:
        sys.stderr.write("decode_step: no CUDA GPU here and TRITON_INTERPRET is not set: run on a GPU, or set "
                         "TRITON_INTERPRET=1 and pass --tiny (Triton's CPU interpreter)\n")
        raise SystemExit(1)
    if not args.tiny:
        sys.stderr.write("decode_step: Triton's interpreter runs --tiny sizes only (real dimensions take hours "
                         "there): add --tiny\n")
        raise SystemExit(2)
    if args.graph:
        sys.stderr.write("decode_step: --graph needs a CUDA GPU (CUDA-graph replay)\n")
        raise SystemExit(2)
    return "cpu"


def _progress(msg: str) -> None:
    sys.stderr.write(f"... {msg}\n")
    sys.stderr.flush()


def _timer(device: str, reps: int):
    """(run) -> seconds a call, the median of ``reps`` timed calls after one untimed call."""
    import torch

    def measure(run: Any) -> float:
        run()
        times = []
        for _ in range(reps):
            if device == "cuda":
                a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
                a.record()
                run()
                b.record()
                b.synchronize()
                times.append(a.elapsed_time(b) / 1e3)
            else:
                t = time.perf_counter()
                run()
                times.append(time.perf_counter() - t)
        return sorted(times)[len(times) // 2]
    return measure


def _runner(model: Any, kernels: Any, layer_fn: Any, graph: bool) -> Any:
    """A no-argument callable running one step: eager, or a CUDA graph captured after two warm-up steps."""
    import torch

    from examples.decode.step import decode_step

    if not graph:
        return lambda: decode_step(model, kernels, layer_fn)
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        for _ in range(2):  # compiles every kernel and config the step uses before capture
            decode_step(model, kernels, layer_fn)
    torch.cuda.current_stream().wait_stream(side)
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g):
        decode_step(model, kernels, layer_fn)
    return g.replay


def main(argv: list[str] | None = None) -> int:
    args = parse(argv)
    device = _device(args)
    import torch

    from examples.decode import dims as dm
    from examples.decode.kernels import CheckingKernels, ReferenceKernels, TunerKernels
    from examples.decode.model import build, memory_bytes
    from examples.decode.step import agreement, decode_step, layer
    from tuner import runtime

    dims = dm.sized(dm.TINY if args.tiny else dm.REAL, batch=args.batch, context=args.context, layers=args.layers,
                    heads=args.heads)
    problems = dims.problems()
    if problems:
        sys.stderr.write(f"decode_step: {problems[0]}\n")
        return 2
    if device == "cuda":
        need, have = memory_bytes(dims), torch.cuda.get_device_properties(0).total_memory
        if need > 0.8 * have:
            sys.stderr.write(f"decode_step: the model and caches take {need / 1e9:.1f} GB, more than 80% of the "
                             f"GPU's {have / 1e9:.1f} GB: fewer --layers, a smaller --batch or --context\n")
            return 2
    try:
        pack = runtime.load_pack(args.pack, allow_other_gpu=args.allow_other_gpu)
    except runtime.PackError as e:
        sys.stderr.write(f"decode_step: {e}\n")
        return 2
    where = torch.cuda.get_device_name(0) if device == "cuda" else "Triton's CPU interpreter (times not meaningful)"
    print(f"decode step: {'tiny' if args.tiny else 'V4.1-Flash'} shapes, {dims.layers} layers, batch {dims.batch}, "
          f"context {dims.context}, {dims.heads} heads, hidden {dims.hidden}, on {where}")
    _progress(f"building random weights and caches ({memory_bytes(dims) / 1e9:.2f} GB)")
    model = build(dims, device, args.seed)

    # the check: every call against its reference, then the step against its reference twin
    runtime.use_pack(pack)
    pack.counters.clear()
    _progress("checking the step against the references")
    checked = CheckingKernels()
    out = decode_step(model, checked)
    stats = pack.stats()
    twin = ReferenceKernels(follow=checked.choices)
    ref = decode_step(model, twin)
    diff = agreement(out, ref)
    bound = END_TO_END_TOL * dims.layers
    n = sum(checked.calls.values())
    calls = ", ".join(f"{k} {v}" for k, v in sorted(checked.calls.items()))
    ok = not checked.failures and diff <= bound
    print(f"check: {n - len(checked.failures)} of {n} kernel calls within their families' tolerances ({calls})")
    for f in checked.failures:
        print(f"  FAILED {f}")
    print(f"check: final residual vs the reference twin, max |diff| / max |ref| of a sequence {diff:.2e} "
          f"(bound {bound:.2e}): {'agree' if diff <= bound else 'DISAGREE'}; the twin took the tuned step's "
          f"choice where its own differed: indexer keys {twin.differed['sparse_mqa']} of "
          f"{twin.compared['sparse_mqa']}, experts {twin.differed['moe_routing']} of {twin.compared['moe_routing']}")
    print(f"pack {pack.name!r} ({'usable here' if pack.usable else 'made on another GPU: defaults'}), one step's "
          "lookups, exact / nearest / default:")
    for kernel, c in sorted(stats.items()):
        print(f"  {kernel:16s} {c['exact']} / {c['nearest']} / {c['default']}")

    # the timings
    gpu = device == "cuda"
    reps, ref_reps = args.reps or (50 if gpu else 1), args.ref_reps or (3 if gpu else 1)
    layer_fn = layer
    if args.compile:
        layer_fn = torch.compile(layer, fullgraph=True, backend="inductor" if gpu else "aot_eager")
    how = ("compiled, " if args.compile else "eager, ") + ("CUDA-graph replay" if args.graph else "launched")
    times = {}
    for name, p in (("pack", pack), ("defaults", None)):
        runtime.use_pack(p)
        _progress(f"timing the step with {name} ({how}, {reps} steps)")
        times[name] = _timer(device, reps)(_runner(model, TunerKernels(ops=args.compile), layer_fn, args.graph))
    runtime.use_pack(pack)
    _progress(f"timing the reference twin (eager, {ref_reps} steps)")
    ref_k = ReferenceKernels()
    times["reference"] = _timer(device, ref_reps)(lambda: decode_step(model, ref_k))
    unit = 1e3
    print(f"time per step ({how}; median of {reps}, reference of {ref_reps}): "
          f"pack {times['pack'] * unit:.3f} ms, defaults {times['defaults'] * unit:.3f} ms "
          f"({times['defaults'] / times['pack']:.2f}x the pack's), reference {times['reference'] * unit:.3f} ms "
          f"({times['reference'] / times['pack']:.3g}x)")
    model.close()
    return 0 if ok else 1


END_TO_END_TOL = 2e-2
"""Agreement of the final residual with the reference twin, per layer: the attention family's
bound (1e-2 relative + 4e-3 of the largest output) plus the bf16 rounding of the stored residual
(2^-8), rounded up; layers add."""


if __name__ == "__main__":
    sys.exit(main())
