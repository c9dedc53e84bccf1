"""Is the Engram host lookup bound by the PCIe link? Bytes on the link per table row read.

    python benchmarks/pcie_link_probe.py [--pack packs/nvidia-h200] [--rows 8M] [--out DIR]

The host lookup at T = 256 (6144 rows of 264 B) takes ~47 us, ~125 M rows/s, and issue 6
asks it to be 10x faster than the CPU gather baseline, which has measured 317-622 us on
different hosts. If the link is what limits the lookup, no kernel change closes the gap on a
host whose CPU baseline is fast. This probe reads NVML's PCIe RX counter (bytes the GPU
receives, sampled over 20 ms windows) while one workload replays back to back in a CUDA
graph, and divides by the rows read, for:

- ``sequential``: 128K rows in order (the link's rate for long reads);
- ``random264 warm``: 6144 random 264-B rows, the same rows every call (as the engram
  benchmark times T = 256); ``random264 cold``: a new set of 6144 rows every call;
- ``aligned256``: 6144 random 256-B rows of a 256-B-aligned table (two 128-B lines a row);
- ``scales8``: the 8 scale bytes of 6144 random rows (does a lone 8-B read move a 32-B
  sector or a 128-B line over the link?);
- ``lookup``: the engram lookup at T = 256 with the pack's config on the benchmark's rows.

A 264-B row at an 8-B-aligned offset always spans three 128-B lines (264 = 2 * 128 + 8), so
with line-sized reads a row moves 384 B; with 32-B sectors, 288 B. The CPU baseline is split
into its steps (rows to the host, ``index_select``, the copy to the GPU, the dequant) too.
Every gather is checked against plain indexing before it is timed. A short table is printed
last; raw numbers go to ``--out`` as JSON.
"""
from __future__ import annotations

import argparse
import ctypes
import statistics
import sys
import threading
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))

_NVML_PCIE_UTIL_RX_BYTES = 1  # nvmlPcieUtilCounter_t: RX = bytes the GPU receives


class PcieRx:
    """NVML's PCIe RX throughput of one GPU (KB/s over a 20 ms window), sampled in a thread."""

    def __init__(self, cuda_index: int = 0) -> None:
        import torch

        self.nv = ctypes.CDLL("libnvidia-ml.so.1")
        self._ok(self.nv.nvmlInit_v2(), "nvmlInit_v2")
        idx = torch.cuda._get_nvml_device_index(cuda_index) if hasattr(torch.cuda, "_get_nvml_device_index") \
            else cuda_index
        self.handle = ctypes.c_void_p()
        self._ok(self.nv.nvmlDeviceGetHandleByIndex_v2(ctypes.c_uint(idx), ctypes.byref(self.handle)),
                 "nvmlDeviceGetHandleByIndex_v2")

    @staticmethod
    def _ok(rc: int, what: str) -> None:
        if rc != 0:
            raise RuntimeError(f"{what} failed: nvmlReturn {rc}")

    def kb_per_s(self) -> int:
        v = ctypes.c_uint()
        self._ok(self.nv.nvmlDeviceGetPcieThroughput(self.handle, _NVML_PCIE_UTIL_RX_BYTES, ctypes.byref(v)),
                 "nvmlDeviceGetPcieThroughput")
        return v.value

    def during(self, work: Any, seconds: float) -> list[float]:
        """RX bytes/s samples taken while ``work()`` is called repeatedly for ``seconds``."""
        import torch

        samples: list[float] = []
        stop = threading.Event()

        def sample() -> None:
            time.sleep(0.05)  # let the GPU reach its steady rate
            while not stop.is_set():
                samples.append(self.kb_per_s() * 1e3)

        th = threading.Thread(target=sample)
        th.start()
        end = time.time() + seconds
        while time.time() < end:
            work()
            torch.cuda.synchronize()
        stop.set()
        th.join()
        return samples


def _graph(fn: Any, calls: int) -> Any:
    """A CUDA graph of ``calls`` back-to-back calls of ``fn``; returns its replay."""
    import torch

    s = torch.cuda.Stream()
    s.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(s):
        fn()  # compile / warm outside the capture
    torch.cuda.current_stream().wait_stream(s)
    torch.cuda.synchronize()
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g):
        for _ in range(calls):
            fn()
    return g.replay


def _gpu_us(replay: Any, calls: int, reps: int = 10) -> float:
    import torch

    times = []
    for _ in range(reps):
        a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        a.record()
        replay()
        b.record()
        b.synchronize()
        times.append(a.elapsed_time(b) * 1e3 / calls)
    return statistics.median(times)


def run(args: argparse.Namespace) -> dict[str, Any]:
    import torch

    from engram import _gather_kernel as engram_gather, offset_arg, zipf_rows
    from engram_sweep import _gather_strided
    from kernel_templates import engram as E
    from kernel_templates.engram import hashing as EH, lookup as EL, table as ET
    from tuner.runtime.target import Target
    from tuner import runtime

    nv = PcieRx()
    idle = statistics.median(nv.during(lambda: time.sleep(0.02), 0.3))
    sms = torch.cuda.get_device_properties(0).multi_processor_count
    n_rows = args.rows
    result: dict[str, Any] = {"device": torch.cuda.get_device_name(0), "table_rows": n_rows,
                              "idle_rx_bytes_per_s": idle, "points": [], "cpu_baseline_us": {}}
    table = E.EngramTable(n_rows, "host", "cuda").fill_random_(seed=0)
    flat = table.data.view(-1)
    uva = table.kernel_arg()
    uva_sc = offset_arg(uva, ET.D)
    g = torch.Generator(device="cuda").manual_seed(1)
    n = 6144
    gather264 = engram_gather()
    gather = _gather_strided()  # W bytes a row from the pointer given
    sets = [torch.randint(0, n_rows, (n,), device="cuda", generator=g) for _ in range(args.cold_sets)]
    n256 = n_rows * ET.ROW_BYTES // 256
    idx256 = torch.randint(0, n256, (n,), device="cuda", generator=g)
    seq = torch.arange(1 << 17, device="cuda")
    dst = torch.empty(1 << 17, ET.ROW_BYTES, dtype=torch.uint8, device="cuda")

    def check(got: Any, want: Any) -> None:
        if not torch.equal(got.cpu().reshape(-1)[: want.numel()], want.reshape(-1)):
            raise AssertionError("gathered bytes differ from plain indexing")

    data = table.data
    by256 = flat[: n256 * 256].view(n256, 256)

    def g264(idx: Any) -> Any:
        grid = (min(4 * sms, -(-idx.numel() // 64)),)
        return lambda: gather264[grid](uva, uva_sc, idx, dst, idx.numel(), ET.ROW_BYTES, ET.ROW_BYTES, ROWS=64,
                                       num_warps=4)

    def gnb(idx: Any, stride: int, off: int, nb: int, rows: int) -> Any:
        grid = (min(4 * sms, -(-idx.numel() // rows)),)
        src = offset_arg(uva, off)
        return lambda: gather[grid](src, idx, dst, idx.numel(), stride, W=nb, EXTRA=False, ROWS=rows, num_warps=4)

    cold_calls = [g264(s) for s in sets]
    cold_i = [0]

    def cold() -> None:
        cold_calls[cold_i[0] % len(cold_calls)]()
        cold_i[0] += 1

    pack = runtime.load_pack(args.pack) if args.pack else None
    params = EH.make_params(n_rows, seed=0, device="cuda")
    _, rows = zipf_rows(params, 256)
    wl = E.Workload(256, "host", n_rows)
    sel = pack.select("engram", {"tokens": 256, "placement": "host", "table_rows": n_rows}) if pack else None
    cfg = sel.config if sel is not None else E.default_config(wl, Target.of("cuda"))
    distinct = int(torch.unique(rows).numel())

    # (name, one call, rows a call, useful bytes a row, check)
    cases = [
        ("sequential", g264(seq), seq.numel(), ET.ROW_BYTES,
         lambda: (g264(seq)(), check(dst, data.index_select(0, seq.cpu())))),
        ("random264 warm", g264(sets[0]), n, ET.ROW_BYTES,
         lambda: (g264(sets[0])(), check(dst, data.index_select(0, sets[0].cpu())))),
        ("random264 cold", cold, n, ET.ROW_BYTES, None),
        ("aligned256", gnb(idx256, 256, 0, 256, 64), n, 256,
         lambda: (gnb(idx256, 256, 0, 256, 64)(), check(dst, by256.index_select(0, idx256.cpu())))),
        ("scales8", gnb(sets[0], ET.ROW_BYTES, ET.D, 8, 256), n, 8,
         lambda: (gnb(sets[0], ET.ROW_BYTES, ET.D, 8, 256)(), check(dst, data[:, ET.D:].index_select(0, sets[0].cpu())))),
        (f"lookup T=256 ({distinct} distinct)", lambda: EL.launch(config=cfg, table=table, rows=rows), distinct,
         ET.ROW_BYTES, lambda: E.verify(EL.launch(config=cfg, table=table, rows=rows), E.reference(table, rows),
                                       {"table": table, "rows": rows})),
    ]
    for name, call, rows_a_call, useful, chk in cases:
        if chk is not None:
            chk()
        calls = max(1, min(200, int(20000 // max(1, rows_a_call // 512))))
        replay = _graph(call, calls)
        us = _gpu_us(replay, calls)
        rx = nv.during(replay, args.seconds)
        rx_med = statistics.median(rx) - idle if rx else float("nan")
        wire = rx_med * us * 1e-6 / rows_a_call
        result["points"].append({"case": name, "us_a_call": us, "rows_a_call": rows_a_call, "useful_bytes_a_row": useful,
                                 "useful_bytes_per_s": rows_a_call * useful / (us * 1e-6),
                                 "rows_per_s": rows_a_call / (us * 1e-6), "rx_bytes_per_s": rx_med,
                                 "rx_samples": len(rx), "rx_bytes_a_row": wire})
        print(f"{name:30s} {us:9.1f} us  {rows_a_call / us:7.1f} Mrows/s  useful {rows_a_call * useful / us / 1e3:6.1f} GB/s"
              f"  RX {rx_med / 1e9:6.1f} GB/s  {wire:6.0f} B/row", flush=True)
    result["lookup_config"] = cfg

    # the CPU gather baseline (engram's torch_eager for host tables), step by step
    def med(fn: Any, reps: int = 30) -> float:
        ts = []
        for _ in range(reps):
            torch.cuda.synchronize()
            t0 = time.perf_counter()
            fn()
            torch.cuda.synchronize()
            ts.append((time.perf_counter() - t0) * 1e6)
        return statistics.median(ts)

    flat_rows = rows.reshape(-1)
    cpu_rows = flat_rows.cpu()
    picked = table.data.index_select(0, cpu_rows)
    on_gpu = picked.to("cuda")
    base = E.baselines["torch_eager"]
    parts = {"whole": lambda: base(table=table, rows=rows), "rows_to_host": lambda: flat_rows.cpu(),
             "index_select": lambda: table.data.index_select(0, cpu_rows), "copy_to_gpu": lambda: picked.to("cuda"),
             "dequant": lambda: E._dequant_torch(on_gpu)}
    for k, fn in parts.items():
        fn()
        result["cpu_baseline_us"][k] = med(fn)
    print("CPU baseline (us): " + ", ".join(f"{k} {v:.1f}" for k, v in result["cpu_baseline_us"].items()), flush=True)
    table.close()
    return result


def _table(result: dict[str, Any]) -> str:
    lines = [f"PCIe RX per row read, {result['device']}, {result['table_rows']} x 264-B host table "
             f"(idle RX {result['idle_rx_bytes_per_s'] / 1e9:.2f} GB/s subtracted)",
             f"{'case':30s} {'us/call':>9s} {'Mrows/s':>8s} {'useful GB/s':>12s} {'RX GB/s':>8s} {'RX B/row':>9s}"]
    for p in result["points"]:
        lines.append(f"{p['case']:30s} {p['us_a_call']:9.1f} {p['rows_per_s'] / 1e6:8.1f} "
                     f"{p['useful_bytes_per_s'] / 1e9:12.1f} {p['rx_bytes_per_s'] / 1e9:8.1f} {p['rx_bytes_a_row']:9.0f}")
    c = result["cpu_baseline_us"]
    lines.append("CPU gather baseline, us: " + ", ".join(f"{k} {v:.1f}" for k, v in c.items()))
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    from host_gather_probe import probe_main

    return probe_main(_parse(argv), "pcie_link_probe", run, _table)


def _parse(argv: list[str] | None) -> argparse.Namespace:
    from engram import _int  # benchmarks/engram.py: 8M = 8 << 20

    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--pack", type=Path, default=None, help="kernel pack folder (the lookup's config; default config if absent)")
    p.add_argument("--rows", type=_int, default=8 << 20, help="table rows (K/M suffixes; default 8M = 2.1 GB)")
    p.add_argument("--seconds", type=float, default=0.6, help="replay time per case while NVML is sampled")
    p.add_argument("--cold-sets", type=int, default=200, help="row sets the cold case cycles through")
    p.add_argument("--out", type=Path, default=None, help="folder for the raw JSON")
    return p.parse_args(argv)


if __name__ == "__main__":
    sys.exit(main())
