"""The Case base: validation and JSON round trips."""

import dataclasses

import numpy as np
import pytest

from kernel_harness.core.case import Case, cast


@dataclasses.dataclass(frozen=True, kw_only=True)
class ToyCase(Case):
    shape: tuple[int, ...]
    window: int | None = None


def test_json_round_trip_restores_tuples():
    case = ToyCase(dtype="bfloat16", seed=3, shape=(2, 128), window=None)
    assert ToyCase.from_json(case.to_json()) == case


def test_unknown_field_is_a_clear_error():
    with pytest.raises(ValueError, match=r"ToyCase has no field\(s\) \['bogus'\]"):
        ToyCase.from_json('{"dtype": "float32", "seed": 0, "shape": [1], "bogus": 1}')


def test_bad_dtype_is_rejected():
    with pytest.raises(ValueError, match="dtype must be one of"):
        ToyCase(dtype="int8", seed=0, shape=(1,))


def test_static_key_ignores_the_seed():
    a = ToyCase(dtype="float32", seed=0, shape=(4,))
    b = ToyCase(dtype="float32", seed=9, shape=(4,))
    assert a.static_key() == b.static_key()


def test_rng_is_deterministic_per_seed_and_stream():
    a = ToyCase(dtype="float32", seed=5, shape=(4,))
    assert np.array_equal(a.rng(1).standard_normal(3), a.rng(1).standard_normal(3))
    assert not np.array_equal(a.rng(1).standard_normal(3), a.rng(2).standard_normal(3))


def test_cast_rounds_to_bfloat16():
    x = cast(np.array([1.0 + 2**-10]), "bfloat16")
    assert x.dtype.name == "bfloat16" and float(x[0]) == 1.0


@dataclasses.dataclass(frozen=True, kw_only=True)
class HeadsCase(Case):
    q_heads: int
    kv_heads: int = 1


def test_stored_cases_with_old_head_names_still_load():
    old = '{"dtype": "float32", "seed": 0, "num_q_heads": 4, "num_kv_heads": 2}'
    assert HeadsCase.from_json(old) == HeadsCase(dtype="float32", seed=0, q_heads=4, kv_heads=2)
    assert HeadsCase.from_json('{"dtype": "float32", "seed": 0, "heads": 3}').q_heads == 3


def test_old_and_new_name_together_are_an_error():
    with pytest.raises(ValueError, match="both 'heads' and its new name 'q_heads'"):
        HeadsCase.from_json('{"dtype": "float32", "seed": 0, "heads": 3, "q_heads": 3}')


def test_an_old_name_the_type_still_has_is_not_renamed():
    # ToyCase-like types that really have a `heads` field keep it.
    @dataclasses.dataclass(frozen=True, kw_only=True)
    class OwnHeads(Case):
        heads: int

    assert OwnHeads.from_json('{"dtype": "float32", "seed": 0, "heads": 2}').heads == 2


def test_head_counts_have_one_rule_and_one_message():
    from kernel_harness.core.case import check_heads

    check_heads(HeadsCase(dtype="float32", seed=0, q_heads=8, kv_heads=2))
    with pytest.raises(ValueError, match=r"q_heads=6 must be a multiple of kv_heads=4 "):
        check_heads(HeadsCase(dtype="float32", seed=0, q_heads=6, kv_heads=4))
    with pytest.raises(ValueError, match="kv_heads must be >= 1, got 0"):
        check_heads(HeadsCase(dtype="float32", seed=0, q_heads=2, kv_heads=0))
