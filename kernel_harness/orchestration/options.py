"""From a front end's options to a :class:`CheckRequest`, the same way for every front end.

``kernel-harness check``, ``gate`` and ``corpus`` (their flags), ``pytest --kh-*`` and
:func:`kernel_harness.testing.check` (its keywords) each give some settings explicitly; the
project's ``[tool.kernel-harness]`` (:mod:`kernel_harness.records.config`) gives others; the
front end's built-in default fills the rest. One rule, :func:`resolve`: an explicit option
beats the configuration, which beats the built-in default. Every resolved setting says
where it came from (:attr:`Setting.origin`), and the request carries that
(:attr:`CheckRequest.origins`), so a report can say why it ran what it ran.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import Any

from kernel_harness.core.backends import BACKEND_NAMES
from kernel_harness.core.errors import UsageError
from kernel_harness.orchestration.request import CheckRequest
from kernel_harness.records.config import HarnessConfig
from kernel_harness.run import impl_source
from kernel_harness.run.profiles import PROFILE_NAMES

#: The settings the configuration may give, and the names each accepts (None: any text).
CONFIGURABLE: dict[str, tuple[str, ...] | None] = {
    "profile": PROFILE_NAMES,
    "backend": BACKEND_NAMES,
    "corpus": None,
}


@dataclasses.dataclass(frozen=True)
class Setting:
    """A resolved setting: its value, where it came from (``origin``: ``given``, the
    option the user gave; ``config``, the project's table; ``default``, the front end's)
    and that in words for a header (``where``: ``from --backend``, ``from backend in
    /x/pyproject.toml [tool.kernel-harness]``, ``the default``)."""

    value: Any
    origin: str
    where: str = ""


def resolve(key: str, given: Any, config: HarnessConfig, builtin: Any,
            flag: str | None = None) -> Setting:
    """``key``'s value: ``given`` when the front end's option (``flag``, for the words) was
    set (not None), else the configuration's, else ``builtin``. A configured name the
    harness does not know is a :class:`UsageError` naming the key and the file."""
    if key not in CONFIGURABLE:
        raise ValueError(f"{key!r} is not a configurable setting ({', '.join(CONFIGURABLE)})")
    if given is not None:
        return Setting(given, "given", f"from {flag or key}")
    configured = getattr(config, key)
    known = CONFIGURABLE[key]
    if configured is not None:
        if known is not None and configured not in known:
            raise UsageError(f"{config.where(key)}: {configured!r} is not one of "
                             f"{', '.join(known)}")
        return Setting(configured, "config", f"from {config.where(key)}")
    return Setting(builtin, "default", "the default")


def settings(config: HarnessConfig, given: Mapping[str, Any], builtins: Mapping[str, Any],
             flags: Mapping[str, str] | None = None) -> dict[str, Setting]:
    """:func:`resolve` for each key of ``builtins`` (the settings this front end has);
    ``flags``: each key's option as the front end spells it (``--kh-backend``)."""
    return {key: resolve(key, given.get(key), config, builtin, (flags or {}).get(key))
            for key, builtin in builtins.items()}


def check_request(resolved: Mapping[str, Setting], config: HarnessConfig | None = None,
                  **fields: Any) -> CheckRequest:
    """The :class:`CheckRequest` of resolved ``profile``, ``backend`` and ``corpus`` settings
    (from :func:`settings`) and the front end's other ``fields`` (as the request names
    them); the request records each setting's origin. ``config``'s ``without``,
    ``waivers``, ``known-bugs`` and ``accepted-source`` travel with it (the front end's
    ``without`` adds to the table's; an accepted-source kind is checked here)."""
    missing = [k for k in CONFIGURABLE if k not in resolved]
    if missing:
        raise ValueError(f"settings not resolved: {', '.join(missing)}")
    clash = [k for k in CONFIGURABLE if k in fields]
    if clash:
        raise ValueError(f"give {', '.join(clash)} as resolved settings, not as fields")
    if config is not None and config.source is not None:
        impl_source.check_accepted(config.accepted_source, config.source)
        fields.update(config_source=str(config.source), waivers=tuple(config.waivers),
                      known_bugs=tuple(config.known_bugs),
                      accepted_source=tuple(config.accepted_source),
                      config_without={family: frozenset(features)
                                      for family, features in config.without.items()})
    return CheckRequest(**fields, **{k: resolved[k].value for k in CONFIGURABLE},
                        origins={k: resolved[k].origin for k in CONFIGURABLE},
                        backend_note=resolved["backend"].where or None)
