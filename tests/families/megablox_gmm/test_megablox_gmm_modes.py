"""ci-sized draws of megablox-gmm reach every mode at sizes where bugs show."""

from tests.helpers.mode_reach import assert_reaches, family_reach

MODES = ("multi-group", "empty-group", "group-not-tile-multiple", "group-boundary-mid-tile",
         "group-under-one-tile", "rows-past-groups", "k-remainder", "multi-k-tile",
         "n-remainder", "multi-n-tile", "transpose-rhs", "rhs-shard", "multi-group-shard",
         "group-offset>0", "out-bfloat16", "float32", "bfloat16", "group-over-1024-rows")


def test_every_mode_is_drawn():
    assert_reaches(family_reach("megablox-gmm"), MODES, "megablox-gmm")
