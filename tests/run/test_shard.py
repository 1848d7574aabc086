"""``--shard I/N`` (issue 21 item 4, the library): every unit in exactly one shard, the same
split on every host, a seed of its own for each shard, bad specs one-line errors."""

from __future__ import annotations

import pytest

from kernel_harness.core.errors import UsageError
from kernel_harness.run.shard import parse_shard, shard_seed, shard_units

UNITS = [(f, p) for f in ("flash", "hstu", "sdpa", "splash", "toy")
         for p in ("matches-reference", "block-size-invariance", "option-effect")]


@pytest.mark.parametrize("n", [1, 2, 3, 4, 7, 15, 16, 40])
def test_every_unit_runs_in_exactly_one_shard(n):
    shards = [shard_units(UNITS, f"{i}/{n}") for i in range(1, n + 1)]
    flat = [u for s in shards for u in s]
    assert sorted(flat) == sorted(UNITS) and len(flat) == len(UNITS)
    sizes = [len(s) for s in shards]
    assert max(sizes) - min(sizes) <= 1
    for s in shards:  # each shard keeps the given order
        assert s == sorted(s, key=UNITS.index)


def test_the_split_is_deterministic():
    assert shard_units(UNITS, "2/4") == shard_units(list(UNITS), " 2 / 4 ")
    assert shard_units(UNITS, "1/2") == UNITS[0::2] and shard_units(UNITS, "2/2") == UNITS[1::2]
    assert shard_units([], "1/3") == []


@pytest.mark.parametrize("spec", ["0/2", "3/2", "1/0", "2", "a/b", "1/2/3", "-1/2", ""])
def test_a_bad_spec_is_a_usage_error(spec):
    with pytest.raises(UsageError, match="--shard") as info:
        shard_units(UNITS, spec)
    assert "\n" not in str(info.value)
    with pytest.raises(UsageError):
        shard_seed(1, spec)


def test_each_shard_has_its_own_seed():
    assert parse_shard("3/5") == (3, 5)
    seeds = [shard_seed(42, f"{i}/8") for i in range(1, 9)]
    assert len(set(seeds)) == 8 and all(isinstance(s, int) and 0 <= s < 2**32 for s in seeds)
    assert seeds == [shard_seed(42, f"{i}/8") for i in range(1, 9)]  # stable
    assert shard_seed(43, "1/8") != seeds[0]
    assert shard_seed(42, "1/1") == 42 and shard_seed(42, None) == 42
    assert shard_seed(None, "2/8") is None and shard_seed(None, None) is None
