"""Input generation the official way: name heuristics, per-dtype defaults, scalars, safetensors, custom.

Seeding is the caller's business (`set_seed(200)` once before the workload loop, workloads in file order,
fresh inputs every correctness round), exactly as the official driver does.
"""

from __future__ import annotations

import math
import random
import re
from pathlib import Path
from typing import Any

import torch

from harness.errors import HarnessError
from harness.schema import (
    CustomInput,
    Definition,
    SafetensorsInput,
    ScalarInput,
    TensorSpec,
    Workload,
)

OFFICIAL_SEED = 200

TORCH_DTYPES: dict[str, torch.dtype] = {
    "float64": torch.float64,
    "float32": torch.float32,
    "float16": torch.float16,
    "bfloat16": torch.bfloat16,
    "float8_e4m3fn": torch.float8_e4m3fn,
    "float8_e5m2": torch.float8_e5m2,
    "int64": torch.int64,
    "int32": torch.int32,
    "int16": torch.int16,
    "int8": torch.int8,
    "bool": torch.bool,
}
if hasattr(torch, "float4_e2m1fn_x2"):  # both fp4 spellings map to the packed type, as officially
    TORCH_DTYPES["float4_e2m1"] = TORCH_DTYPES["float4_e2m1fn_x2"] = torch.float4_e2m1fn_x2

_FLOAT_HEURISTIC_DTYPES = (torch.float32, torch.float16, torch.bfloat16, torch.float64)
_BINARY_MASK_NAMES = {"x_mask", "text_mask", "aspect_ratio_mask", "drop_mask", "attention_mask"}
_BINARY_MASK_HINTS = ("binary", "{0, 1}", "0 or 1", "1.0 for valid", "0.0 for masked")
_ROPE_NAMES = {"cos", "sin", "cos_cached", "sin_cached", "rope_cos", "rope_sin"}
_POSITIVE_NAMES = {"rstd", "std", "variance", "var"}
_POSITIVE_SUFFIXES = ("_rstd", "_std", "_variance", "_var")
_SOFTMAX_NAMES = {"attn_weights", "attention_weights", "routing_weights"}
_WEIGHT_SUFFIXES = (
    "_weight",
    "_weights",
    "_proj",
    "_projs",
    "_proj_weight",
    "_proj_weights",
    "_weight_matrix",
)
# e4m3 magnitudes of the 8 non-negative fp4 (e2m1) codes, for quantising random fp4 data
_FP4_VALUES = torch.tensor([0.0, 0.5, 1.0, 1.5, 2.0, 3.0, 4.0, 6.0])


def set_seed(seed: int = OFFICIAL_SEED) -> None:
    """The official seeding: Python's random, torch and every CUDA device (no numpy)."""
    random.seed(seed)
    torch.manual_seed(seed)
    if torch.cuda.is_available():
        torch.cuda.manual_seed_all(seed)


def torch_dtype(name: str) -> torch.dtype:
    try:
        return TORCH_DTYPES[name]
    except KeyError:
        raise HarnessError(f"dtype: expected one of {sorted(TORCH_DTYPES)}, got {name!r}") from None


def resolve_axes(definition: Definition, workload: Workload) -> dict[str, int]:
    try:
        return definition.resolve_axes(workload.axes)
    except (TypeError, KeyError) as exc:
        raise HarnessError(
            f"{definition.name}: workload {workload.uuid}: cannot resolve axes: {exc}"
        ) from None


# ------------------------------------------------------------------------------------------ heuristics


def _norm_param(name: str, suffix: str) -> bool:
    """`norm<suffix>`, or `<prefix><suffix>` whose prefix ends in _norm/_layernorm/layernorm, or norm+digits."""
    if name == "norm" + suffix:
        return True
    if not name.endswith(suffix):
        return False
    prefix = name[: -len(suffix)]
    return prefix.endswith(("_norm", "_layernorm", "layernorm")) or prefix.rstrip("0123456789").endswith(
        "norm"
    )


def _is_positive(name: str) -> bool:
    for candidate in (name, name.rstrip("0123456789")):
        if candidate in _POSITIVE_NAMES or candidate.endswith(_POSITIVE_SUFFIXES):
            return True
    return False


def _is_weight_matrix(name: str, ndim: int) -> bool:
    if ndim < 2:
        return False
    return name == "weight" or re.fullmatch(r"weight\d+", name) is not None or name.endswith(_WEIGHT_SUFFIXES)


def heuristic_kind(name: str, spec: TensorSpec, shape: tuple[int, ...], dtype: torch.dtype) -> str | None:
    """Which of the nine official name heuristics applies (None: the dtype default)."""
    if dtype not in _FLOAT_HEURISTIC_DTYPES:
        return None
    desc = (spec.description or "").lower()
    if _norm_param(name, "_weight"):
        return "norm_weight"
    if _norm_param(name, "_bias"):
        return "norm_bias"
    if (
        len(shape) >= 2
        and shape[-1] == shape[-2]
        and (name in ("attention_mask", "causal_mask") or ("attention mask" in desc and "causal" in desc))
    ):
        return "causal_mask"
    if name in _BINARY_MASK_NAMES or (name.endswith("_mask") and any(h in desc for h in _BINARY_MASK_HINTS)):
        return "binary_mask"
    if name in _ROPE_NAMES:
        return "rope"
    if _is_positive(name):
        return "positive"
    if name in ("A_cumsum", "A_log", "A", "g"):
        return name
    if name in _SOFTMAX_NAMES or ("softmax" in desc and "output" in desc):
        return "softmax"
    if _is_weight_matrix(name, len(shape)):
        return "weight_matrix"
    return None


def _uniform(shape, low: float, high: float, device) -> torch.Tensor:
    return torch.empty(shape, dtype=torch.float32, device=device).uniform_(low, high)


def _heuristic_tensor(kind: str, name: str, shape, dtype: torch.dtype, device) -> torch.Tensor:
    if kind == "norm_weight":
        return torch.ones(shape, dtype=dtype, device=device)
    if kind == "norm_bias":
        return torch.zeros(shape, dtype=dtype, device=device)
    if kind == "causal_mask":
        upper = torch.ones(shape[-2:], dtype=torch.bool, device=device).triu(1)
        mask = torch.zeros(shape, dtype=dtype, device=device)
        return mask.masked_fill(upper, torch.finfo(dtype).min)
    if kind == "binary_mask":
        return torch.randint(0, 2, shape, device=device).to(dtype)
    if kind == "rope":
        angle = torch.randn(shape, dtype=torch.float32, device=device).clamp(-math.pi, math.pi)
        return (angle.cos() if "cos" in name else angle.sin()).to(dtype)
    if kind == "positive":
        return (torch.randn(shape, dtype=dtype, device=device).abs() + 0.1).to(dtype)
    if kind == "A_cumsum":
        return _uniform(shape, -0.1, 0.0, device).cumsum(-1).to(dtype)
    if kind == "A_log":
        return _uniform(shape, -5.0, -1.0, device).to(dtype)
    if kind == "A":
        return _uniform(shape, -1.0, -0.001, device).to(dtype)
    if kind == "g":
        return _uniform(shape, -5.0, 0.0, device).to(dtype)
    if kind == "softmax":
        return torch.randn(shape, dtype=torch.float32, device=device).softmax(-1).to(dtype)
    if kind == "weight_matrix":
        return torch.randn(shape, dtype=dtype, device=device) / math.sqrt(shape[-1])
    raise AssertionError(kind)


def _default_tensor(name: str, shape, dtype: torch.dtype, dtype_name: str, device) -> torch.Tensor:
    if dtype in (torch.float32, torch.float16, torch.bfloat16):
        return torch.randn(shape, dtype=dtype, device=device)
    if dtype in (torch.float8_e4m3fn, torch.float8_e5m2):
        return torch.randn(shape, dtype=torch.float32, device=device).clamp(-2, 2).to(dtype)
    if dtype_name.startswith("float4"):
        return _random_fp4(shape, device)
    if dtype == torch.bool:
        return torch.randint(0, 2, shape, device=device).to(torch.bool)
    if dtype == torch.int8:
        return torch.randint(-128, 128, shape, dtype=dtype, device=device)
    if dtype in (torch.int16, torch.int32, torch.int64):
        return torch.randint(-1024, 1024, shape, dtype=dtype, device=device)
    raise HarnessError(f"input {name!r}: random generation is not supported for dtype {dtype_name}")


def _random_fp4(shape, device) -> torch.Tensor:
    """fp32 normal quantised to e2m1 codes, two per byte (even index low nibble); the last dim is halved."""
    values = torch.randn(shape, dtype=torch.float32, device=device)
    table = _FP4_VALUES.to(device)
    codes = (values.abs()[..., None] - table).abs().argmin(-1).to(torch.uint8)
    codes = codes | ((values < 0).to(torch.uint8) << 3)
    packed = codes[..., 0::2] | (codes[..., 1::2] << 4)
    return packed.view(torch.float4_e2m1fn_x2)


def random_tensor(name: str, spec: TensorSpec, shape: tuple[int, ...], device, op_type: str | None = None):
    dtype = torch_dtype(spec.dtype)
    kind = heuristic_kind(name, spec, shape, dtype)
    tensor = (
        _heuristic_tensor(kind, name, shape, dtype, device)
        if kind is not None
        else _default_tensor(name, shape, dtype, spec.dtype, device)
    )
    if op_type == "sampling" and name == "probs":
        tensor = tensor.float().softmax(-1).to(dtype)
    return tensor


def random_scalar(spec: TensorSpec, device) -> bool | int | float:
    """One random element of the dtype, as a Python value."""
    return random_tensor("_scalar", spec, (1,), device)[0].item()


# ------------------------------------------------------------------------------------------ public API


def gen_inputs(
    definition: Definition,
    workload: Workload,
    device: str | torch.device = "cpu",
    *,
    safetensors_cache: dict[str, torch.Tensor] | None = None,
    custom_fn: Any = None,
) -> list[Any]:
    """Inputs in definition order: random tensors (fresh on every call), scalars, safetensors, custom."""
    axes = resolve_axes(definition, workload)
    descriptors = workload.inputs
    custom_values: dict[str, Any] | None = None
    if definition.custom_inputs_entrypoint is not None:
        if custom_fn is None:
            raise HarnessError(f"{definition.name}: custom inputs need the reference's entrypoint function")
        try:
            custom_values = custom_fn({**axes, **workload.scalars()}, torch.device(device))
        except Exception as exc:  # noqa: BLE001 - reported the official way
            raise HarnessError(f"gen_inputs failed: {exc}") from exc
    out: list[Any] = []
    for name, spec in definition.inputs.items():
        desc = descriptors.get(name)
        if isinstance(desc, ScalarInput):
            out.append(desc.value)
        elif isinstance(desc, SafetensorsInput):
            if safetensors_cache is None or name not in safetensors_cache:
                raise HarnessError(f"gen_inputs failed: safetensors input {name!r} was not loaded")
            out.append(safetensors_cache[name].to(device, non_blocking=True))
        elif isinstance(desc, CustomInput) or (custom_values is not None and name in custom_values):
            if custom_values is None or name not in custom_values:
                raise HarnessError(f"gen_inputs failed: custom inputs did not return {name!r}")
            value = custom_values[name]
            out.append(value.to(device) if isinstance(value, torch.Tensor) else value)
        else:
            shape = definition.shape_of(spec, axes)
            if shape is None:
                out.append(random_scalar(spec, device))
            else:
                out.append(random_tensor(name, spec, shape, device, definition.op_type))
    return out


def allocate_outputs(definition: Definition, axes: dict[str, int], device: str | torch.device = "cpu"):
    """Zero tensors for destination-passing style, in output order."""
    return [
        torch.zeros(definition.shape_of(spec, axes) or (), dtype=torch_dtype(spec.dtype), device=device)
        for spec in definition.outputs.values()
    ]


def load_safetensors_inputs(
    definition: Definition, workload: Workload, axes: dict[str, int], roots: list[Path]
) -> dict[str, torch.Tensor]:
    """Load a workload's safetensors inputs once (blob roots, then prefix stripping), checking shape and dtype."""
    from safetensors.torch import load_file

    loaded: dict[str, torch.Tensor] = {}
    files: dict[Path, dict[str, torch.Tensor]] = {}
    for name, desc in workload.inputs.items():
        if not isinstance(desc, SafetensorsInput):
            continue
        path = resolve_blob_path(desc.path, roots)
        try:
            if path not in files:
                files[path] = load_file(str(path))
            tensors = files[path]
            if desc.tensor_key not in tensors:
                raise KeyError(f"key {desc.tensor_key!r} not in {path}")
            tensor = tensors[desc.tensor_key]
            spec = definition.inputs[name]
            want_shape = definition.shape_of(spec, axes)
            if want_shape is not None and tuple(tensor.shape) != want_shape:
                raise ValueError(f"{name}: shape {tuple(tensor.shape)} != definition shape {want_shape}")
            if tensor.dtype != torch_dtype(spec.dtype):
                raise ValueError(f"{name}: dtype {tensor.dtype} != definition dtype {spec.dtype}")
        except Exception as exc:  # noqa: BLE001 - one message, the official wording
            raise HarnessError(f"Failed to load safetensors: {exc}") from exc
        loaded[name] = tensor.contiguous()
    return loaded


def resolve_blob_path(path: str, roots: list[Path]) -> Path:
    """Absolute paths as given; relative ones tried under each root, full then with leading parts stripped."""
    p = Path(path)
    if p.is_absolute():
        return p
    parts = p.parts
    for root in roots:
        for start in range(len(parts)):
            candidate = root.joinpath(*parts[start:])
            if candidate.is_file():
                return candidate
    return p
