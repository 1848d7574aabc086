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


def test_interpret_params_name_a_field_this_jax_lacks():
    pattern = r"jax \d.*InterpretParams has no field\(s\) \['no_such_field_in_any_jax'\]"
    with pytest.raises(compat.InterpreterLayoutError, match=pattern):
        compat.tpu_interpret_params(no_such_field_in_any_jax=1)


def test_interpret_params_record_races_instead_of_raising():
    import dataclasses

    from jax.experimental.pallas import tpu as pltpu

    params = compat.tpu_interpret_params()
    if "on_race" in {f.name for f in dataclasses.fields(pltpu.InterpretParams)}:
        assert params.on_race == "warn"  # jax >= 0.12 would raise before waivers apply
    else:
        assert not hasattr(params, "on_race")
