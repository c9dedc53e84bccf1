"""Does a host-table lookup slow down with the table's size, and does the page size matter?

Run 101 measured a 32M-row host table about 2x slower than an 8M one at T = 4096 (not at
T = 256); HBM tables do not slow down. One hypothesis: a random gather over a large table
misses translation caches (the GPU's, for sysmem mapped in small pages, or the host's). This
probe times the same lookup (same tokens and config; the rows differ with the table's size,
as its hash primes do) over host tables of several sizes, each in two kinds of memory:

- ``pinned``: the ``host`` placement (``EngramTable``, cudaHostAlloc);
- ``vmm``: host memory from the CUDA driver's virtual memory API (``cuMemCreate`` with a
  host NUMA location, ``cuMemMap``, access for the GPU and the CPU), mapped at the driver's
  allocation granularity (reported; whether the GPU then uses large pages is not visible).

Both kinds hold the same bytes (copied) and every vmm lookup is checked equal to the pinned
one before it is timed (pinned is timed first). ``--window N`` also times the rows folded
into the table's first N rows: the same table, the addresses of a smaller one. Probe only:
nothing here is a template placement.

Runs 102-103 (H200 in a VM): T = 4096 slows 3.2x from 1M to 64M rows; VMM memory (2 MB
granularity) is no faster; the 64M table's rows folded into 1M run at the 1M table's speed.
The cost grows with the spread of the addresses read; which translation limits it is open.

    python3 benchmarks/engram_page_probe.py --rows 1M,8M,32M --tokens 256,4096 --out $OUT
"""

from __future__ import annotations

import argparse
import ctypes
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))  # benchmarks/_results.py (benchmarks is not a package)

from _results import raw_path, write_raw  # noqa: E402

# CUDA driver API values (cuda.h)
_PINNED = 1                 # CU_MEM_ALLOCATION_TYPE_PINNED
_LOC_DEVICE, _LOC_HOST, _LOC_HOST_NUMA = 1, 2, 3
_GRAN_RECOMMENDED = 1       # CU_MEM_ALLOC_GRANULARITY_RECOMMENDED
_RW = 3                     # CU_MEM_ACCESS_FLAGS_PROT_READWRITE


class _Loc(ctypes.Structure):
    _fields_ = [("type", ctypes.c_int), ("id", ctypes.c_int)]


class _AllocFlags(ctypes.Structure):
    _fields_ = [("compressionType", ctypes.c_ubyte), ("gpuDirectRDMACapable", ctypes.c_ubyte),
                ("usage", ctypes.c_ushort), ("reserved", ctypes.c_ubyte * 4)]


class _Prop(ctypes.Structure):
    _fields_ = [("type", ctypes.c_int), ("requestedHandleTypes", ctypes.c_int), ("location", _Loc),
                ("win32HandleMetaData", ctypes.c_void_p), ("allocFlags", _AllocFlags)]


class _Access(ctypes.Structure):
    _fields_ = [("location", _Loc), ("flags", ctypes.c_int)]


class VmmHost:
    """``nbytes`` of host memory mapped through the driver's VMM API, readable by the GPU
    (UVA) and by the CPU at one virtual address. ``close()`` unmaps and releases."""

    def __init__(self, nbytes: int, device: int = 0) -> None:
        self.cu = ctypes.CDLL("libcuda.so.1")
        self.ptr = ctypes.c_uint64(0)
        self.handle = ctypes.c_uint64(0)
        self.size = 0
        errors = []
        for loc in (_LOC_HOST_NUMA, _LOC_HOST):
            prop = _Prop(type=_PINNED, requestedHandleTypes=0, location=_Loc(loc, 0))
            gran = ctypes.c_size_t(0)
            rc = self.cu.cuMemGetAllocationGranularity(ctypes.byref(gran), ctypes.byref(prop), _GRAN_RECOMMENDED)
            if rc:
                errors.append(f"location {loc}: granularity rc={rc}")
                continue
            self.granularity = gran.value
            self.size = -(-nbytes // gran.value) * gran.value
            rc = self.cu.cuMemCreate(ctypes.byref(self.handle), ctypes.c_size_t(self.size), ctypes.byref(prop),
                                     ctypes.c_ulonglong(0))
            if rc:
                errors.append(f"location {loc}: cuMemCreate rc={rc}")
                continue
            self.location = loc
            break
        else:
            raise RuntimeError("; ".join(errors))
        try:
            self._map(device)
        except RuntimeError:
            self.close()
            raise

    def _map(self, device: int) -> None:
        self._check(self.cu.cuMemAddressReserve(ctypes.byref(self.ptr), ctypes.c_size_t(self.size),
                                                ctypes.c_size_t(self.granularity), ctypes.c_uint64(0),
                                                ctypes.c_ulonglong(0)), "cuMemAddressReserve")
        self._check(self.cu.cuMemMap(self.ptr, ctypes.c_size_t(self.size), ctypes.c_size_t(0), self.handle,
                                     ctypes.c_ulonglong(0)), "cuMemMap")
        acc = _Access(_Loc(_LOC_DEVICE, device), _RW)
        self._check(self.cu.cuMemSetAccess(self.ptr, ctypes.c_size_t(self.size), ctypes.byref(acc),
                                           ctypes.c_size_t(1)), "cuMemSetAccess (device)")
        # CPU access is not needed here (filled with cuMemcpy); recorded for the notes.
        host = _Access(_Loc(self.location, 0), _RW)
        self.cpu_access_rc = self.cu.cuMemSetAccess(self.ptr, ctypes.c_size_t(self.size), ctypes.byref(host),
                                                    ctypes.c_size_t(1))

    def _check(self, rc: int, what: str) -> None:
        if rc:
            raise RuntimeError(f"{what} failed: CUresult {rc}")

    def copy_from(self, src_ptr: int, nbytes: int) -> None:
        """Copy ``nbytes`` from any CUDA-visible address (unified addressing) and wait."""
        self._check(self.cu.cuMemcpy(self.ptr, ctypes.c_uint64(src_ptr), ctypes.c_size_t(nbytes)), "cuMemcpy")

    def close(self) -> None:
        """Unmap, release and free what was set up (idempotent; after a failed map too)."""
        if self.size:
            if self.ptr.value:
                self.cu.cuMemUnmap(self.ptr, ctypes.c_size_t(self.size))
                self.cu.cuMemAddressFree(self.ptr, ctypes.c_size_t(self.size))
            self.cu.cuMemRelease(self.handle)
            self.size = 0


def vmm_table(src: Any, mem: VmmHost) -> Any:
    """An ``EngramTable`` of placement ``host`` whose rows live in ``mem`` (a copy of ``src``'s)."""
    import torch

    from kernel_templates import engram as E

    t = E.EngramTable.__new__(E.EngramTable)
    # Only the descriptive fields: nothing the source table owns (registration, mapping) is shared.
    for k in ("device", "num_rows", "requested_placement", "placement", "reason"):
        setattr(t, k, getattr(src, k))
    t.pinned, t.registered, t._mmap, t._reg_ptr, t.huge_page_bytes = True, False, None, 0, 0
    mem.copy_from(src.data.data_ptr(), src.num_rows * E.ROW_BYTES)
    # A CPU tensor over the mapping's address: never read on the CPU here, only its data_ptr()
    # reaches the kernel (as for pinned tables, via _UVAPointer).
    nbytes = src.num_rows * E.ROW_BYTES
    data = torch.frombuffer((ctypes.c_uint8 * nbytes).from_address(mem.ptr.value), dtype=torch.uint8)
    data = data.view(src.num_rows, E.ROW_BYTES)
    t._data, t._codes, t._scales = data, data[:, :E.D], data[:, E.D:]
    return t


def main(argv: list[str] | None = None) -> int:
    from tuner.cli.common import parse_count

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rows", default="1M,8M,32M,64M", help="table sizes (K/M suffixes)")
    ap.add_argument("--tokens", default="256,4096", help="tokens a lookup (24 rows each)")
    ap.add_argument("--window", default="", help="also time the rows folded into the table's first N rows "
                    "(rows %% N; K/M suffixes): the same table, the addresses of a smaller one")
    ap.add_argument("--reps", type=int, default=50)
    ap.add_argument("--out", type=Path, default=Path("benchmarks/results"))
    args = ap.parse_args(argv)

    import torch

    from engram import zipf_rows  # benchmarks/engram.py
    from kernel_templates import engram as E
    from tuner.timing import gpu_available

    if not gpu_available():
        print("engram_page_probe.py needs a CUDA GPU (and TRITON_INTERPRET unset)", file=sys.stderr)
        return 2
    result: dict[str, Any] = {"probe": "engram_page", "rows": []}
    path = raw_path(args.out, "engram_page_probe")  # rewritten after every size
    lines = [f"{'rows':>7} {'T':>6} {'memory':<7} {'config':<8} {'us':>9} {'GB/s':>7}"]
    for size in [parse_count(s) for s in args.rows.split(",")]:
        params = E.make_params(size, seed=0, device="cuda")
        t0 = time.time()
        src = E.EngramTable(size, "host", "cuda").fill_random_(seed=0)
        mem = vt = None
        try:
            mem = VmmHost(size * E.ROW_BYTES)
            vt = vmm_table(src, mem)
            result.setdefault("vmm", {})[size] = {"location": mem.location, "granularity": mem.granularity,
                                                   "cpu_access_rc": mem.cpu_access_rc}
            print(f"{size >> 20}M rows: tables ready in {time.time() - t0:.1f} s; vmm location {mem.location}, "
                  f"granularity {mem.granularity >> 10} KiB, CPU access rc {mem.cpu_access_rc}", flush=True)
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

    from tuner.timing import bench_kernel

    cfgs = {"default": E.default_config(E.Workload(T, "host", size))}
    if cfgs["default"]["DEDUP"]:  # sorted rows against the hashed order (DEDUP tiles are <= 16 rows)
        cfgs["no-dedup"] = {**cfgs["default"], "DEDUP": False}
    for name, cfg in cfgs.items():
        out = E.launch(config=cfg, table=src, rows=rows)
        E.verify(out, E.reference(table=src, rows=rows), {"table": src, "rows": rows})
        tables = [("pinned", src)]
        if vt is not None:
            try:
                same = torch.equal(out, E.launch(config=cfg, table=vt, rows=rows))
            except Exception as e:  # a launcher that cannot use the mapping: keep the pinned rows
                print(f"vmm lookup failed: {str(e).splitlines()[0]}", flush=True)
                result["vmm"][size]["launch_error"] = str(e)
            else:
                if not same:
                    raise SystemExit(f"vmm lookup differs from pinned at {size} rows, T={T}, {name}")
                tables.append(("vmm", vt))
        for memname, table in tables:
            tm = bench_kernel(E.SPEC, lambda: E.launch(config=cfg, table=table, rows=rows), reps=args.reps)
            nbytes = rows.numel() * E.ROW_BYTES
            rec = {"table_rows": size, "tokens": T, "window": win, "memory": memname, "config_name": name,
                   "config": cfg, "median_us": tm.median_us, "gb_per_s": nbytes / tm.median_us / 1e3}
            result["rows"].append(rec)
            where = f"{size >> 20}M" + (f"%{win >> 20}M" if win else "")
            lines.append(f"{where:>7} {T:>6} {memname:<7} {name:<8} {tm.median_us:>9.1f} {rec['gb_per_s']:>7.1f}")
            print(lines[-1], flush=True)


if __name__ == "__main__":
    sys.exit(main())
