"""spec.export: the source pieces exported scripts share. The interpreter extensions go
into a script verbatim, less their one harness import; ``interpreting()`` enters them only
when asked; a module's source loses its ``__future__`` line."""

from __future__ import annotations

from kernel_harness.core.compat import interpreter_ext
from kernel_harness.families.tpu_inference import loader as tpu_inference_loader
from kernel_harness.records.export import (
    interpreter_source,
    module_source,
    tpu_interpreting_source,
)


def test_the_embedded_extensions_are_the_harness_module_less_its_import() -> None:
    text = interpreter_source()
    assert "import kernel_harness" not in text and "from kernel_harness" not in text
    assert interpreter_ext.tpu_interpreter_extensions.__doc__ in text
    assert "from __future__" not in text
    compile(text, "<extensions>", "exec")


def test_interpreting_enters_the_extensions_only_when_asked() -> None:
    plain, extended = tpu_interpreting_source(2), tpu_interpreting_source(2, extended=True)
    assert "tpu_interpreter_extensions()" not in plain
    assert "stack.enter_context(tpu_interpreter_extensions())" in extended
    for text in (plain, extended):
        compile(text, "<interpreting>", "exec")
        assert "{cores: 2}" in text.replace("**", "")


def test_module_source_drops_the_future_import_only() -> None:
    text = module_source(tpu_inference_loader)
    assert "from __future__" not in text and "def kernel_module(" in text
