"""Backend selection: explicit errors, never a quiet substitute."""

import pytest

from kernel_harness.core import compat
from kernel_harness.core.backends import BackendUnavailable, availability, resolve_backend


def test_unknown_backend_names_the_choices():
    with pytest.raises(ValueError, match="unknown backend 'cuda'; choose one of: auto, interpret"):
        resolve_backend("cuda")


@pytest.mark.parametrize("name", ["tpu", "gpu"])
def test_missing_accelerator_is_a_clear_error(name):
    if availability()[name] is None:
        pytest.skip(f"a {name} is attached here")
    with pytest.raises(BackendUnavailable, match=f"backend '{name}' is not available: no"):
        resolve_backend(name)


def test_auto_says_what_it_chose():
    b = resolve_backend("auto")
    expected = "tpu" if availability()["tpu"] is None else "interpret"
    assert b.name == expected and b.note.startswith("auto:")


def test_interpret_backends_pass_the_right_interpret_value():
    assert resolve_backend("interpret").pallas_interpret() is True
    params = resolve_backend("tpu-interpret").pallas_interpret()
    assert params.detect_races is True
    assert params.uninitialized_memory == "nan"
    assert params.num_cores_or_threads == 2


def test_interpret_params_drop_unknown_fields():
    params = compat.tpu_interpret_params(no_such_field_in_any_jax=1)
    assert not hasattr(params, "no_such_field_in_any_jax")
