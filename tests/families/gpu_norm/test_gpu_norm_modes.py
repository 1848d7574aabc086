"""ci-sized draws of gpu-norm reach every mode at sizes where bugs show."""

from tests.helpers.mode_reach import assert_reaches, family_reach

MODES = ("layer_norm", "rms_norm", "float32", "bfloat16", "float16", "non-pow2-n",
         "partial-col-block", "multi-col-block", "partial-dw-col-block", "partial-dw-row-block",
         "multi-dw-row-block", "offset", "offset>=100-spreads", "large-magnitude",
         "eps-dominates-var", "constant-rows", "identity-affine", "pruned-affine")


def test_every_mode_is_drawn():
    assert_reaches(family_reach("gpu-norm"), MODES, "gpu-norm")
