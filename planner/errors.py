"""Expected errors, each with its documented exit code (README, "Exit codes").

Bugs keep their traceback; these are the failures a user can cause or fix.
"""

from __future__ import annotations

from typing import Any

EXIT_OK = 0
EXIT_FINDING = 1  # drift found, SLO cannot be met
EXIT_BAD_INPUT = 2  # usage and validation errors
EXIT_SOURCE_UNAVAILABLE = 3  # Hub, network, GPU driver


class PlannerError(Exception):
    """Base of every expected error; carries its process exit code."""

    exit_code: int = EXIT_FINDING

    def __reduce__(self) -> tuple[Any, ...]:
        """Pickled as its message and attributes, so that a worker of a process pool (fleet's
        candidates) hands it back whole: the subclasses' own __init__ signatures are not
        re-run on the way."""
        return (_rebuilt, (type(self), self.args, dict(self.__dict__)))


def _rebuilt(cls: type[PlannerError], args: tuple[Any, ...], state: dict[str, Any]) -> PlannerError:
    """A PlannerError of `cls` with `args` and attributes `state`, as pickled (__reduce__)."""
    err = cls.__new__(cls)
    Exception.__init__(err, *args)
    err.__dict__.update(state)
    return err


class InputError(PlannerError):
    """Bad input: names the field and what is accepted."""

    exit_code = EXIT_BAD_INPUT

    def __init__(self, field: str, message: str) -> None:
        self.field = field
        self.message = message
        super().__init__(f"{field}: {message}")


class SourceUnavailable(PlannerError):
    """A source (Hub, network, GPU driver) could not be read; says what to do."""

    exit_code = EXIT_SOURCE_UNAVAILABLE


def validation_text(err: Any) -> str:
    """A pydantic error's message as one lower-case clause, its numbers as a user writes them
    (a bound of 1/86,400 req/s reads 1.157e-05, not 0.000011574074074074073)."""
    import re

    def short(m: re.Match[str]) -> str:
        return f"{float(m.group(0)):.4g}"

    return re.sub(r"\d+\.\d{5,}", short, str(err["msg"]).lower())
