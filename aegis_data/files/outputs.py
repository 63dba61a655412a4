"""Checks of output paths, run before any long work: a command that would fail at its last step (a folder where
a file goes, no permission, an output that would overwrite its own input) says so first, in one line.

Every CLI command and every ``aegis baseline`` step calls these, with the option names the user typed.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Mapping
from pathlib import Path

from aegis_data.errors import AegisError


def file_above(path: Path) -> Path | None:
    """The first of ``path``'s parents that exists and is not a folder (a file where a folder must be), or None."""
    return next((d for d in path.parents if d.exists() and not d.is_dir()), None)


def _check_creatable(opt: str, path: Path, verb: str) -> None:
    """No file where a parent folder must be, and write permission in the nearest existing folder."""
    blocker = file_above(path)
    if blocker is not None:
        raise AegisError(f"{opt} {path} cannot be {verb}: {blocker} is a file, not a folder")
    existing = next((d for d in (path, *path.parents) if d.exists() and d.is_dir()), Path("."))
    if not os.access(existing, os.W_OK | os.X_OK) or (path.exists() and not os.access(path, os.W_OK)):
        raise AegisError(f"{opt} {path} cannot be written: no permission in {existing}")


def check_outputs(outputs: Mapping[str, Path | None], inputs: Iterable[Path | None] = ()) -> None:
    """Before any long work: every output file can be written, no two options name the same file, and none
    replaces (or lands inside) an input of the same command. Raises AegisError in one line naming the option.

    ``outputs`` maps an option's name as the caller wants it printed (the CLI passes its flags) to its path or
    None; ``inputs`` are the files and folders the command reads (a folder protects every file under it).
    """
    given = {opt: Path(p) for opt, p in outputs.items() if p is not None}
    seen: dict[Path, str] = {}
    for opt, path in given.items():
        real = path.resolve()
        if real in seen:
            raise AegisError(f"{seen[real]} and {opt} both name {path}; give each output its own file")
        seen[real] = opt
        if path.is_dir():
            raise AegisError(f"{opt} {path} is a folder; expected a file name")
        _check_creatable(opt, path, "written")
        for src in inputs:
            if src is None or not Path(src).exists():
                continue
            src_real = Path(src).resolve()
            if real == src_real or (src_real.is_dir() and src_real in real.parents):
                what = "is" if real == src_real else "lies inside"
                raise AegisError(f"{opt} {path} {what} the input {src}; write the output somewhere else")


def check_output_dirs(outputs: Mapping[str, Path | None], inputs: Iterable[Path | None] = ()) -> None:
    """Output folders: each may exist (as a folder) or be creatable, and is neither an input folder nor inside
    one (``inputs``); AegisError in one line otherwise."""
    inputs = [Path(p).resolve() for p in inputs if p is not None and Path(p).is_dir()]

    for opt, path in outputs.items():
        if path is None:
            continue
        path = Path(path)
        if path.exists() and not path.is_dir():
            raise AegisError(f"{opt} must be a directory, got an existing file: {path}")
        _check_creatable(opt, path, "created")
        real = path.resolve()
        for src in inputs:
            if real == src or src in real.parents:
                raise AegisError(
                    f"{opt} {path} {'is' if real == src else 'lies inside'} the input folder {src}; "
                    f"write the output somewhere else"
                )


def check_name_component(name: str, what: str, reserved: Iterable[str] = ()) -> str:
    """``name`` (a policy name, a label, ...) where it becomes one folder or file name inside an output folder.

    A name that is empty, ``.``, ``..``, holds a path separator, a NUL or a control character, or equals one of
    the folder's own entries (``reserved``) could leave its folder or clobber a sibling: AegisError in one line.
    """
    if not isinstance(name, str) or not name.strip():
        raise AegisError(f"{what} {name!r} is empty; it names a folder, so it needs visible characters")
    bad = next((ch for ch in name if ch in "/\\" or ord(ch) < 32 or ord(ch) == 127), None)
    if bad is not None or name in (".", "..") or name != name.strip():
        why = (
            f"holds {bad!r}"
            if bad is not None
            else ("is a relative folder name" if name.strip() in (".", "..") else "starts or ends with white space")
        )
        raise AegisError(
            f"{what} {name!r} {why}; it names a folder of the output, so it must be one plain name "
            f"(letters, digits, '-', '_', '.')"
        )
    if name in set(reserved):
        raise AegisError(f"{what} {name!r} is taken: the output folder has its own {name!r}; choose another name")
    return name
