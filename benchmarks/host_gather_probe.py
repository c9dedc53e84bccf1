"""What limits a random gather of table rows from host memory over PCIe (Engram host tables).

    python benchmarks/host_gather_probe.py [--rows 8M] [--out DIR]

The engram benchmark measures a random 264-B row gather from a pinned host table at
~13.7 GB/s against 48 GB/s for the same rows read in order, and huge pages (THP,
registered) change nothing; the row layout does not matter either (engram_sweep.py:
264-, 256-, 288-B rows 12.6-13.1 GB/s). This probe separates the other candidate limits in
one run, with the engram benchmark's gather kernel (``engram._gather_kernel``):

- **span**: random rows drawn from the first 1/1, 1/2, 1/4, 1/8 of the table (every span
  larger than the L2, so repeats stay rare). A rate that climbs as the span shrinks points
  at address translation (the GPU's TLB reach over 4 KiB-mapped host pages, or the host
  IOMMU); a flat rate points at the PCIe request rate itself.
- **allocation**: ``cudaHostAlloc`` (torch ``pin_memory``), THP + ``cudaHostRegister`` (the
  ``host_thp`` placement), and, where the driver offers it, a CUDA VMM host allocation
  (``cuMemCreate`` with ``CU_MEM_LOCATION_TYPE_HOST``, or ``HOST_NUMA`` node 0 on CUDA 12
  drivers, at its recommended granularity, which the driver may map with large GPU pages);
  an HBM table for reference.

Every gather is checked against ``index_select`` on the same rows before it is timed. A
short table is printed last; raw numbers go to ``--out`` as JSON.
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
sys.path.insert(0, str(ROOT / "benchmarks"))

from _results import save_raw  # noqa: E402


# -- CUDA VMM host allocation through the driver API (ctypes) --------------------------------
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


_PINNED, _LOC_DEVICE, _LOC_HOST, _LOC_HOST_NUMA, _RW, _RECOMMENDED = 1, 1, 2, 3, 3, 1


class VmmHostBuffer:
    """``nbytes`` of host memory from ``cuMemCreate(CU_MEM_LOCATION_TYPE_HOST)``, mapped into
    the device's address space with read/write access for ``device``; ``tensor`` is a uint8
    CUDA tensor view of it (the GPU fills and reads it; the CPU never touches it)."""

    def __init__(self, nbytes: int, device: int = 0) -> None:
        import torch

        torch.cuda.init()
        self.cu = ctypes.CDLL("libcuda.so.1")
        self.handle, self.ptr, self.size = ctypes.c_ulonglong(0), ctypes.c_ulonglong(0), 0
        self._created = self._reserved = self._mapped = False
        try:
            self._create(nbytes)
            self._check("cuMemAddressReserve", ctypes.byref(self.ptr), ctypes.c_size_t(self.size),
                        ctypes.c_size_t(self.granularity), ctypes.c_ulonglong(0), ctypes.c_ulonglong(0))
            self._reserved = True
            self._check("cuMemMap", self.ptr, ctypes.c_size_t(self.size), ctypes.c_size_t(0), self.handle,
                        ctypes.c_ulonglong(0))
            self._mapped = True
            acc = _Access(_Loc(_LOC_DEVICE, device), _RW)
            self._check("cuMemSetAccess", self.ptr, ctypes.c_size_t(self.size), ctypes.byref(acc),
                        ctypes.c_size_t(1))
        except Exception:
            self._release()
            raise
        ptr = self.ptr.value

        class _View:
            __cuda_array_interface__ = {"shape": (nbytes,), "typestr": "|u1", "data": (ptr, False), "version": 3}

        self.tensor = torch.as_tensor(_View(), device=f"cuda:{device}")

    def _create(self, nbytes: int) -> None:
        """cuMemCreate in host memory: location HOST (CUDA 13 drivers), else HOST_NUMA node 0
        (CUDA 12 drivers refuse HOST there with CUDA_ERROR_INVALID_VALUE)."""
        errors = []
        for loc in (_LOC_HOST, _LOC_HOST_NUMA):
            prop = _Prop()
            prop.type, prop.location = _PINNED, _Loc(loc, 0)
            gran = ctypes.c_size_t()
            rc = self.cu.cuMemGetAllocationGranularity(ctypes.byref(gran), ctypes.byref(prop), _RECOMMENDED)
            if rc == 0:
                size = -(-nbytes // gran.value) * gran.value
                rc = self.cu.cuMemCreate(ctypes.byref(self.handle), ctypes.c_size_t(size), ctypes.byref(prop),
                                         ctypes.c_ulonglong(0))
                if rc == 0:
                    self.granularity, self.size, self.location = gran.value, size, loc
                    self._created = True
                    return
            errors.append(f"location {loc}: CUresult {rc}")
        raise RuntimeError("cuMemCreate in host memory failed: " + "; ".join(errors))

    def _release(self) -> None:
        if self._mapped:
            self.cu.cuMemUnmap(self.ptr, ctypes.c_size_t(self.size))
        if self._reserved:
            self.cu.cuMemAddressFree(self.ptr, ctypes.c_size_t(self.size))
        if self._created:
            self.cu.cuMemRelease(self.handle)
        self._created = self._reserved = self._mapped = False

    def _check(self, name: str, *args: Any) -> None:
        rc = getattr(self.cu, name)(*args)
        if rc != 0:
            raise RuntimeError(f"{name} failed: CUresult {rc}")

    def close(self) -> None:
        import torch

        torch.cuda.synchronize()
        self.tensor = None
        self._release()


# -- the probe -----------------------------------------------------------------------------
def _tables(rows: int) -> list[tuple[str, Any, Any, Any]]:
    """(name, uint8 table of rows x 264 B, kernel pointer arg, closer)."""
    import torch

    from kernel_templates.engram import EngramTable
    from kernel_templates.engram.table import ROW_BYTES

    nbytes = rows * ROW_BYTES
    out: list[tuple[str, Any, Any, Any]] = []
    hbm = torch.empty(nbytes, dtype=torch.uint8, device="cuda")
    out.append(("hbm", hbm, hbm, lambda: None))
    pinned = torch.empty(nbytes, dtype=torch.uint8, pin_memory=True)
    out.append(("cudaHostAlloc", pinned, _uva(pinned), lambda: None))
    t = EngramTable(rows, "host_thp")
    if t.placement == "host_thp":
        flat = t.data.view(-1)
        out.append((f"thp+register ({t.huge_page_bytes >> 20} MiB huge)", flat, _uva(flat), t.close))
    else:
        print(f"host_thp unavailable: {t.reason}")
        t.close()
    try:
        v = VmmHostBuffer(nbytes)
        where = "HOST" if v.location == _LOC_HOST else "HOST_NUMA 0"
        out.append((f"vmm {where} (gran {v.granularity >> 10} KiB)", v.tensor, v.tensor, v.close))
    except Exception as e:  # noqa: BLE001 - a probe: report any driver refusal and go on
        print(f"VMM host allocation unavailable: {type(e).__name__}: {e}")
    return out


def _uva(host: Any) -> Any:
    from kernel_templates.engram.table import _UVAPointer

    return _UVAPointer(host.data_ptr(), host.dtype)


def _fill(buf: Any) -> None:
    """Random bytes, written from the GPU in 256 MB chunks (host buffers through a staging copy)."""
    import torch

    g = torch.Generator(device="cuda").manual_seed(0)
    step = 1 << 28
    for s in range(0, buf.numel(), step):
        part = torch.randint(0, 256, (min(step, buf.numel() - s),), dtype=torch.uint8, device="cuda", generator=g)
        buf[s:s + part.numel()].copy_(part)
    torch.cuda.synchronize()


def run(args: argparse.Namespace) -> dict[str, Any]:
    import torch

    from engram import _gather_kernel, offset_arg  # benchmarks/engram.py: the ceiling's 264-B row gather
    from kernel_templates.engram.table import ROW_BYTES
    from tuner.timing import bench

    kern = _gather_kernel()
    sms = torch.cuda.get_device_properties(0).multi_processor_count
    rows, n = args.rows, args.gathers
    dst = torch.empty(n, ROW_BYTES, dtype=torch.uint8, device="cuda")
    cols = torch.arange(ROW_BYTES)
    result: dict[str, Any] = {"rows": rows, "gathers": n, "device": torch.cuda.get_device_name(0), "points": []}
    for name, buf, arg, close in _tables(rows):
        t0 = time.time()
        _fill(buf)
        sc = offset_arg(arg, 256)  # the scales of a packed row
        for span_div in args.spans:
            span = rows // span_div
            idx = torch.randint(0, span, (n,), device="cuda", generator=torch.Generator(device="cuda").manual_seed(span_div))
            # correctness first: the gathered rows equal plain indexing of the same rows
            want = buf[idx.long().to(buf.device)[:, None] * ROW_BYTES + cols.to(buf.device)[None, :]].cpu()
            best = (0.0, None)
            for rows_per, progs in ((16, sms), (32, 2 * sms), (64, 4 * sms), (16, 8 * sms)):
                grid = (min(progs, -(-n // rows_per)),)

                def call() -> None:
                    kern[grid](arg, sc, idx, dst, n, ROW_BYTES, ROW_BYTES, ROWS=rows_per, num_warps=4)

                if best[1] is None:
                    dst.zero_()
                    call()
                    if not torch.equal(dst.cpu(), want):
                        raise AssertionError(f"{name}: gathered bytes differ from plain indexing")
                t = bench(call, reps=args.reps, flush_l2=True)
                rate = n * ROW_BYTES / (t.median_us * 1e-6)
                if rate > best[0]:
                    best = (rate, {"rows_per_program": rows_per, "programs": grid[0], "median_us": t.median_us})
            result["points"].append({"alloc": name, "span_rows": span, "span_bytes": span * ROW_BYTES,
                                     "bytes_per_s": best[0], "rows_per_s": best[0] / ROW_BYTES, **best[1]})
            print(f"{name:32s} span {span * ROW_BYTES / 2**30:6.2f} GiB {best[0] / 1e9:7.1f} GB/s "
                  f"{best[0] / ROW_BYTES / 1e6:7.1f} Mrows/s", flush=True)
        print(f"({name}: {time.time() - t0:.1f} s)", flush=True)
        close()
    return result


def _table(result: dict[str, Any]) -> str:
    spans = sorted({p["span_bytes"] for p in result["points"]}, reverse=True)
    lines = [f"random 264-B row gather, {result['gathers']} rows a call, {result['device']}; GB/s by span",
             f"{'allocation':32s} " + " ".join(f"{s / 2**30:8.2f} GiB" for s in spans)]
    for a in dict.fromkeys(p["alloc"] for p in result["points"]):  # measured order
        by = {p["span_bytes"]: p["bytes_per_s"] for p in result["points"] if p["alloc"] == a}
        lines.append(f"{a:32s} " + " ".join(f"{by[s] / 1e9:12.1f}" if s in by else f"{'-':>12s}" for s in spans))
    return "\n".join(lines)


def probe_main(args: argparse.Namespace, name: str, run_fn: Any, table_fn: Any) -> int:
    """A probe's main: needs a GPU (exit 2 without), runs, writes ``{name}-<time>.json`` under
    ``args.out`` when given, prints the short table."""
    import torch

    if not torch.cuda.is_available():
        print(f"{name}.py needs a CUDA GPU", file=sys.stderr)
        return 2
    result = run_fn(args)
    if args.out:
        save_raw(args.out, name, result)
    print(table_fn(result))
    return 0


def main(argv: list[str] | None = None) -> int:
    return probe_main(_parse(argv), "host_gather_probe", run, _table)


def _parse(argv: list[str] | None) -> argparse.Namespace:
    from engram import _int  # benchmarks/engram.py: 8M = 8 << 20

    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--rows", type=_int, default=8 << 20, help="table rows (K/M suffixes; default 8M = 2.1 GB)")
    p.add_argument("--gathers", type=_int, default=1 << 17, help="rows gathered per timed call (default 128K)")
    p.add_argument("--spans", type=lambda s: [int(x) for x in s.split(",")], default=[1, 2, 4, 8],
                   help="random rows from the first 1/d of the table, for each d (default 1,2,4,8)")
    p.add_argument("--reps", type=int, default=20)
    p.add_argument("--out", type=Path, default=None, help="folder for the raw JSON")
    return p.parse_args(argv)


if __name__ == "__main__":
    sys.exit(main())
