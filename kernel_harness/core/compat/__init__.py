"""The one place that knows which jax version spells a Pallas API which way.

Everything version-specific (TPU interpret parameters, ``shard_map``'s home, lowering
entry points) is looked up here so the rest of the harness stays version-agnostic.
"""

from __future__ import annotations

import contextlib
import dataclasses
import threading
from collections.abc import Iterator
from typing import Any

import jax
import numpy as np

from kernel_harness.core.compat.forced_settings import forcing
from kernel_harness.core.frames import is_plumbing
from kernel_harness.core.interpret_log import BufferAccess, BufferAllocation, TpuInterpretLog

JAX_VERSION: tuple[int, ...] = tuple(int(p) for p in jax.__version__.split(".")[:3] if p.isdigit())


class InterpreterLayoutError(RuntimeError):
    """The installed jax's TPU interpreter is not laid out the way this harness knows
    (a private module, class, method or ``InterpretParams`` field it relies on moved).

    Raised instead of running without race detection or NaN-filled memory: the
    message names the jax version and the missing piece.
    """

    def __init__(self, missing: str):
        super().__init__(
            f"jax {jax.__version__}: TPU interpret mode's internals are not laid out as "
            f"kernel_harness expects ({missing}); the harness knows jax 0.10.x and 0.12.x. "
            f"Adapt kernel_harness/core/compat/ to this jax, or use --backend interpret."
        )
        self.missing = missing


#: ``InterpretParams`` fields the diagnostics rely on (NaN-filled memory, race detection,
#: grid-point recording, the shuffled parallel order). A jax lacking one is an error.
REQUIRED_INTERPRET_FIELDS: tuple[str, ...] = (
    "uninitialized_memory", "detect_races", "random_seed", "grid_point_recorder",
    "dma_execution_mode",
)


def tpu_interpret_params(**overrides: Any) -> Any:
    """Returns ``pltpu.InterpretParams`` with the harness's diagnostic defaults.

    NaN-filled uninitialized memory, race detection, a shuffled parallel grid
    order and two simulated cores; where this jax's race detector can raise
    (``on_race``, jax >= 0.12) it is told to record (``"warn"``) so the harness's
    own analysis and waivers decide. A field this jax lacks (a required one, or
    one passed in ``overrides``) is an :class:`InterpreterLayoutError` naming it.
    """
    from jax.experimental.pallas import tpu as pltpu

    wanted: dict[str, Any] = {
        "uninitialized_memory": "nan",
        "detect_races": True,
        "random_seed": 0,
        # A stable module-level callable, so compile caches keyed on the params stay valid.
        "grid_point_recorder": record_grid_point,
        "num_cores_or_threads": 2,
        # Only the shuffling of "parallel" grid dimensions is asked for.
        "dma_execution_mode": "on_wait",
    }
    known = {f.name for f in dataclasses.fields(pltpu.InterpretParams)}
    if "on_race" in known:
        wanted["on_race"] = "warn"
    wanted.update(overrides)
    if "num_cores_or_threads" not in known and "num_cores_per_device" in known:
        wanted["num_cores_per_device"] = wanted.pop("num_cores_or_threads")
    missing = sorted((set(wanted) | set(REQUIRED_INTERPRET_FIELDS)) - known)
    if missing:
        raise InterpreterLayoutError(f"InterpretParams has no field(s) {missing}")
    return pltpu.InterpretParams(**wanted)


@contextlib.contextmanager
def forced_tpu_interpret_mode(params: Any) -> Iterator[None]:
    """Traces every ``pallas_call`` here in TPU interpret mode (see :mod:`.forced_settings`)."""
    from jax.experimental.pallas import tpu as pltpu

    with forcing(params), pltpu.force_tpu_interpret_mode(params):
        yield


def reset_tpu_interpret_state() -> None:
    """Clears TPU interpret mode's global state; needed after any failure."""
    from jax.experimental.pallas import tpu as pltpu

    pltpu.reset_tpu_interpret_mode_state()


def set_cpu_device_count(n: int) -> None:
    """Asks for ``n`` host CPU devices; only effective before jax initializes its backends."""
    try:
        jax.config.update("jax_num_cpu_devices", n)
    except AttributeError:  # older jax: only the XLA flag exists
        import os

        flags = os.environ.get("XLA_FLAGS", "")
        os.environ["XLA_FLAGS"] = f"{flags} --xla_force_host_platform_device_count={n}".strip()


def shard_map_unchecked(f: Any, *, mesh: Any, in_specs: Any, out_specs: Any) -> Any:
    """``shard_map`` without its replication/varying-axes check (``check_vma`` in new
    jax, ``check_rep`` in old): ``pallas_call`` outputs carry no such annotations."""
    import inspect

    sm = shard_map()
    params = inspect.signature(sm).parameters
    flag = next((n for n in ("check_vma", "check_rep") if n in params), None)
    extra = {flag: False} if flag else {}
    return sm(f, mesh=mesh, in_specs=in_specs, out_specs=out_specs, **extra)


def shard_map() -> Any:
    """``jax.shard_map`` where it exists, else the experimental one."""
    if hasattr(jax, "shard_map"):
        return jax.shard_map
    from jax.experimental.shard_map import shard_map as experimental_shard_map

    return experimental_shard_map


# --- TPU interpret mode: access recording (diagnostics.py analyses what is recorded) -------------


_LOG_LOCK = threading.RLock()
_ACTIVE_LOGS: list[TpuInterpretLog] = []
_CURRENT_GRID_POINT: dict[int, tuple[int, ...]] = {}
_STATE_INDEX: dict[int, int] = {}
#: Serial number of the latest interpreted pallas_call (each has its own simulator state).
_SERIAL = [0]
_PATCHES: list[tuple[Any, str, Any]] = []


def record_grid_point(*args: Any) -> Any:
    """The ``grid_point_recorder`` the harness installs: remembers which grid point
    each simulated core runs (jax 0.10 passes ``(token, grid_point, core)`` and
    expects the token back; a two-argument form is accepted too)."""
    token, rest = (args[0], args[1:]) if len(args) == 3 else (None, args)
    point = tuple(int(i) for i in np.asarray(rest[0]).reshape(-1))
    core = int(np.asarray(rest[1]))
    with _LOG_LOCK:
        _CURRENT_GRID_POINT[core] = point
        for log in _ACTIVE_LOGS:
            log.grid_points.append((_SERIAL[0], core, point))
    return token


def _frame_of(source_info: Any) -> tuple[str, str]:
    """``(line, kernel)`` of a kernel access: the innermost frame outside jax's and the
    harness's plumbing (:mod:`kernel_harness.core.frames`) as ``file:line (function)`` (a
    kernel shipped inside jax.experimental, like splash, counts as user code) and the
    kernel body function Pallas traced (``function (file)``); ``("pallas_call", "")`` for
    the interpreter's own copies."""
    if source_info is None:
        return "pallas_call", ""
    frames = list(getattr(source_info.traceback, "frames", None) or [])
    line, kernel = "pallas_call", ""
    for f in frames:
        if is_plumbing(f.file_name):
            if kernel:
                break
            continue
        if line == "pallas_call":
            line = f"{f.file_name}:{f.line_num} ({f.function_name})"
        kernel = f"{f.function_name} ({f.file_name.rsplit('/', 1)[-1]})"
    return line, kernel


def _uninitialized(value: Any) -> bool:
    v = np.asarray(value)
    if v.size == 0:
        return False
    if np.issubdtype(v.dtype, np.floating) or v.dtype.name == "bfloat16":
        return bool(np.isnan(v.astype(np.float32)).all())
    if np.issubdtype(v.dtype, np.integer):
        return bool((v == np.iinfo(v.dtype).max).all())
    return False


_MISSING = object()

#: The race detector's ``check_read``/``check_write`` parameters after ``self``, per layout:
#: jax 0.10 passes ``(device_id, local_core_id, clock, ...)``, jax 0.12 a thread key
#: ``(device_id, local_core_id)`` and a vector-clock object.
_CHECK_LAYOUTS: dict[tuple[str, ...], str] = {
    ("device_id", "local_core_id", "clock", "buffer_key", "rnge", "source_info"): "device-core",
    ("thread", "clock", "buffer_key", "rnge", "source_info"): "thread",
}


@dataclasses.dataclass(frozen=True)
class InterpreterLayout:
    """Where this jax keeps the TPU interpreter pieces the recorder wraps."""

    state_cls: Any
    mem_cls: Any
    check_style: str


def interpreter_layout() -> InterpreterLayout:
    """Finds the race detector and shared memory classes of this jax's TPU interpreter;
    anything unrecognized is an :class:`InterpreterLayoutError` naming the piece."""
    import inspect

    try:
        from jax._src.pallas.mosaic.interpret import race_detection_state as rds
        from jax._src.pallas.mosaic.interpret import shared_memory as shm
    except ImportError as e:
        raise InterpreterLayoutError(f"cannot import the interpreter modules: {e}") from None
    state_cls = getattr(rds, "RaceDetectionState", None)
    mem_cls = getattr(shm, "SharedMemory", None)
    if state_cls is None or mem_cls is None:
        raise InterpreterLayoutError(
            "no race_detection_state.RaceDetectionState or shared_memory.SharedMemory")
    if not callable(getattr(mem_cls, "allocate_buffer", None)):
        raise InterpreterLayoutError("SharedMemory (or a base class) has no allocate_buffer")
    if "races_found" not in {f.name for f in dataclasses.fields(state_cls)}:
        raise InterpreterLayoutError("RaceDetectionState has no races_found field")
    styles = set()
    for name in ("check_read", "check_write"):
        method = getattr(state_cls, name, None)
        if method is None:
            raise InterpreterLayoutError(f"RaceDetectionState has no {name}")
        params = tuple(inspect.signature(method).parameters)[1:]
        if params not in _CHECK_LAYOUTS:
            raise InterpreterLayoutError(
                f"RaceDetectionState.{name} takes {params}, none of the known "
                f"{sorted(_CHECK_LAYOUTS)}")
        styles.add(_CHECK_LAYOUTS[params])
    if len(styles) != 1:
        raise InterpreterLayoutError(f"check_read and check_write differ: {sorted(styles)}")
    return InterpreterLayout(state_cls=state_cls, mem_cls=mem_cls, check_style=styles.pop())


def _install_patches() -> None:
    layout = interpreter_layout()
    state_cls, mem_cls = layout.state_cls, layout.mem_cls
    orig_init = state_cls.__init__
    orig = {"read": state_cls.check_read, "write": state_cls.check_write}
    orig_alloc = mem_cls.allocate_buffer

    def init(self: Any, *args: Any, **kwargs: Any) -> None:
        orig_init(self, *args, **kwargs)
        with _LOG_LOCK:
            _SERIAL[0] += 1
            for log in _ACTIVE_LOGS:
                log.kernels += 1
            _STATE_INDEX[id(self)] = _SERIAL[0]
            _CURRENT_GRID_POINT.clear()

    def note(self: Any, kind: str, before: bool, device_id: Any, core_id: Any, clock: Any,
             buffer_key: Any, rnge: Any, source_info: Any) -> None:
        with _LOG_LOCK:
            index = _STATE_INDEX.get(id(self), _SERIAL[0])
            frame, kernel = _frame_of(source_info)
            clock = getattr(clock, "clock", clock)  # jax 0.12: a vector-clock object
            access = BufferAccess(
                kernel_index=index, kind=kind, buffer=tuple(buffer_key), where=tuple(rnge),
                device=int(device_id), core=int(core_id),
                clock=None if clock is None else np.array(clock),
                frame=frame, kernel=kernel,
                grid_point=_CURRENT_GRID_POINT.get(int(core_id)),
                race=bool(self.races_found and not before),
            )
            for log in _ACTIVE_LOGS:
                log.accesses.append(access)
                if self.races_found:
                    log.races_flagged.add(index)

    def checker(kind: str) -> Any:
        if layout.check_style == "thread":
            def check(self, thread, clock, buffer_key, rnge, source_info=None):
                before = self.races_found
                result = orig[kind](self, thread, clock, buffer_key, rnge,
                                    source_info=source_info)
                device_id, core_id = thread
                note(self, kind, before, device_id, core_id, clock, buffer_key, rnge,
                     source_info)
                return result
        else:
            def check(self, device_id, core_id, clock, buffer_key, rnge, source_info=None):
                before = self.races_found
                result = orig[kind](self, device_id, core_id, clock, buffer_key, rnge,
                                    source_info=source_info)
                note(self, kind, before, device_id, core_id, clock, buffer_key, rnge,
                     source_info)
                return result

        return check

    def allocate(self, key, ref_count, value, *args, **kwargs):
        new = key not in self.mem
        result = orig_alloc(self, key, ref_count, value, *args, **kwargs)
        if new:
            v = np.asarray(value)
            with _LOG_LOCK:
                alloc = BufferAllocation(
                    kernel_index=_SERIAL[0], buffer=tuple(key), shape=tuple(v.shape),
                    dtype=str(v.dtype), uninitialized=_uninitialized(v),
                )
                for log in _ACTIVE_LOGS:
                    log.allocations[(alloc.kernel_index, alloc.buffer)] = alloc
        return result

    # Each wrapper is set on the class itself (jax 0.12 defines allocate_buffer on a
    # generic base class shared with the GPU interpreter, which stays untouched).
    for cls, name, new in ((state_cls, "__init__", init), (state_cls, "check_read",
                           checker("read")), (state_cls, "check_write", checker("write")),
                           (mem_cls, "allocate_buffer", allocate)):
        _PATCHES.append(saved_attribute(cls, name))
        setattr(cls, name, new)


def saved_attribute(owner: Any, name: str) -> tuple[Any, str, Any]:
    """``(owner, name, owner's own value of name)``, for :func:`restore_attributes` (a
    marker where the value is inherited or missing: restoring then deletes the patch)."""
    return owner, name, owner.__dict__.get(name, _MISSING)


def restore_attributes(saved: list[tuple[Any, str, Any]]) -> None:
    """Undoes monkey patches, the last first, emptying ``saved`` (of
    :func:`saved_attribute` entries)."""
    while saved:
        owner, name, old = saved.pop()
        if old is _MISSING:
            delattr(owner, name)
        else:
            setattr(owner, name, old)


def _remove_patches() -> None:
    restore_attributes(_PATCHES)


@contextlib.contextmanager
def recording_tpu_interpret() -> Iterator[TpuInterpretLog]:
    """Records every simulated-buffer access, allocation and grid point of the
    TPU-interpreted kernels run inside the context (needs ``detect_races=True``).

    This wraps private jax internals (jax._src.pallas.mosaic.interpret); it is
    the one place that does, so a jax upgrade that moves them breaks here.
    """
    log = TpuInterpretLog()
    with _LOG_LOCK:
        if not _ACTIVE_LOGS:
            try:
                _install_patches()
            except BaseException:
                _remove_patches()
                raise
        _ACTIVE_LOGS.append(log)
    try:
        yield log
    finally:
        with _LOG_LOCK:
            _ACTIVE_LOGS.remove(log)
            if not _ACTIVE_LOGS:
                _remove_patches()
                _STATE_INDEX.clear()


def pallas_tpu_has(name: str) -> bool:
    """Whether this jax's ``jax.experimental.pallas.tpu`` has ``name`` (a public op a kernel
    needs and an older jax lacks: ``reciprocal`` is missing on jax 0.10.2)."""
    from jax.experimental.pallas import tpu as pltpu

    return hasattr(pltpu, name)


def lower_for_platform(fn: Any, args: tuple[Any, ...], platform: str, *,
                       device_kind: str | None = None) -> str:
    """StableHLO text of ``jax.jit(fn)`` lowered for ``platform`` (e.g. ``"tpu"``) on any
    host: Pallas TPU kernels go through their Mosaic lowering without a TPU attached.

    ``device_kind`` (e.g. ``"TPU v6 lite"``) names the chip for a kernel whose Mosaic
    lowering asks the TPU generation (``tpu_info.get_tpu_info``, e.g. jnp.sign's rule),
    which has no answer on a CPU host: the lowering runs under an abstract one-device mesh
    of that device kind, the way jax 0.12's own error message asks (``use_abstract_mesh``;
    jax 0.10.2 reads it the same way)."""
    target: Any = contextlib.nullcontext()
    if device_kind is not None:
        device = jax.sharding.AbstractDevice(device_kind=device_kind, num_cores=1,
                                             platform=platform)
        # Auto axes: the mesh only names the chip (jax 0.12's default, Explicit, rejects
        # kernels slicing reshaped refs: tpu-inference RPA v3/MLA v2, "sharding.spec (5)").
        target = jax.sharding.use_abstract_mesh(jax.sharding.AbstractMesh(
            (1,), ("lowering_target",), axis_types=(jax.sharding.AxisType.Auto,),
            abstract_device=device))
    with target:
        exported = jax.export.export(jax.jit(fn), platforms=[platform])(*args)
    return exported.mlir_module()
