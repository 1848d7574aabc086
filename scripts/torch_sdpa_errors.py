"""Worst relative error of torch's SDPA against the attention reference, per dtype, torch
kernel and output, over N drawn torch-sdpa cases (the numbers behind the family's
tolerance table; needs torch). Usage: python scripts/torch_sdpa_errors.py [N]"""

from __future__ import annotations

import collections
import sys

from hypothesis import HealthCheck, given, settings

from kernel_harness import get_family, resolve_backend
from kernel_harness.run.runner import check_case

FAMILY = get_family("torch-sdpa")
BACKEND = resolve_backend("interpret")
WORST: dict[tuple[str, str, str], float] = collections.defaultdict(float)


def main(n: int) -> None:
    @settings(max_examples=n, deadline=None, derandomize=True, database=None,
              suppress_health_check=list(HealthCheck))
    @given(FAMILY.cases())
    def measure(case) -> None:
        skip = set(FAMILY.not_compared(case))
        for v in check_case(FAMILY, case, BACKEND).verdicts:
            if v.stats.output not in skip:
                key = (case.dtype, case.backend + ("+gqa" if case.enable_gqa else ""),
                       v.stats.output)
                WORST[key] = max(WORST[key], v.stats.max_rel_err)

    measure()
    for key in sorted(WORST):
        print(" ".join(key), f"{WORST[key]:.2e}")


if __name__ == "__main__":
    main(int(sys.argv[1]) if len(sys.argv) > 1 else 60)
