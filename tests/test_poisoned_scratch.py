"""No kernel reads memory it did not write: every registered family's small workloads run
with ``torch.empty`` / ``empty_like`` / ``Tensor.new_empty`` returning poisoned memory.

On a GPU (and in CI's allocator) ``torch.empty`` often returns zeros or an earlier
tensor's values, so a read of an unwritten output or scratch element can pass a test by
luck and fail on the next machine; the seq_len-clamp bug of sparse_mqa's radix path did
exactly that. Two poisons: 0x7F bytes (a huge finite float, a huge positive integer) and
0xFF bytes (NaN, -1)."""
from __future__ import annotations

import random

import pytest
import torch

from tuner.registry import kernels
from tuner.runtime.target import Target

CASES = [(k.name, i) for k in kernels().values() for i in range(len(k.small_workloads))]


def _poisoning(monkeypatch: pytest.MonkeyPatch, byte: int) -> None:
    real_empty, real_like, real_new = torch.empty, torch.empty_like, torch.Tensor.new_empty

    def fill(t: torch.Tensor) -> torch.Tensor:
        if t.numel() and t.device.type != "meta" and t.dtype != torch.bool and t.is_contiguous():
            t.view(-1).view(torch.uint8).fill_(byte)
        return t

    monkeypatch.setattr(torch, "empty", lambda *a, **kw: fill(real_empty(*a, **kw)))
    monkeypatch.setattr(torch, "empty_like", lambda *a, **kw: fill(real_like(*a, **kw)))
    monkeypatch.setattr(torch.Tensor, "new_empty", lambda self, *a, **kw: fill(real_new(self, *a, **kw)))


@pytest.mark.parametrize("byte", [0x7F, 0xFF])
@pytest.mark.parametrize("name, i", CASES)
def test_default_config_never_reads_unwritten_memory(name, i, byte, device, monkeypatch):
    k = kernels()[name]
    w = k.small_workloads[i]
    if k.feasible(w):
        pytest.skip(k.feasible(w))
    inputs = k.spec.make_inputs(w, device, 0)
    ref = k.spec.reference(**inputs)
    _poisoning(monkeypatch, byte)
    assert torch.empty(3, dtype=torch.int32, device=device).view(torch.uint8).eq(byte).all()
    out = k.spec.launch(config=k.spec.default_config(w, Target.of(device)), **inputs)
    k.spec.verify(out, ref, inputs)


def _sampled_configs(k, w, target, n: int, seed: int) -> list[dict]:
    """``n`` distinct configs the tuner would measure on ``target``: the default with one to three
    parameters redrawn, made canonical (a uniform draw over a space with pinned knobs is rarely admitted)."""
    rng = random.Random(seed)
    default = dict(k.spec.default_config(w, target))
    out: list[dict] = []
    for _ in range(400):
        cfg = dict(default)
        for name in rng.sample(sorted(k.space), rng.randint(1, 3)):
            cfg[name] = rng.choice(k.space[name].values())
        cfg = k.canonical(cfg, w, target)
        if k.constraints(cfg, w, target) and cfg not in out:
            out.append(cfg)
        if len(out) == n:
            break
    return out


@pytest.mark.parametrize("name", sorted(kernels()))
def test_sampled_configs_never_read_unwritten_memory(name, device, monkeypatch):
    """Configs the tuner may draw (not only the defaults) under the 0x7F poison."""
    k = kernels()[name]
    w = next(w for w in k.small_workloads if not k.feasible(w))
    inputs = k.spec.make_inputs(w, device, 1)
    ref = k.spec.reference(**inputs)
    configs = _sampled_configs(k, w, Target.of(device), 4, seed=len(name))
    assert configs, f"{name}: no admitted config in 400 draws"
    _poisoning(monkeypatch, 0x7F)
    for cfg in configs:
        try:
            k.spec.verify(k.spec.launch(config=cfg, **inputs), ref, inputs)
        except AssertionError as e:
            raise AssertionError(f"{name} {cfg}: {e}") from None
