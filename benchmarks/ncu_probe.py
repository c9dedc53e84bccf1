"""Run one family's kernel on one workload a few times, for a profiler to attach to.

No timing and no verification: this is the target process of Nsight Compute (``ncu``),
which replays the kernels it selects and reads their hardware counters (achieved memory
throughput, occupancy, warp stall reasons), to say *why* a kernel sits where it does
against its floor. The config is the family's default, updated with ``--config``.

    ncu --clock-control none -k regex:_split_kernel -s 2 -c 1 --section SpeedOfLight \\
        python benchmarks/ncu_probe.py nvfp4_attention \\
        --workload batch=16,context=32768,heads=16,kv_dtype=nvfp4,mode=dense \\
        --config '{"SWAP_AB": true, "num_warps": 4}'
"""
from __future__ import annotations

import argparse
import dataclasses
import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("kernel", help="family name, e.g. nvfp4_attention")
    p.add_argument("--workload", required=True, help="axis=value pairs joined by commas")
    p.add_argument("--config", default="{}", help="JSON object of config keys overriding the default")
    p.add_argument("--calls", type=int, default=4, help="launches of the whole family call")
    a = p.parse_args(argv)

    import torch

    from tuner import registry
    from tuner.runtime.target import Target
    from tuner.spec import workload_from_dict

    k = registry.get(a.kernel)
    axes = dict(kv.split("=", 1) for kv in a.workload.split(","))
    for f in dataclasses.fields(k.spec.workload):  # axes with a default may be left out
        if f.name not in axes and f.default is not dataclasses.MISSING:
            axes[f.name] = f.default
    w = workload_from_dict(k.spec.workload, axes)
    dev = "cuda" if torch.cuda.is_available() else "cpu"
    target = Target.of(torch.device(dev))
    cfg = {**k.spec.default_config(w, target), **json.loads(a.config)}
    why = k.refusal(cfg, w, target)
    if why:
        print(f"note: the tuner would not measure {cfg}: {why}", file=sys.stderr)
    inputs = k.spec.make_inputs(w, dev, 0)
    for _ in range(a.calls):
        k.spec.launch(config=cfg, **inputs)
    if dev == "cuda":
        torch.cuda.synchronize()
    print(f"{a.kernel} {w} {cfg}: {a.calls} calls done")
    return 0


if __name__ == "__main__":
    sys.exit(main())
