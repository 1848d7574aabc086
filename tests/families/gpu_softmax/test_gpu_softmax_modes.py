"""A derandomized ci draw of gpu-softmax reaches every mode at sizes where bugs show."""

from tests.helpers.mode_reach import events_reached

MODES = ("float32", "bfloat16", "float16", "rank-1", "rank-2", "rank-3", "rank-4", "pow2-n",
         "partial-block", "n=1", "large-offset", "large-logits")


def test_every_mode_is_drawn():
    seen = events_reached("gpu-softmax")
    assert [m for m in MODES if not seen[m]] == [], seen
