"""A derandomized ci draw of gpu-norm reaches every mode at sizes where bugs show."""

from tests.helpers.mode_reach import events_reached

MODES = ("layer_norm", "rms_norm", "float32", "bfloat16", "float16", "non-pow2-n",
         "partial-col-block", "multi-col-block", "partial-dw-col-block", "partial-dw-row-block",
         "multi-dw-row-block", "offset", "offset>=100-spreads", "large-magnitude",
         "eps-dominates-var")


def test_every_mode_is_drawn():
    seen = events_reached("gpu-norm")
    assert [m for m in MODES if not seen[m]] == [], seen
