"""Candidate toy kernels for the gate and golden tests (importable as ``--impl`` targets)."""

from tests.helpers.toy_family import softplus


def slightly_worse(x):
    """Relative error 3e-6: inside the toy tolerance (1e-5), far above the baseline (~1e-8)."""
    return softplus(x) * (1 + 3e-6)


def within_noise(x):
    """Relative error 5e-7: below the gate's floor x factor, so not a regression."""
    return softplus(x) * (1 + 5e-7)


def _variant(factor, *, crash=False):
    """A factory of planted bugs: its products' ``__qualname__`` is ``_variant.<locals>.planted``,
    so a report can name them only by the ``--impl`` path they were given as."""
    def planted(x):
        if crash:
            raise NotImplementedError("planted crash")
        return softplus(x) * factor
    return planted


off_by_a_hundredth = _variant(1 + 1e-2)
crashes_always = _variant(1.0, crash=True)


def off_by_a_thousandth(x):
    """Relative error 1e-3: far outside the toy tolerance (1e-5): must fail."""
    return softplus(x) * (1 + 1e-3)


def wrong_at_length_8(x):
    """A planted bug only some cases reach: off by 1% on the last element when length is 8
    (a one-example run that draws length 4 passes it)."""
    y = softplus(x)
    return y.at[-1].multiply(1.01) if x.shape[0] == 8 else y


def wrong_at_length_4(x):
    """The same bug at length 4 only: it passes every case ``wrong_at_length_8`` fails."""
    y = softplus(x)
    return y.at[0].multiply(0.99) if x.shape[0] == 4 else y


def crashes_at_length_8(x):
    """Raises on length 8 only (a crash the search finds and the corpus keeps)."""
    if x.shape[0] == 8:
        raise NotImplementedError("length 8 is not supported")
    return softplus(x)


def wrong_when_first_above_1(x):
    """A planted bug that only some data draws expose: wrong (x 1.01) when ``x[0] > 1``."""
    import jax.numpy as jnp

    return jnp.where(x[0] > 1.0, softplus(x) * 1.01, softplus(x))


_SLOW_FAILED: list[bool] = []


def slow_wrong_at_length_8(x):
    """``wrong_at_length_8``, and 2 s per call once it has failed in this process: a run is
    still shrinking its failure when a test's signal comes (the interrupt tests; with 0.3 s
    a call throughout, a loaded CI machine once delivered the signal after a 6.4 s shrink
    had ended, and the run finished instead of being interrupted). Before its first
    failure 0.02 s a call: the slowness matters only once the signal is on its way."""
    import time

    time.sleep(2.0 if _SLOW_FAILED else 0.02)
    if x.shape[0] == 8:
        _SLOW_FAILED.append(True)
    return wrong_at_length_8(x)


def wrong_at_length_8_and_stops_redis(x):
    """``wrong_at_length_8`` that, at its first failing call, shuts down the Redis server on
    port ``$KH_TEST_STOP_REDIS_PORT`` (a corpus outage right before the first failure is
    stored: the outage tests)."""
    import os

    port = os.environ.get("KH_TEST_STOP_REDIS_PORT")
    if port and x.shape[0] == 8:
        import redis

        client = redis.Redis(host="127.0.0.1", port=int(port), socket_connect_timeout=1)
        try:
            client.shutdown(nosave=True)
        except redis.ConnectionError:
            pass  # already down (a later call), or shutting down as it answered
        del os.environ["KH_TEST_STOP_REDIS_PORT"]
    return wrong_at_length_8(x)
