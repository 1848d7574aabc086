"""What can go wrong between the kernel count and the run
(:mod:`kernel_harness.run.kernel_count`), each error saying what to do."""

from __future__ import annotations


class ClosedOverTracer(RuntimeError):
    """The implementation's program, traced once to count it and then run, left a traced
    value inside a function it defines (a ``custom_vjp`` backward closing over a traced
    argument): that function cannot run outside the trace it was made in."""

    @classmethod
    def explain(cls, error: BaseException) -> ClosedOverTracer | None:
        """The clear error for ``error`` where it is a tracer leaked from the count's trace
        (else None)."""
        text = str(error)
        if type(error).__name__ != "UnexpectedTracerError" or "kernel_count.py" not in text:
            return None
        first = text.strip().splitlines()[0] if text.strip() else ""
        return cls(
            "the implementation defines a function that closes over a traced argument (most "
            "often a custom_vjp backward using an array of the call it does not receive as a "
            "residual): the harness traces an implementation once, counts its kernels and "
            "runs that same program, so a closure over a value of that trace cannot run "
            "later. Pass the value as an argument (a primal input of the custom_vjp, or "
            "through fwd's residuals) or use jax.closure_convert. jax said: " + first)


class CountUnavailable(RuntimeError):
    """The adapter made no call of the implementation and no earlier example of the same
    configuration was counted: the example's kernels are unknown (never taken as none)."""
