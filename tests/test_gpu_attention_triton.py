"""On a CUDA machine only (COURSE_MODE=live): the course's Triton attention kernel compiled for the GPU,
against float64 at hostile shapes with two tile configs, autotuned at a prefill's shape against float64 and
SDPA, its generated code and resources, and its speed beside SDPA (printed; asserted only far below it)."""
import os

import pytest

pytestmark = pytest.mark.gpu
if os.environ.get("COURSE_MODE") != "live":
    pytest.skip("GPU tests run with COURSE_MODE=live on a CUDA machine (make gpu-test)", allow_module_level=True)

torch = pytest.importorskip("torch")
pytest.importorskip("triton", reason="Triton is not installed: it comes with PyTorch's CUDA wheels")

from course_lib.launch import attention_triton as at  # noqa: E402

TOLERANCE = 3e-2   # as the interpreter's tests: a few bf16 ulps of |O| for unit-normal inputs


def reference(q, k, v, causal):
    q, k, v = (x.double() for x in (q, k, v))
    group = q.shape[1] // k.shape[1]
    k, v = k.repeat_interleave(group, 1), v.repeat_interleave(group, 1)
    s = q @ k.transpose(-1, -2) / q.shape[-1] ** 0.5
    sq, sk = q.shape[2], k.shape[2]
    if causal:
        i, j = torch.arange(sq, device=q.device)[:, None], torch.arange(sk, device=q.device)[None, :]
        s = s.masked_fill(j > i + sk - sq, float("-inf"))
    return torch.softmax(s, -1).nan_to_num(0.0) @ v


def operands(sq, sk, d, hq=4, hkv=2, batch=1, seed=0):
    gen = torch.Generator(device="cuda").manual_seed(seed)
    return tuple(torch.randn(batch, h, n, d, device="cuda", generator=gen).bfloat16()
                 for h, n in ((hq, sq), (hkv, sk), (hkv, sk)))


@pytest.mark.parametrize("config", [at.CONFIGS[0], at.TileConfig(64, 64, 4, 3)], ids=lambda c: c.label)
@pytest.mark.parametrize("d", [64, 128])
def test_hostile_shapes_on_the_gpu(config, d):
    for sq, sk in ((1, 1), (17, 17), (130, 130), (5, 300), (300, 5), (257, 1000)):
        q, k, v = operands(sq, sk, d, seed=sq + sk)
        for causal in (False, True):
            got = at.forward(q, k, v, causal=causal, config=config)
            err = (got.double() - reference(q, k, v, causal)).abs().max().item()
            assert err <= TOLERANCE, (config.label, d, sq, sk, causal, err)


@pytest.mark.parametrize("d", [64, 128])
def test_autotuned_at_a_prefill_shape_matches_float64_and_sdpa(d):
    import torch.nn.functional as F

    q, k, v = operands(2048, 2048, d, hq=32, hkv=8, batch=2, seed=d)
    for causal in (False, True):
        got = at.forward(q, k, v, causal=causal)
        assert at.last_config() in at.CONFIGS
        rows = slice(-96, None)   # the last rows see every key; bottom-right makes the slice exact
        want = reference(q[:1, :8, rows], k[:1, :2], v[:1, :2], causal)
        assert (got[:1, :8, rows].double() - want).abs().max().item() <= TOLERANCE
        sdpa = F.scaled_dot_product_attention(q, k, v, is_causal=causal, enable_gqa=True)
        assert (got.float() - sdpa.float()).abs().max().item() <= TOLERANCE


def test_the_live_code_and_resources():
    q, k, v = operands(1024, 1024, 128, hq=8, hkv=2, seed=3)
    at.forward(q, k, v, causal=True)
    code = at.last_generated_code()
    res = at.last_resources()
    print(f"\n{code.config.label}: {res}")
    summary = at.code_summary(code)
    print(summary)
    counts = summary["ptx_instruction_counts"]
    assert counts["ex2 (MUFU exponential)"] > 0 and counts["local-memory store (a spill)"] == 0
    if torch.cuda.get_device_capability() >= (9, 0):
        assert counts["Hopper warpgroup MMA (wgmma)"] > 0
    else:
        assert counts["warp MMA (mma.sync)"] > 0


@pytest.mark.parametrize("d", [128, 64])
def test_speed_beside_sdpa(d):
    """Printed for the record of the session (not a recorded measurement): TFLOP/s of the Triton kernel and
    SDPA at 8k tokens, two sequences, 32 query heads on 8 KV heads; fails only far below SDPA."""
    import torch.nn.functional as F

    from course_lib.core.timing import benchmark_interleaved
    from course_lib.models import attention as attention_model

    q, k, v = operands(8192, 8192, d, hq=32, hkv=8, batch=2, seed=11)
    for causal in (False, True):
        fns = [lambda: at.forward(q, k, v, causal=causal),
               lambda: F.scaled_dot_product_attention(q, k, v, is_causal=causal, enable_gqa=True)]
        fns[0]()
        triton_t, sdpa_t = benchmark_interleaved(fns, 20)
        flop = attention_model.flop(attention_model.prefill_shape(2, 8192, d, causal))
        print(f"\nd={d} causal={causal} {at.last_config().label}: Triton {flop / triton_t.median_s / 1e12:.0f} "
              f"TFLOP/s, SDPA {flop / sdpa_t.median_s / 1e12:.0f} TFLOP/s, "
              f"Triton {100 * sdpa_t.median_s / triton_t.median_s:.0f}% of SDPA")
        assert sdpa_t.median_s / triton_t.median_s > 0.3
