"""The one error type users see.

Every library function reports bad input by raising :class:`AegisError` with a message that names what was
received and what was expected. It subclasses ``ValueError`` so API callers can catch the standard type; the
CLI catches it at the command boundary and prints the message as one line with a non-zero exit.

Library messages speak the library's language: a parameter is named as it is spelled in Python, between
backticks (`` `person_px` must be positive``), and ``param`` says which parameter the error is about. The CLI
alone knows flags: it turns every backticked parameter into its flag when it prints the line.
"""

from __future__ import annotations

from typing import Any


class AegisError(ValueError):
    """Bad input or an unusable artefact; the message is one line meant for a person.

    ``param`` names the (Python) parameter the error is about, or is None when the error is about a file's
    contents or the state of the disk rather than one argument.
    """

    def __init__(self, message: str = "", *, param: str | None = None) -> None:
        super().__init__(message)
        self.param = param

    def __reduce__(self) -> tuple[Any, ...]:  # survives pickling across worker processes with its parameter
        return (_rebuild, (type(self), str(self), self.param))


def _rebuild(cls: type[AegisError], message: str, param: str | None) -> AegisError:
    error = cls.__new__(cls)
    AegisError.__init__(error, message, param=param)
    return error
