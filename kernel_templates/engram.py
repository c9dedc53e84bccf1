"""Engram: n-gram hashing, FP8 table lookup from GPU or host memory, async prefetch.

KERNELS.md section 6. Two ``@triton.jit`` kernels:

- ``_engram_hash_kernel``: token ids -> 24 table rows per token (orders 2, 3, 4 x 8 heads),
  ``mix_n(t) = XOR_{k<n} comp[tokens[t-k]] * m[k]`` with ``pad_id`` standing for the
  tokens before each row start of ``tokens [B, L]`` (so a pad contributes ``comp[pad_id]``),
  ``row = mix_n mod p[n-2, h] + off[n-2, h]``.
- ``_engram_lookup_kernel`` (the tuned one, ``SPEC``): rows -> ``[..., 256]`` bf16, the
  dequantized FP8 E4M3 values times their UE8M0 scale (one per 32).

Table layout (``EngramTable``): ONE ``uint8 [rows, 264]`` tensor, bytes 0..255 the E4M3
values, 256..263 the UE8M0 scales, except for ``host_split`` (below). One contiguous
264-B span per row keeps a gather at one page (one TLB entry) per row, which is the point
of the huge-page placement. Rows are 264 = 8 * 33 B apart, so loads are at most 8 B wide:
``VEC`` is the alignment hint (1, 2, 4 or 8 B) given on the row offsets, i.e. the load
width the compiler emits (the row stride is a runtime int Triton cannot see, 264 not being
a multiple of 16). The kernel takes the values and the scales as two pointers with their
own row strides, so both layouts run the same code.

Placements: ``hbm`` (device memory); ``host`` (pinned host memory, ``torch.empty(...,
pin_memory=True)``, read zero-copy over UVA); ``host_thp`` (anonymous mmap, 2 MB aligned,
``madvise(MADV_HUGEPAGE)``, pre-faulted, then ``cudaHostRegister``; falls back to
``host`` with a logged reason when huge pages are unavailable); ``host_split`` (the
values as ``uint8 [rows, 256]`` in pinned host memory, 256-B aligned, the scales as
``uint8 [rows, 8]`` in HBM: 3% of the table's bytes on the GPU). Host reads move whole
128-B lines and the host answers a bounded number of them a second (~365 M/s on the H200
host, ``benchmarks/pcie_link_probe.py``, run 63): a 264-B row always spans three lines
(264 = 2 * 128 + 8), a 256-B-aligned row two, so ``host_split`` reads ~1.3x the rows a
second of ``host`` (182 vs 142 M random rows/s there). Host tables are passed to
Triton as a ``_UVAPointer`` (``data_ptr()`` + ``dtype``, what Triton's launcher asks of a
pointer argument): the launcher maps the host address to its device address with
``cuPointerGetAttribute(CU_POINTER_ATTRIBUTE_DEVICE_POINTER)``, valid for pinned and
registered memory. Without CUDA, host placements are plain CPU memory (reason logged) so
the interpreter can check the math.

Out-of-range rows (``< 0`` or ``>= table rows``) read nothing and give zeros: a bad id must
never turn into a wild read of host memory.
"""
from __future__ import annotations

import ctypes
import functools
import logging
import math
import mmap
import os
from dataclasses import dataclass
from typing import Any

import torch
import triton
import triton.language as tl

from kernel_templates._host import cdiv, next_power_of_2, sm_count
from kernel_templates.nvfp4 import dequantize_fp8_ue8m0, fp8_ue8m0_tile_to_f32, quantize_fp8_ue8m0
from tuner import runtime
from tuner.runtime.env import interpreting
from tuner.spec import KernelSpec
from tuner.verify import assert_close

SOURCE_DEPENDENCIES = ("kernel_templates.nvfp4",)

log = logging.getLogger(__name__)

D = 256                    # values per row
N_SCALES = 8               # UE8M0 scales per row (one per 32 values)
ROW_BYTES = D + N_SCALES   # 264
ORDERS = (2, 3, 4)
N_MAX = 4
HEADS = 8
ROWS_PER_TOKEN = len(ORDERS) * HEADS  # 24
VOCAB = 129_280            # DeepSeek-V4.1 tokenizer ids
CLASSES = 99_092           # ... after the compression table
PLACEMENTS = ("hbm", "host", "host_thp", "host_split")
SPLIT_PLACEMENTS = ("host_split",)  # values on the host, scales in HBM
SPLIT_ALIGN = 256  # host_split rows: 256-B aligned, two 128-B lines each
HUGE_PAGE = 2 << 20
THP_SYSFS = "/sys/kernel/mm/transparent_hugepage/enabled"
_CUDA_HOST_REGISTER_FLAGS = 1 | 2  # cudaHostRegisterPortable | cudaHostRegisterMapped


# ----------------------------------------------------------------------------- reference

def reference_hash(tokens: torch.Tensor, comp: torch.Tensor, multipliers: torch.Tensor, primes: torch.Tensor,
                   offsets: torch.Tensor, *, pad_id: int) -> torch.Tensor:
    """``rows [B, L, 24] int64`` straight from KERNELS.md: column ``(n-2)*8 + h`` is order n, head h."""
    c = comp.long()[tokens.long()]                      # [B, L]
    B, L = c.shape
    cpad = comp.long()[pad_id]
    mix = torch.zeros(B, L, dtype=torch.long, device=c.device)
    cols = []
    for k in range(N_MAX):
        shifted = torch.cat([cpad.expand(B, min(k, L)), c[:, :max(L - k, 0)]], dim=1) if k else c
        mix = mix ^ (shifted * multipliers[k].long())
        n = k + 1
        if n in ORDERS:
            cols.append(mix[..., None] % primes[n - 2].long() + offsets[n - 2].long())
    return torch.cat(cols, dim=-1)


def reference(table: "EngramTable", rows: torch.Tensor) -> torch.Tensor:
    """Gather + dequant in fp32: ``[..., 256]`` (values exact; bf16 holds them exactly too)."""
    g = table.gather_packed(rows.reshape(-1))
    x = dequantize_fp8_ue8m0(g[:, :D], g[:, D:], torch.float32)
    return x.reshape(*rows.shape, D).to(rows.device)


# ----------------------------------------------------------------------------- kernels

@triton.jit
def _engram_hash_kernel(
    tok_ptr, comp_ptr, mult_ptr, prime_ptr, off_ptr, out_ptr,
    n_tokens, L, V, pad_id, stride_b, stride_l,
    BLOCK_T: tl.constexpr,
):
    t = tl.program_id(0) * BLOCK_T + tl.arange(0, BLOCK_T)
    live = t < n_tokens
    b = t // L
    pos = t % L
    col = tl.arange(0, 32)                 # 24 used: column (n-2)*8 + h
    cmask = col < 24
    order = col // 8 + 2
    p = tl.load(prime_ptr + col, mask=cmask, other=1)
    off = tl.load(off_ptr + col, mask=cmask, other=0)
    mix = tl.zeros([BLOCK_T, 32], dtype=tl.int64)
    for k in tl.static_range(4):
        tk = tl.load(tok_ptr + b.to(tl.int64) * stride_b + (pos - k) * stride_l, mask=live & (pos >= k), other=pad_id)
        ok = (tk >= 0) & (tk < V)          # a bad id must not read past comp: it hashes as class 0
        c = tl.load(comp_ptr + tl.where(ok, tk, 0), mask=live & ok, other=0).to(tl.int64)
        term = c * tl.load(mult_ptr + k)
        mix = tl.where(order[None, :] > k, mix ^ term[:, None], mix)
    row = mix % p[None, :] + off[None, :]
    tl.store(out_ptr + t.to(tl.int64)[:, None] * 24 + col[None, :], row, mask=live[:, None] & cmask[None, :])


@triton.jit
def _imax(a, b):
    return tl.maximum(a, b)


@triton.jit
def _engram_lookup_kernel(
    codes_ptr, scales_ptr, rows_ptr, perm_ptr, out_ptr, sout_ptr,
    n_rows, row_begin, table_rows, stride_c, stride_s,
    D: tl.constexpr, N_SCALES: tl.constexpr,
    ROWS: tl.constexpr, VEC: tl.constexpr, DEDUP: tl.constexpr,
    GRID_SM_FRAC: tl.constexpr, CHUNK_ROWS: tl.constexpr, STREAM: tl.constexpr = False, RAW: tl.constexpr = False,
):
    # RAW (a staged prefetch, never with DEDUP): the rows' values and scales are copied as they are,
    # into out_ptr ([n, D] uint8) and sout_ptr ([n, N_SCALES] uint8); ``unstage`` dequantizes them later.
    # GRID_SM_FRAC only sizes the persistent grid (launcher); the loop strides by the real count.
    pid = tl.program_id(0)
    nprog = tl.num_programs(0)
    if CHUNK_ROWS > 0:
        end = tl.minimum(n_rows, row_begin + CHUNK_ROWS)
    else:
        end = n_rows
    n_blocks = tl.cdiv(end - row_begin, ROWS)
    lane = tl.arange(0, ROWS)
    col = tl.arange(0, D)
    scol = tl.arange(0, N_SCALES)
    for blk in range(pid, n_blocks, nprog):
        j = row_begin + blk * ROWS + lane
        live = j < end
        r = tl.load(rows_ptr + j, mask=live, other=-1)
        ok = live & (r >= 0) & (r < table_rows)
        if DEDUP:
            # rows arrive sorted: only the first of each run in this block reads the table,
            # the others take its decoded row from registers (gather across the tile).
            prev = tl.load(rows_ptr + j - 1, mask=live & (lane > 0), other=-1)
            lead = (lane == 0) | (r != prev)
            src = tl.associative_scan(tl.where(lead, lane, 0), 0, _imax)
            dst = tl.load(perm_ptr + j, mask=live, other=0)
            ok = ok & lead
        else:
            dst = j
        # 264-B rows are 8-B aligned at best; VEC tells the compiler how wide it may load.
        rr = tl.where(ok, r, 0)
        base = tl.multiple_of(rr * stride_c, VEC)
        sbase = tl.multiple_of(rr * stride_s, 8)
        # STREAM: rows read once, output read layers later: neither should displace the L2's other lines
        evict: tl.constexpr = "evict_first" if STREAM else ""
        vals = tl.load(codes_ptr + base[:, None] + col[None, :], mask=ok[:, None], other=0, eviction_policy=evict)
        sc = tl.load(scales_ptr + sbase[:, None] + scol[None, :], mask=ok[:, None], other=0, eviction_policy=evict)
        if RAW:
            tl.store(out_ptr + dst.to(tl.int64)[:, None] * D + col[None, :], vals, mask=live[:, None],
                     cache_modifier=".cs" if STREAM else "")
            tl.store(sout_ptr + dst.to(tl.int64)[:, None] * N_SCALES + scol[None, :], sc, mask=live[:, None],
                     cache_modifier=".cs" if STREAM else "")
        else:
            x = fp8_ue8m0_tile_to_f32(vals.to(tl.float8e4nv, bitcast=True), sc).to(tl.bfloat16)
            if DEDUP:
                x = tl.gather(x, tl.broadcast_to(src[:, None], (ROWS, D)), 0)
            tl.store(out_ptr + dst.to(tl.int64)[:, None] * D + col[None, :], x, mask=live[:, None],
                     cache_modifier=".cs" if STREAM else "")


# ----------------------------------------------------------------------------- the table

def _round_up(n: int, m: int) -> int:
    return (n + m - 1) // m * m


class _Fallback(Exception):
    """host_thp cannot be had here; the message is the reason."""


class _UVAPointer:
    """A host table as a Triton pointer argument: Triton only asks for ``data_ptr()`` and
    ``dtype``; its launcher turns the (pinned or registered) host address into the device
    address. The owning ``EngramTable`` keeps the memory alive."""

    __slots__ = ("_ptr", "dtype")

    def __init__(self, ptr: int, dtype: torch.dtype) -> None:
        self._ptr = ptr
        self.dtype = dtype

    def data_ptr(self) -> int:
        return self._ptr


def _thp_unavailable() -> str | None:
    """Why transparent huge pages cannot be asked for here, or None."""
    if not hasattr(mmap, "MADV_HUGEPAGE"):
        return "this platform has no madvise(MADV_HUGEPAGE)"
    try:
        with open(THP_SYSFS) as f:
            mode = f.read()
    except OSError:
        return f"no transparent huge page support ({THP_SYSFS} unreadable)"
    if "[never]" in mode:
        return f"transparent huge pages are disabled ({THP_SYSFS}: {mode.strip()})"
    return None


def _anon_huge_bytes(start: int, length: int) -> int | None:
    """AnonHugePages of the mappings overlapping [start, start+length) (/proc/self/smaps), or None."""
    total, inside = 0, False
    try:
        with open("/proc/self/smaps") as f:
            for line in f:
                head = line.split(None, 1)[0]
                if "-" in head and not head.endswith(":"):
                    lo, hi = (int(x, 16) for x in head.split("-"))
                    inside = lo < start + length and hi > start
                elif inside and head == "AnonHugePages:":
                    total += int(line.split()[1]) * 1024
    except (OSError, ValueError):
        return None
    return total


def _host_register(ptr: int, nbytes: int) -> None:
    """cudaHostRegister (portable, mapped); raises RuntimeError on failure."""
    torch.cuda.check_error(torch.cuda.cudart().cudaHostRegister(ptr, nbytes, _CUDA_HOST_REGISTER_FLAGS))


def _host_unregister(ptr: int) -> None:
    torch.cuda.check_error(torch.cuda.cudart().cudaHostUnregister(ptr))


def _registers_with_cuda(device: torch.device) -> bool:
    return device.type == "cuda"


def _pinned_empty(num_rows: int) -> torch.Tensor:
    """Plain pinned host memory (cudaHostAlloc through torch's host allocator)."""
    return torch.empty(num_rows, ROW_BYTES, dtype=torch.uint8, pin_memory=True)


class EngramTable:
    """A table of ``num_rows`` rows of 256 FP8 E4M3 values + 8 UE8M0 scales (264 B each).

    ``data`` is the ``uint8 [num_rows, 264]`` tensor: on ``device`` for ``hbm``, in host
    memory otherwise (pinned, or huge-page backed and registered for ``host_thp``).
    ``codes`` (``[num_rows, 256]``) and ``scales`` (``[num_rows, 8]``) are its two parts
    (views of ``data``), and for ``host_split``, which has no ``data``, two tensors: the
    values in pinned host memory, the scales on ``device``.
    ``placement`` is what was obtained, ``requested_placement`` what was asked;
    ``reason`` says why they differ or why the memory is plain CPU memory (None when
    neither). Free with ``close()`` or a ``with`` block: it waits for the device, then
    unregisters and unmaps; views of ``data`` must not be used after it.
    """

    def __init__(self, num_rows: int, placement: str = "hbm", device: str | torch.device | None = None) -> None:
        if placement not in PLACEMENTS:
            raise ValueError(f"placement must be one of {PLACEMENTS}, got {placement!r}")
        if num_rows < 1:
            raise ValueError(f"num_rows must be >= 1, got {num_rows}")
        dev = torch.device(device if device is not None else ("cuda" if torch.cuda.is_available() else "cpu"))
        if dev.type == "cuda" and dev.index is None:  # "cuda" and "cuda:0" must compare equal in checks
            dev = torch.device("cuda", torch.cuda.current_device())
        self.device = dev
        self.num_rows = int(num_rows)
        self.requested_placement = placement
        self.placement = placement
        self.reason: str | None = None
        self.pinned = False
        self.registered = False
        self.huge_page_bytes = 0
        self._mmap: mmap.mmap | None = None
        self._reg_ptr = 0
        self._data: torch.Tensor | None = None
        self._codes: torch.Tensor | None = None
        self._scales: torch.Tensor | None = None
        nbytes = self.num_rows * ROW_BYTES
        if placement == "hbm":
            self._data = torch.empty(self.num_rows, ROW_BYTES, dtype=torch.uint8, device=self.device)
        elif placement == "host_split":
            self._alloc_split()
            return
        elif placement == "host_thp":
            try:
                self._alloc_thp(nbytes)
            except _Fallback as e:
                self.placement, self.reason = "host", str(e)
                log.warning("host_thp unavailable (%s); using plain pinned host memory", e)
        if self._data is None:
            self._alloc_pinned()
        self._codes, self._scales = self._data[:, :D], self._data[:, D:]

    # -- allocation
    def _alloc_split(self) -> None:
        """Values ``[rows, 256]`` in pinned host memory at a 256-B aligned address (two 128-B
        lines a row), scales ``[rows, 8]`` on the device."""
        n = self.num_rows * D
        pin = _registers_with_cuda(self.device)
        if pin:
            self.pinned = True
        else:
            self.reason = "no CUDA device: host_split values in plain (unpinned) CPU memory"
            log.info("%s", self.reason)
        # Pinned blocks start page-aligned: over-allocate only when this one is not (torch's host
        # allocator rounds sizes to powers of two, so 256 B more can double the pinned memory).
        buf = torch.empty(n, dtype=torch.uint8, pin_memory=pin)
        if buf.data_ptr() % SPLIT_ALIGN:
            buf = torch.empty(n + SPLIT_ALIGN, dtype=torch.uint8, pin_memory=pin)
        off = (-buf.data_ptr()) % SPLIT_ALIGN
        self._codes = buf[off:off + n].view(self.num_rows, D)
        self._scales = torch.empty(self.num_rows, N_SCALES, dtype=torch.uint8, device=self.device)

    def _alloc_pinned(self) -> None:
        if _registers_with_cuda(self.device):
            self._data = _pinned_empty(self.num_rows)
            self.pinned = True
        else:
            self._data = torch.empty(self.num_rows, ROW_BYTES, dtype=torch.uint8)
            note = "no CUDA device: host table in plain (unpinned) CPU memory"
            self.reason = f"{self.reason}; {note}" if self.reason else note
            log.info("%s", note)

    def _alloc_thp(self, nbytes: int) -> None:
        why = _thp_unavailable()
        if why:
            raise _Fallback(why)
        span = _round_up(nbytes, HUGE_PAGE)
        # Over-map by one huge page so a 2 MB aligned span fits: only aligned 2 MB extents
        # can be huge pages.
        mm = mmap.mmap(-1, span + HUGE_PAGE, flags=mmap.MAP_PRIVATE | mmap.MAP_ANONYMOUS,
                       prot=mmap.PROT_READ | mmap.PROT_WRITE)
        # Through a ctypes view: it holds a buffer export that every tensor view keeps alive,
        # so munmap (mm.close) refuses while views exist (torch.frombuffer(mm) would not).
        buf = torch.frombuffer((ctypes.c_uint8 * len(mm)).from_buffer(mm), dtype=torch.uint8)
        off = (-buf.data_ptr()) % HUGE_PAGE
        region = buf[off:off + span]
        ptr = region.data_ptr()

        def undo(reason: str) -> _Fallback:
            nonlocal buf, region
            del buf, region
            mm.close()
            return _Fallback(reason)

        try:
            mm.madvise(mmap.MADV_HUGEPAGE, off, span)
        except OSError as e:
            raise undo(f"madvise(MADV_HUGEPAGE) failed: {e}") from None
        # Pre-fault: one write per 4 KiB page (with THP the first touch maps the whole 2 MB).
        region.view(-1, 4096)[:, 0].fill_(0)
        huge = _anon_huge_bytes(ptr, span)
        if huge == 0:
            raise undo("the kernel backed none of the table with huge pages (memory fragmented or "
                       "THP defrag off)")
        self.huge_page_bytes = huge or 0
        if _registers_with_cuda(self.device):
            try:
                _host_register(ptr, span)
            except RuntimeError as e:
                raise undo(f"cudaHostRegister failed: {e}") from None
            self.registered, self.pinned, self._reg_ptr = True, True, ptr
        else:
            self.reason = "no CUDA device: huge-page table not registered (plain CPU memory)"
            log.info("%s", self.reason)
        self._mmap = mm
        self._data = region[:nbytes].view(self.num_rows, ROW_BYTES)

    # -- access
    @property
    def split(self) -> bool:
        """True when values and scales live apart (``host_split``)."""
        return self.placement in SPLIT_PLACEMENTS

    @property
    def data(self) -> torch.Tensor:
        """The ``uint8 [num_rows, 264]`` table (raises after ``close()`` and for ``host_split``)."""
        if self.closed:
            raise ValueError("EngramTable is closed")
        if self._data is None:
            raise ValueError(f"a {self.placement} table has no packed [rows, {ROW_BYTES}] tensor: use codes and scales")
        return self._data

    @property
    def codes(self) -> torch.Tensor:
        """The E4M3 values, ``uint8 [num_rows, 256]`` (row stride 264, or 256 for ``host_split``)."""
        if self._codes is None:
            raise ValueError("EngramTable is closed")
        return self._codes

    @property
    def scales(self) -> torch.Tensor:
        """The UE8M0 scales, ``uint8 [num_rows, 8]`` (row stride 264, or 8 for ``host_split``)."""
        if self._scales is None:
            raise ValueError("EngramTable is closed")
        return self._scales

    @property
    def closed(self) -> bool:
        return self._codes is None

    @property
    def row_stride(self) -> int:
        return self.data.stride(0)

    def _arg(self, t: torch.Tensor) -> Any:
        if t.device.type == "cuda" or self.device.type != "cuda" or interpreting():
            return t
        return _UVAPointer(t.data_ptr(), t.dtype)

    def kernel_arg(self) -> Any:
        """What to pass Triton for the packed table's pointer (the tensor, or a UVA pointer for host tables)."""
        return self._arg(self.data)

    def kernel_args(self) -> tuple[Any, Any]:
        """Triton pointer arguments of the values and of the scales (tensors or UVA pointers)."""
        return self._arg(self.codes), self._arg(self.scales)

    def gather_packed(self, idx: torch.Tensor) -> torch.Tensor:
        """Rows ``idx`` (1-D int64, in range) as packed ``uint8 [n, 264]`` on the values' device."""
        c = self.codes.index_select(0, idx.to(self.codes.device))
        s = self.scales.index_select(0, idx.to(self.scales.device))
        return torch.cat([c, s.to(c.device)], dim=1)

    def write_(self, start: int, packed: torch.Tensor) -> None:
        """Copy ``packed uint8 [n, 264]`` (any device) into rows ``start .. start+n``."""
        if packed.dtype != torch.uint8 or packed.dim() != 2 or packed.shape[1] != ROW_BYTES:
            raise ValueError(f"packed rows must be uint8 [n, {ROW_BYTES}], got {packed.dtype} {tuple(packed.shape)}")
        if not 0 <= start <= self.num_rows - packed.shape[0]:
            raise ValueError(f"rows {start}..{start + packed.shape[0]} outside the table of {self.num_rows}")
        end = start + packed.shape[0]
        if self._data is not None:
            self._data[start:end].copy_(packed)
        else:
            self.codes[start:end].copy_(packed[:, :D])
            self.scales[start:end].copy_(packed[:, D:])

    def fill_random_(self, seed: int = 0, chunk_rows: int = 1 << 20) -> "EngramTable":
        """Fill with quantized random embeddings (normal values, per-row log-normal scale).

        Generated in chunks on the compute device (fast on a GPU, then copied to host tables).
        """
        gen_dev = self.device if self.device.type == "cuda" else torch.device("cpu")
        g = torch.Generator(device=gen_dev).manual_seed(seed)
        for start in range(0, self.num_rows, chunk_rows):
            n = min(chunk_rows, self.num_rows - start)
            self.write_(start, pack_rows(random_embeddings(n, g, gen_dev)))
        if self.device.type == "cuda":
            torch.cuda.synchronize(self.device)
        return self

    # -- lifetime
    def close(self) -> None:
        """Wait for the device, unregister and unmap (idempotent)."""
        if self._codes is None and self._mmap is None:
            return
        if self.device.type == "cuda" and self.placement != "hbm" and torch.cuda.is_available():
            try:
                torch.cuda.synchronize(self.device)  # no kernel may still read what we free
            except RuntimeError as e:
                log.warning("EngramTable.close: device sync failed (%s)", e)
        if self.registered:
            try:
                _host_unregister(self._reg_ptr)
            except RuntimeError as e:
                log.warning("cudaHostUnregister failed: %s", e)
            self.registered = False
        self._data = self._codes = self._scales = None
        if self._mmap is not None:
            try:
                self._mmap.close()
            except BufferError:
                log.warning("EngramTable.close: views of the table are alive; unmapped when they are freed")
            self._mmap = None

    def __enter__(self) -> "EngramTable":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    def __del__(self) -> None:
        try:
            self.close()
        except Exception:  # noqa: BLE001 - never raise from a finalizer (interpreter shutdown)
            pass

    def __repr__(self) -> str:
        state = "closed" if self.closed else f"{self.num_rows} rows"
        return f"EngramTable({state}, placement={self.placement!r}, device={self.device})"


def random_embeddings(n: int, generator: torch.Generator, device: torch.device | str = "cpu") -> torch.Tensor:
    """``fp32 [n, 256]`` normal rows with a log-normal per-row scale (what trained rows look like)."""
    x = torch.randn(n, D, generator=generator, device=device)
    return x * torch.exp(0.5 * torch.randn(n, 1, generator=generator, device=device) - 3.0)


def pack_rows(x: torch.Tensor) -> torch.Tensor:
    """Quantize ``[n, 256]`` to packed ``uint8 [n, 264]`` rows (E4M3 values, then UE8M0 scales)."""
    q, s = quantize_fp8_ue8m0(x)
    return torch.cat([q.view(torch.uint8), s], dim=1)


# ----------------------------------------------------------------------------- launchers

_INTERPRETER_SMS = 4  # the interpreter runs programs one by one: a few, so the persistent loop is exercised
_H200_SMS = 132
GRID_SM_FRACS = (1 / 32, 1 / 16, 1 / 8, 0.25, 0.5, 1.0, 2.0, 4.0, 8.0, 16.0)
# A host-table prefetch (EngramPrefetcher) runs as PREFETCH_CLUSTERS programs, each a cluster
# of two CTAs (NUM_CTAS=2) on a pair of SMs. The layers it hides behind run cluster-launched
# GEMMs: the overlap benchmark's is 64 clusters of 2 CTAs (128 of the H200's 132 SMs) that
# fill every register of their SMs. A lookup CTA on an SM breaks that SM's pair, and with 64
# of the 66 pairs needed, any broken pairs beyond two push clusters into a second wave:
# 16 single-CTA programs (1/8 of the SMs) hid 54% of the lookup, 4 programs 53%, 132
# one-warp programs 0-4%; two 2-CTA clusters (two whole pairs) hid 84-87% (benchmarks/
# NOTES.md, runs 10, 14-17). Alone such a prefetch is slower (T=256: ~70 us on 4 SMs vs
# ~47 us on 16): the price of not stretching the layer beside it.
PREFETCH_CLUSTERS = 2
# STREAM in the prefetch tile: its reads evict-first, its output streaming, so that the lookup's
# bytes do not displace the layer's in the L2. Paired with the plain tile at T=4096 it hid as much
# or more (89.2 vs 78.3%, 87.8 vs 86.2%, 83.2 vs 83.1%); the benchmark's T=256 host_split overlap
# went 91.1% -> 95.8 / 95.9% (runs 85, 88-89; the spread between processes is as large).
PREFETCH_TILE = dict(ROWS=128, VEC=8, DEDUP=False, CHUNK_ROWS=0, STREAM=True, num_warps=32, num_stages=3, NUM_CTAS=2)
# STAGE: the prefetch copies the rows' bytes into HBM as they are (264 B a row written instead of the 512
# of bf16) and ``wait()`` dequantizes them on the consumer's stream (``stage`` / ``unstage``). Beside the
# layer's GEMMs the lookup's bf16 writes are what costs most (a write-only kernel from the same four SMs
# slows the layer 35-52%; the staged copy's own span grows 1-7% against the tile's 10-22%: runs 94-95).
# In the benchmark's rounds (run 96, two processes) host_split T=4096 hid 91.1 / 91.0% staged against
# 87.5 / 87.0% (exposed 183 vs 214-223 us, the dequant included); host T=4096 91.4 vs 92.2% (exposed 186
# vs 161 us) and every T=256 less (the ~2-4 us dequant is all exposed: host_split 84.6 vs 91.7%). So
# host_split stages from T=4096 (24 rows a token) on; the others, and shorter lookups, do not.
STAGE_PLACEMENTS = ("host_split",)
STAGE_MIN_ROWS = 4096 * 24
# The priority of the prefetcher's own side stream (CUDA: lower is higher). High priority
# (-1) hid no more than normal: 16 one-CTA programs 57% vs 54% (run 11), two clusters at
# T=256 91.6 / 91.5% vs 91.1 / 91.4% (host_split / host, run 85, five rounds each).
PREFETCH_PRIORITY = 0


def _sm_count(device: torch.device) -> int:
    return _INTERPRETER_SMS if interpreting() else sm_count(device, _INTERPRETER_SMS)


@functools.lru_cache(maxsize=None)
def _has_clusters(device: torch.device) -> bool:
    """Thread-block clusters exist from sm_90 on; before, NUM_CTAS programs run as single CTAs."""
    return torch.cuda.get_device_capability(device)[0] >= 9


def sm_count_hint() -> int:
    """SMs the grid will be sized for here: this GPU's, the interpreter's, or an H200's."""
    if interpreting():
        return _INTERPRETER_SMS
    if torch.cuda.is_available():
        return _sm_count(torch.device("cuda", torch.cuda.current_device()))
    return _H200_SMS


def grid_programs(n_rows: int, config: dict[str, Any], sms: int) -> int:
    """Programs of one launch over ``n_rows`` rows (the persistent grid, capped by the work)."""
    blocks = cdiv(max(1, n_rows), config["ROWS"])
    return max(1, min(blocks, round(config["GRID_SM_FRAC"] * sms)))


CONFIG_KEYS = ("ROWS", "VEC", "DEDUP", "GRID_SM_FRAC", "CHUNK_ROWS", "num_warps", "num_stages")
# An optional launch key, outside the tuned space (prefetch_config sets it): NUM_CTAS makes
# each program a cluster of that many CTAs (one per SM, the tile split between them); ignored
# by the interpreter and before sm_90.


def _check_lookup(table: Any, rows: torch.Tensor, config: dict[str, Any]) -> None:
    if not isinstance(table, EngramTable):
        raise ValueError(f"table must be an EngramTable, got {type(table).__name__}")
    if table.closed:
        raise ValueError("table is closed")
    if not isinstance(rows, torch.Tensor) or rows.dtype != torch.int64:
        raise ValueError(f"rows must be an int64 tensor, got {getattr(rows, 'dtype', type(rows).__name__)}")
    if rows.device != table.device:
        raise ValueError(f"rows are on {rows.device} but the table serves {table.device}")
    want = (D, 1) if table.split else (ROW_BYTES, 1)
    if table.codes.stride() != want or table.scales.stride() != ((N_SCALES, 1) if table.split else want):
        raise ValueError(f"table rows must be contiguous uint8 ({table.placement}: values strides {want}), "
                         f"got {table.codes.stride()} / {table.scales.stride()}")
    missing = [k for k in CONFIG_KEYS if k not in config]
    if missing:
        raise ValueError(f"config lacks {missing} (keys: {list(CONFIG_KEYS)})")
    if table.split:
        if config["VEC"] not in (1, 2, 4, 8, 16):
            raise ValueError(f"VEC must be 1, 2, 4, 8 or 16 bytes, got {config['VEC']}")
    elif config["VEC"] not in (1, 2, 4, 8):
        raise ValueError(f"VEC must be 1, 2, 4 or 8 bytes (rows are 264 = 8*33 B apart), got {config['VEC']}")
    if config["ROWS"] < 1 or config["ROWS"] & (config["ROWS"] - 1):
        raise ValueError(f"ROWS must be a power of two, got {config['ROWS']}")
    if config["CHUNK_ROWS"] < 0:
        raise ValueError(f"CHUNK_ROWS must be >= 0 (0: one launch), got {config['CHUNK_ROWS']}")
    if config.get("NUM_CTAS", 1) not in (1, 2, 4):
        raise ValueError(f"NUM_CTAS must be 1, 2 or 4 (CTAs per program, one cluster), got {config['NUM_CTAS']}")


def _lookup_constexprs(config: dict[str, Any]) -> dict[str, Any]:
    """The lookup kernel's constexpr arguments for ``config`` (``launch`` and ``lower_signatures``)."""
    return dict(D=D, N_SCALES=N_SCALES, ROWS=config["ROWS"], VEC=config["VEC"], DEDUP=bool(config["DEDUP"]),
                GRID_SM_FRAC=config["GRID_SM_FRAC"], CHUNK_ROWS=config["CHUNK_ROWS"],
                STREAM=bool(config.get("STREAM", False)), RAW=False)


def launch(*, config: dict[str, Any], table: EngramTable, rows: torch.Tensor) -> torch.Tensor:
    """Validate, allocate ``[*rows.shape, 256]`` bf16 and launch the lookup (per chunk)."""
    _check_lookup(table, rows, config)
    out = torch.empty(*rows.shape, D, dtype=torch.bfloat16, device=table.device)
    cptr, sptr = table.kernel_args()
    _run(config, cptr, sptr, table.codes.stride(0), table.scales.stride(0), table.num_rows, rows.reshape(-1), out,
         table.device)
    return out


def _run(config: dict[str, Any], cptr: Any, sptr: Any, stride_c: int, stride_s: int, table_rows: int,
         flat: torch.Tensor, out: torch.Tensor, device: torch.device, sout: torch.Tensor | None = None) -> None:
    """The lookup kernel over the rows ``flat`` (per chunk) into ``out``; with ``sout`` a raw
    copy (values into ``out`` uint8, scales into ``sout``: ``stage``)."""
    n = flat.numel()
    if n == 0:
        return
    if config["DEDUP"]:
        flat, perm = torch.sort(flat)  # on the device, no host sync: capturable
    else:
        perm = flat                    # unused
    chunk = config["CHUNK_ROWS"] or n
    sms = _sm_count(device)
    meta = dict(_lookup_constexprs(config), num_warps=config["num_warps"], num_stages=config["num_stages"])
    meta["RAW"] = sout is not None
    native = device.type == "cuda" and not interpreting()
    if config.get("NUM_CTAS", 1) > 1 and native and _has_clusters(device):
        meta["num_ctas"] = config["NUM_CTAS"]  # each program a cluster of CTAs on as many SMs, its tile split
    for begin in range(0, n, chunk):
        grid = (grid_programs(min(chunk, n - begin), config, sms),)
        _engram_lookup_kernel[grid](cptr, sptr, flat, perm, out, out if sout is None else sout, n, begin, table_rows,
                                    stride_c, stride_s, **meta)


def stage(config: dict[str, Any], table: EngramTable, rows: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """The first half of a staged lookup: the rows' bytes copied as they are into HBM,
    ``(values [n, 256] uint8, scales [n, 8] uint8)`` (n = ``rows.numel()``), with the
    lookup tile of ``config`` (no DEDUP); ``unstage`` turns them into the lookup's output."""
    _check_lookup(table, rows, config)
    if config["DEDUP"]:
        raise ValueError("a staged lookup copies rows in order: DEDUP must be off")
    n = rows.numel()
    vals = torch.empty(n, D, dtype=torch.uint8, device=table.device)
    scales = torch.empty(n, N_SCALES, dtype=torch.uint8, device=table.device)
    cptr, sptr = table.kernel_args()
    _run(config, cptr, sptr, table.codes.stride(0), table.scales.stride(0), table.num_rows, rows.reshape(-1), vals,
         table.device, sout=scales)
    return vals, scales


def unstage(config: dict[str, Any], vals: torch.Tensor, scales: torch.Tensor, shape: tuple[int, ...]) -> torch.Tensor:
    """Staged rows (``stage``) -> ``[*shape, 256]`` bf16: the lookup kernel with ``config`` over
    the staged rows in order, as over a split table in HBM (DEDUP and clusters off)."""
    missing = [k for k in CONFIG_KEYS if k not in config]
    if missing:
        raise ValueError(f"config lacks {missing} (keys: {list(CONFIG_KEYS)})")
    n = vals.shape[0]
    out = torch.empty(*shape, D, dtype=torch.bfloat16, device=vals.device)
    cfg = {k: v for k, v in config.items() if k not in ("NUM_CTAS", "STAGE")}
    cfg.update(DEDUP=False, CHUNK_ROWS=0)
    _run(cfg, vals, scales, D, N_SCALES, n, torch.arange(n, device=vals.device), out, vals.device)
    return out


def hash_config(n_tokens: int) -> dict[str, Any]:
    """Launch config of the hash kernel: it writes 192 B per token, ~1/4 of a percent of
    the lookup's bytes, so it is a fixed heuristic rather than a tuned axis."""
    bt = min(64, next_power_of_2(max(1, n_tokens)))
    return {"BLOCK_T": bt, "num_warps": 4 if bt >= 32 else 1, "num_stages": 1}


def engram_hash(tokens: torch.Tensor, comp: torch.Tensor, multipliers: torch.Tensor, primes: torch.Tensor,
                offsets: torch.Tensor, *, pad_id: int, config: dict[str, Any] | None = None) -> torch.Tensor:
    """Token ids ``[B, L]`` int64 -> table rows ``[B, L, 24]`` int64 (see the module docstring).

    ``config`` (``BLOCK_T``, ``num_warps``, ``num_stages``) defaults to ``hash_config``.
    Ids outside ``[0, V)`` hash as compressed class 0 instead of reading out of bounds.
    """
    if tokens.dim() != 2 or tokens.dtype != torch.int64:
        raise ValueError(f"tokens must be int64 [B, L], got {tokens.dtype} {tuple(tokens.shape)}")
    dev = tokens.device
    for name, t, dt, shape in (("comp", comp, torch.int32, None), ("multipliers", multipliers, torch.int64, (N_MAX,)),
                               ("primes", primes, torch.int64, (3, HEADS)), ("offsets", offsets, torch.int64, (3, HEADS))):
        if t.dtype != dt or t.device != dev or (shape and tuple(t.shape) != shape) or (shape is None and t.dim() != 1):
            want = f"{dt} {list(shape) if shape else '[V]'}"
            raise ValueError(f"{name} must be {want} on {dev}, got {t.dtype} {tuple(t.shape)} on {t.device}")
    V = comp.shape[0]
    if not 0 <= pad_id < V:
        raise ValueError(f"pad_id must be a token id in [0, {V}), got {pad_id}")
    B, L = tokens.shape
    out = torch.empty(B, L, ROWS_PER_TOKEN, dtype=torch.int64, device=dev)
    n = B * L
    if n == 0:
        return out
    cfg = config or hash_config(n)
    _engram_hash_kernel[(cdiv(n, cfg["BLOCK_T"]),)](
        tokens, comp, multipliers.contiguous(), primes.contiguous(), offsets.contiguous(), out,
        n, L, V, int(pad_id), tokens.stride(0), tokens.stride(1),
        BLOCK_T=cfg["BLOCK_T"], num_warps=cfg["num_warps"], num_stages=cfg.get("num_stages", 1))
    return out


# ----------------------------------------------------------------------------- public API

def _workload_of(table: EngramTable, rows: torch.Tensor) -> dict[str, Any]:
    return {"tokens": cdiv(rows.numel(), ROWS_PER_TOKEN), "placement": table.placement,
            "table_rows": table.num_rows}


def engram_lookup(table: EngramTable, rows: torch.Tensor, config: dict[str, Any] | None = None) -> torch.Tensor:
    """Rows ``[..., 24]`` (any shape) -> dequantized ``[..., 256]`` bf16 on the table's device.

    ``config=None`` takes the tuned config for (tokens, placement, table rows) from the
    active pack, or the default.
    """
    if config is None:
        config = runtime.select("engram", _workload_of(table, rows)).config
    return launch(config=config, table=table, rows=rows)


def prefetch_config(config: dict[str, Any], placement: str = "host", clusters: int = PREFETCH_CLUSTERS,
                    sms: int | None = None, rows: int = 0) -> dict[str, Any]:
    """The launch config of a prefetched lookup of ``rows`` rows of a table at ``placement``,
    from the pack's ``config`` for its shape. Host tables (PCIe-bound): ``clusters`` programs
    of two CTAs each, 128-row tiles, 32 warps (``PREFETCH_TILE``; see PREFETCH_CLUSTERS for
    why), on ``sms`` SMs (this GPU's by default), staged (``STAGE``) where ``STAGE_PLACEMENTS``
    and ``STAGE_MIN_ROWS`` say. HBM tables keep the pack's config: their gathers need every
    SM's bytes in flight (T=4096: 24.1 us with 2112 programs, several times that with 16)."""
    if placement == "hbm":
        return dict(config)
    if clusters < 1:
        raise ValueError(f"clusters must be >= 1, got {clusters}")
    sms = sms or sm_count_hint()
    staged = placement in STAGE_PLACEMENTS and rows >= STAGE_MIN_ROWS
    return dict(config, **PREFETCH_TILE, GRID_SM_FRAC=clusters / sms, STAGE=staged)


class PrefetchHandle:
    """One lookup in flight: ``wait()`` makes the current stream wait for it and returns the output.

    A staged lookup (``finish`` given) holds the staged rows; its first ``wait()`` runs
    ``finish`` (the dequant, ``unstage``) on the current stream and records a new event after
    it, so a later ``wait()``, on any stream, waits for the dequant and returns the same output.
    """

    def __init__(self, out: torch.Tensor | None, event: Any | None, keep: tuple[Any, ...] = (),
                 finish: Any | None = None, device: torch.device | None = None) -> None:
        self._out = out
        self._event = event
        self._keep = keep
        self._finish = finish
        self._device = device if device is not None else (out.device if out is not None else None)

    def ready(self) -> bool:
        """True when the side stream's part has finished (never blocks); a staged lookup's
        dequant runs at ``wait()`` on the consumer's stream, after which this covers it too."""
        return self._event is None or self._event.query()

    def wait(self) -> torch.Tensor:
        """Order the current stream after the lookup (no host sync) and return ``[..., 256]`` bf16."""
        cur = None
        if self._event is not None:
            cur = torch.cuda.current_stream(self._device)
            cur.wait_event(self._event)
            for t in (self._out, *self._keep[1:]):
                if t is not None:
                    t.record_stream(cur)  # the allocator must not recycle them while cur uses them
        if self._finish is not None:
            self._out, self._finish = self._finish(), None
            self._keep = self._keep[:1]  # the staged rows: recorded on cur above, freed once it is done
            if cur is not None:
                self._event = torch.cuda.Event()
                self._event.record(cur)  # a later wait(), on any stream, orders after the dequant
        return self._out


class EngramPrefetcher:
    """Runs lookups on a side stream so they overlap the layers before their consumer.

    ``submit(rows)`` orders the side stream after the current one (the rows were made
    there), launches the lookup into a fresh output and records an event; each handle
    owns its buffer, so several may be in flight. Without CUDA it runs synchronously.
    A staged config (``STAGE``, host_split from ``STAGE_MIN_ROWS`` rows by default) copies
    the rows' bytes on the side stream and dequantizes them at the handle's ``wait()``.
    With ``config=None`` each lookup runs with ``prefetch_config`` of the pack's config for
    its shape (host tables: ``clusters`` two-CTA clusters); a given ``config`` runs as is.
    Without a given ``stream`` it makes its own at ``priority`` (``PREFETCH_PRIORITY``).
    """

    def __init__(self, table: EngramTable, *, config: dict[str, Any] | None = None,
                 stream: Any | None = None, clusters: int = PREFETCH_CLUSTERS,
                 priority: int = PREFETCH_PRIORITY) -> None:
        self.table = table
        self.config = config
        self.clusters = clusters
        cuda = table.device.type == "cuda" and not interpreting()
        self.stream = (stream or torch.cuda.Stream(table.device, priority=priority)) if cuda else None

    def submit(self, rows: torch.Tensor) -> PrefetchHandle:
        """Start the lookup of ``rows`` on the side stream; returns its handle."""
        cfg = self.config or prefetch_config(runtime.select("engram", _workload_of(self.table, rows)).config,
                                             self.table.placement, self.clusters, _sm_count(self.table.device),
                                             rows=rows.numel())
        if cfg.get("STAGE"):
            return self._submit_staged(cfg, rows)
        out, ev = self._on_side(lambda: launch(config=cfg, table=self.table, rows=rows), rows)
        return PrefetchHandle(out, ev, (rows,))

    def _submit_staged(self, cfg: dict[str, Any], rows: torch.Tensor) -> PrefetchHandle:
        """STAGE: the side stream copies the rows' bytes into HBM; ``wait()`` dequantizes them on
        the consumer's stream with the pack's config for an HBM table of this shape."""
        hbm = runtime.select("engram", dict(_workload_of(self.table, rows), placement="hbm")).config
        shape = tuple(rows.shape)
        (vals, scales), ev = self._on_side(lambda: stage(cfg, self.table, rows), rows)
        return PrefetchHandle(None, ev, (rows, vals, scales), finish=lambda: unstage(hbm, vals, scales, shape),
                              device=self.table.device)

    def _on_side(self, work: Any, rows: torch.Tensor) -> tuple[Any, Any | None]:
        """``work()`` on the side stream, ordered after the current one (the rows were made there):
        its result and the event recorded after it. Without CUDA it runs here, with no event."""
        if self.stream is None:
            return work(), None
        self.stream.wait_stream(torch.cuda.current_stream(self.table.device))
        with torch.cuda.stream(self.stream):
            result = work()
            ev = torch.cuda.Event()
            ev.record(self.stream)
        rows.record_stream(self.stream)  # freed by the caller on its stream: not reused before we read it
        return result, ev


# ----------------------------------------------------------------------------- workloads

@dataclass(frozen=True)
class Workload:
    """One lookup shape: tokens (24 rows each), table placement and table rows."""

    tokens: int
    placement: str
    table_rows: int


def _is_prime(n: int) -> bool:
    if n < 2:
        return False
    if n % 2 == 0:
        return n == 2
    return all(n % d for d in range(3, math.isqrt(n) + 1, 2))


def table_primes(table_rows: int) -> torch.Tensor:
    """``[3, 8]`` distinct primes, the largest below ``table_rows // 24`` (so they sum to <= table_rows)."""
    p, found = table_rows // ROWS_PER_TOKEN, []
    while len(found) < ROWS_PER_TOKEN and p >= 2:
        if _is_prime(p):
            found.append(p)
        p -= 1
    if len(found) < ROWS_PER_TOKEN:
        raise ValueError(f"table_rows={table_rows} is too small for 24 distinct prime sub-tables")
    return torch.tensor(found, dtype=torch.int64).view(3, HEADS)


def make_params(table_rows: int, seed: int = 0, vocab: int = VOCAB, classes: int = CLASSES,
                device: str | torch.device = "cpu") -> dict[str, Any]:
    """Hash inputs of one Engram layer: compression table, odd multipliers, primes,
    cumulative offsets (one flat table) and ``pad_id``."""
    g = torch.Generator().manual_seed(seed)
    comp = (torch.randperm(vocab, generator=g) % classes).to(torch.int32)  # surjective: 1-2 ids per class
    r_max = (2**62) // classes  # (2r+1) * (classes-1) < 2^63: products never overflow int64
    multipliers = 2 * torch.randint(0, r_max, (N_MAX,), generator=g, dtype=torch.int64) + 1
    primes = table_primes(table_rows)
    offsets = (torch.cumsum(primes.flatten(), 0) - primes.flatten()).view(3, HEADS)
    return dict(comp=comp.to(device), multipliers=multipliers.to(device), primes=primes.to(device),
                offsets=offsets.to(device), pad_id=0)


def zipf_tokens(shape: tuple[int, ...], seed: int = 0, vocab: int = VOCAB, s: float = 1.1) -> torch.Tensor:
    """Token ids with Zipf(s) frequencies over a seeded random rank -> id map (int64, CPU)."""
    g = torch.Generator().manual_seed(seed)
    w = torch.arange(1, vocab + 1, dtype=torch.float64) ** -s
    cdf = torch.cumsum(w, 0)
    n = math.prod(shape)
    rank = torch.searchsorted(cdf, torch.rand(n, generator=g, dtype=torch.float64) * cdf[-1]).clamp(max=vocab - 1)
    return torch.randperm(vocab, generator=g)[rank].view(shape)


def token_shape(tokens: int) -> tuple[int, int]:
    """``[B, L]`` for ``tokens``: sequences of up to 512 tokens (decode batches are L = 1)."""
    L = math.gcd(max(1, tokens), 512)
    return max(1, tokens) // L, L


def make_inputs(workload: Workload, device: str = "cpu", seed: int = 0) -> dict[str, Any]:
    """A seeded random table in the workload's placement and the rows of Zipfian tokens."""
    p = make_params(workload.table_rows, seed)
    tokens = zipf_tokens(token_shape(workload.tokens), seed)
    rows = reference_hash(tokens, p["comp"], p["multipliers"], p["primes"], p["offsets"], pad_id=p["pad_id"])
    table = EngramTable(workload.table_rows, workload.placement, device).fill_random_(seed)
    return dict(table=table, rows=rows.to(device))


def default_config(workload: Workload) -> dict[str, Any]:
    """H200 defaults from the run-10 sweep (benchmarks/NOTES.md). HBM: 32-row tiles, 8 warps,
    up to 16 programs per SM (bytes in flight: T=4096 31.0 -> 24.1 us, 74% of HBM). Host:
    PCIe-bound; 64-row tiles, 16 warps, a quarter of the SMs gather as fast as all of them
    (T=256 45.2 us for 33 to 264 programs), leaving the rest to the main stream; dedup
    once T is large enough for repeats."""
    n = max(1, workload.tokens) * ROWS_PER_TOKEN
    host = workload.placement != "hbm"
    rows = min(64 if host else 32, max(2, next_power_of_2(n)))
    vec = 16 if workload.placement in SPLIT_PLACEMENTS else 8  # 256-B rows: 16-B loads
    cfg = dict(ROWS=rows, VEC=vec, DEDUP=host and workload.tokens >= 4096, GRID_SM_FRAC=0.25 if host else 16.0,
               CHUNK_ROWS=0, STREAM=False, num_warps=max(1, min(16 if host else 8, rows // 4)), num_stages=3 if host else 1)
    if cfg["DEDUP"]:  # Triton 3.6 compiles DEDUP tiles of at most 16 rows (search_spaces/engram.py)
        cfg.update(ROWS=16, num_warps=4)
    # The smallest fraction giving the same grid: small T needs fewer programs than SMs.
    sms = sm_count_hint()
    want = grid_programs(n, cfg, sms)
    cfg["GRID_SM_FRAC"] = min(f for f in GRID_SM_FRACS if grid_programs(n, dict(cfg, GRID_SM_FRAC=f), sms) == want
                              and f <= cfg["GRID_SM_FRAC"])
    return cfg


def cost(workload: Workload) -> tuple[float, float]:
    """KERNELS.md floor: 264 B read + 512 B written per row; one multiply per value."""
    n = workload.tokens * ROWS_PER_TOKEN
    return float(n * ROW_BYTES + n * D * 2), float(n * D)


def feasible(workload: Workload) -> str | None:
    """None when the table fits here, else why the workload is skipped."""
    need = workload.table_rows * ROW_BYTES
    if workload.placement not in PLACEMENTS:
        return f"unknown placement {workload.placement!r}"
    if interpreting() or not torch.cuda.is_available():
        return None if need <= 256 << 20 else f"a {need / 1e9:.1f} GB table is too big for the interpreter"
    if workload.placement == "hbm":
        budget = int(0.6 * torch.cuda.get_device_properties(0).total_memory)
    else:
        budget = int(0.4 * os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES"))
    return None if need <= budget else f"needs {need / 1e9:.1f} GB for the table, budget {budget / 1e9:.1f} GB"


def verify(out: torch.Tensor, ref: torch.Tensor, inputs: dict[str, Any]) -> None:
    """bf16 output equal to the fp32 reference: every value is exactly representable."""
    if out.dtype != torch.bfloat16:
        raise AssertionError(f"embeddings: dtype {out.dtype}, want bfloat16")
    assert_close("embeddings", out.float().cpu(), ref.float().cpu(), atol=0.0)


# ----------------------------------------------------------------------------- baselines

def _dequant_torch(g: torch.Tensor) -> torch.Tensor:
    v = g[:, :D].view(torch.float8_e4m3fn).float().view(-1, N_SCALES, 32)
    s = torch.exp2(g[:, D:].float() - 127.0)
    return (v * s[..., None]).view(-1, D).to(torch.bfloat16)


def _torch_eager(table: EngramTable, rows: torch.Tensor) -> torch.Tensor:
    """What a user writes first. HBM: index + dequant on the GPU. Host: ``index_select`` on
    the CPU, copy to the GPU, dequant there (host-synchronizing, so not graph-capturable)."""
    flat = rows.reshape(-1)
    if table.placement == "hbm" or table.device.type != "cuda":
        g = table.gather_packed(flat)
    elif table.split:  # values from the host, scales from HBM
        c = table.codes.index_select(0, flat.cpu()).to(table.device, non_blocking=True)
        g = torch.cat([c, table.scales.index_select(0, flat)], dim=1)
    else:
        g = table.data.index_select(0, flat.cpu()).to(table.device, non_blocking=True)
    return _dequant_torch(g).view(*rows.shape, D)


baselines = {"torch_eager": _torch_eager}


# ----------------------------------------------------------------------------- lowering

def lower_signatures(workload: Workload, config: dict[str, Any]) -> list[tuple[Any, dict[str, str], dict[str, Any]]]:
    """The lookup launch ``launch`` does (chunks repeat the same compiled kernel); with
    ``STAGE`` in ``config``, the raw copy ``stage`` launches (a staged prefetch's first half).

    Needs ``TRITON_INTERPRET`` unset (the interpreter wraps the kernel in a non-compilable object).
    """
    raw = bool(config.get("STAGE", False))
    if raw and config["DEDUP"]:
        raise ValueError("a staged lookup copies rows in order: DEDUP must be off")
    out = "*u8" if raw else "*bf16"
    sig = {"codes_ptr": "*u8", "scales_ptr": "*u8", "rows_ptr": "*i64", "perm_ptr": "*i64", "out_ptr": out,
           "sout_ptr": out, "n_rows": "i32", "row_begin": "i32", "table_rows": "i32", "stride_c": "i32", "stride_s": "i32"}
    cx = dict(_lookup_constexprs(config), RAW=raw)
    return [(_engram_lookup_kernel, {**sig, **{k: "constexpr" for k in cx}}, cx)]


def lower_hash_signature(config: dict[str, Any]) -> tuple[Any, dict[str, str], dict[str, Any]]:
    """(jit fn, signature, constexprs) of the hash kernel, for ``tune lower``-style compiles."""
    sig = {"tok_ptr": "*i64", "comp_ptr": "*i32", "mult_ptr": "*i64", "prime_ptr": "*i64", "off_ptr": "*i64",
           "out_ptr": "*i64", "n_tokens": "i32", "L": "i32", "V": "i32", "pad_id": "i32", "stride_b": "i32",
           "stride_l": "i32", "BLOCK_T": "constexpr"}
    return _engram_hash_kernel, sig, {"BLOCK_T": config["BLOCK_T"]}


runtime.register_defaults("engram", lambda wd: default_config(Workload(**wd)))

SPEC = KernelSpec(
    name="engram", workload=Workload, make_inputs=make_inputs, reference=reference, launch=launch,
    default_config=default_config, cost=cost, verify=verify, baselines=baselines, launch_bound=True,
    description="Engram table lookup: hashed rows -> dequantized FP8 rows from HBM or host memory (UVA)",
)
