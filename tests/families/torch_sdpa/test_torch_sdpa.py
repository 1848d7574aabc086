"""The torch bridge and the torch-sdpa family (need torch: ``pip install -e '.[torch]'``;
the main CI venv has none, and these tests then skip, saying so)."""

from __future__ import annotations

import hypothesis
import jax
import jax.numpy as jnp
import numpy as np
import pytest

torch = pytest.importorskip(
    "torch", reason="torch is not importable: the torch-sdpa tests need the [torch] extra "
    "(a separate venv, docs/torch.md)")

from kernel_harness import get_family, resolve_backend  # noqa: E402
from kernel_harness.checks.properties import HarnessFailure, Observer, matches_reference  # noqa: E402
from kernel_harness.core.torch_bridge import (  # noqa: E402
    TorchBridgeError,
    to_numpy,
    to_torch,
    torch_function,
)
from kernel_harness.families.torch_sdpa.cases import TorchSdpaCase  # noqa: E402
from kernel_harness.families.torch_sdpa.family import FAMILY as _TORCH_SDPA  # noqa: E402

reference = _TORCH_SDPA.reference
from kernel_harness.families.torch_sdpa.kernel import run, torch_sdpa  # noqa: E402
from kernel_harness.run.profiles import get_profile  # noqa: E402
from kernel_harness.run.runner import check_case  # noqa: E402
from tests.helpers.torch_impls import (  # noqa: E402
    ignores_is_causal,
    sdpa_no_gqa_flag,
    xla_flash_defaults,
)

FAMILY = get_family("torch-sdpa")
BACKEND = resolve_backend("interpret")


def test_bfloat16_crosses_the_bridge_bit_for_bit():
    x = np.asarray(np.random.default_rng(0).standard_normal(64), jnp.bfloat16)
    t = to_torch(x)
    assert t.dtype == torch.bfloat16
    back = to_numpy(t)
    assert back.dtype == x.dtype and np.array_equal(back.view(np.uint16), x.view(np.uint16))


def test_an_unmappable_dtype_is_a_clear_error():
    with pytest.raises(TorchBridgeError, match="uint32 has no exact torch counterpart"):
        torch_function(lambda x: x)(jnp.zeros(3, jnp.uint32))


def test_a_torch_output_of_another_dtype_is_an_error_not_a_cast():
    f = torch_function(lambda x: x.float(),
                       out_shapes=lambda x: [jax.ShapeDtypeStruct(x.shape, x.dtype)])
    with pytest.raises(Exception, match="never casts"):
        jax.block_until_ready(f(jnp.ones(4, jnp.bfloat16)))


def test_gradients_come_from_torch_autograd_under_jit():
    f = torch_function(lambda x, y: (torch.sin(x) * y, x * 2.0))
    x = jnp.linspace(-1.0, 1.0, 5, dtype=jnp.float32)
    y = jnp.arange(5, dtype=jnp.float32)

    def loss(x, y):
        a, b = f(x, y)
        return (a * 3.0).sum() + b.sum()

    gx, gy = jax.jit(jax.grad(loss, argnums=(0, 1)))(x, y)
    np.testing.assert_allclose(gx, 3.0 * np.cos(x) * y + 2.0, rtol=1e-6)
    np.testing.assert_allclose(gy, 3.0 * np.sin(x), rtol=1e-6)


def test_a_none_argument_reaches_torch_as_none():
    f = torch_function(lambda x, m: x if m is None else x * m)
    assert np.array_equal(f(jnp.ones(3), None), np.ones(3))


def _case(**kw) -> TorchSdpaCase:
    base = dict(dtype="float32", seed=3, batch=1, q_heads=4, kv_heads=2, q_len=8, kv_len=16,
                head_dim=16)
    return TorchSdpaCase(**{**base, **kw})


@pytest.mark.parametrize("kw", [
    dict(is_causal=True),  # q_len < kv_len: top-left aligned
    dict(is_causal=True, q_len=16, kv_len=8, scale=0.3),
    dict(mask="full", empty_row=True, mask_keep=0.5),
    dict(bias="full"),
    dict(mask="full", empty_row=True, backend="flash"),
    dict(bias="full", backend="flash"),
    dict(dtype="bfloat16", is_causal=True, backend="flash"),
], ids=repr)
def test_torch_sdpa_matches_the_reference(kw):
    result = check_case(FAMILY, _case(**kw), BACKEND)
    assert result.passed, [v for v in result.verdicts if not v.passed]


def test_rows_that_see_no_key_are_zero_in_torch_and_in_the_contract():
    case = _case(mask="full", empty_row=True)
    inputs = case.materialize()
    out = run(torch_sdpa, case, inputs, BACKEND)
    assert not case.visible()[:, :, 0].any()
    assert np.all(out["out"][:, :, 0] == 0) and np.all(out["dq"][:, :, 0] == 0)
    assert np.all(reference(case, inputs)["out"][:, :, 0] == 0)
    assert FAMILY.valid(case) == {}  # nothing excluded: such rows are judged


def test_the_float_mask_gradient_is_judged_on_math_only():
    assert FAMILY.not_compared(_case(bias="full")) == {}
    assert "flash" in FAMILY.not_compared(_case(bias="full", backend="flash"))["dmask"]
    out = run(torch_sdpa, _case(bias="full"), _case(bias="full").materialize(), BACKEND)
    assert out["dmask"].shape == (1, 4, 8, 16) and np.abs(out["dmask"]).max() > 0


def test_a_wrapper_expanding_kv_heads_itself_passes():
    result = check_case(FAMILY, _case(is_causal=True), BACKEND, sdpa_no_gqa_flag)
    assert result.passed


@pytest.mark.parametrize("impl", [xla_flash_defaults, ignores_is_causal],
                         ids=lambda f: f.__name__)
def test_seed_000_flash_defaults_fail_ci_profile(impl):
    """torch_xla's flash_attention(q, k, v) defaults (causal=False, sm_scale=1.0) in place of
    the causal, scaled SDPA call, and is_causal alone dropped: the family must fail both
    within the ci profile."""
    observer = Observer()
    prop = matches_reference(FAMILY, backend=BACKEND, impl=impl,
                             observer=observer)
    settings = hypothesis.settings(
        get_profile("ci"), phases=(hypothesis.Phase.explicit, hypothesis.Phase.generate))
    with pytest.raises(HarnessFailure):
        settings(prop)()
    assert observer.examples <= 30
