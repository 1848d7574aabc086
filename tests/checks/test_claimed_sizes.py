"""Every size the kernel claims (issue 55, item 5): gpu-softmax claims vocabulary rows
(32k-256k), gpu-norm hidden sizes (8k-16k), gpu-mha contexts of 16k-64k tokens,
megablox-gmm a mixture-of-experts layer; an implementation that runs its kernel only
for the rows a test draws (plain XLA past 2048 logits, or the kernel on a prefix and XLA on
the rest, concatenated) passes every drawn case and fails ``claimed-sizes``, traced at the
claimed sizes and never run there. One that branches between the drawn sizes and the
claimed ones fails too: a ladder of sizes between a small size and each claimed one is
traced as well (every factor of 2, each rung's place drawn)."""

from __future__ import annotations

import re

import jax
import pytest

from kernel_harness import testing
from kernel_harness.checks.claimed_sizes import claimed_sizes
from kernel_harness.core.backends import resolve_backend
from kernel_harness.core.errors import PropertyNotApplicable
from kernel_harness.records.registry import get_family
from kernel_harness.testing import HarnessCheckFailed
from tests.helpers.generic_cheats import ghost_mha, ghost_norm, gmm, mha, softmax, xla_mha

PLANTED = "tests.helpers.planted_softmax"


@pytest.mark.triton_ops
def test_the_kernel_runs_the_same_program_at_every_claimed_size():
    testing.check("gpu-softmax", profile="ci", properties=["claimed-sizes"])


@pytest.mark.parametrize("impl, words", [
    ("ghost_past_2048", "launches 0 Pallas kernel(s) there, 1 at x=(2, 3, 100)"),
    ("concatenated_past_2048", "it computes concatenate, "),
])
@pytest.mark.triton_ops
def test_a_ghost_branch_past_the_drawn_sizes_fails_naming_its_class(impl, words):
    with pytest.raises(HarnessCheckFailed) as e:
        testing.check("gpu-softmax", impl=f"{PLANTED}:{impl}", profile="ci",
                      properties=["claimed-sizes"])
    text = str(e.value)
    assert "FAIL gpu-softmax ghost branch bfloat16 x=(8, 262144)" in text, text
    assert words in text, text
    # The same impl passes every drawn case: only the claimed sizes show the branch.
    testing.check("gpu-softmax", impl=f"{PLANTED}:{impl}", profile="dev",
                  properties=["matches-reference"], seed=1)


def test_a_family_claiming_no_sizes_is_a_skip_saying_so():
    with pytest.raises(PropertyNotApplicable, match="claims no sizes"):
        claimed_sizes(get_family("gpu-paged"), backend=resolve_backend("interpret"))


def _ghost_gmm(lhs, rhs, group_sizes, preferred_element_type, tiling, group_offset,
               existing_out, transpose_rhs, interpret):
    """megablox's gmm for up to 4096 rows (a test draws up to 384), XLA's ragged_dot past."""
    if lhs.shape[0] <= 4096:
        return gmm(lhs, rhs, group_sizes, preferred_element_type, tiling, group_offset,
                   existing_out, transpose_rhs, interpret)
    return jax.lax.ragged_dot(lhs, rhs, group_sizes,
                              preferred_element_type=preferred_element_type)


@pytest.mark.parametrize("family, ghost, where", [
    pytest.param("gpu-norm", ghost_norm, "bfloat16 x=\\(1, 4096, 8192\\)", id="hidden-sizes"),
    pytest.param("gpu-mha", ghost_mha, "bfloat16 q=\\(1, 32768, 8, 128\\)", id="contexts"),
    # Nightly: the same path as the two above, at gmm's costlier claimed sizes.
    pytest.param("megablox-gmm", _ghost_gmm, "bfloat16,float32,int32 lhs=\\(32768, 4096\\)",
                 id="moe-layer", marks=pytest.mark.nightly),
])
def test_a_family_passes_at_its_claimed_sizes_and_its_ghost_branch_fails(family, ghost, where):
    testing.check(family, profile="ci", properties=["claimed-sizes"])
    with pytest.raises(HarnessCheckFailed, match=f"FAIL {family} ghost branch {where} .* "
                       "launches 0 Pallas kernel"):
        testing.check(family, impl=ghost, profile="ci", properties=["claimed-sizes"])


def test_gpu_mha_traces_causal_and_segments_only_where_the_check_keeps_them():
    claim = get_family("gpu-mha").claimed
    uses = [claim.uses(a) for a in claim.sizes()]
    assert uses == [frozenset({"causal"}), frozenset({"causal", "segments"}), frozenset(),
                    frozenset({"segments"})]
    kept = claim.kept(frozenset({"causal"}))
    assert [a["q"].shape for a in kept] == [(1, 65536, 4, 64), (8, 4096, 32, 128)]
    assert len(claim.kept(frozenset({"segments"}))) == 2


def test_a_claimed_size_using_a_left_out_feature_is_not_traced():
    family = get_family("gpu-norm")
    assert len(family.claimed.kept(frozenset())) == 2
    assert family.claimed.kept(frozenset({"rows-over-4096"})) == []
    assert len(family.claimed.kept(frozenset({"bfloat16"}))) == 1  # a dtype left out
    with pytest.raises(PropertyNotApplicable, match="every claimed size uses what this check "
                       "leaves out \\(rows-over-4096\\)"):
        from kernel_harness.records.narrow import narrow

        claimed_sizes(narrow(family, {"rows-over-4096"}), backend=resolve_backend("interpret"))


def _between_softmax(x, *, axis=-1, interpret=False):
    """gpu-softmax's kernel, plain XLA for rows of 4097..16383 logits: above every drawn size,
    below every claimed one."""
    if 4096 < x.shape[-1] < 16384:
        return jax.nn.softmax(x, axis=axis)
    return softmax(x, axis=axis, interpret=interpret)


@pytest.mark.parametrize("seed", [0, 1])
@pytest.mark.triton_ops
def test_a_ghost_branch_between_the_drawn_and_the_claimed_sizes_fails_naming_the_rung(seed):
    with pytest.raises(HarnessCheckFailed) as e:
        testing.check("gpu-softmax", impl=_between_softmax, profile="ci", seed=seed,
                      properties=["claimed-sizes"])
    text = str(e.value)
    assert "FAIL gpu-softmax ghost branch " in text, text
    assert "at this size (traced, not run; rung " in text, text
    assert "launches 0 Pallas kernel(s) there, 1 at x=(2, 3, 100)" in text, text
    shape = re.search(r"ghost branch \S+ x=\(([\d, ]+)\)", text).group(1)
    assert 4096 < int(shape.split(",")[-1]) < 16384, text


def _causal_between_mha(q, k, v, segment_ids, *, causal, **kw):
    """gpu-mha's kernel, plain XLA for causal attention over 1025..16383 tokens: only a rung
    of a causal claimed size, traced causal, reaches it."""
    if causal and 1024 < q.shape[1] < 16384:
        return xla_mha(q, k, v, segment_ids, causal=causal, **kw)
    return mha(q, k, v, segment_ids, causal=causal, **kw)


@pytest.mark.triton_ops
def test_a_ghost_branch_between_on_causal_attention_only_fails():
    with pytest.raises(HarnessCheckFailed, match="FAIL gpu-mha ghost branch (bfloat16|float16,"
                       "int32) q=.* at this size \\(traced, not run; rung .* launches 0 Pallas"):
        testing.check("gpu-mha", impl=_causal_between_mha, profile="ci",
                      properties=["claimed-sizes"])


def _refusing_softmax(x, *, axis=-1, interpret=False):
    """gpu-softmax's kernel, refusing rows of 2049..31999 logits."""
    if 2048 < x.shape[-1] < 32000:
        raise ValueError(f"rows of {x.shape[-1]} logits are not supported")
    return softmax(x, axis=axis, interpret=interpret)


@pytest.mark.triton_ops
def test_a_size_between_whose_trace_raises_is_a_fail_naming_the_rung_and_the_exception():
    with pytest.raises(HarnessCheckFailed) as e:
        testing.check("gpu-softmax", impl=_refusing_softmax, profile="ci",
                      properties=["claimed-sizes"])
    text = str(e.value)
    assert "FAIL gpu-softmax claimed size refused " in text, text
    assert "at this size (traced, not run; rung " in text, text
    assert "raised ValueError: rows of " in text and "are not supported" in text, text


def _operands(lhs, rhs, mode):
    """bfloat16 operands when not interpreted: the test is on this helper's parameter."""
    if mode is False:
        return (jax.lax.reduce_precision(lhs, exponent_bits=8, mantissa_bits=7),
                jax.lax.reduce_precision(rhs, exponent_bits=8, mantissa_bits=7))
    return lhs, rhs


def _compiled_bf16_gmm(lhs, rhs, group_sizes, preferred_element_type, tiling, group_offset,
                       existing_out, transpose_rhs, interpret):
    lhs, rhs = _operands(lhs, rhs, interpret)
    return gmm(lhs, rhs, group_sizes, preferred_element_type, tiling, group_offset,
               existing_out, transpose_rhs, interpret)


def test_a_branch_only_a_compiled_run_takes_fails_traced_for_the_target_backend():
    """Round 6: the source check does not follow ``interpret`` into a helper's parameter;
    tracing the small size for the family's compiled backend (tpu) shows the other math."""
    with pytest.raises(HarnessCheckFailed) as e:
        testing.check("megablox-gmm", impl=_compiled_bf16_gmm, profile="dev",
                      properties=["claimed-sizes"])
    text = str(e.value)
    assert "FAIL megablox-gmm ghost branch" in text and "traced for tpu (not run)" in text, text
    assert "computes reduce_precision and not on interpret" in text, text
