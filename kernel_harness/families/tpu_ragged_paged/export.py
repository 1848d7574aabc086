"""Standalone repro source for one tpu-ragged-paged case (``kernel-harness export-repro``).

jax's TPU interpreter cannot run this kernel unextended (reads through reshaped/bitcast
refs, masked stores to 3-D refs), so an interpreted script carries the harness's own
extensions: the source of :mod:`kernel_harness.core.compat.interpreter_ext`, embedded
verbatim (one source of truth, as the judge is), with its one harness import replaced by
local definitions (the exception class; the patch helpers' own source). The reference
embeds the ragged op's ``allowed`` and ``attend_sequence`` after the attention op's source
(:func:`kernel_harness.ops.attention.export.reference_source`).
"""

from __future__ import annotations

import inspect
import textwrap

from kernel_harness.families.tpu_ragged_paged.cases import RaggedCase
from kernel_harness.families.tpu_ragged_paged.kernel import PROGRAM
from kernel_harness.ops.attention.export import reference_source
from kernel_harness.ops.paged_attention import ragged as _reference
from kernel_harness.records.export import ExportSnippet, interpreter_source, tpu_interpreting_source


def export(case: RaggedCase) -> ExportSnippet:
    """The kernel call with the case's exact options (on interpret: TPU interpret mode,
    one core, zeroed scratch, inside the embedded extensions), and the reference over
    the active sequences (padding rows are outside the contract: ``valid:out``)."""
    options = PROGRAM.options(dict(case.static_key()), False)
    run_kernel = interpreter_source() + "\n\n\n" + tpu_interpreting_source(
        1, extended=True) + "\n\n" + textwrap.dedent(f'''
        OPTIONS = {options!r}
        OPERANDS = ("q", "kv_pages", "kv_lens", "page_indices", "cu_q_lens", "num_seqs")


        def run_kernel(x):
            fn = jax.jit(lambda *operands: kernel(*operands, **OPTIONS))
            with interpreting():
                out = jax.block_until_ready(fn(*(x[n] for n in OPERANDS)))
            return dict(out=out)
    ''')
    ratio = case.q_heads // case.kv_heads
    reference = reference_source("\n\n".join([
        "_HI = HI", inspect.getsource(_reference.allowed),
        inspect.getsource(_reference.attend_sequence), textwrap.dedent(f'''
        def reference(x):
            """Per active sequence: its keys gathered page by page through page_indices (K
            in even, V in odd combined heads), the causal (and window) mask, a float32
            softmax at HIGHEST. Rows past the active sequences' tokens stay 0."""
            q_all = np.asarray(x["q"]).astype(np.float32)
            pages = np.asarray(x["kv_pages"]).astype(np.float32)
            table = np.asarray(x["page_indices"])
            out = np.zeros(q_all.shape, np.float32)
            start = 0
            for i, (q_len, kv_len) in enumerate(zip({case.q_lens!r}, {case.kv_lens!r})):
                t = np.arange(kv_len)
                tokens = pages[table[i, t // {case.page_size}], t % {case.page_size}]
                o = attend_sequence(
                    jnp.asarray(q_all[start:start + q_len]),
                    jnp.asarray(tokens[:, 0::2]), jnp.asarray(tokens[:, 1::2]),
                    jnp.asarray(allowed(q_len, kv_len, {case.sliding_window!r})),
                    sm_scale={case.sm_scale!r}, soft_cap={case.soft_cap!r}, ratio={ratio})
                out[start:start + q_len] = np.asarray(o, np.float32)
                start += q_len
            return dict(out=out)
        ''')]))
    return ExportSnippet(
        default_import="from jax.experimental.pallas.ops.tpu.ragged_paged_attention.kernel "
        "import ragged_paged_attention as kernel",
        run_kernel=run_kernel, reference=reference, outputs=("out",),
    )
