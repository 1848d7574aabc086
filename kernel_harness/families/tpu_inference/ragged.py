"""What tpu-inference's ragged paged kernels (rpa v3, its head_dim-64 variant, MLA v2)
share, written once: the draws of their cases' pages, passes and attention options, the
facts of their records (the cache's tolerances, the VMEM limit they are called with, the
metamorphic record: lowering as on a v6e) and their exported scripts' ``run_kernel`` and
reference (the op's functions embedded). What the op gives their records (its padding
exclusion, modes, output axes, reference, keywords) is the op's:
:mod:`kernel_harness.ops.paged_attention.ragged_record` and
:mod:`~kernel_harness.ops.paged_attention.keywords`.

Each kernel takes the passes' operands (:mod:`kernel_harness.ops.paged_attention.passes`),
writes the new tokens into its cache and returns ``(out, cache)``.
"""

from __future__ import annotations

import inspect
import re
import textwrap
from collections.abc import Callable
from typing import Any

from hypothesis import strategies as st

from kernel_harness.core.case import cast
from kernel_harness.core.tolerance import ToleranceTable
from kernel_harness.ops.attention.export import reference_source
from kernel_harness.ops.paged_attention import kv_update
from kernel_harness.ops.paged_attention import ragged as _ragged
from kernel_harness.ops.paged_attention.kv_update import KvUpdateCase
from kernel_harness.ops.paged_attention.passes import (
    PassesCase,
    draw_passes,
    effective_q,
    new_token_slots,
)
from kernel_harness.ops.paged_attention.sequences import page_slots
from kernel_harness.records.adapter import INTERPRET_VMEM_BYTES, JittedTpuProgram
from kernel_harness.records.export import interpreter_source, tpu_interpreting_source
from kernel_harness.records.hooks import Metamorphic


def draw_paging(draw: st.DrawFn, dtypes: tuple[str, ...], max_seqs: int
                ) -> tuple[str, dict[str, Any]]:
    """The dtype, then the case's pages (8 or 16 tokens, 1-4 per sequence) and passes
    (:func:`~kernel_harness.ops.paged_attention.passes.draw_passes`) as case fields. The dtype
    is drawn here, first, because the families drew it first before this was shared: the
    same draw order keeps every stored derandomized stream and shrink the same."""
    dtype = draw(st.sampled_from(dtypes))
    page_size = draw(st.sampled_from((8, 16)))
    pages_per_seq = draw(st.integers(1, 4))
    passes = draw(draw_passes(page_size=page_size, pages_per_seq=pages_per_seq,
                              max_seqs=max_seqs))
    return dtype, {**passes, "page_size": page_size, "pages_per_seq": pages_per_seq}


def draw_attention(draw: st.DrawFn, paging: dict[str, Any]) -> dict[str, Any]:
    """Case fields: a window (or none) up to a sequence's capacity, a soft cap or none,
    sm_scale 1 or 0.5, large logits or not."""
    capacity = paging["page_size"] * paging["pages_per_seq"]
    return dict(sliding_window=draw(st.one_of(st.none(), st.integers(1, capacity))),
                soft_cap=draw(st.sampled_from((None, 2.0, 20.0))),
                sm_scale=draw(st.sampled_from((1.0, 0.5))),
                logit_scale=draw(st.sampled_from((1.0, 4.0))))


def cache_update_tolerances(*, float32: tuple[float, str], bfloat16: tuple[float, str],
                            cache: str, copy: str) -> ToleranceTable:
    """``out``'s limits and reasons per dtype; the updated ``cache``, a copy (``copy``
    says why), at 1e-7 of its scale in either dtype."""
    return ToleranceTable.of_limits({
        ("float32", "out"): float32, ("bfloat16", "out"): bfloat16,
        **{(dtype, cache): (1e-7, copy) for dtype in ("float32", "bfloat16")}})


def vmem_keyword(interpreted: bool) -> dict[str, Any]:
    """``vmem_limit_bytes``: the interpreter's larger VMEM when interpreted, the kernel's
    own default (None) on a TPU."""
    return {"vmem_limit_bytes": INTERPRET_VMEM_BYTES if interpreted else None}


def lowering_hooks(logit_input: str, traceable: Callable[..., Any]) -> Metamorphic:
    """The metamorphic hooks: no queries and keys of the op's own, ``logit_input`` scaled
    for the large-logit properties, Mosaic lowering as on a v6e (the kernels ask the chip
    its VMEM size)."""
    return Metamorphic(roles={}, logit_input=logit_input, traceable=traceable,
                       tpu_device_kind="TPU v6 lite")


def script_options(program: JittedTpuProgram, case: PassesCase, *,
                   leave_out: tuple[str, ...] = ()) -> dict[str, Any]:
    """The keyword arguments the harness calls the kernel with for ``case`` (the program's
    own options, so a script runs the kernel exactly as a check does), less
    ``vmem_limit_bytes`` (the script sets it by backend) and ``leave_out`` (keywords the
    script writes as source, a dtype say)."""
    options = program.options(dict(case.static_key()), False)
    return {k: v for k, v in options.items() if k not in ("vmem_limit_bytes", *leave_out)}


def run_kernel_source(options: dict[str, Any], operands: tuple[str, ...], cache: str, *,
                      keywords: str = "") -> str:
    """An exported script's ``run_kernel``: the interpreter extensions embedded, the
    kernel jitted with ``options`` (and ``keywords``, source) on ``operands``, under
    ``interpreting()``; it returns ``out`` and the updated cache, named ``cache``."""
    return interpreter_source() + "\n\n\n" + tpu_interpreting_source(
        1, extended=True) + "\n\n" + textwrap.dedent(f'''
        OPTIONS = {options!r}
        OPERANDS = {operands!r}


        def run_kernel(x):
            vmem = {INTERPRET_VMEM_BYTES} if INTERPRET else None
            fn = jax.jit(lambda *ops: kernel(*ops, vmem_limit_bytes=vmem, {keywords}**OPTIONS))
            with interpreting():
                out, cache = jax.block_until_ready(fn(*(x[n] for n in OPERANDS)))
            return dict(out=np.asarray(out, np.float32), {cache}=np.asarray(cache, np.float32))
    ''')


#: What an embedded function may need beyond the attention op's prelude: ml_dtypes (q
#: quantized to fp8) and the names of its annotations; a script imports only those its
#: embedded sources use (:func:`_prelude`).
_OPTIONAL_IMPORTS = {"ml_dtypes": "import ml_dtypes",
                     "Callable": "from collections.abc import Callable",
                     "Iterable": "from collections.abc import Iterable",
                     "Sequence": "from collections.abc import Sequence"}


def _prelude(sources: list[str]) -> str:
    """The imports ``sources`` use, and ``_HI``, the ragged op's precision."""
    text = "\n".join(sources)
    used = [line for name, line in _OPTIONAL_IMPORTS.items()
            if re.search(rf"\b{name}\b", text)]
    return "\n".join([*used, "", "_HI = HI", ""])


def ragged_reference_source(functions: tuple[Callable[..., Any], ...], fields: dict[str, Any],
                            *, pages_per_seq: int, call: str, doc: str) -> str:
    """An exported script's reference, all embedded verbatim: the ragged op
    (:func:`~kernel_harness.ops.paged_attention.ragged.ragged_attention` over the eager
    ``attend_sequence``), the page walk (``page_slots``, ``new_token_slots``) and the
    family's ``functions``; then ``CASE = fields`` and ``reference(x)`` returning ``call``
    (source over ``x``, the page table ``table`` and ``CASE``; ``doc`` its docstring)."""
    def source(*fs: Callable[..., Any]) -> list[str]:
        return [inspect.getsource(f) for f in fs]

    embedded = [
        *source(_ragged.allowed, _ragged.attend_sequence),
        "# The harness jits attend_sequence per sequence shape; the script runs it eagerly.\n"
        "_attend = attend_sequence",
        *source(_ragged.ragged_attention, page_slots, new_token_slots, *functions),
    ]
    return reference_source("\n\n".join([
        _prelude(embedded), *embedded,
        f"CASE = {fields!r}\nPAGES_PER_SEQ = {pages_per_seq!r}",
        textwrap.dedent(f'''
            def reference(x):
                """{doc}"""
                table = np.asarray(x["page_indices"]).reshape(-1, PAGES_PER_SEQ)
                return {call}
        ''')]))


def kv_update_reference_source(case: KvUpdateCase) -> str:
    """The reference of an exported script of a kernel that writes the new tokens' K/V
    first (rpa v3, hd64): :func:`~kernel_harness.ops.paged_attention.kv_update.kv_update_attention`,
    what it calls and the case's layout functions (``write_token``, ``token_kv``) embedded,
    called with the case's
    :data:`~kernel_harness.ops.paged_attention.kv_update.REFERENCE_FIELDS`."""
    write, read = type(case).write_token, type(case).token_kv
    functions = (cast, effective_q, kv_update.updated_cache, kv_update.sequence_kv,
                 kv_update.kv_update_attention, write, read)
    return ragged_reference_source(
        functions, {f: getattr(case, f) for f in kv_update.REFERENCE_FIELDS},
        pages_per_seq=case.pages_per_seq,
        call=f"{kv_update.kv_update_attention.__name__}(x, table, {write.__name__}, "
             f"{read.__name__}, **CASE)",
        doc="The cache update (write_token: the kernel's layout), the ragged op over it.")
