"""ci-sized draws of gpu-softmax reach every mode at sizes where bugs show."""

from tests.helpers.mode_reach import assert_reaches, family_reach

MODES = ("float32", "bfloat16", "float16", "rank-1", "rank-2", "rank-3", "rank-4", "rank-5",
         "rank-6", "masked-row", "pow2-n",
         "partial-block", "n=1", "large-offset", "large-logits", "masked-prefix",
         "masked-leading-block", "masked-suffix", "masked-block", "tied-max")


def test_every_mode_is_drawn():
    assert_reaches(family_reach("gpu-softmax"), MODES, "gpu-softmax")
