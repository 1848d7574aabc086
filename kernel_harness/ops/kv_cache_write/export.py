"""The kv-cache write op's reference as embedded in an exported script: the ragged
kv-update's slots and copy and this op's layout and bits, verbatim (one source for the
family and the script)."""

from __future__ import annotations

import inspect
import textwrap

from kernel_harness.ops.kv_cache_write import reference as _reference
from kernel_harness.ops.kv_cache_write.cases import KvWriteCase
from kernel_harness.ops.paged_attention import kv_update, passes, sequences


def reference_source(case: KvWriteCase) -> str:
    """Code defining ``reference(x) -> {kv_cache, kv_cache_bits}`` for ``case``:
    :func:`~.reference.kv_cache_write` on the script's ``kv_cache``, ``k``, ``v`` and
    ``block_table`` with the case's lengths."""
    functions = (sequences.page_slots, passes.new_token_slots, kv_update.updated_cache,
                 _reference.write_token, _reference.cache_bits, _reference.kv_cache_write)
    return "\n\n".join([
        "from collections.abc import Callable, Iterable, Sequence",
        *(inspect.getsource(f) for f in functions),
        textwrap.dedent(f'''
            CACHE_LENS = {case.cache_lens!r}
            NEW_LENS = {case.new_lens!r}
            PAGE_SIZE = {case.page_size!r}


            def reference(x):
                """The cache after the write: the new tokens in their slots, the rest as
                it was; its values and its bits."""
                return kv_cache_write(x["kv_cache"], x["k"], x["v"], x["block_table"],
                                      CACHE_LENS, NEW_LENS, PAGE_SIZE)
        ''')])
