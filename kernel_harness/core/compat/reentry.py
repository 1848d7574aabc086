"""Part of :mod:`kernel_harness.core.compat`: the settings a traced call depended on beyond
its arguments, kept so that a call made later, outside the block that set them, runs as the
first did (a module of its own: it reads :mod:`.interpreter_ext`, which imports the package).
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator

import jax

from kernel_harness.core.compat import forced_tpu_interpret_mode, interpreter_ext
from kernel_harness.core.compat.forced_settings import params_in_force


def settings_reentry() -> Callable[[], contextlib.AbstractContextManager[None]]:
    """What re-enters, for a call made later outside the block that set them, the forced
    TPU interpreter settings, the harness's interpreter extensions, the abstract mesh and the
    default matmul precision in force now (a direct call of an implementation traces its
    kernels as the adapter's call did: :mod:`kernel_harness.run.kernel_eager`)."""
    params, precision = params_in_force(), jax.config.jax_default_matmul_precision
    extended = interpreter_ext.extensions_in_force()
    mesh = jax.sharding.get_abstract_mesh()  # a TPU chip named on a CPU host (flywheel's)

    @contextlib.contextmanager
    def again() -> Iterator[None]:
        with contextlib.ExitStack() as stack:
            if not mesh.empty:
                stack.enter_context(jax.sharding.use_abstract_mesh(mesh))
            if extended:
                stack.enter_context(interpreter_ext.tpu_interpreter_extensions())
            if params is not None:
                stack.enter_context(forced_tpu_interpret_mode(params))
            stack.enter_context(jax.default_matmul_precision(precision))
            yield

    return again
