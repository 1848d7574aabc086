"""Floor 1, core: cases, backends, compat (the one place for jax-version internals),
comparing (measuring) and tolerances (judging), errors."""
