"""A derandomized ci draw of megablox-gmm reaches every mode at sizes where bugs show."""

from tests.helpers.mode_reach import events_reached

MODES = ("multi-group", "empty-group", "group-not-tile-multiple", "group-boundary-mid-tile",
         "group-under-one-tile", "rows-past-groups", "k-remainder", "multi-k-tile",
         "n-remainder", "multi-n-tile", "transpose-rhs", "rhs-shard", "multi-group-shard",
         "group-offset>0", "out-bfloat16", "float32", "bfloat16")


def test_every_mode_is_drawn():
    seen = events_reached("megablox-gmm")
    assert [m for m in MODES if not seen[m]] == [], seen
