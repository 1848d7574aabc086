"""Apply every independent mutant to its module's source and compile it (no kernel run)."""
import importlib

from kernel_harness.records.mutant import patched_source

for fam in ("deltanet_tpu_gdn2", "flywheel_tpu_kv_cache_write", "flywheel_tpu_rotary"):
    mod = importlib.import_module(f"tests.mutants_independent.{fam}_mutants")
    for m in mod.MUTANTS:
        origin, src = patched_source(m)
        compile(src, str(origin), "exec")
        print(fam, m.name, "ok")
