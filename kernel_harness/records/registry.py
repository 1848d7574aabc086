"""The registry of families: built-in, out-of-tree, found by name, imported lazily.

Three sources, all treated alike by every command and by the pytest properties:

- the built-in families (:data:`BUILTIN_FAMILIES`);
- installed packages declaring an entry point in the group ``kernel_harness.families``
  (``name = "package.module:FAMILY"``; see ``examples/rmsnorm_family``);
- modules named with ``--family-module MODULE`` (CLI), ``--kh-family-module`` (pytest),
  ``family-modules`` in the user's ``[tool.kernel-harness]`` (:mod:`.config`) or
  ``$KERNEL_HARNESS_FAMILY_MODULES`` (comma-separated), registered by
  :func:`load_family_modules`: every module-level :class:`Family` counts. Loading one
  adds it to that variable, so child processes (``shard``, ``mutate``) see it too.

A name declared twice (an out-of-tree family named like a built-in, or two
packages) is an error naming both, never a silent override.
"""

from __future__ import annotations

import importlib
import importlib.metadata
import os
import sys
from collections.abc import Sequence
from pathlib import Path

from kernel_harness.core.errors import UsageError
from kernel_harness.records.family import Family

#: Entry point group through which installed packages declare families.
ENTRY_POINT_GROUP = "kernel_harness.families"

#: Environment variable naming family modules (comma-separated), inherited by children.
FAMILY_MODULES_ENV = "KERNEL_HARNESS_FAMILY_MODULES"


class UnknownFamily(KeyError):
    """No family of that name is registered."""

    def __str__(self) -> str:
        return str(self.args[0])


#: Built-in families: name -> "module:attribute" of its Family (imported lazily).
BUILTIN_FAMILIES: dict[str, str] = {
    "splash": "kernel_harness.families.splash.family:FAMILY",
    "hstu": "kernel_harness.families.hstu.family:FAMILY",
    "flash": "kernel_harness.families.flash.family:FAMILY",
    "sdpa": "kernel_harness.families.sdpa.family:FAMILY",
    "torch-sdpa": "kernel_harness.families.torch_sdpa.family:FAMILY",
    "gpu-mha": "kernel_harness.families.gpu_mha.family:FAMILY",
    "gpu-decode": "kernel_harness.families.gpu_decode.family:FAMILY",
    "gpu-paged": "kernel_harness.families.gpu_paged.family:FAMILY",
    "megablox-gmm": "kernel_harness.families.megablox_gmm.family:FAMILY",
    "gpu-norm": "kernel_harness.families.gpu_norm.family:FAMILY",
    "gpu-softmax": "kernel_harness.families.gpu_softmax.family:FAMILY",
    "tpu-ragged-paged": "kernel_harness.families.tpu_ragged_paged.family:FAMILY",
    "tpu-paged": "kernel_harness.families.tpu_paged.family:FAMILY",
    "tpu-inference-quantized-matmul": "kernel_harness.families.tpu_inference_qmm.family:FAMILY",
    "tpu-inference-blockwise-quantized-matmul":
        "kernel_harness.families.tpu_inference_bqmm.family:FAMILY",
    "tpu-inference-rpa-v3": "kernel_harness.families.tpu_inference_rpa_v3.family:FAMILY",
    "tpu-inference-rpa-v3-hd64": "kernel_harness.families.tpu_inference_rpa_hd64.family:FAMILY",
    "tpu-inference-mla-v2": "kernel_harness.families.tpu_inference_mla_v2.family:FAMILY",
    "tpu-all-gather": "kernel_harness.families.tpu_all_gather.family:FAMILY",
    "tpu-inference-all-gather-matmul":
        "kernel_harness.families.tpu_inference_agmm.family:FAMILY",
    "tpu-inference-fused-moe":
        "kernel_harness.families.tpu_inference_fused_moe.family:FAMILY",
    "flywheel-tpu-kv-cache-write":
        "kernel_harness.families.flywheel_tpu_kv_cache_write.family:FAMILY",
    "flywheel-tpu-rotary": "kernel_harness.families.flywheel_tpu_rotary.family:FAMILY",
    "flywheel-tpu-flash": "kernel_harness.families.flywheel_tpu_flash.family:FAMILY",
    "flywheel-tpu-varlen": "kernel_harness.families.flywheel_tpu_varlen.family:FAMILY",
    "flywheel-tpu-paged-decode":
        "kernel_harness.families.flywheel_tpu_paged_decode.family:FAMILY",
    "flywheel-tpu-varlen-paged":
        "kernel_harness.families.flywheel_tpu_varlen_paged.family:FAMILY",
    "flywheel-tpu-ragged-append":
        "kernel_harness.families.flywheel_tpu_ragged_append.family:FAMILY",
    "flywheel-tpu-gdn": "kernel_harness.families.flywheel_tpu_gdn.family:FAMILY",
    "flywheel-tpu-kda": "kernel_harness.families.flywheel_tpu_kda.family:FAMILY",
    "deltanet-tpu-gdn2": "kernel_harness.families.deltanet_gdn2.family:FAMILY",
    "deltanet-tpu-gdn2-bf16": "kernel_harness.families.deltanet_gdn2_bf16.family:FAMILY",
    "gdn2-pallas": "kernel_harness.families.gdn2_pallas.family:FAMILY",
}

# Families registered by load_family_modules (explicit calls only; empty at import).
_from_modules: dict[str, str] = {}
_loaded_modules: set[str] = set()
# Family objects handed over directly (register_family) that no module attribute holds:
# found by name in this process only.
_objects: dict[str, Family] = {}


def _env_modules() -> list[str]:
    return [m.strip() for m in os.environ.get(FAMILY_MODULES_ENV, "").split(",") if m.strip()]


def _entry_point_families() -> dict[str, str]:
    found: dict[str, str] = {}
    for ep in importlib.metadata.entry_points(group=ENTRY_POINT_GROUP):
        if ep.name in found and found[ep.name] != ep.value:
            raise UsageError(
                f"family {ep.name!r} is declared twice in entry point group "
                f"{ENTRY_POINT_GROUP!r}: {found[ep.name]} and {ep.value}"
            )
        found[ep.name] = ep.value
    return found


def _registered() -> dict[str, str]:
    """name -> target over every source, refusing a name declared twice."""
    pending = [m for m in _env_modules() if m not in _loaded_modules]
    if pending:
        load_family_modules(pending)
    merged = dict(BUILTIN_FAMILIES)
    for source, extra in (("entry point", _entry_point_families()),
                          ("--family-module", _from_modules)):
        for name, target in extra.items():
            if name in merged and merged[name] != target:
                raise UsageError(
                    f"family {name!r} from {source} {target} clashes with the family of the "
                    f"same name at {merged[name]}; rename one of them"
                )
            merged[name] = target
    return merged


def family_names() -> list[str]:
    """Names of the registered families: built-ins first, then out-of-tree ones."""
    return list(_registered())


def family_target(name: str) -> str:
    """``module:attribute`` of the registered family ``name`` (child processes import it)."""
    try:
        return _registered()[name]
    except KeyError:
        raise UnknownFamily(
            f"unknown family {name!r}; known families: {', '.join(_registered())}"
        ) from None


def import_target(target: str) -> Family:
    """Imports the :class:`Family` at ``module:attribute``; anything else (a module that
    does not import, whatever it raises; a missing attribute; not a Family) is a
    UsageError naming the target, so one broken plugin fails only where it is asked for."""
    module, _, attr = target.partition(":")
    try:
        obj = getattr(importlib.import_module(module), attr)
    except Exception as e:  # noqa: BLE001 - any import failure is the plugin's, to be named
        raise UsageError(f"family at {target} does not import: {type(e).__name__}: {e}") from e
    if not isinstance(obj, Family):
        raise UsageError(f"{target} is a {type(obj).__name__}, not a kernel_harness Family")
    return obj


def get_family(name: str) -> Family:
    """The registered family ``name``; an unknown name is :class:`UnknownFamily`."""
    if name in _objects:
        return _objects[name]
    return import_target(family_target(name))


def importable_families() -> tuple[list[Family], dict[str, str]]:
    """Every registered family that imports, and ``{name: the import error}`` of those
    that do not (an installed plugin whose module is missing): ``list`` and an
    every-family check show both, so one broken plugin does not hide the others."""
    found, broken = [], {}
    for name in family_names():
        try:
            found.append(get_family(name))
        except UsageError as e:
            broken[name] = str(e)
    return found, broken


def _module_attribute(family: Family) -> str | None:
    """``module:attribute`` of a module-level variable holding ``family``, if any."""
    for module_name, module in list(sys.modules.items()):
        try:
            items = list(vars(module).items())
        except TypeError:
            continue
        for attr, value in items:
            if value is family and not attr.startswith("_"):
                return f"{module_name}:{attr}"
    return None


def register_family(family: Family) -> str:
    """Registers a :class:`Family` object handed over directly (``testing.check(FAMILY)``)
    and returns its name. A module-level family is registered through its module, so a
    printed repro command finds it (``--family-module``); one defined elsewhere is known to
    this process only. A different family under a registered name is a UsageError."""
    if not isinstance(family, Family):
        raise UsageError(f"{family!r} is a {type(family).__name__}, not a kernel_harness Family")
    name = family.name
    try:
        known = get_family(name)
    except (UnknownFamily, UsageError):
        known = None
    if known is not None:
        if known is not family and (known.kernel is not family.kernel
                                    or known.reference is not family.reference):
            raise UsageError(f"family {name!r} is already registered as a different family; "
                             "rename one of them")
        return name
    target = _module_attribute(family)
    if target is not None and name not in BUILTIN_FAMILIES:
        load_family_modules([target.partition(":")[0]])
    else:
        _objects[name] = family
    return name


def load_family_modules(modules: Sequence[str], *, search_path: Path | None = None,
                        origin: str = "--family-module") -> list[str]:
    """Imports each module (the working directory is importable, as for ``--impl``; and
    ``search_path`` first, e.g. the folder of the user's pyproject.toml, also for child
    processes through ``$PYTHONPATH``) and registers every module-level :class:`Family`
    in it; returns the names registered. A module that does not import or declares no
    Family is a UsageError naming ``origin`` (the flag or configuration key)."""
    if search_path is not None:
        folder = str(search_path)
        if folder not in sys.path:
            sys.path.insert(0, folder)
        inherited = [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p]
        if folder not in inherited:
            os.environ["PYTHONPATH"] = os.pathsep.join([folder, *inherited])
    names = []
    for module_name in modules:
        if os.getcwd() not in sys.path:
            sys.path.insert(0, os.getcwd())
        try:
            module = importlib.import_module(module_name)
        except Exception as e:  # noqa: BLE001 - any import failure is the user's to see
            raise UsageError(
                f"{origin} {module_name}: cannot import it: {type(e).__name__}: {e}"
            ) from None
        found = {attr: obj for attr, obj in vars(module).items() if isinstance(obj, Family)}
        if not found:
            raise UsageError(
                f"{origin} {module_name}: the module defines no kernel_harness Family "
                "at module level (e.g. FAMILY = Family(...))"
            )
        own = 0
        for attr, family in found.items():
            target = f"{module_name}:{attr}"
            builtin = BUILTIN_FAMILIES.get(family.name)
            if builtin is not None and builtin != target:
                if get_family(family.name) is family:
                    continue  # the built-in itself, imported there: not registered twice
                raise UsageError(
                    f"{origin} {module_name}: family {family.name!r} clashes with the "
                    f"built-in family of that name; rename it"
                )
            _from_modules[family.name] = target
            names.append(family.name)
            own += 1
        if not own:
            raise UsageError(f"{origin} {module_name}: the module declares no Family of its "
                             f"own (it imports the built-in {', '.join(sorted(found))})")
        _loaded_modules.add(module_name)
        if module_name not in _env_modules():
            os.environ[FAMILY_MODULES_ENV] = ",".join([*_env_modules(), module_name])
    return names


def family_module_args(name: str) -> list[str]:
    """``["--family-module", MODULE]`` when family ``name`` came from a module (so a printed
    repro command finds it again); ``[]`` for built-in and entry-point families."""
    if name in _objects:
        return []
    target = _from_modules.get(name)
    return [] if target is None else ["--family-module", target.partition(":")[0]]
