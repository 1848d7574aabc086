"""Case descriptions: small, frozen, readable, and serializable to one JSON line.

Each family defines its own frozen, keyword-only dataclass deriving from
:class:`Case`. A case holds only primitives and tuples (a mask is described,
never stored as an array), so a failing case prints readably and a repro
command can carry it. Arrays come from :meth:`Case.materialize`, which is
deterministic in the case's ``seed``.
"""

from __future__ import annotations

import dataclasses
import json
import math
from typing import Any, ClassVar, Self

import numpy as np

#: Named arrays: a case's inputs, or a kernel's (or reference's) outputs and gradients.
Arrays = dict[str, np.ndarray]

DTYPES: tuple[str, ...] = ("float32", "bfloat16", "float16")


#: Field names cases were stored with before one spelling per fact (goldens, gate
#: baselines, failure corpora keep them): old name -> the name every case type uses now.
FIELD_ALIASES: dict[str, str] = {
    "heads": "q_heads",
    "num_q_heads": "q_heads",
    "num_kv_heads": "kv_heads",
}


def renamed_fields(data: dict[str, Any], names: set[str]) -> dict[str, Any]:
    """``data`` (a stored case's fields) with old names (:data:`FIELD_ALIASES`) renamed,
    where the case type has the new name and not the old; a description holding both the
    old and the new name is an error."""
    out = dict(data)
    for old, new in FIELD_ALIASES.items():
        if old in out and old not in names and new in names:
            if new in out:
                raise ValueError(f"case holds both {old!r} and its new name {new!r}")
            out[new] = out.pop(old)
    return out


def _tupled(value: Any) -> Any:
    if isinstance(value, list):
        return tuple(_tupled(v) for v in value)
    return value


@dataclasses.dataclass(frozen=True, kw_only=True)
class Case:
    """Base of every family's case description.

    Attributes:
      dtype: name of the input dtype (``float32``, ``bfloat16``, ``float16``).
      seed: data seed; the arrays are a pure function of the case.
    """

    dtype: str
    seed: int

    #: Fields that do not change the compiled program (everything else is static).
    DYNAMIC_FIELDS: ClassVar[frozenset[str]] = frozenset({"seed"})

    def __post_init__(self) -> None:
        parent = getattr(super(), "__post_init__", None)
        if parent is not None:  # a mixed-in base's checks (the attention op's Shape) too
            parent()
        if self.dtype not in DTYPES:
            raise ValueError(f"dtype must be one of {DTYPES}, got {self.dtype!r}")

    def to_json(self) -> str:
        """One JSON line holding every field."""
        return json.dumps(dataclasses.asdict(self), sort_keys=True, separators=(",", ":"))

    @classmethod
    def fields_from_json(cls, text: str) -> dict[str, Any]:
        """The fields a stored case (:meth:`to_json`'s text) gives, by this type's names:
        old names renamed (:data:`FIELD_ALIASES`), lists made tuples; invalid JSON or a
        field this type lacks is a clear error. Fields left out are not added."""
        try:
            data = json.loads(text)
        except json.JSONDecodeError as e:
            raise ValueError(f"case is not valid JSON: {e}") from None
        if not isinstance(data, dict):
            raise ValueError(f"a case is a JSON object of fields, got {type(data).__name__}")
        names = {f.name for f in dataclasses.fields(cls)}
        data = cls.upgraded(renamed_fields(data, names))
        unknown = set(data) - names
        if unknown:
            raise ValueError(f"{cls.__name__} has no field(s) {sorted(unknown)}")
        return {k: _tupled(v) for k, v in data.items()}

    @classmethod
    def upgraded(cls, data: dict[str, Any]) -> dict[str, Any]:
        """A stored case's fields with values this type once spelled otherwise in today's
        spelling (goldens, baselines and corpora keep the old); by default unchanged."""
        return data

    @classmethod
    def from_json(cls, text: str) -> Self:
        """Inverse of :meth:`to_json`; unknown or missing fields are a clear error."""
        fields = cls.fields_from_json(text)
        try:
            return cls(**fields)
        except TypeError as e:
            raise ValueError(f"cannot build {cls.__name__} from JSON: {e}") from None

    def static_key(self) -> tuple[Any, ...]:
        """The fields that select a compiled program (for compile caches)."""
        return tuple(
            (f.name, getattr(self, f.name))
            for f in dataclasses.fields(self)
            if f.name not in self.DYNAMIC_FIELDS
        )

    def rng(self, stream: int = 0) -> np.random.Generator:
        """A numpy generator for this case's data; ``stream`` separates uses."""
        return np.random.default_rng((self.seed, stream))

    def materialize(self) -> dict[str, np.ndarray]:
        """The case's input arrays by name (family-specific)."""
        raise NotImplementedError


#: Multiples of the O(1) logit scale that ``matches-reference`` draws for softmax families
#: (``Case.logit_scale`` of those families): at 1x the logits are ~N(0, 1), at 16x a row's
#: largest logit is ~40-60. The references subtract the row max, so they are exact there; a
#: kernel without max-subtraction, or whose running max goes stale, is not.
LOGIT_SCALES: tuple[float, ...] = (1.0, 4.0, 16.0)


def logit_scales_for(dtype: str, *, calibrated: bool = False) -> tuple[float, ...]:
    """The logit scales drawn for ``dtype``: all of :data:`LOGIT_SCALES` for float32, or
    where the family judges ``dtype`` by the calibrated bound (``calibrated``: sdpa, flash
    in bfloat16); else 1x only. The fixed low-precision tolerance tables were measured at
    O(1) logits; at 4x/16x a pristine bfloat16 flash dk (and sdpa dq) exceeds them by ~10%,
    as a plain-jnp bfloat16 computation does by more (README, "Large logits"): judging
    those takes the calibrated bound (README, "Calibrated bounds"), not a looser table."""
    return LOGIT_SCALES if dtype == "float32" or calibrated else (1.0,)


def check_logit_scale(value: float) -> None:
    """Raises ValueError unless ``value`` (a case's ``logit_scale``) is positive and finite."""
    if not (isinstance(value, (int, float)) and math.isfinite(value) and value > 0):
        raise ValueError(f"logit_scale must be a positive finite number (1 = logits ~N(0, 1)), "
                         f"got {value!r}")


def check_sizes(case: Any, *names: str) -> None:
    """Raises ValueError unless each of ``case``'s fields ``names`` (sizes) is >= 1."""
    for name in names:
        if getattr(case, name) < 1:
            raise ValueError(f"{name} must be >= 1, got {getattr(case, name)}")


def check_heads(case: Any) -> None:
    """Raises ValueError unless ``case``'s head counts (``q_heads``, and ``kv_heads`` where it
    has one) are >= 1 and ``kv_heads`` divides ``q_heads``: every attention case's rule."""
    names = [n for n in ("q_heads", "kv_heads") if hasattr(case, n)]
    check_sizes(case, *names)
    if len(names) == 2 and case.q_heads % case.kv_heads:
        raise ValueError(f"q_heads={case.q_heads} must be a multiple of "
                         f"kv_heads={case.kv_heads} (each kv head serves a group of query heads)")


def cast(x: np.ndarray, dtype: str) -> np.ndarray:
    """Rounds float64/float32 data to float32, then to ``dtype`` (round to nearest even), and
    returns it as a numpy array of that dtype (bfloat16 via ml_dtypes, which jax ships).

    On the host: numpy's and ml_dtypes' conversions give bitwise what XLA's convert gives
    (subnormals, infinities, NaNs and overflow included, checked on both jax stacks), without
    compiling an XLA program for every input shape (2,100 of the suite's 3,900 in-process
    compiles were these casts). A non-float ``dtype`` keeps XLA's convert."""
    import jax.numpy as jnp
    from jax import dtypes

    target = dtypes.canonicalize_dtype(jnp.dtype(dtype))  # float64: float32 unless x64
    if not jnp.issubdtype(target, jnp.floating):
        return np.asarray(jnp.asarray(x, dtype=jnp.float32).astype(dtype))
    # Past the dtype's range is inf, as XLA's convert gives: meant, not a warning for the
    # user's console (a softmax's low-precision twin rounds x - max of a logit masked at
    # the dtype's most negative value to -inf, as a kernel in that dtype does).
    with np.errstate(over="ignore"):
        return np.asarray(x, np.float32).astype(target)


def dtype_packing(dtype: str) -> int:
    """Elements of ``dtype`` per 32-bit word: how TPU kernels pack tokens, cache rows or
    heads (their ``get_dtype_packing``: 1 for float32, 2 for bfloat16, 4 for float8)."""
    import jax.numpy as jnp

    return 4 // np.dtype(jnp.dtype(dtype)).itemsize


def standard_normal(rng: np.random.Generator, shape: tuple[int, ...], dtype: str) -> np.ndarray:
    """Standard normal data rounded to ``dtype`` (the reference sees the rounded values)."""
    return cast(rng.standard_normal(shape), dtype)
