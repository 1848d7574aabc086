"""Mutant catalog for gpu-norm: realistic bugs planted in the installed Pallas GPU
``layer_norm`` and ``rms_norm`` sources.

``kernel-harness mutate gpu-norm`` loads each mutated copy of
``jax.experimental.pallas.ops.gpu.layer_norm`` (or ``rms_norm``) in place of the original
and runs the family's properties; every mutant must be killed. They cover eps placement,
the variance formula and its column mask, the mean terms of the dx kernels, the row and
column bounds of the dweight/dbias kernel, and xhat vs x in dweight.
"""

from __future__ import annotations

from kernel_harness.records.mutant import CI, Mutant, edits_of

LN = "jax.experimental.pallas.ops.gpu.layer_norm"
RMS = "jax.experimental.pallas.ops.gpu.rms_norm"


_ln = edits_of(LN)
_rms = edits_of(RMS)


MUTANTS: list[Mutant] = [
    _ln("ln-eps-outside-sqrt", "layer_norm forward: rstd = 1 / (sqrt(var) + eps)",
        "rstd = 1 / jnp.sqrt(var + eps)", "rstd = 1 / (jnp.sqrt(var) + eps)"),
    _ln("ln-variance-uncentred",
        "layer_norm forward: the variance loop squares x instead of x - mean (E[x^2])",
        "    a = jnp.where(mask, a - mean, 0.)\n    return acc + a * a", "    return acc + a * a"),
    _ln("ln-one-pass-variance",
        "layer_norm forward: variance as E[x^2] - mean^2 in float32 (cancels for rows far "
        "from 0)", "    a = jnp.where(mask, a - mean, 0.)\n    return acc + a * a\n\n"
        "  var = lax.fori_loop(\n      0,\n      pl.cdiv(n_col, block_size),\n"
        "      var_body,\n      init_val=jnp.zeros(block_size),\n  ).sum()\n" "  var /= n_col\n",
        "    return acc + a * a\n\n"
        "  var = lax.fori_loop(\n      0,\n      pl.cdiv(n_col, block_size),\n"
        "      var_body,\n      init_val=jnp.zeros(block_size),\n  ).sum()\n"
        "  var = var / n_col - mean * mean\n", tags=CI),
    _ln("ln-var-mask-dropped",
        "layer_norm forward: the variance loop drops its column mask, so the padding lanes "
        "of a partial block add (0 - mean)^2", "a = jnp.where(mask, a - mean, 0.)", "a = a - mean"),
    _ln("ln-dx-drops-mean-term", "layer_norm dx: the mean(weight * do) term is dropped",
        "da = (wdout - (a_hat * mean1 + mean2)) * rstd_ref[...]",
        "da = (wdout - a_hat * mean1) * rstd_ref[...]", tags=CI),
    _ln("ln-dx-drops-projection",
        "layer_norm dx: the xhat * mean(xhat * weight * do) term is dropped",
        "da = (wdout - (a_hat * mean1 + mean2)) * rstd_ref[...]",
        "da = (wdout - mean2) * rstd_ref[...]"),
    _ln("ln-dx-mean-over-block",
        "layer_norm dx: the row means divide by the padded block width instead of n",
        "  mean1 = mean1.sum() / n_col\n  mean2 = mean2.sum() / n_col",
        "  mean1 = mean1.sum() / block_size\n  mean2 = mean2.sum() / block_size"),
    _ln("ln-dwdb-drops-partial-row-block",
        "layer_norm dweight/dbias: the row loop runs m // block_m blocks, dropping a "
        "partial last block of rows", "pl.cdiv(m, block_m)", "m // block_m", tags=CI),
    _ln("ln-dweight-uses-x", "layer_norm dweight sums do * x instead of do * xhat",
        "dw_acc_ref + (dout * a_hat).sum(axis=0)", "dw_acc_ref + (dout * a).sum(axis=0)"),
    _ln("ln-dwdb-row-mask-off-by-one",
        "layer_norm dweight/dbias: the row mask keeps one row past m", "row_mask = row_idx < m",
        "row_mask = row_idx <= m"),
    _ln("ln-mean-mask-off-by-one",
        "layer_norm forward: the mean loop's column mask keeps one lane past n",
        "mask = col_idx < n_col", "mask = col_idx <= n_col", occurrence=1),
    _rms("rms-eps-outside-sqrt", "rms_norm forward: rstd = 1 / (sqrt(mean(x^2)) + eps)",
         "rstd = 1 / jnp.sqrt(var + eps)", "rstd = 1 / (jnp.sqrt(var) + eps)", tags=CI),
    _rms("rms-mean-over-block",
         "rms_norm forward: mean(x^2) divides by the padded block width instead of n",
         "  var /= n_col\n", "  var /= block_size\n"),
    _rms("rms-dx-drops-projection",
         "rms_norm dx: the xhat * mean(xhat * weight * do) term is dropped",
         "da = (wdout - (a_hat * c1)) * rstd_ref[...]", "da = wdout * rstd_ref[...]", tags=CI),
    _rms("rms-dx-rstd-once", "rms_norm dx: the final rstd factor is dropped",
         "da = (wdout - (a_hat * c1)) * rstd_ref[...]", "da = wdout - (a_hat * c1)"),
    _rms("rms-dweight-uses-x", "rms_norm dweight sums do * x instead of do * xhat",
         "a_hat = a * rstd[:, None]", "a_hat = a"),
]
