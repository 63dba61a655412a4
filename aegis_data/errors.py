"""The one error type users see.

Every library function reports bad input by raising :class:`AegisError` with a message that names what was
received and what was expected. It subclasses ``ValueError`` so API callers can catch the standard type; the
CLI catches it at the command boundary and prints the message as one line with a non-zero exit.
"""


class AegisError(ValueError):
    """Bad input or an unusable artefact; the message is one line meant for a person."""
