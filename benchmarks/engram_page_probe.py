"""Does a host-table lookup slow down with the table's size, and does the page size matter?

An H200 measured a 32M-row host table about 2x slower than an 8M one at T = 4096 (not at
T = 256); HBM tables do not slow down. One hypothesis: a random gather over a large table
misses translation caches (the GPU's, for sysmem mapped in small pages, or the host's). This
probe times the same lookup (same tokens and config; the rows differ with the table's size,
as its hash primes do) over host tables of several sizes, each in two kinds of memory:

- ``pinned``: the ``host`` placement (``EngramTable``, cudaHostAlloc);
- ``vmm``: host memory from the CUDA driver's virtual memory API (``host_gather_probe``'s
  ``VmmHostBuffer``: ``cuMemCreate`` at a host location, mapped for the GPU at the driver's
  allocation granularity, reported; whether the GPU then uses large pages is not visible).

Both kinds hold the same bytes (copied) and every vmm lookup is checked equal to the pinned
one before it is timed (pinned is timed first). ``--window N`` also times the rows folded
into the table's first N rows: the same table, the addresses of a smaller one. Probe only:
nothing here is a template placement.

Measured on an H200 in a VM: T = 4096 slows 3.2x from 1M to 64M rows; VMM memory (2 MB
granularity) is no faster; the 64M table's rows folded into 1M run at the 1M table's speed.
The cost grows with the spread of the addresses read; which translation limits it is open.
The same at the lookup kernel as ``host_gather_probe.py`` found for a raw 264-B gather
(13.5 -> 43 GB/s as the span shrank from 2 GiB to 0.5 GiB; VMM and THP memory alike).

    python3 benchmarks/engram_page_probe.py --rows 1M,8M,32M --tokens 256,4096 --out $OUT
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))  # benchmarks/_results.py (benchmarks is not a package)

from _results import raw_path, write_raw  # noqa: E402
from host_gather_probe import VmmHostBuffer  # noqa: E402

def vmm_table(src: Any, mem: Any) -> Any:
    """An ``EngramTable`` of placement ``host`` whose rows live in ``mem.tensor`` (a uint8 view of
    at least the table's bytes, a ``VmmHostBuffer``'s), filled with a copy of ``src``'s rows."""
    from kernel_templates import engram as E
    from kernel_templates.engram import table as ET

    t = E.EngramTable.__new__(E.EngramTable)
    # Only the descriptive fields: nothing the source table owns (registration, mapping) is shared.
    for k in ("device", "num_rows", "requested_placement", "placement", "reason"):
        setattr(t, k, getattr(src, k))
    t.pinned, t.registered, t._mmap, t._reg_ptr, t.huge_page_bytes = True, False, None, 0, 0
    data = mem.tensor[:src.num_rows * ET.ROW_BYTES].view(src.num_rows, ET.ROW_BYTES)
    data.copy_(src.data)
    t._data, t._codes, t._scales = data, data[:, :ET.D], data[:, ET.D:]
    return t


def main(argv: list[str] | None = None) -> int:
    from tuner.cli.common import parse_count

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rows", default="1M,8M,32M,64M", help="table sizes (K/M suffixes)")
    ap.add_argument("--tokens", default="256,4096", help="tokens a lookup (24 rows each)")
    ap.add_argument("--window", default="", help="also time the rows folded into the table's first N rows "
                    "(rows %% N; K/M suffixes): the same table, the addresses of a smaller one")
    ap.add_argument("--reps", type=int, default=50)
    ap.add_argument("--out", type=Path, default=Path("benchmarks/results/raw"))
    args = ap.parse_args(argv)

    import torch

    from engram import zipf_rows  # benchmarks/engram.py
    from kernel_templates import engram as E
    from kernel_templates.engram import hashing as EH, table as ET
    from tuner.timing import gpu_available

    if not gpu_available():
        print("engram_page_probe.py needs a CUDA GPU (and TRITON_INTERPRET unset)", file=sys.stderr)
        return 2
    result: dict[str, Any] = {"probe": "engram_page", "rows": []}
    path = raw_path(args.out, "engram_page_probe")  # rewritten after every size
    lines = [f"{'rows':>7} {'T':>6} {'memory':<7} {'config':<8} {'us':>9} {'GB/s':>7}"]
    for size in [parse_count(s) for s in args.rows.split(",")]:
        params = EH.make_params(size, seed=0, device="cuda")
        t0 = time.time()
        src = E.EngramTable(size, "host", "cuda").fill_random_(seed=0)
        mem = vt = None
        try:
            mem = VmmHostBuffer(size * ET.ROW_BYTES)
            vt = vmm_table(src, mem)
            result.setdefault("vmm", {})[size] = {"location": mem.location, "granularity": mem.granularity}
            print(f"{size >> 20}M rows: tables ready in {time.time() - t0:.1f} s; vmm location {mem.location}, "
                  f"granularity {mem.granularity >> 10} KiB", flush=True)
        except (OSError, RuntimeError, ValueError, TypeError) as e:  # pinned sizes still say whether size matters
            if mem is not None:
                mem.close()
            mem = vt = None
            result.setdefault("vmm", {})[size] = {"error": str(e)}
            print(f"{size >> 20}M rows: no vmm table ({e})", flush=True)
        try:
            for T in [int(x) for x in args.tokens.split(",")]:
                _, hashed = zipf_rows(params, T)
                for win in [0] + ([parse_count(args.window)] if args.window else []):
                    if 0 < win < size or win == 0:
                        rows = hashed % win if win else hashed
                        _time_rows(args, E, result, lines, size, T, win, rows, src, vt)
        finally:  # a failure keeps what was measured and frees this size's tables
            write_raw(path, result)
            if vt is not None:
                vt.close()
            src.close()
            del vt
            if mem is not None:
                mem.close()
            torch.cuda.synchronize()
    print(f"raw results: {path}")
    print("\n".join(lines))
    return 0


def _time_rows(args: argparse.Namespace, E: Any, result: dict[str, Any], lines: list[str], size: int, T: int,
               win: int, rows: Any, src: Any, vt: Any) -> None:
    """Verify and time the lookup of ``rows`` over the pinned table and (where it exists) the VMM copy:
    the default config, and where it dedups (sorts the rows) the same without."""
    import torch

    from kernel_templates.engram import lookup as EL, table as ET
    from tuner.runtime.target import Target
    from tuner.timing import bench_kernel

    cfgs = {"default": E.default_config(E.Workload(T, "host", size), Target.of(src.device))}
    if cfgs["default"]["DEDUP"]:  # sorted rows against the hashed order (DEDUP tiles are <= 16 rows)
        cfgs["no-dedup"] = {**cfgs["default"], "DEDUP": False}
    for name, cfg in cfgs.items():
        out = EL.launch(config=cfg, table=src, rows=rows)
        E.verify(out, E.reference(table=src, rows=rows), {"table": src, "rows": rows})
        tables = [("pinned", src)]
        if vt is not None:
            try:
                same = torch.equal(out, EL.launch(config=cfg, table=vt, rows=rows))
            except Exception as e:  # a launcher that cannot use the mapping: keep the pinned rows
                print(f"vmm lookup failed: {str(e).splitlines()[0]}", flush=True)
                result["vmm"][size]["launch_error"] = str(e)
            else:
                if not same:
                    raise SystemExit(f"vmm lookup differs from pinned at {size} rows, T={T}, {name}")
                tables.append(("vmm", vt))
        for memname, table in tables:
            tm = bench_kernel(E.SPEC, lambda: EL.launch(config=cfg, table=table, rows=rows), reps=args.reps)
            nbytes = rows.numel() * ET.ROW_BYTES
            rec = {"table_rows": size, "tokens": T, "window": win, "memory": memname, "config_name": name,
                   "config": cfg, "median_us": tm.median_us, "gb_per_s": nbytes / tm.median_us / 1e3}
            result["rows"].append(rec)
            where = f"{size >> 20}M" + (f"%{win >> 20}M" if win else "")
            lines.append(f"{where:>7} {T:>6} {memname:<7} {name:<8} {tm.median_us:>9.1f} {rec['gb_per_s']:>7.1f}")
            print(lines[-1], flush=True)


if __name__ == "__main__":
    sys.exit(main())
