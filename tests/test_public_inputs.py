"""Bad inputs to the public APIs and bad configs to the launchers: a clear ValueError or
TypeError naming what is wrong, raised before anything is launched (no IndexError, KeyError,
AttributeError or error from inside Triton, no garbage returned)."""
from __future__ import annotations

import pytest
import torch

from tuner import registry
from tuner.runtime.target import INTERPRETER

FAMILIES = ("moe_routing", "engram", "mhc", "nvfp4_attention", "sparse_mqa")


def _cases():
    from kernel_templates import engram as en
    from kernel_templates import mhc
    from kernel_templates import moe_routing as mr
    from kernel_templates import nvfp4 as nv
    from kernel_templates import nvfp4_attention as na
    from kernel_templates import sparse_mqa as sm

    f8 = torch.float8_e4m3fn
    i32 = dict(dtype=torch.int32)
    mqa = dict(q=torch.zeros(1, 1, 64, 128).to(f8), weights=torch.zeros(1, 1, 64), k_cache=torch.zeros(1, 64, 128).to(f8),
               k_scales=torch.zeros(1, 64), block_table=torch.zeros(1, 1, **i32), seq_lens=torch.ones(1, **i32))
    att = dict(q=torch.zeros(1, 64, 512).bfloat16(), kv_codes=torch.zeros(1, 64, 256, dtype=torch.uint8),
               kv_scales=torch.zeros(1, 64, 32, dtype=torch.uint8), block_table=torch.zeros(1, 1, **i32),
               seq_lens=torch.ones(1, **i32), swa_kv=torch.zeros(1, 128, 512).to(f8),
               swa_scales=torch.zeros(1, 128, 16, dtype=torch.uint8), sink=torch.zeros(64))
    u8 = dict(dtype=torch.uint8)
    D = 64
    pre = (torch.zeros(2, 4, D, dtype=torch.bfloat16), torch.zeros(mhc.N_MIX, 4 * D), torch.ones(3),
           torch.zeros(mhc.N_MIX), torch.ones(D, dtype=torch.bfloat16))
    return {
        # what is wrong -> (call, a word the message must hold)
        "quantize_nvfp4_triton of a 0-d tensor": (lambda: nv.quantize_nvfp4_triton(torch.tensor(1.0)), "x"),
        "quantize_nvfp4_triton of a list": (lambda: nv.quantize_nvfp4_triton([1.0] * 16), "Tensor"),
        "quantize_nvfp4_triton of complex": (lambda: nv.quantize_nvfp4_triton(torch.ones(2, 16, dtype=torch.complex64)),
                                             "complex"),
        "quantize_nvfp4 of a 0-d tensor": (lambda: nv.quantize_nvfp4(torch.tensor(1.0)), "x"),
        "dequantize_triton of 0-d codes": (lambda: nv.dequantize_triton("nvfp4", torch.tensor(1, **u8),
                                                                        torch.tensor(1, **u8)), "codes"),
        "dequantize_triton scales of the wrong shape": (lambda: nv.dequantize_triton(
            "nvfp4", torch.zeros(2, 8, **u8), torch.zeros(2, 5, **u8)), "scales"),
        "dequantize_triton scales of other rows": (lambda: nv.dequantize_triton(
            "nvfp4", torch.zeros(2, 8, **u8), torch.zeros(3, 1, **u8)), "scales"),
        "dequantize_triton float codes": (lambda: nv.dequantize_triton("nvfp4", torch.zeros(2, 8),
                                                                       torch.zeros(2, 1, **u8)), "codes"),
        "moe_routing logits a list": (lambda: mr.moe_routing([[1.0, 2.0]], None, top_k=1), "logits"),
        "mqa_topk q of 3 dims": (lambda: sm.mqa_topk(**{**mqa, "q": torch.zeros(1, 64, 128).to(f8)}, top_k=4), "q"),
        "mqa_topk top_k a string": (lambda: sm.mqa_topk(**mqa, top_k="4"), "top_k"),
        "mqa_topk block_table of 1 dim": (lambda: sm.mqa_topk(**{**mqa, "block_table": torch.zeros(1, **i32)}, top_k=4),
                                          "block_table"),
        "nvfp4_decode_attention q of 2 dims": (lambda: na.nvfp4_decode_attention(
            **{**att, "q": torch.zeros(64, 512).bfloat16()}), "q"),
        "nvfp4_decode_attention block_table of 1 dim": (lambda: na.nvfp4_decode_attention(
            **{**att, "block_table": torch.zeros(1, **i32)}), "block_table"),
        # values out of range: a kernel would read outside the cache (checked where the tensors are on the
        # CPU; on a GPU with TUNER_CHECK_INPUTS=1)
        "mqa_topk block_table past the cache": (lambda: sm.mqa_topk(**{**mqa, "block_table": torch.full(
            (1, 1), 10**6, **i32)}, top_k=4), "block_table"),
        "mqa_topk block_table negative": (lambda: sm.mqa_topk(**{**mqa, "block_table": torch.full(
            (1, 1), -1, **i32)}, top_k=4), "block_table"),
        "nvfp4_decode_attention seq_lens x 1000": (lambda: na.nvfp4_decode_attention(
            **{**att, "seq_lens": torch.full((1,), 1000, **i32)}), "seq_lens"),
        "nvfp4_decode_attention seq_lens negative": (lambda: na.nvfp4_decode_attention(
            **{**att, "seq_lens": torch.full((1,), -3, **i32)}), "seq_lens"),
        "nvfp4_decode_attention block_table past the cache": (lambda: na.nvfp4_decode_attention(
            **{**att, "block_table": torch.full((1, 1), 7, **i32)}), "block_table"),
        "engram_lookup without a table": (lambda: en.engram_lookup(None, torch.zeros(2, 24, dtype=torch.int64)),
                                          "table"),
        "moe_routing logits 0-d": (lambda: mr.moe_routing(torch.tensor(1.0), None, top_k=1), "logits"),
        "moe_routing bias a list": (lambda: mr.moe_routing(torch.zeros(2, 8), [0.0] * 8, top_k=1), "bias"),
        "moe_routing expert_map a list": (lambda: mr.moe_routing(torch.zeros(2, 8), None, top_k=1,
                                                                 expert_map=list(range(8))), "expert_map"),
        "mhc_pre X 0-d": (lambda: mhc.mhc_pre(torch.tensor(1.0), *pre[1:]), "X"),
        "mhc_pre X a list": (lambda: mhc.mhc_pre([[0.0]], *pre[1:]), "X"),
        "mhc_pre sinkhorn_iters 10**9": (lambda: mhc.mhc_pre(*pre, sinkhorn_iters=10**9), "sinkhorn_iters"),
        "mhc_pre sinkhorn_iters 2.5": (lambda: mhc.mhc_pre(*pre, sinkhorn_iters=2.5), "sinkhorn_iters"),
        "dequantize_nvfp4 of a 7-wide row": (lambda: nv.dequantize_nvfp4(torch.zeros(2, 7, **u8),
                                                                         torch.zeros(2, 1, **u8)), "scales"),
        "dequantize_nvfp4 of float codes": (lambda: nv.dequantize_nvfp4(torch.zeros(2, 8), torch.zeros(2, 1, **u8)),
                                            "codes"),
    }


def test_bad_inputs_to_the_public_apis_raise_a_clear_value_or_type_error():
    wrong = []
    for what, (call, word) in _cases().items():
        try:
            call()
            wrong.append(f"{what}: no error")
        except (ValueError, TypeError) as e:
            if word not in str(e):
                wrong.append(f"{what}: {type(e).__name__} not naming {word!r}: {str(e)[:120]}")
        except Exception as e:  # noqa: BLE001 - collected: the failure lists every case
            wrong.append(f"{what}: {type(e).__name__}: {str(e)[:120]}")
    assert not wrong, "\n".join(wrong)


def test_quantize_nvfp4_triton_is_bit_identical_for_nan_and_inf():
    from kernel_templates import nvfp4 as nv

    x = torch.randn(4, 32, generator=torch.Generator().manual_seed(0))
    x[0, 3], x[1, 5], x[2, 7], x[3] = float("nan"), float("inf"), float("-inf"), float("nan")
    for a, b in zip(nv.quantize_nvfp4(x), nv.quantize_nvfp4_triton(x)):
        assert torch.equal(a, b), (a, b)


def _bad_configs(config: dict):
    """(knob, bad config) pairs: each knob missing, of the wrong type, out of range."""
    for k, v in config.items():
        yield k, {n: c for n, c in config.items() if n != k}
        yield k, {**config, k: "x"}
        yield k, {**config, k: [v]}
        if isinstance(v, int) and not isinstance(v, bool):
            yield k, {**config, k: -4}
            yield k, {**config, k: 10**9}
            yield k, {**config, k: 2**30}  # a power of two past every tile a kernel can hold
        if isinstance(v, float):
            yield k, {**config, k: float("inf")}
            yield k, {**config, k: float("nan")}


@pytest.mark.parametrize("family", FAMILIES)
def test_launchers_validate_every_knob_before_launching(family):
    k = registry.get(family)
    w = next(iter(k.small_workloads))
    inputs = k.spec.make_inputs(w, "cpu", 0)
    config = k.default_config(w, INTERPRETER)
    wrong = []
    for knob, bad in _bad_configs(config):
        try:
            k.spec.launch(config=bad, **inputs)
            wrong.append(f"{knob}={bad.get(knob, '<missing>')!r}: launched")
        except (ValueError, TypeError) as e:
            if knob not in str(e):
                wrong.append(f"{knob}={bad.get(knob, '<missing>')!r}: {type(e).__name__} not naming it: {str(e)[:100]}")
        except Exception as e:  # noqa: BLE001
            wrong.append(f"{knob}={bad.get(knob, '<missing>')!r}: {type(e).__name__}: {str(e)[:100]}")
    assert not wrong, f"{family}:\n" + "\n".join(wrong)


def test_paged_checks_read_only_the_pages_a_sequence_uses():
    from kernel_templates._host import check_paged

    i32 = dict(dtype=torch.int32)
    table = torch.tensor([[3, -1, 99], [0, 1, 2]], **i32)  # row 0: one page used, the rest padding
    check_paged(table, torch.tensor([16, 48], **i32), pages=4, page=16)
    check_paged(table, torch.tensor([0, 0], **i32), pages=4, page=16)
    with pytest.raises(ValueError, match=r"block_table\[0, 1\] = -1"):
        check_paged(table, torch.tensor([17, 48], **i32), pages=4, page=16)
    with pytest.raises(ValueError, match=r"seq_lens must lie in \[0, 48\]"):
        check_paged(table, torch.tensor([16, 49], **i32), pages=4, page=16)
    check_paged(table, torch.tensor([-5, 49], **i32), pages=4, page=16, clamp=True)  # sparse MQA clamps them
    with pytest.raises(ValueError, match=r"block_table\[1, 2\] = 7"):
        check_paged(table.clone().fill_(0).index_put_((torch.tensor([1]), torch.tensor([2])), torch.tensor(7, **i32)),
                    torch.tensor([10**6, 10**6], **i32), pages=4, page=16, clamp=True)
