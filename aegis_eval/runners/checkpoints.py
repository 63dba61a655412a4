"""Ultralytics weights are vetted before Ultralytics reads them (docs/SECURITY.md).

A ``.pt`` file is a pickle, and Ultralytics unpickles checkpoints with ``weights_only=False``: a received file
could run any code. A model yaml is no safer: Ultralytics evaluates its ``activation`` string and calls any name
of its own module as a layer. (Ultralytics 8.4's opt-in restricted mode, ``ULTRALYTICS_SAFE_LOAD``, is off by
default and read once at its import, so the runners do not rely on it.) So every local file the runners hand to
Ultralytics (weights to predict with or to fine-tune from, a run's ``last.pt`` to resume, a model yaml) passes a check
here first, which runs nothing from the file:

- ``check_ultralytics_checkpoint``: (1) a walk over the pickle's opcodes, without unpickling, lists every global
  it names and how it is used. The model's classes (``nn.Module`` classes of torch and Ultralytics) may only be
  rebuilt the way ``torch.save`` writes a module (``cls.__new__`` plus its attribute dict), never called: a call
  runs the constructor with arguments the file chooses, and DetectionModel's evaluates a yaml string. (2)
  ``torch.load(weights_only=True)`` with exactly those classes allow-listed; torch refuses every other global
  (``exec``, ``os.system``, ...) itself. (3) The loaded object must look like an Ultralytics checkpoint.
- ``check_ultralytics_yaml``: the model dict Ultralytics would build from may name only layer classes and a
  literal ``nn.<Class>(...)`` activation.
"""

from __future__ import annotations

import ast
import importlib
import io
import pickletools
import zipfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

from aegis_data.errors import AegisError

# Modules whose nn.Module classes a checkpoint may rebuild: torch's layers, Ultralytics' blocks and models.
_CLASS_MODULE_PREFIXES = ("torch.nn.modules.", "ultralytics.nn.modules.")
_CLASS_MODULES = ("ultralytics.nn.tasks",)
# Modules whose own classes (not nn.Modules) a checkpoint may rebuild: a saved model can keep its loss object.
_LOSS_MODULES = ("ultralytics.utils.loss", "ultralytics.utils.tal")
# Opcodes torch.save never writes and torch's weights_only loader does not run; each one builds or calls objects.
_REFUSED_OPCODES = {"INST", "OBJ", "STACK_GLOBAL", "EXT1", "EXT2", "EXT4", "NEWOBJ_EX"}


def _refuse(path: str | Path, why: str) -> AegisError:
    return AegisError(f"checkpoint {path} {why}; refused: loading it could run code it carries (docs/SECURITY.md)")


def _data_globals() -> dict[str, Any]:
    """Plain data an Ultralytics checkpoint may hold beside tensors (official ones do); each is harmless to call."""
    import pathlib

    import numpy as np
    from ultralytics.utils import IterableSimpleNamespace

    scalar = np.float64(0).__reduce__()[0]
    out: dict[str, Any] = {
        "numpy.dtype": np.dtype,
        "numpy.core.multiarray.scalar": scalar,
        "numpy._core.multiarray.scalar": scalar,
        "ultralytics.utils.IterableSimpleNamespace": IterableSimpleNamespace,
        "ultralytics.yolo.utils.IterableSimpleNamespace": IterableSimpleNamespace,
    }
    for module in ("pathlib", "pathlib._local"):  # a path pickled on either OS, by Python before or after 3.13
        for name in ("PosixPath", "WindowsPath"):
            out[f"{module}.{name}"] = pathlib.PurePosixPath
    return out


def _layer_class(name: str):
    """The class ``name`` (``module.Class``) when it is a torch or Ultralytics layer or model (an nn.Module), or
    an Ultralytics loss class defined in its loss modules; else None.

    Only modules of torch.nn and of Ultralytics' nn package and loss modules are imported: installed code.
    """
    import torch

    module, _, attr = name.rpartition(".")
    if not (module.startswith(_CLASS_MODULE_PREFIXES) or module in _CLASS_MODULES + _LOSS_MODULES):
        return None
    try:
        obj = getattr(importlib.import_module(module), attr, None)
    except Exception:  # a module name that does not exist here: not a class this toolkit knows
        return None
    if not isinstance(obj, type):
        return None
    if module in _LOSS_MODULES:
        return obj if obj.__module__ == module else None
    return obj if issubclass(obj, torch.nn.Module) else None


def _read_archive(path: Path) -> tuple[io.BytesIO, bytes]:
    """The checkpoint's bytes (read once: every later step sees exactly what was vetted) and its ``data.pkl``,
    read by the reader torch.load itself uses."""
    import torch

    try:
        blob = path.read_bytes()
    except OSError as exc:
        raise AegisError(f"cannot read checkpoint {path}: {exc.strerror or exc}") from None
    if blob[:4] != b"PK\x03\x04":  # torch.load reads anything else as the legacy format, which this walk does not cover
        raise AegisError(f"checkpoint {path} is not a PyTorch zip archive (torch.save writes one); refused")
    try:
        with zipfile.ZipFile(io.BytesIO(blob)) as archive:
            packed = [i.filename for i in archive.infolist() if i.compress_type != zipfile.ZIP_STORED]
    except (zipfile.BadZipFile, OSError, ValueError) as exc:
        raise AegisError(f"checkpoint {path} is not a readable zip archive: {str(exc).splitlines()[0]}") from None
    if packed:  # torch.save stores every record; a compressed one could expand without bound when read
        raise _refuse(path, f"holds compressed records ({packed[0]}), which torch.save never writes")
    try:
        record = bytes(torch._C.PyTorchFileReader(io.BytesIO(blob)).get_record("data.pkl"))
    except Exception as exc:
        raise AegisError(f"checkpoint {path} has no readable data.pkl: {str(exc).splitlines()[0]}") from None
    return io.BytesIO(blob), record


def called_globals(data: bytes, where: str | Path) -> set[str]:
    """The globals the pickle calls (REDUCE), by walking its opcodes; nothing is unpickled. Which globals it names
    at all, torch itself lists (``get_unsafe_globals_in_checkpoint``); what it does with them, only this walk sees.

    The walk keeps an abstract stack in which only globals are known (STACK_GLOBAL, which would build one from
    strings, is refused), and follows the memo, so a class fetched again from the memo is still recognised when
    REDUCE calls it.
    """
    stack: list[Any] = []
    marks: list[int] = []
    memo: dict[Any, Any] = {}  # keyed by the opcodes' memo indices
    called: set[str] = set()
    try:
        for op, arg, _pos in pickletools.genops(data):
            name = op.name
            if name in _REFUSED_OPCODES:
                raise _refuse(where, f"uses the pickle opcode {name}")
            if name == "MARK":
                marks.append(len(stack))
            elif name == "GLOBAL":
                stack.append(("global", ".".join(str(arg).split(" ", 1))))
            elif name in ("PUT", "BINPUT", "LONG_BINPUT"):
                memo[arg] = stack[-1]
            elif name == "MEMOIZE":
                memo[len(memo)] = stack[-1]
            elif name in ("GET", "BINGET", "LONG_BINGET"):
                stack.append(memo.get(arg))
            elif name == "DUP":
                stack.append(stack[-1])
            elif name == "REDUCE":
                stack.pop()
                func = stack.pop()
                if isinstance(func, tuple) and func[0] == "global":
                    called.add(func[1])
                stack.append(None)
            else:  # every other opcode by its documented stack effect
                before = op.stack_before
                if pickletools.markobject in before:
                    del stack[marks.pop() :]
                    count = before.index(pickletools.markobject)
                else:
                    count = len(before)
                if count > len(stack):
                    raise IndexError("stack underflow")
                del stack[len(stack) - count :]
                stack.extend([None] * len(op.stack_after))
    except AegisError:
        raise
    except (ValueError, IndexError, KeyError) as exc:
        raise AegisError(f"checkpoint {where} is not a well-formed pickle: {exc}") from None
    return called


def check_ultralytics_checkpoint(path: str | Path, *, resume: bool = False) -> dict[str, Any]:
    """Vet a local Ultralytics checkpoint without running anything from it; return the loaded checkpoint dict.

    resume: the file is a run's ``last.pt`` to continue from: it must say which epoch it reached (an int;
        Ultralytics writes -1 once the run finished).
    Raises AegisError (one line naming the file) for anything but an Ultralytics model checkpoint.
    """
    import torch

    p = Path(path)
    blob, data = _read_archive(p)
    called = called_globals(data, p)
    try:
        beyond_torch = set(torch.serialization.get_unsafe_globals_in_checkpoint(blob))
    except Exception as exc:
        raise AegisError(f"checkpoint {p} cannot be read: {str(exc).splitlines()[0]}") from None
    data_globals = _data_globals()
    allowed: list[Callable[..., Any] | tuple[Callable[..., Any], str]] = []
    for glob in sorted(beyond_torch):
        if glob in data_globals:
            allowed.append((data_globals[glob], glob))
            continue
        cls = _layer_class(glob)
        if cls is None:
            raise _refuse(p, f"refers to {glob}, which a detector checkpoint does not need")
        if glob in called:  # a call runs the constructor with the file's arguments; torch.save only rebuilds
            raise _refuse(p, f"calls the class {glob} instead of rebuilding it")
        allowed.append((cls, glob))
    if "numpy.dtype" in beyond_torch:  # numpy pickles a dtype as numpy.dtype(...), then sets the state of its own type
        import numpy as np

        allowed += [
            (type(np.dtype(t)), f"numpy.dtypes.{type(np.dtype(t)).__name__}")
            for t in (np.float16, np.float32, np.float64, np.int32, np.int64, np.bool_)
        ]
    try:
        with torch.serialization.safe_globals(allowed):
            blob.seek(0)
            ckpt = torch.load(blob, map_location="cpu", weights_only=True)
    except Exception as exc:
        lines = str(exc).strip().splitlines()
        detail = next((ln.strip() for ln in lines if "Unsupported" in ln or "Trying" in ln), lines[0] if lines else "")
        raise _refuse(p, f"does not load as plain weights ({type(exc).__name__}: {detail[:200]})") from None
    if not isinstance(ckpt, dict):
        raise AegisError(
            f"checkpoint {p} is a {type(ckpt).__name__}, not an Ultralytics checkpoint (a dict with a model)"
        )
    if resume and (type(ckpt.get("epoch")) is not int):
        raise AegisError(
            f"checkpoint {p} records no epoch (an integer): it is no Ultralytics training checkpoint "
            f"and cannot be resumed or taken for a finished run; remove it or use another `run_dir`",
            param="run_dir",
        )
    model = ckpt.get("ema") if ckpt.get("ema") is not None else ckpt.get("model")
    if not isinstance(model, torch.nn.Module):
        raise AegisError(f"checkpoint {p} holds no model (Ultralytics keeps it under 'model' or 'ema')")
    if "train_args" in ckpt and not isinstance(ckpt["train_args"], dict):
        raise AegisError(f"checkpoint {p}: train_args is a {type(ckpt['train_args']).__name__}, not a mapping")
    return ckpt


# --- model yaml -------------------------------------------------------------------------------------------------
def _activation_class(spec: Any):
    """The torch.nn class of ``nn.SiLU()`` / ``torch.nn.LeakyReLU(0.1)`` when its arguments are literals, else None."""
    import torch

    try:
        call = ast.parse(str(spec).strip(), mode="eval").body
        if not isinstance(call, ast.Call):
            return None
        parts: list[str] = []
        node = call.func
        while isinstance(node, ast.Attribute):
            parts.insert(0, node.attr)
            node = node.value
        if not (isinstance(node, ast.Name) and [node.id, *parts[:-1]] in (["nn"], ["torch", "nn"])):
            return None
        for a in [*call.args, *(k.value for k in call.keywords)]:
            ast.literal_eval(a)
    except (SyntaxError, ValueError, TypeError):
        return None
    cls = getattr(torch.nn, parts[-1], None)
    return cls if isinstance(cls, type) and issubclass(cls, torch.nn.Module) else None


def check_ultralytics_yaml(weights: str) -> None:
    """Vet the model dict Ultralytics builds for ``weights`` (a yaml path or a built-in yaml name).

    Ultralytics evaluates ``activation`` and takes each layer's module name from its own namespace, calling it
    with the yaml's arguments: only nn.Module classes (torch.nn, torchvision.ops, Ultralytics' layers) may be named.
    """
    import torch
    from ultralytics.nn import tasks

    try:
        d = tasks.yaml_model_load(weights)
    except Exception as exc:
        raise AegisError(
            f"cannot read model yaml {weights!r}: {type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}"
        ) from None
    if not isinstance(d, dict):
        raise AegisError(f"model yaml {weights}: not a mapping")
    act = d.get("activation")
    if act and _activation_class(act) is None:
        raise AegisError(
            f"model yaml {weights}: activation {str(act)[:80]!r} is not a torch.nn class called with "
            f"literal arguments (such as nn.SiLU()); refused: Ultralytics would evaluate it as code"
        )
    layers = [*(d.get("backbone") or []), *(d.get("head") or [])]
    if not layers or not all(isinstance(row, list) and len(row) == 4 for row in layers):
        raise AegisError(f"model yaml {weights}: backbone and head must be lists of [from, number, module, args]")
    for row in layers:
        m = row[2]
        if not isinstance(m, str):
            raise AegisError(f"model yaml {weights}: layer module {m!r} is not a name")
        if m.startswith("nn."):
            obj = getattr(torch.nn, m[3:], None)
        elif m.startswith("torchvision.ops."):
            obj = getattr(importlib.import_module("torchvision.ops"), m[16:], None)
        else:
            obj = vars(tasks).get(m)
        if not (isinstance(obj, type) and issubclass(obj, torch.nn.Module)):
            raise AegisError(
                f"model yaml {weights}: layer module {m!r} is not a model layer (an nn.Module class); "
                f"refused: Ultralytics would call it with the yaml's arguments"
            )


def check_ultralytics_weights(weights: str) -> None:
    """Vet what ``YOLO(weights)`` / ``RTDETR(weights)`` would read: a model yaml, or a checkpoint file.

    A bare ``*.pt`` name that is not on disk (``allow_download``) is Ultralytics' own release asset: not vetted.
    """
    p = Path(weights)
    if p.suffix.lower() in (".yaml", ".yml"):
        check_ultralytics_yaml(weights)
    elif p.is_file():
        check_ultralytics_checkpoint(p)
    elif p.name != str(weights):
        raise AegisError(f"weights file not found: {weights}")
