"""GPU families: strategy validity, case validation, kernel limits, backends."""

from __future__ import annotations

import functools

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from jax.experimental.pallas.ops.gpu import attention, decode_attention, paged_attention

from kernel_harness import BackendUnavailable, check_case, get_family, resolve_backend
from kernel_harness.core.backends import Backend, availability
from kernel_harness.families.gpu_common import is_pow2
from kernel_harness.families.gpu_decode.cases import DecodeCase
from kernel_harness.families.gpu_mha.cases import BLOCK_FIELDS, MhaCase
from kernel_harness.families.gpu_paged.cases import MASKED_V, PagedCase
from kernel_harness.run.runner import run_on_backend

GPU_FAMILIES = ("gpu-mha", "gpu-decode", "gpu-paged")
FAST = settings(max_examples=40, deadline=None, database=None,
                suppress_health_check=list(HealthCheck))


def _common_checks(family, case):
    assert isinstance(case, family.case_type)
    assert family.case_type.from_json(case.to_json()) == case
    hash(case.static_key())
    assert all(isinstance(e, str) for e in family.events(case))
    a, b = case.materialize(), case.materialize()
    assert a.keys() == b.keys()
    for name in a:
        # Deterministic; float64 views so NaN poison compares equal for every dtype.
        np.testing.assert_array_equal(a[name].astype(np.float64), b[name].astype(np.float64))
    return a


@FAST
@given(get_family("gpu-mha").cases())
def test_mha_strategy_draws_valid_cases(case):
    x = _common_checks(get_family("gpu-mha"), case)
    for name in BLOCK_FIELDS:
        eff = case.effective_block(name)
        assert is_pow2(eff) and eff >= 16
    assert case.q_len // case.effective_block("block_q_dq") == (
        case.kv_len // case.effective_block("block_kv_dkv")
    )
    assert not case.is_causal or case.q_len <= case.kv_len
    assert x["q"].shape == (case.batch, case.q_len, case.q_heads, case.head_dim)
    assert x["k"].dtype == np.dtype(jnp.dtype(case.dtype))
    if case.q_segments is not None:
        assert case.q_len == case.kv_len and case.q_segments == case.kv_segments
        assert x["segment_ids"].shape == (case.batch, case.kv_len)


@FAST
@given(get_family("gpu-decode").cases())
def test_decode_strategy_draws_valid_cases(case):
    x = _common_checks(get_family("gpu-decode"), case)
    start, end = case.bounds()
    assert ((0 <= start) & (start <= case.kv_len) & (0 <= end) & (end <= case.kv_len)).all()
    assert case.entry == "gqa" or case.kv_heads == 1
    assert x["k"].shape == (case.batch, case.kv_len, case.kv_heads, case.head_dim)
    assert ("start_idx" in x) == (case.kv_starts is not None)


@FAST
@given(get_family("gpu-paged").cases())
def test_paged_strategy_draws_valid_cases_and_poisons_only_unused_slots(case):
    x = _common_checks(get_family("gpu-paged"), case)
    tables = x["block_tables"]
    assert tables.dtype == np.int32 and tables.shape == (case.batch, case.pages_per_seq)
    assert ((0 <= tables) & (tables < case.total_pages)).all()
    assert (tables[:, : case.shared_pages] == tables[0, : case.shared_pages]).all()
    assert len(np.unique(tables[:, case.shared_pages:])) == tables[:, case.shared_pages:].size
    vp = x["v_scales_pages"] if case.quantized else x["v_pages"].astype(np.float32)
    for b in range(case.batch):
        slots = np.arange(case.capacity)
        page, slot = tables[b, slots // case.page_size], slots % case.page_size
        seen = slots < case.length(b)
        read = slots < case.read_pages(b) * case.page_size
        vals = np.moveaxis(vp[:, page, slot], 1, -1)  # slot axis last
        assert np.isfinite(vals[..., seen]).all()
        assert np.isfinite(vals[..., read]).all()  # read-but-masked slots are finite
        assert np.isnan(vals[..., ~read]).all()  # never-read slots are NaN
        if not case.quantized:
            masked = read & ~seen
            assert (np.abs(vals[..., masked]) == np.float32(MASKED_V)).all()
            assert (np.abs(vals[..., seen]) < 50).all()


def test_mha_case_rejects_what_the_kernel_cannot_do():
    base = dict(dtype="float32", seed=0, batch=1, q_heads=1, kv_heads=1, head_dim=32)
    with pytest.raises(ValueError, match="causal mask needs q_len <= kv_len"):
        MhaCase(**base, q_len=64, kv_len=32, is_causal=True, block_q_dq=32, block_kv_dkv=16)
    with pytest.raises(ValueError, match="silently computes wrong gradients"):
        MhaCase(**base, q_len=96, kv_len=96, block_q_dkv=64)
    with pytest.raises(ValueError, match="as many q blocks"):
        MhaCase(**base, q_len=64, kv_len=64, block_q_dq=16, block_kv_dkv=32)
    with pytest.raises(ValueError, match="q_len == kv_len"):
        MhaCase(**base, q_len=32, kv_len=64, q_segments=(((0, 32),),),
                kv_segments=(((0, 64),),), block_kv_dkv=64)


def test_decode_and_paged_cases_reject_bad_layouts():
    with pytest.raises(ValueError, match="mqa"):
        DecodeCase(dtype="float32", seed=0, batch=1, q_heads=4, kv_heads=2, q_len=1,
                   kv_len=32, head_dim=16, entry="mqa")
    with pytest.raises(ValueError, match="k_splits"):
        DecodeCase(dtype="float32", seed=0, batch=1, q_heads=4, kv_heads=2, q_len=1,
                   kv_len=48, head_dim=16, k_splits=2)
    with pytest.raises(ValueError, match="block_h"):
        PagedCase(dtype="float32", seed=0, batch=1, q_heads=4, kv_heads=1, head_dim=16,
                  page_size=16, pages_per_seq=2, block_h=8)
    with pytest.raises(ValueError, match="under 16 keys"):
        PagedCase(dtype="float32", seed=0, batch=1, q_heads=4, kv_heads=1, head_dim=16,
                  page_size=4, pages_per_seq=4, pages_per_compute_block=2)


def _arrays(*shapes):
    rng = np.random.default_rng(0)
    return [jnp.asarray(rng.standard_normal(s), jnp.float32) for s in shapes]


def test_kernels_raise_clearly_on_unsupported_tilings():
    q, k, v = _arrays((1, 96, 1, 32), (1, 96, 1, 32), (1, 96, 1, 32))
    with pytest.raises(ValueError, match="must be a multiple of"):
        attention.mha(q, k, v, None, block_sizes=attention.BlockSizes(block_q=64, block_k=32),
                      interpret=True)
    sizes = attention.BlockSizes(block_q=32, block_k=32, block_q_dkv=32, block_kv_dkv=32,
                                 block_q_dq=16, block_kv_dq=32)
    f = functools.partial(attention.mha, segment_ids=None, block_sizes=sizes, interpret=True)
    with pytest.raises(ValueError, match="same number of blocks"):
        jax.vjp(lambda q: f(q, k, v), q)[1](q)
    qd, kd = _arrays((1, 4, 16), (1, 48, 1, 16))
    with pytest.raises(AssertionError, match="divisible by k_splits"):
        decode_attention.gqa(qd, kd, kd, k_splits=5, interpret=True)
    pages = _arrays((1, 4, 16, 16))[0]
    tables = jnp.zeros((1, 2), jnp.int32)
    with pytest.raises(ValueError, match="block_h must divisible by 16"):
        paged_attention.paged_attention(qd, pages, pages, tables, None, block_h=8,
                                        interpret=True)


@pytest.mark.parametrize("name", GPU_FAMILIES)
def test_gpu_families_refuse_tpu_backends(name):
    family = get_family(name)
    assert family.backends == frozenset({"interpret", "gpu"})
    for backend_name in ("tpu", "tpu-interpret"):
        backend = Backend(name=backend_name, platform="cpu")
        with pytest.raises(BackendUnavailable, match="cannot run on backend"):
            check_case(family, None, backend)
        # the runner's guard is the only one: every adapter call goes through it
        with pytest.raises(BackendUnavailable, match="cannot run on backend"):
            run_on_backend(family, family.kernel, None, {}, backend)


@pytest.mark.skipif(availability()["gpu"] is None, reason="a GPU is attached")
def test_gpu_backend_is_unavailable_without_a_gpu():
    with pytest.raises(BackendUnavailable, match="no GPU"):
        resolve_backend("gpu")


# Hand-picked hard cases; num_warps/num_stages are Triton launch settings that the
# interpreter accepts (and ignores).
HARD_CASES = [
    ("gpu-mha", MhaCase(dtype="float32", seed=1, batch=2, q_heads=2, kv_heads=2, q_len=32,
                        kv_len=128, head_dim=48, is_causal=True, block_q=256, block_k=16,
                        block_q_dkv=16, block_kv_dkv=64, block_q_dq=16, block_kv_dq=32,
                        num_warps=8, num_stages=3)),
    ("gpu-decode", DecodeCase(dtype="bfloat16", seed=2, batch=2, q_heads=40, kv_heads=2,
                              q_len=1, kv_len=128, head_dim=32, kv_starts=(5, 64),
                              kv_lengths=(6, 64), k_splits=4, block_k=16,
                              normalize_output=False, num_warps=4, num_stages=1)),
    ("gpu-paged", PagedCase(dtype="float16", seed=3, batch=3, q_heads=20, kv_heads=1,
                            head_dim=32, page_size=8, pages_per_seq=8, lengths=(0, 19, 64),
                            spare_pages=1, pages_per_compute_block=2, k_splits=2, num_warps=4,
                            num_stages=1)),
]


# Nightly: the pristine kernels; their goldens run per push.
@pytest.mark.nightly
@pytest.mark.parametrize(("name", "case"), HARD_CASES, ids=[n for n, _ in HARD_CASES])
def test_hard_cases_pass(name, case):
    result = check_case(get_family(name), case, resolve_backend("interpret"))
    assert result.passed, [(v.stats.output, v.problems) for v in result.failures]
    if name == "gpu-paged":  # the float16 zero-length row is outside the contract
        assert result.excluded == {"out": case.q_heads * case.head_dim}
