"""The public kernel functions as PyTorch custom ops: ``torch.ops.tuner.<function>``.

Registered when any kernel family is imported (this package's ``__init__`` imports this
module), each with a fake implementation giving its outputs' shapes and dtypes, so a model
compiled with ``torch.compile(fullgraph=True)`` calls them with no graph break and a CUDA
graph (``torch.cuda.graph``, ``mode="reduce-overhead"``) captures their launches. Each op runs
the family's plain function with ``config=None``: the active pack's config for the call's
shape (exact, nearest, else the default), chosen on the host from shapes alone.

The ops live outside the family packages: a family's tuning key hashes its package's code,
and wrapping a function as an op changes nothing a kernel computes. Families are imported on
an op's first call, not here (this module is imported before any of them).

=========================  ======================================================  ==========================
op                         arguments (``*``: keyword-only, as in the function)      outputs
=========================  ======================================================  ==========================
``moe_routing``            logits, bias?, expert_map?, \\*, top_k, n_group,         topk_weights, topk_ids,
                           topk_group, scoring, routed_scaling_factor,              sorted_token_ids,
                           renormalize, block_m                                     expert_ids,
                                                                                    num_tokens_post_pad
``mhc_pre``                X, fn, scale, base, norm_w, \\*, eps, sinkhorn_iters       u, post, comb
``mhc_post``               X, y, post, comb                                         X_new
``mhc_seam``               X, y, post, comb, fn, scale, base, norm_w, \\*, eps,       X_new, u, post, comb
                           sinkhorn_iters
``nvfp4_decode_attention`` q, kv_codes, kv_scales?, block_table, seq_lens, swa_kv,  out
                           swa_scales, sink, topk_idx?, \\*, sm_scale?, kv_dtype
``quantize_nvfp4``         x, global_scale?, \\*, rounding                            codes, scales
``mqa_topk``               q, weights, k_cache, k_scales, block_table, seq_lens,    topk_idx
                           \\*, top_k, k_format
``mqa_topk_logits``        as ``mqa_topk``                                          topk_idx, logits
``engram_hash``            tokens, comp, multipliers, primes, offsets, \\*, pad_id   rows
``engram_lookup``          codes, scales, rows, \\*, placement                       embeddings
=========================  ======================================================  ==========================

PyTorch's custom ops take no keyword-only tensors, so ``expert_map`` and ``topk_idx`` come
before the ``*`` (pass them by name all the same). ``engram_lookup`` takes the table as its two
tensors (``EngramTable.codes`` and ``.scales``: two views of one packed ``[rows, 264]`` table, or
two tensors ``[rows, 256]`` and ``[rows, 8]`` contiguous) and its placement: ``hbm`` tables on
the rows' device, ``host`` / ``host_thp`` tables in pinned (or registered) host memory,
``host_split`` values on the host and scales on the device. ``mqa_topk_logits`` is
``mqa_topk(..., return_logits=True)``. ``quantize_nvfp4`` runs the Triton quantizer where it
applies (a power-of-two last dimension, tensors a kernel can read) and the PyTorch one
otherwise: the two agree bit for bit, in either rounding.
"""
from __future__ import annotations

import functools
import importlib
from typing import Any

import torch

from tuner.runtime.ops import register_op
from tuner.runtime.warm import register_warmup

__all__ = ["OPS"]


def _fam(name: str) -> Any:
    return importlib.import_module(f"kernel_templates.{name}")


def _cdiv(a: Any, b: int) -> Any:
    return (a + b - 1) // b


# ----------------------------------------------------------------------------- moe_routing

def _moe_routing(logits, bias, expert_map=None, *, top_k, n_group=1, topk_group=1, scoring="sigmoid",
                 routed_scaling_factor=1.0, renormalize=True, block_m=64):
    out = _fam("moe_routing").moe_routing(logits, bias, top_k=top_k, n_group=n_group, topk_group=topk_group,
                                          scoring=scoring, routed_scaling_factor=routed_scaling_factor,
                                          renormalize=renormalize, block_m=block_m, expert_map=expert_map)
    return tuple(out)


def _moe_routing_fake(logits, bias, expert_map=None, *, top_k, n_group=1, topk_group=1, scoring="sigmoid",
                      routed_scaling_factor=1.0, renormalize=True, block_m=64):
    T, E = logits.shape
    n_sorted = T * top_k + E * (block_m - 1)
    i32 = {"dtype": torch.int32, "device": logits.device}
    return (logits.new_empty((T, top_k), dtype=torch.float32), logits.new_empty((T, top_k), **i32),
            logits.new_empty((n_sorted,), **i32), logits.new_empty((_cdiv(n_sorted, block_m),), **i32),
            logits.new_empty((1,), **i32))


# ----------------------------------------------------------------------------- mhc

def _mhc_pre(X, fn, scale, base, norm_w, *, eps=1e-6, sinkhorn_iters=20):
    return tuple(_fam("mhc").mhc_pre(X, fn, scale, base, norm_w, eps=eps, sinkhorn_iters=sinkhorn_iters))


def _mhc_pre_fake(X, fn, scale, base, norm_w, *, eps=1e-6, sinkhorn_iters=20):
    T, _, D = X.shape
    return (X.new_empty((T, D)), X.new_empty((T, 4), dtype=torch.float32),
            X.new_empty((T, 4, 4), dtype=torch.float32))


def _mhc_post(X, y, post, comb):
    return _fam("mhc").mhc_post(X, y, post, comb)


def _mhc_post_fake(X, y, post, comb):
    return X.new_empty(X.shape)


def _mhc_seam(X, y, post, comb, fn, scale, base, norm_w, *, eps=1e-6, sinkhorn_iters=20):
    return tuple(_fam("mhc").mhc_seam(X, y, post, comb, fn, scale, base, norm_w, eps=eps,
                                      sinkhorn_iters=sinkhorn_iters))


def _mhc_seam_fake(X, y, post, comb, fn, scale, base, norm_w, *, eps=1e-6, sinkhorn_iters=20):
    return (X.new_empty(X.shape),) + _mhc_pre_fake(X, fn, scale, base, norm_w)


# ----------------------------------------------------------------------------- nvfp4 attention, quantizer

def _nvfp4_attention(q, kv_codes, kv_scales, block_table, seq_lens, swa_kv, swa_scales, sink, topk_idx=None, *,
                     sm_scale=None, kv_dtype="nvfp4"):
    return _fam("nvfp4_attention").nvfp4_decode_attention(
        q, kv_codes, kv_scales, block_table, seq_lens, swa_kv, swa_scales, sink, sm_scale=sm_scale,
        topk_idx=topk_idx, kv_dtype=kv_dtype)


def _nvfp4_attention_fake(q, kv_codes, kv_scales, block_table, seq_lens, swa_kv, swa_scales, sink, topk_idx=None,
                          *, sm_scale=None, kv_dtype="nvfp4"):
    return q.new_empty(q.shape, dtype=torch.bfloat16)


def _triton_quantizes(x: torch.Tensor) -> bool:
    from tuner.runtime.target import NoBackend, Target

    D = x.shape[-1] if x.dim() else 0
    if D < 16 or D & (D - 1) or x.numel() == 0:
        return False
    try:
        Target.of(x.device)
    except NoBackend:
        return False
    return True


def _quantize_nvfp4(x, global_scale=None, *, rounding="exact"):
    nvfp4 = _fam("nvfp4")
    if _triton_quantizes(x):
        return nvfp4.quantize_nvfp4_triton(x, global_scale, rounding=rounding)
    codes, scales = nvfp4.quantize_nvfp4(x, global_scale, rounding=rounding)
    return codes.contiguous(), scales.contiguous()


def _quantize_nvfp4_fake(x, global_scale=None, *, rounding="exact"):
    lead, D = tuple(x.shape[:-1]), x.shape[-1]
    return x.new_empty((*lead, D // 2), dtype=torch.uint8), x.new_empty((*lead, D // 16), dtype=torch.uint8)


# ----------------------------------------------------------------------------- sparse_mqa

def _mqa_topk(q, weights, k_cache, k_scales, block_table, seq_lens, *, top_k, k_format="fp8"):
    return _fam("sparse_mqa").mqa_topk(q, weights, k_cache, k_scales, block_table, seq_lens, top_k=top_k,
                                       k_format=k_format)


def _mqa_topk_fake(q, weights, k_cache, k_scales, block_table, seq_lens, *, top_k, k_format="fp8"):
    B, T = q.shape[:2]
    return q.new_empty((B, T, top_k), dtype=torch.int32)


def _mqa_topk_logits(q, weights, k_cache, k_scales, block_table, seq_lens, *, top_k, k_format="fp8"):
    return tuple(_fam("sparse_mqa").mqa_topk(q, weights, k_cache, k_scales, block_table, seq_lens, top_k=top_k,
                                             k_format=k_format, return_logits=True))


def _mqa_topk_logits_fake(q, weights, k_cache, k_scales, block_table, seq_lens, *, top_k, k_format="fp8"):
    B, T = q.shape[:2]
    return (q.new_empty((B, T, top_k), dtype=torch.int32),
            q.new_empty((B, T, block_table.shape[1] * k_cache.shape[1]), dtype=torch.float32))


# ----------------------------------------------------------------------------- engram

def _engram_hash(tokens, comp, multipliers, primes, offsets, *, pad_id):
    return _fam("engram").engram_hash(tokens, comp, multipliers, primes, offsets, pad_id=pad_id)


def _engram_hash_fake(tokens, comp, multipliers, primes, offsets, *, pad_id):
    B, L = tokens.shape
    return tokens.new_empty((B, L, 24), dtype=torch.int64)


def _engram_lookup(codes, scales, rows, *, placement="hbm"):
    engram = _fam("engram")
    return engram.engram_lookup(_table_view(codes, scales, rows, placement), rows)


def _engram_lookup_fake(codes, scales, rows, *, placement="hbm"):
    return rows.new_empty((*rows.shape, 256), dtype=torch.bfloat16)


@functools.cache
def _view_class() -> type:
    from kernel_templates.engram.table import ROW_BYTES, EngramTable

    class TableView(EngramTable):
        """An ``EngramTable`` over tensors the caller owns: nothing allocated, nothing freed."""

        def __init__(self, codes: torch.Tensor, scales: torch.Tensor, placement: str, device: torch.device) -> None:
            self.device, self.num_rows = device, int(codes.shape[0])
            self.placement = self.requested_placement = placement
            self.reason, self.pinned, self.registered, self.huge_page_bytes = None, False, False, 0
            self._mmap, self._reg_ptr, self._data, self._codes, self._scales = None, 0, None, codes, scales

        @property
        def split(self) -> bool:
            """Values and scales as two tensors (not the two views of one packed table)."""
            return self._codes is not None and self._codes.stride(0) != ROW_BYTES

        def close(self) -> None:
            self._codes = self._scales = None

    return TableView


def _table_view(codes: torch.Tensor, scales: torch.Tensor, rows: torch.Tensor, placement: str) -> Any:
    """An ``EngramTable`` over the op's tensors, after checking that each lives where
    ``placement`` says (a host pointer handed to a kernel as a device one would be a wild read)."""
    from kernel_templates.engram.table import N_SCALES, PLACEMENTS, SPLIT_PLACEMENTS, D

    if placement not in PLACEMENTS:
        raise ValueError(f"engram_lookup: placement must be one of {PLACEMENTS}, got {placement!r}")
    for name, t, width in (("codes", codes, D), ("scales", scales, N_SCALES)):
        if t.dtype != torch.uint8 or t.dim() != 2 or t.shape[1] != width or t.shape[0] != codes.shape[0]:
            raise ValueError(f"engram_lookup: {name} must be uint8 [rows, {width}] (as many rows as codes), got "
                             f"{t.dtype} {list(t.shape)}")
    here, cpu = rows.device, torch.device("cpu")
    want = {"codes": here if placement == "hbm" else cpu,
            "scales": here if placement == "hbm" or placement in SPLIT_PLACEMENTS else cpu}
    for name, t in (("codes", codes), ("scales", scales)):
        if t.device != want[name] and not (t.device.type == want[name].type == "cpu"):
            raise ValueError(f"engram_lookup: a {placement} table's {name} must be on {want[name]}, got {t.device}")
    return _view_class()(codes, scales, placement, here)


def _engram_warmup(workload: dict[str, Any], config: dict[str, Any], device: torch.device) -> None:
    """``runtime.warmup``'s launch for an Engram workload: the lookup (and, for a host table on a
    GPU, the prefetcher's tile) on a table of 4096 or 4097 rows, not the workload's millions:
    Triton specialises an integer argument only on being 1 or a multiple of 16, so a row count
    with the table's residue class compiles the same kernel."""
    engram = _fam("engram")
    rows_n = 4096 if workload["table_rows"] % 16 == 0 else 4097
    inp = engram.make_inputs(engram.Workload(workload["tokens"], workload["placement"], rows_n), device)
    table, rows = inp["table"], inp["rows"]
    try:
        engram.SPEC.launch(config=config, table=table, rows=rows)
        if table.placement != "hbm" and device.type == "cuda":
            tile = engram.prefetch_config(config, table.placement, rows=rows.numel())
            engram.EngramPrefetcher(table, config=tile).submit(rows).wait()
    finally:
        table.close()


register_warmup("engram", _engram_warmup)


# ----------------------------------------------------------------------------- registration

_OPTS = "float eps=1e-06, int sinkhorn_iters=20"
_ATT = ("Tensor q, Tensor kv_codes, Tensor? kv_scales, Tensor block_table, Tensor seq_lens, Tensor swa_kv, "
        "Tensor swa_scales, Tensor sink, Tensor? topk_idx=None, *, float? sm_scale=None, str kv_dtype='nvfp4'")
_MQA = ("Tensor q, Tensor weights, Tensor k_cache, Tensor k_scales, Tensor block_table, Tensor seq_lens, *, "
        "int top_k, str k_format='fp8'")

OPS = {
    name: register_op(name, schema, impl, fake) for name, schema, impl, fake in (
        ("moe_routing", ("(Tensor logits, Tensor? bias, Tensor? expert_map=None, *, int top_k, int n_group=1, "
                         "int topk_group=1, str scoring='sigmoid', float routed_scaling_factor=1.0, "
                         "bool renormalize=True, int block_m=64) -> (Tensor, Tensor, Tensor, Tensor, Tensor)"),
         _moe_routing, _moe_routing_fake),
        ("mhc_pre", (f"(Tensor X, Tensor fn, Tensor scale, Tensor base, Tensor norm_w, *, {_OPTS}) "
                     "-> (Tensor, Tensor, Tensor)"), _mhc_pre, _mhc_pre_fake),
        ("mhc_post", "(Tensor X, Tensor y, Tensor post, Tensor comb) -> Tensor", _mhc_post, _mhc_post_fake),
        ("mhc_seam", (f"(Tensor X, Tensor y, Tensor post, Tensor comb, Tensor fn, Tensor scale, Tensor base, "
                      f"Tensor norm_w, *, {_OPTS}) -> (Tensor, Tensor, Tensor, Tensor)"), _mhc_seam, _mhc_seam_fake),
        ("nvfp4_decode_attention", f"({_ATT}) -> Tensor", _nvfp4_attention, _nvfp4_attention_fake),
        ("quantize_nvfp4", "(Tensor x, float? global_scale=None, *, str rounding='exact') -> (Tensor, Tensor)",
         _quantize_nvfp4,
         _quantize_nvfp4_fake),
        ("mqa_topk", f"({_MQA}) -> Tensor", _mqa_topk, _mqa_topk_fake),
        ("mqa_topk_logits", f"({_MQA}) -> (Tensor, Tensor)", _mqa_topk_logits, _mqa_topk_logits_fake),
        ("engram_hash", ("(Tensor tokens, Tensor comp, Tensor multipliers, Tensor primes, Tensor offsets, *, "
                         "int pad_id) -> Tensor"), _engram_hash, _engram_hash_fake),
        ("engram_lookup", "(Tensor codes, Tensor scales, Tensor rows, *, str placement='hbm') -> Tensor",
         _engram_lookup, _engram_lookup_fake),
    )
}
"""Each op by name: ``OPS["moe_routing"]`` is ``torch.ops.tuner.moe_routing``."""
