"""The Engram table: its row format and where it lives (``EngramTable``).

ONE ``uint8 [rows, 264]`` tensor, bytes 0..255 the E4M3 values, 256..263 the UE8M0 scales
(one per 32), except for ``host_split``. One contiguous 264-B span per row keeps a gather
at one page (one TLB entry) per row, which is the point of the huge-page placement.

Placements: ``hbm`` (device memory); ``host`` (pinned host memory, ``torch.empty(...,
pin_memory=True)``, read zero-copy over UVA); ``host_thp`` (anonymous mmap, 2 MB aligned,
``madvise(MADV_HUGEPAGE)``, pre-faulted, then ``cudaHostRegister``; falls back to
``host`` with a logged reason when huge pages are unavailable); ``host_split`` (the
values as ``uint8 [rows, 256]`` in pinned host memory, 256-B aligned, the scales as
``uint8 [rows, 8]`` in HBM: 3% of the table's bytes on the GPU). Host reads move whole
128-B lines and the host answers a bounded number of them a second (~365 M/s on the H200
host, ``benchmarks/pcie_link_probe.py``): a 264-B row always spans three lines
(264 = 2 * 128 + 8), a 256-B-aligned row two, so ``host_split`` reads ~1.3x the rows a
second of ``host`` (182 vs 142 M random rows/s there). Host tables are passed to
Triton as a ``_UVAPointer`` (``data_ptr()`` + ``dtype``, what Triton's launcher asks of a
pointer argument): the launcher maps the host address to its device address with
``cuPointerGetAttribute(CU_POINTER_ATTRIBUTE_DEVICE_POINTER)``, valid for pinned and
registered memory. Without CUDA, host placements are plain CPU memory (reason logged) so
the interpreter can check the math.
"""
from __future__ import annotations

import ctypes
import logging
import mmap
import threading
from typing import Any

import torch

from kernel_templates.nvfp4 import quantize_fp8_ue8m0
from tuner.runtime.target import Target

log = logging.getLogger(__name__)

D = 256                    # values per row
N_SCALES = 8               # UE8M0 scales per row (one per 32 values)
ROW_BYTES = D + N_SCALES   # 264
PLACEMENTS = ("hbm", "host", "host_thp", "host_split")
SPLIT_PLACEMENTS = ("host_split",)  # values on the host, scales in HBM
SPLIT_ALIGN = 256  # host_split rows: 256-B aligned, two 128-B lines each
HUGE_PAGE = 2 << 20
THP_SYSFS = "/sys/kernel/mm/transparent_hugepage/enabled"
_CUDA_HOST_REGISTER_FLAGS = 1 | 2  # cudaHostRegisterPortable | cudaHostRegisterMapped


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


def _resolve(device: str | torch.device | None) -> torch.device:
    """``device`` as a table holds it (None: the GPU if there is one; ``cuda``: the current one,
    so "cuda" and "cuda:0" compare equal in checks)."""
    dev = torch.device(device if device is not None else ("cuda" if torch.cuda.is_available() else "cpu"))
    if dev.type == "cuda" and dev.index is None:
        dev = torch.device("cuda", torch.cuda.current_device())
    return dev


_SHARED: dict[tuple, "EngramTable"] = {}
_SHARED_LOCK = threading.RLock()  # re-entrant: a collection inside shared_table may drop a handle
_DROPPED: list["EngramTable"] = []
"""Owners of handles dropped by a finalizer while another thread held the lock (a finalizer never
waits on it): counted by that thread once it lets the lock go (``_settle``)."""


def shared_table(num_rows: int, placement: str, device: str | torch.device | None = None,
                 seed: int = 0) -> "EngramTable":
    """A handle on the random table (``fill_random_(seed)``) of ``num_rows`` rows in ``placement``
    on ``device``: built and filled by the first call, then shared by every call with the same
    arguments while one of its handles is open. A handle reads the table like the table itself;
    its ``close()`` (or its finalizer) lets go of it, and the last one closes the table
    (unregisters and unmaps host memory). Nothing else holds the table, so no memory outlives
    its holders and no close frees memory another holder reads."""
    key = (int(num_rows), placement, str(_resolve(device)), int(seed))
    try:
        return _take(key, num_rows, placement, device, seed)
    finally:
        _settle()


def _take(key: tuple, num_rows: int, placement: str, device: Any, seed: int) -> "EngramTable":
    with _SHARED_LOCK:
        _count_dropped()
        owner = _SHARED.get(key)
        if owner is None:
            owner = EngramTable(num_rows, placement, device).fill_random_(seed)
            owner._shared_key = key
            _SHARED[key] = owner
        owner._handles += 1  # first: a collection below may drop another handle of this table
        handle = None
        try:
            state = {k: v for k, v in owner.__dict__.items() if k not in ("_handles", "_shared_key")}
            state.update(_mmap=None, _reg_ptr=0, _owner=owner)  # the handle frees nothing itself
            handle = object.__new__(EngramTable)
            handle.__dict__.update(state)  # at once: a handle is whole or holds nothing
        except BaseException:  # e.g. Ctrl-C: this handle's count is given back here, not by it
            if handle is not None:  # holds nothing, reports closed
                handle.__dict__.clear()
                handle.__dict__.update(_data=None, _codes=None, _scales=None, _mmap=None, _reg_ptr=0, registered=False)
            _DROPPED.append(owner)
            _count_dropped()
            raise
        return handle


def _release(owner: "EngramTable", wait: bool = True) -> None:
    """One handle of ``owner`` is gone: count it under the lock (so no handle is given out while
    the last one closes the table), or, for a finalizer that finds the lock taken, later."""
    _DROPPED.append(owner)
    if wait:
        with _SHARED_LOCK:
            _count_dropped()
    _settle()


def _settle() -> None:
    """Count what finalizers queued while the lock was held; called after each release of it,
    so a queued handle waits for no later call (a finalizer queues before it tries the lock)."""
    while _DROPPED and _SHARED_LOCK.acquire(blocking=False):
        try:
            _count_dropped()
        finally:
            _SHARED_LOCK.release()


def _count_dropped() -> None:
    """With the lock held: count the dropped handles; a table whose last handle went is closed."""
    while _DROPPED:
        owner = _DROPPED.pop()
        owner._handles -= 1
        if owner._handles <= 0:
            if _SHARED.get(owner._shared_key) is owner:
                del _SHARED[owner._shared_key]
            owner.close()


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

    _owner: "EngramTable | None" = None
    """The table a handle from ``shared_table`` reads (None: this object owns its memory)."""
    _handles = 0
    _shared_key: tuple | None = None

    def __init__(self, num_rows: int, placement: str = "hbm", device: str | torch.device | None = None) -> None:
        if placement not in PLACEMENTS:
            raise ValueError(f"placement must be one of {PLACEMENTS}, got {placement!r}")
        if num_rows < 1:
            raise ValueError(f"num_rows must be >= 1, got {num_rows}")
        self.device = _resolve(device)
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
        if t.device.type == "cuda" or self.device.type != "cuda" or Target.of(self.device).interpret:
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
        A table on the ``meta`` device (shapes for compiling ahead) is left unfilled: nothing
        reads it, and filling a host buffer of millions of rows takes the CPU tens of seconds.
        """
        if self.device.type == "meta":
            return self
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
        """Wait for the device, unregister and unmap (idempotent). A handle from
        ``shared_table`` lets go of the shared table, which closes with its last handle."""
        if self._let_go(wait=True):
            return
        if self._codes is None and self._mmap is None:
            return
        if self.device.type == "cuda" and self.placement != "hbm" and torch.cuda.is_available():
            try:
                torch.cuda.synchronize(self.device)  # no kernel may still read what we free
            except RuntimeError as e:
                log.warning("EngramTable.close: device sync failed (%s)", e)
        if self.registered and self._reg_ptr:
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

    def _let_go(self, wait: bool) -> bool:
        """A handle from ``shared_table``: give up the shared table (once, even from two threads:
        the instance dict's pop is atomic) and say so; False for a table that owns its memory."""
        owner = self.__dict__.pop("_owner", None)
        if owner is None:
            return False
        self._data = self._codes = self._scales = None
        self.registered = False
        _release(owner, wait)
        return True

    def __del__(self) -> None:
        try:
            if not self._let_go(wait=False):  # a finalizer never waits on the lock
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
