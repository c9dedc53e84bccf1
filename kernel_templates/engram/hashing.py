"""Engram hashing: token ids -> 24 table rows per token (orders 2, 3, 4 x 8 heads).

``mix_n(t) = XOR_{k<n} comp[tokens[t-k]] * m[k]`` with ``pad_id`` standing for the tokens
before each row start of ``tokens [B, L]`` (so a pad contributes ``comp[pad_id]``),
``row = mix_n mod p[n-2, h] + off[n-2, h]`` (column ``(n-2)*8 + h``). A token id outside
``[0, V)`` hashes as compressed class 0: a bad id must never read past ``comp``.
Also the hash inputs of one layer (``make_params``) and realistic token streams.
"""
from __future__ import annotations

import math
from typing import Any

import torch
import triton
import triton.language as tl

from kernel_templates._host import cdiv, next_power_of_2

ORDERS = (2, 3, 4)
N_MAX = 4
HEADS = 8
ROWS_PER_TOKEN = len(ORDERS) * HEADS  # 24
VOCAB = 129_280            # DeepSeek-V4.1 tokenizer ids
CLASSES = 99_092           # ... after the compression table


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
        BLOCK_T=cfg["BLOCK_T"], num_warps=cfg["num_warps"], num_stages=cfg["num_stages"])
    return out


def lower_hash_signature(config: dict[str, Any]) -> tuple[Any, dict[str, str], dict[str, Any]]:
    """(jit fn, signature, constexprs) of the hash kernel, for ``tune lower``-style compiles."""
    sig = {"tok_ptr": "*i64", "comp_ptr": "*i32", "mult_ptr": "*i64", "prime_ptr": "*i64", "off_ptr": "*i64",
           "out_ptr": "*i64", "n_tokens": "i32", "L": "i32", "V": "i32", "pad_id": "i32", "stride_b": "i32",
           "stride_l": "i32", "BLOCK_T": "constexpr"}
    return _engram_hash_kernel, sig, {"BLOCK_T": config["BLOCK_T"]}


# ----------------------------------------------------------------------------- hash inputs

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
        raise ValueError(f"table_rows={table_rows} is too small for 24 distinct prime sub-tables "
                         f"(at least {MIN_TABLE_ROWS})")
    return torch.tensor(found, dtype=torch.int64).view(3, HEADS)


MIN_TABLE_ROWS = 89 * ROWS_PER_TOKEN  # 89 is the 24th prime: the smallest table with 24 sub-tables


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
