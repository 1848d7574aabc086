"""The flywheel-tpu-kda family: flywheel-tpu 0.3.0's fused conv1d + KDA serving kernel
(``linear_attention.fused_conv1d_kda``) on the delta-rule op's serving form with its
per-channel gate (``gate="channel"``): flywheel-tpu-gdn's record with the gate changed,
the same cases, reference, judges and hard paths otherwise."""

from __future__ import annotations

import dataclasses
from typing import Any

from kernel_harness.families.flywheel_tpu import library
from kernel_harness.families.flywheel_tpu_gdn import family as gdn
from kernel_harness.families.flywheel_tpu_gdn.export import exporter
from kernel_harness.families.flywheel_tpu_kda import kernel as _kernel
from kernel_harness.ops.delta_rule.serving import ServingCase, serving_cases

CONTRACT = f"""\
flywheel-tpu {library.TESTED_VERSION} linear_attention.fused_conv1d_kda(qkv, b, g, ...):
flywheel-tpu-gdn's call and contract (below) with KDA's gate: g bfloat16 [tokens, n_v d_k]
and dt_bias [n_v d_k], one log decay -exp(a_log[h]) softplus(g + dt_bias) per value head
and key channel, the state decaying row by row. Also not drawn: lower_bound (the
sigmoid-bounded decay), beta_is_activated=True.
{gdn.CONTRACT}"""


def cases(*, without: frozenset[str] = frozenset()) -> Any:
    """The op's serving strategy at the family's shapes, the gate per channel."""
    return serving_cases(tokens=gdn.TOKENS, max_seqs=gdn.MAX_SEQS, slots=gdn.SLOTS,
                         chunk_size=gdn.CHUNK, gate="channel")


def seed_cases(without: frozenset[str]) -> list[ServingCase]:
    """flywheel-tpu-gdn's hand-made case with the gate per channel."""
    return [dataclasses.replace(c, gate="channel") for c in gdn.seed_cases(without)]


FAMILY = dataclasses.replace(
    gdn.FAMILY,
    name="flywheel-tpu-kda",
    summary=library.summary("fused conv1d + KDA serving kernel "
                            "(linear_attention.fused_conv1d_kda: the gate per key channel; "
                            "ragged prefill and decode, states in slot pools; forward only)"),
    cases=cases,
    **_kernel.ADAPTER.fields(),
    contract=CONTRACT,
    tolerances=gdn.serving_tolerances(
        "out 1.1e-2 of the scale, 1.8e-2 of a row's own; the state 8.4e-3 and 1.5e-2 (20 "
        "drawn cases, interpret, jax 0.12.0.1, 2026-12-06)"),
    seed_cases=seed_cases,
    metamorphic=dataclasses.replace(gdn.FAMILY.metamorphic, traceable=_kernel.traceable),
    export=exporter("from flywheel_tpu.linear_attention import fused_conv1d_kda as kernel"),
)
