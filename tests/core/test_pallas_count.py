"""The jaxpr walker counting Pallas kernels (core/compat/pallas_count.py): kernels found under
every higher-order primitive, a cond counting its poorest branch, plain XLA counted as none
with what it ran instead, and an unknown layout refused loudly."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax.experimental import pallas as pl

from kernel_harness.core import compat
from kernel_harness.core.compat import pallas_count


def _add_one(x_ref, o_ref):
    o_ref[...] = x_ref[...] + 1.0


def kernel(x):
    return pl.pallas_call(_add_one, out_shape=jax.ShapeDtypeStruct(x.shape, x.dtype),
                          interpret=True)(x)


X = jax.ShapeDtypeStruct((8, 128), jnp.float32)


def count(fn, *args):
    return pallas_count.pallas_kernels(jax.make_jaxpr(fn)(*(args or (X,))))


@jax.custom_vjp
def vjp_kernel(x):
    return kernel(x)


vjp_kernel.defvjp(lambda x: (kernel(x), None), lambda _, g: (kernel(g),))


@jax.custom_jvp
def jvp_kernel(x):
    return kernel(x)


jvp_kernel.defjvp(lambda primals, tangents: (kernel(primals[0]), tangents[0]))


def test_a_bare_kernel_and_plain_xla():
    assert count(kernel) == 1
    assert count(lambda x: kernel(kernel(x))) == 2
    assert count(jax.nn.softmax) == 0
    top = pallas_count.top_primitives(jax.make_jaxpr(jax.nn.softmax)(X), n=20)
    assert {"exp", "reduce_max", "reduce_sum"} <= set(top)
    assert "pallas_call" not in " ".join(pallas_count.top_primitives(
        jax.make_jaxpr(lambda x: kernel(jnp.exp(x)))(X)))


@pytest.mark.parametrize("wrap", [
    pytest.param(lambda f: jax.jit(f), id="jit"),
    pytest.param(lambda f: jax.vmap(f), id="vmap"),
    pytest.param(lambda f: lambda x: jax.lax.scan(lambda c, _: (f(c), None), x, None,
                                                  length=3)[0], id="scan"),
    pytest.param(lambda f: lambda x: jax.lax.while_loop(lambda c: c[0, 0] < 5, f, x),
                 id="while"),
    pytest.param(lambda f: lambda x: jax.lax.cond(x[0, 0] > 0, f, f, x), id="cond"),
    pytest.param(lambda f: jax.checkpoint(f), id="checkpoint"),
    pytest.param(lambda f: lambda x: jax.jit(jax.jit(f))(x), id="jit-in-jit"),
])
def test_kernels_inside_higher_order_primitives_are_found(wrap):
    arg = jax.ShapeDtypeStruct((2, 8, 128), jnp.float32)
    assert count(wrap(kernel), arg if "vmap" in repr(wrap) else X) == 1


def test_vmap_of_a_kernel():
    assert count(jax.vmap(kernel), jax.ShapeDtypeStruct((2, 8, 128), jnp.float32)) == 1


def test_custom_vjp_and_custom_jvp_bodies_and_rules():
    assert count(vjp_kernel) == 1
    assert count(jvp_kernel) == 1
    # The backward is traced once jax.vjp's function is: the bwd rule's kernel is there.
    box = {}

    def forward(x):
        out, vjp = jax.vjp(vjp_kernel, x)
        box["bwd"] = jax.make_jaxpr(vjp)(X)
        return out

    jax.make_jaxpr(forward)(X)
    assert pallas_count.pallas_kernels(box["bwd"]) == 1


def test_shard_map_body():
    mesh = jax.sharding.Mesh(np.array(jax.devices()[:1]), ("d",))
    spec = jax.sharding.PartitionSpec("d")
    fn = compat.shard_map_unchecked(kernel, mesh=mesh, in_specs=(spec,), out_specs=spec)
    assert count(fn) == 1


def test_a_cond_counts_its_branch_with_the_fewest_kernels():
    """A kernel in one branch only may not run: a fallback behind a traced predicate."""
    assert count(lambda x: jax.lax.cond(x[0, 0] > 0, kernel, jax.nn.softmax, x)) == 0
    assert count(lambda x: jax.lax.cond(x[0, 0] > 0, kernel, lambda y: kernel(kernel(y)),
                                        x)) == 1


def test_an_unknown_layout_is_a_loud_error(monkeypatch):
    """A higher-order primitive whose body the walker cannot find is never counted as 0."""
    monkeypatch.setattr(pallas_count, "HIGHER_ORDER", pallas_count.HIGHER_ORDER | {"exp"})
    with pytest.raises(pallas_count.KernelCountLayoutError, match="'exp' carries no jaxpr"):
        count(jnp.exp)


def _host_body(x_ref, o_ref):
    v = x_ref[...]
    jax.debug.print("{}", v[0, 0])
    jax.debug.callback(lambda a: None, v)

    @pl.when(v[0, 0] > 0)
    def _():
        o_ref[...] = jax.pure_callback(lambda a: a, jax.ShapeDtypeStruct(v.shape, v.dtype), v)


def host_kernel(x):
    return pl.pallas_call(_host_body, out_shape=jax.ShapeDtypeStruct(x.shape, x.dtype),
                          interpret=True)(x)


def _body_names(fn, arg=X):
    return [(op.name, op.results) for op in pallas_count.kernel_body_ops(jax.make_jaxpr(fn)(arg))]


def test_the_ops_inside_kernel_bodies_are_found_with_what_they_return():
    """A kernel's body (its ``pl.when`` branches included) is walked wherever the kernel
    sits; a debug print or callback returns nothing to the kernel, a pure_callback does."""
    names = _body_names(host_kernel)
    assert ("pure_callback", 1) in names
    assert ("debug_print", 0) in names and ("debug_callback", 0) in names
    assert ("add", 1) in _body_names(kernel) and not any(
        n == "pure_callback" for n, _ in _body_names(kernel))
    assert _body_names(jnp.exp) == []  # no kernel: nothing inside one
    for wrap in (jax.jit, lambda f: lambda x: jax.lax.cond(x[0, 0] > 0, f, jnp.exp, x),
                 lambda f: lambda x: jax.lax.scan(lambda c, _: (f(c), None), x, None,
                                                  length=2)[0]):
        assert ("pure_callback", 1) in _body_names(wrap(host_kernel))
    batched = jax.ShapeDtypeStruct((2, 8, 128), jnp.float32)
    assert ("add", 1) in _body_names(jax.vmap(kernel), batched)
