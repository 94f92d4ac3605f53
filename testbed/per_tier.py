"""``--flag VALUE`` / ``--flag TIER=VALUE`` options of ``inferslice testbed up`` (``--engine``, ``--serving``)."""

from __future__ import annotations

from collections.abc import Sequence

from inferslice.errors import ConfigError


def resolve_per_tier(items: Sequence[str], tiers: Sequence[str], choices: Sequence[str], default: str, flag: str) -> dict[str, str]:
    """``["ray"]`` (every tier) or ``["premium=ray", ...]`` -> {tier: value}; later items win.
    ``ConfigError`` naming ``flag`` for an unknown value or tier."""
    out = dict.fromkeys(tiers, default)
    for item in items:
        tier, sep, value = item.partition("=")
        targets = [tier] if sep else list(tiers)
        value = value if sep else tier
        if value not in choices:
            raise ConfigError(f"--{flag}: {value!r} is not one of {', '.join(choices)}", field=flag)
        for t in targets:
            if t not in tiers:
                raise ConfigError(f"--{flag}: unknown tier {t!r} (have {', '.join(tiers)})", field=flag)
            out[t] = value
    return out
