"""Optional extras: which one provides a missing module, and the one line that tells a user how to install it.

The core install (``pip install -c constraints.txt -e .``) runs the engine, splits, verify and scoring. Three
extras add the rest: ``runners`` (torch, torchvision, ultralytics: ``aegis baseline``), ``report`` (matplotlib:
``aegis report`` figures) and ``distributed`` (Dask: a ``scheduler`` address). Every place that needs one names it
through :func:`missing_module_message`, so the hint is the same everywhere and the command is quoted for every shell.
"""

from __future__ import annotations

from typing import Any

from aegis_data.errors import AegisError

# Top-level module -> the extra that installs it (None: the core install).
EXTRA_OF = {
    "torch": "runners",
    "torchvision": "runners",
    "ultralytics": "runners",
    "matplotlib": "report",
    "dask": "distributed",
    "distributed": "distributed",
    "datasets": None,
    "huggingface_hub": None,
    "pycocotools": None,
    "faster_coco_eval": None,
    "cv2": None,
    "numpy": None,
    "yaml": None,
    "typer": None,
    "rich": None,
}
# What each extra is for, in a message.
EXTRA_PURPOSE = {"runners": "the reference detectors", "report": "report figures", "distributed": "Dask clusters"}


def install_command(extra: str | None) -> str:
    """The quoted install line for ``extra`` (None: the core), pinned by the checkout's constraints file."""
    target = "." if extra is None else f".[{extra}]"
    return f"pip install -c constraints.txt -e '{target}'"


def missing_module_message(module: str, feature: str | None = None) -> str | None:
    """One line naming the extra that provides the top-level ``module`` and how to install it; None when the
    module is not one the toolkit depends on (then the caller re-raises: that is a bug, not an install step)."""
    top = module.split(".")[0]
    if top not in EXTRA_OF:
        return None
    extra = EXTRA_OF[top]
    what = f"{feature} needs" if feature else "this command needs"
    if extra is None:
        return (
            f"{what} {top}, part of the core install, which is missing or broken: {install_command(None)} "
            f"(from the aegisbench checkout; docs/README 'Two commands')"
        )
    return (
        f"{what} {top} from the '{extra}' extra ({EXTRA_PURPOSE[extra]}): {install_command(extra)} "
        f"(from the aegisbench checkout), or pip install 'aegisbench[{extra}]'"
    )


class MissingExtra(AegisError):
    """An optional extra is not installed (the CLI exits 2 for it, as for a usage error: nothing ran)."""


def require(module: str, feature: str) -> Any:
    """``import module`` or :class:`MissingExtra` with :func:`missing_module_message`."""
    from importlib import import_module

    try:
        return import_module(module)
    except ImportError as exc:
        message = missing_module_message(getattr(exc, "name", None) or module, feature)
        if message is None:
            raise
        raise MissingExtra(message) from None
