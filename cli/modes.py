"""The modes of the command line (docs/CLI.md): the accepted values of each mode option, as Enums. They import
nothing (no Typer), so a plain `aegis score` line (cli/plain_score.py) uses them without loading the option parser;
cli/vocabulary.py re-exports them with the options built on them."""

from __future__ import annotations

from enum import Enum
from typing import Any


# --- modes: the accepted values of each mode option, shown in --help --------------------------------------
# The values mirror the library's own tuples (tests/cli/test_cli_vocabulary.py checks they agree); they are spelled
# here so that `aegis --help` imports no runner, report or scoring module.
class Task(str, Enum):
    detection = "detection"
    referring = "referring"


class RankBy(str, Enum):
    condition = "condition"
    version = "version"


class RemapSide(str, Enum):
    gt = "gt"
    preds = "preds"


class ClassThresholds(str, Enum):
    per_class = "per-class"
    shared = "shared"


class SplitName(str, Enum):
    test = "test"
    val = "val"
    train = "train"


class ListFormat(str, Enum):
    table = "table"
    json = "json"


class HtmlFigures(str, Enum):
    png = "png"
    svg = "svg"


class CrossCheck(str, Enum):
    pycocotools = "pycocotools"


class Dataset(str, Enum):
    synthetic = "synthetic"
    heridal = "heridal"
    sard = "sard"
    coco = "coco"
    yolo = "yolo"
    voc = "voc"
    hf = "hf"


class Model(str, Enum):
    yolo11 = "yolo11"
    rtdetr = "rtdetr"
    fasterrcnn = "fasterrcnn"


class Arch(str, Enum):
    resnet50_v2 = "resnet50_v2"
    mobilenet_v3 = "mobilenet_v3"


class Optimizer(str, Enum):
    SGD = "SGD"
    AdamW = "AdamW"


def value(mode_value: Any) -> Any:
    """The plain string of a parsed mode (a member's value; an unknown string or None unchanged)."""
    return mode_value.value if isinstance(mode_value, Enum) else mode_value
