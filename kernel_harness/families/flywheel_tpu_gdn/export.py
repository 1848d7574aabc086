"""Standalone repro source for one flywheel-tpu-gdn or flywheel-tpu-kda case
(``kernel-harness export-repro``): the kernel under forced TPU interpret mode (the
harness's interpreter extensions and an abstract v6e mesh embedded), and the op's serving
reference (its functions embedded: the conv pre-stage, the gates, the token-serial
recurrence)."""

from __future__ import annotations

import inspect
import textwrap
from collections.abc import Callable

from kernel_harness.families.flywheel_tpu.linear_attention import DEVICE_KIND
from kernel_harness.ops.delta_rule import reference as op
from kernel_harness.ops.delta_rule import serving
from kernel_harness.records.export import (
    ExportSnippet,
    interpreter_source,
    tpu_interpreting_source,
)


def exporter(default_import: str) -> Callable[[serving.ServingCase], ExportSnippet]:
    """The family's ``export``: ``default_import`` binds ``kernel`` (the library's)."""
    return lambda case: _export(case, default_import)


def _export(case: serving.ServingCase, default_import: str) -> ExportSnippet:
    """The kernel on the case's arrays, and the reference (its functions embedded)."""
    bias = "jnp.asarray(x['conv_bias'])" if case.conv_bias else "None"
    run_kernel = interpreter_source() + "\n\n\n" + tpu_interpreting_source(
        1, extended=True) + "\n\n" + textwrap.dedent(f'''
        NAMES = ("qkv", "b", "a", "conv_state", "recurrent_state", "conv_weight")
        META = ("a_log", "dt_bias", "query_start_loc", "state_indices", "distribution",
                "seq_lens", "read_state_indices")
        UNTOUCHED = {[s for s in range(case.slots) if s not in case.write_slots]!r}


        def _bits(conv, rec):
            flat = np.concatenate([np.asarray(conv, np.float32)[UNTOUCHED].ravel(),
                                   np.asarray(rec, np.float32)[UNTOUCHED].ravel()])
            bits = flat.view(np.uint32)
            return np.stack([bits >> 16, bits & 0xFFFF]).astype(np.float32)


        def run_kernel(x):
            device = jax.sharding.AbstractDevice(device_kind={DEVICE_KIND!r}, num_cores=1,
                                                 platform="tpu")
            mesh = jax.sharding.AbstractMesh((1,), ("chip",), abstract_device=device,
                                             axis_types=(jax.sharding.AxisType.Auto,))
            args = [jnp.asarray(x[n]) for n in NAMES] + [{bias}] + [
                jnp.asarray(x[n]) for n in META]
            with interpreting(), jax.sharding.use_abstract_mesh(mesh):
                (conv, rec), out = kernel(*args, n_kq={case.key_heads}, n_v={case.value_heads},
                                          d_k={case.key_dim}, d_v={case.value_dim},
                                          kernel_size={case.kernel_size})
                out = jax.block_until_ready(out)
            return dict(out=np.asarray(out, np.float32), conv_state=np.asarray(conv),
                        recurrent_state=np.asarray(rec), untouched_bits=_bits(conv, rec))
    ''')
    fields = {f: getattr(case, f) for f in (
        "tokens", "slots", "key_heads", "value_heads", "key_dim", "value_dim", "kernel_size",
        "conv_bias", "lengths", "histories", "write_slots", "read_slots", "gate")}
    reference = "\n\n".join([
        "import math\nimport types\n\nServingCase = Arrays = dict  # the annotations",
        f"L2_EPS = {op.L2_EPS!r}",
        inspect.getsource(op.normalised), inspect.getsource(op.recurrence),
        inspect.getsource(serving.silu), inspect.getsource(serving.softplus),
        inspect.getsource(serving.pre_stage),
        "\n".join(inspect.getsource(serving.serving_reference).splitlines()),
        textwrap.dedent(f'''
        FIELDS = {fields!r}


        class _Case(types.SimpleNamespace):
            dim = property(lambda c: 2 * c.key_heads * c.key_dim + c.value_heads * c.value_dim)

            def starts(self):
                return np.concatenate([[0], np.cumsum(self.lengths)]).astype(np.int32)


        def reference(x):
            """The op's serving reference for this case (float64 pre-stage and gates, the
            token-serial recurrence in float32 at HIGHEST)."""
            case = _Case(**FIELDS)
            ref = serving_reference(case, x)
            ref["untouched_bits"] = _bits(ref["conv_state"], ref["recurrent_state"])
            return ref
        ''')])
    return ExportSnippet(
        default_import=default_import, run_kernel=run_kernel, reference=reference,
        outputs=("out", "conv_state", "recurrent_state", "untouched_bits"))


#: flywheel-tpu-gdn's ``export``.
export = exporter("from flywheel_tpu.linear_attention import fused_conv1d_gdn as kernel")
