"""Bugs planted for the serving form's state-continuity relation (``kernel-harness mutate
flywheel-tpu-gdn --catalog tests.families.flywheel_tpu_gdn.state_mutants:GDN``, and
``:KDA`` for flywheel-tpu-kda): the prefill and mixed path's load of a continued
sequence's initial states skips the read, so the sequence starts from zeros. A kernel
that is right for fresh sequences and for decodes; the relation's variant resumes a fresh
sequence of the drawn case, so it sees the bug without a reference."""

from __future__ import annotations

from kernel_harness.records.mutant import Mutant, edits_of


def _catalog(module: str) -> list[Mutant]:
    load = edits_of(f"flywheel_tpu.linear_attention.{module}.vmem_ldst")
    return [
        load("continued-conv-state-unread", "a continued prefill's conv state is not read: "
             "its first K - 1 taps see zeros",
             "initial_conv_state = jnp.where(has_initial_state, hbm_conv_state, 0)",
             "initial_conv_state = jnp.zeros_like(hbm_conv_state)"),
        load("continued-recurrent-state-unread", "a continued prefill's recurrent state is "
             "not read: it starts from zeros",
             "initial_recurrent_state = jnp.where(has_initial_state,",
             "initial_recurrent_state = jnp.where(False,"),
    ]


#: flywheel-tpu-gdn's.
GDN = _catalog("gdn")
#: flywheel-tpu-kda's.
KDA = _catalog("kda")
