"""The project's own error hierarchy.

Callers decide what to do from the class alone: a ``RetryableError`` may succeed if tried again
later (a target timed out, a socket was refused), a ``PermanentError`` will not (bad config, bad
input); retrying it only hides the bug.
"""

from __future__ import annotations


class InferSliceError(Exception):
    """Base of every error this project raises on purpose."""


class PermanentError(InferSliceError):
    """Retrying will not help: the input, the configuration or the environment is wrong."""


class RetryableError(InferSliceError):
    """A transient failure: the same call may succeed later."""


class ConfigError(PermanentError):
    """A configuration or topology file is invalid; ``field`` names the offending path."""

    def __init__(self, message: str, field: str | None = None) -> None:
        self.field = field
        super().__init__(f"{field}: {message}" if field else message)


class InputError(PermanentError):
    """A request body, input line or argument is malformed."""

    def __init__(self, message: str, field: str | None = None) -> None:
        self.field = field
        super().__init__(f"{field}: {message}" if field else message)


class NotPrivilegedError(PermanentError):
    """The operation needs root (network namespaces, qdiscs)."""


class SourceUnavailable(RetryableError):
    """A metric source (exporter target, Prometheus, NVML, OVSDB) could not be read right now."""


class ParseError(PermanentError):
    """Text from a source could not be parsed (a Prometheus exposition, a JSON body)."""
