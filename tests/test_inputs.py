"""harness/inputs.py: the official input generation (name heuristics, dtype defaults, scalars, seeding,
output allocation, safetensors loading and blob path resolution), on tiny synthetic definitions."""

from __future__ import annotations

import math
from pathlib import Path

import pytest
import torch

from harness.errors import HarnessError
from harness.inputs import (
    allocate_outputs,
    gen_inputs,
    heuristic_kind,
    load_safetensors_inputs,
    resolve_axes,
    resolve_blob_path,
    set_seed,
)
from harness.schema import Definition, Workload

# --------------------------------------------------------------------------------------------- helpers


def make_definition(
    inputs: dict, outputs: dict | None = None, axes: dict | None = None, **extra
) -> Definition:
    """inputs/outputs: name -> (shape or None, dtype[, description]); `run` takes the inputs in order."""

    def spec(value):
        shape, dtype, *desc = value
        return {"shape": shape, "dtype": dtype, "description": desc[0] if desc else None}

    outputs = outputs or {"out": (["1"], "float32")}
    return Definition.model_validate(
        {
            "name": "synthetic",
            "axes": axes or {},
            "inputs": {n: spec(v) for n, v in inputs.items()},
            "outputs": {n: spec(v) for n, v in outputs.items()},
            "reference": f"def run({', '.join(inputs)}):\n    return None\n",
            **extra,
        }
    )


def gen_one(name: str, shape, dtype: str = "float32", description: str | None = None, *, seed: int = 0):
    definition = make_definition(
        {name: ([str(s) for s in shape] if shape is not None else None, dtype, description)}
    )
    torch.manual_seed(seed)
    return gen_inputs(definition, Workload(uuid="w"))[0]


def kind(name: str, shape=(8, 8), dtype=torch.float32, description: str | None = None) -> str | None:
    definition = make_definition({name: ([str(s) for s in shape], "float32", description)})
    return heuristic_kind(name, definition.inputs[name], tuple(shape), dtype)


# -------------------------------------------------------------------------------------- norm weight/bias


@pytest.mark.parametrize(
    "name",
    ["norm_weight", "layer_norm_weight", "layer_norm1_weight", "q_norm_weight", "layernorm_weight",
     "post_layernorm_weight", "rmsnorm_weight", "norm2_weight", "input_layernorm3_weight"],
)  # fmt: skip
def test_norm_weight_is_ones(name):
    assert kind(name) == "norm_weight"
    t = gen_one(name, (16,))
    assert torch.equal(t, torch.ones(16))
    t2 = gen_one(name, (4, 16))  # 2-D too: the norm rule comes before the weight-matrix rule
    assert torch.equal(t2, torch.ones(4, 16))


@pytest.mark.parametrize("name", ["normal_weight", "ln_weight", "norm_weights", "weight_norm", "enorm_w"])
def test_not_norm_weight(name):
    assert kind(name, (16,)) != "norm_weight"
    t = gen_one(name, (256,))
    assert not torch.equal(t, torch.ones(256))


@pytest.mark.parametrize("name", ["norm_bias", "layer_norm_bias", "layer_norm1_bias", "final_layernorm_bias"])
def test_norm_bias_is_zeros(name):
    assert kind(name) == "norm_bias"
    assert torch.equal(gen_one(name, (16,)), torch.zeros(16))


@pytest.mark.parametrize("name", ["attn_bias", "normal_bias", "norm_biases", "bias"])
def test_not_norm_bias(name):
    assert kind(name) is None
    t = gen_one(name, (256,))
    assert t.abs().sum() > 0 and t.std() > 0.5


# ---------------------------------------------------------------------------------------------- masks


def _is_causal(t: torch.Tensor) -> bool:
    n = t.shape[-1]
    upper = torch.ones(n, n, dtype=torch.bool).triu(1)
    return bool((t[..., ~upper] == 0).all() and (t[..., upper] == torch.finfo(t.dtype).min).all())


@pytest.mark.parametrize("name", ["attention_mask", "causal_mask"])
def test_causal_mask_by_name(name):
    assert kind(name, (2, 5, 5)) == "causal_mask"
    assert _is_causal(gen_one(name, (2, 3, 5, 5)))


def test_causal_mask_by_description_and_dtype_min():
    t = gen_one("bias_mask", (6, 6), "float16", "Additive causal attention mask for decoding")
    assert t.dtype == torch.float16 and _is_causal(t)
    assert t[0, 1].item() == torch.finfo(torch.float16).min


def test_causal_mask_needs_square_last_dims():
    # attention_mask is also a binary-mask name: non-square -> random 0/1
    assert kind("attention_mask", (4, 6)) == "binary_mask"
    t = gen_one("attention_mask", (40, 60))
    assert set(t.unique().tolist()) == {0.0, 1.0}
    # causal_mask is not: non-square -> the dtype default (normal)
    assert kind("causal_mask", (4, 6)) is None
    assert kind("attention_mask", (5,)) == "binary_mask"  # 1-D: not causal
    # the description form also needs a square
    assert kind("m_mask", (4, 6), description="causal attention mask") is None


def test_causal_description_needs_both_words():
    assert kind("bias", (4, 4), description="an attention mask") is None
    assert kind("bias", (4, 4), description="causal") is None


@pytest.mark.parametrize("name", ["x_mask", "text_mask", "aspect_ratio_mask", "drop_mask"])
def test_binary_mask_names(name):
    assert kind(name, (10, 12)) == "binary_mask"
    t = gen_one(name, (50, 40), "bfloat16")
    assert t.dtype == torch.bfloat16 and set(t.float().unique().tolist()) == {0.0, 1.0}


@pytest.mark.parametrize(
    "description",
    [
        "A binary padding mask",
        "values in {0, 1}",
        "0 or 1 per token",
        "1.0 for valid tokens",
        "0.0 for masked",
    ],
)
def test_binary_mask_description_hints(description):
    assert kind("pad_mask", (4, 6), description=description) == "binary_mask"
    assert kind("pad_mask", (4, 6), description=description.upper()) == "binary_mask"  # case-insensitive


def test_binary_mask_negatives():
    assert kind("pad_mask", (4, 6), description="additive mask") is None
    assert kind("pad_mask", (4, 6)) is None
    assert kind("mask", (4, 6), description="binary") is None  # needs the _mask suffix
    assert kind("mask_x", (4, 6), description="binary") is None


# ----------------------------------------------------------------------------------------------- RoPE


@pytest.mark.parametrize("name", ["cos", "sin", "cos_cached", "sin_cached", "rope_cos", "rope_sin"])
def test_rope_values_and_function(name):
    t = gen_one(name, (64, 32), seed=3)
    assert t.abs().max() <= 1.0
    torch.manual_seed(3)
    angle = torch.randn(64, 32).clamp(-math.pi, math.pi)
    expected = angle.cos() if "cos" in name else angle.sin()
    assert torch.equal(t, expected)


@pytest.mark.parametrize("name", ["cosine", "rope", "sin_table", "freqs_cos"])
def test_rope_negatives(name):
    assert kind(name, (4, 4)) != "rope"


# ------------------------------------------------------------------------------------------- positive


@pytest.mark.parametrize("name", ["rstd", "std", "variance", "var", "x_rstd", "ln_std", "h_variance", "x_var",
                                  "var2", "rstd0", "x_rstd12", "h_var3"])  # fmt: skip
def test_positive_names(name):
    assert kind(name, (8,)) == "positive"
    t = gen_one(name, (4096,))
    assert t.min() >= 0.1 and t.mean() > 0.8  # |N(0,1)| + 0.1 has mean ~0.90


@pytest.mark.parametrize("name", ["variable", "stddev", "mystd", "rstd_x", "var_x", "vars"])
def test_positive_negatives(name):
    assert kind(name, (8,)) is None
    assert gen_one(name, (4096,)).min() < 0


# ------------------------------------------------------------------------------------------------ SSM


def test_ssm_a_cumsum():
    t = gen_one("A_cumsum", (4, 64))
    steps = torch.diff(t, dim=-1, prepend=torch.zeros(4, 1))
    assert (steps <= 0).all() and (steps >= -0.1 - 1e-6).all()  # cumsum of U(-0.1, 0) along the last dim
    assert (t[:, -1] < t[:, 0]).all()


@pytest.mark.parametrize("name, low, high", [("A_log", -5.0, -1.0), ("A", -1.0, -0.001), ("g", -5.0, 0.0)])
def test_ssm_ranges(name, low, high):
    t = gen_one(name, (64, 64))
    assert t.min() >= low and t.max() <= high
    assert t.max() - t.min() > 0.8 * (high - low)  # spread over the whole range


@pytest.mark.parametrize("name", ["a", "A_logit", "G", "gate", "A_cum"])
def test_ssm_negatives(name):
    assert kind(name, (8,)) is None


# -------------------------------------------------------------------------------------------- softmax


@pytest.mark.parametrize(
    "name, description",
    [("attn_weights", None), ("attention_weights", None), ("routing_weights", None),
     ("p", "Softmax output probabilities")],
)  # fmt: skip
def test_softmax_rows_sum_to_one(name, description):
    t = gen_one(name, (3, 5, 17), description=description)
    assert (t > 0).all()
    torch.testing.assert_close(t.sum(-1), torch.ones(3, 5))


def test_softmax_negatives():
    assert kind("p", (4, 4), description="softmax input logits") is None
    assert kind("weights_attn", (4, 4)) is None


# -------------------------------------------------------------------------------------- weight matrix


@pytest.mark.parametrize("name", ["weight", "weight2", "fc_weight", "fc_weights", "q_proj", "q_projs",
                                  "o_proj_weight", "up_proj_weights", "x_weight_matrix", "iou_proj_in_weight"])  # fmt: skip
def test_weight_matrix_scaled_by_fan_in(name):
    assert kind(name, (64, 256)) == "weight_matrix"
    t = gen_one(name, (128, 256))
    assert abs(t.std().item() - 1 / 16) < 0.005  # 1/sqrt(fan_in = last dim)
    t3 = gen_one(name, (4, 32, 64))
    assert abs(t3.std().item() - 1 / 8) < 0.01


@pytest.mark.parametrize("name", ["fc_weight", "weight", "q_proj"])
def test_one_d_weight_not_scaled(name):
    assert kind(name, (256,)) is None
    assert abs(gen_one(name, (4096,)).std().item() - 1.0) < 0.05


@pytest.mark.parametrize("name", ["weighted_sum", "proj_out", "weights", "myweight", "w"])
def test_weight_matrix_negatives(name):
    assert kind(name, (64, 256)) is None
    assert abs(gen_one(name, (128, 256)).std().item() - 1.0) < 0.05


# ---------------------------------------------------------------------------- heuristics skip ints/fp8


@pytest.mark.parametrize("dtype", ["int32", "int8", "int64", "bool", "float8_e4m3fn", "float8_e5m2"])
@pytest.mark.parametrize(
    "name", ["layer_norm_weight", "norm_bias", "attention_mask", "A", "fc_weight", "rstd"]
)
def test_heuristics_skip_int_and_fp8(name, dtype):
    shape = (32, 32)
    t = gen_one(name, shape, dtype)
    assert t.shape == shape
    values = t.float()
    assert not torch.equal(values, torch.ones(shape)) and not torch.equal(values, torch.zeros(shape))
    if dtype.startswith("float8"):
        assert values.min() < 0 and values.abs().max() <= 2  # fp32 normal clamped to [-2, 2]


@pytest.mark.parametrize("dtype", ["float16", "bfloat16", "float64"])
def test_heuristics_apply_to_other_floats(dtype):
    assert torch.equal(gen_one("layer_norm_weight", (8,), dtype), torch.ones(8, dtype=getattr(torch, dtype)))


# ----------------------------------------------------------------------------------------- dtype defaults


def test_fp32_default_standard_normal():
    t = gen_one("x", (256, 256))
    assert t.dtype == torch.float32
    assert abs(t.mean().item()) < 0.02 and abs(t.std().item() - 1.0) < 0.02


@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
def test_half_defaults_normal_in_that_dtype(dtype):
    t = gen_one("x", (128, 128), dtype)
    assert t.dtype == getattr(torch, dtype) and abs(t.float().std().item() - 1.0) < 0.05


@pytest.mark.parametrize(
    "dtype, low, high",
    [("int8", -128, 127), ("int16", -1024, 1023), ("int32", -1024, 1023), ("int64", -1024, 1023)],
)
def test_int_ranges(dtype, low, high):
    t = gen_one("idx", (200, 200), dtype)
    assert t.dtype == getattr(torch, dtype)
    assert t.min().item() == low and t.max().item() == high  # both ends reached with 40k draws


def test_bool_default():
    t = gen_one("flags", (64, 64), "bool")
    assert t.dtype == torch.bool and 0.4 < t.float().mean() < 0.6


@pytest.mark.parametrize("dtype", ["float8_e4m3fn", "float8_e5m2"])
def test_fp8_clamped_normal(dtype):
    t = gen_one("x", (128, 128), dtype).float()
    assert t.min() == -2.0 and t.max() == 2.0  # clamped tails land exactly on the bounds


@pytest.mark.skipif(not hasattr(torch, "float4_e2m1fn_x2"), reason="torch without fp4")
@pytest.mark.parametrize("dtype", ["float4_e2m1", "float4_e2m1fn_x2"])
def test_fp4_packed_last_dim_halved(dtype):
    t = gen_one("x", (4, 16), dtype)
    assert t.dtype == torch.float4_e2m1fn_x2 and tuple(t.shape) == (4, 8)


def test_float64_raises_unless_a_heuristic_applies():
    with pytest.raises(HarnessError, match="float64"):
        gen_one("x", (4, 4), "float64")
    assert gen_one("A", (4, 4), "float64").dtype == torch.float64
    assert gen_one("fc_weight", (4, 4), "float64").dtype == torch.float64


# ---------------------------------------------------------------------------------------------- scalars


def test_random_scalars_are_python_values():
    definition = make_definition(
        {"f": (None, "float32"), "i": (None, "int32"), "b": (None, "bool"), "h": (None, "float16")}
    )
    f, i, b, h = gen_inputs(definition, Workload(uuid="w"))
    assert (type(f), type(i), type(b), type(h)) == (float, int, bool, float)
    assert -1024 <= i <= 1023


def test_workload_scalars_keep_their_type_and_value():
    definition = make_definition({"x": (["3"], "float32"), "eps": (None, "float32"), "flag": (None, "bool")})
    workload = Workload.model_validate(
        {
            "uuid": "w",
            "inputs": {"eps": {"type": "scalar", "value": 1}, "flag": {"type": "scalar", "value": True}},
        }
    )
    for _ in range(2):  # the same literal every call
        x, eps, flag = gen_inputs(definition, workload)
        assert eps == 1 and type(eps) is int and flag is True
        assert isinstance(x, torch.Tensor)


def test_zero_dim_tensor_input():
    t = gen_one("x", ())
    assert isinstance(t, torch.Tensor) and t.dim() == 0


# --------------------------------------------------------------------------------------------- seeding


def _two_input_definition():
    return make_definition(
        {"a": (["n", "4"], "float32"), "w_weight": (["4", "4"], "float32")}, axes={"n": {"type": "var"}}
    )


def test_set_seed_reproducible_and_calls_fresh():
    definition = _two_input_definition()
    workload = Workload(uuid="w", axes={"n": 5})
    set_seed(200)
    first = gen_inputs(definition, workload)
    second = gen_inputs(definition, workload)
    set_seed(200)
    again = gen_inputs(definition, workload)
    for x, y in zip(first, again, strict=True):
        assert torch.equal(x, y)
    for x, y in zip(first, second, strict=True):
        assert not torch.equal(x, y)
    set_seed(201)
    assert not torch.equal(gen_inputs(definition, workload)[0], first[0])


def test_set_seed_seeds_python_random():
    import random

    set_seed(7)
    a = random.random()
    set_seed(7)
    assert random.random() == a


def test_gen_inputs_follows_definition_order():
    definition = make_definition(
        {
            "zeta": (["2"], "float32"),
            "alpha": (["3", "4"], "int32"),
            "s": (None, "float32"),
            "mid": (["5"], "bool"),
        }
    )
    values = gen_inputs(definition, Workload(uuid="w"))
    assert [tuple(v.shape) if isinstance(v, torch.Tensor) else "scalar" for v in values] == [
        (2,),
        (3, 4),
        "scalar",
        (5,),
    ]
    assert [v.dtype for v in values if isinstance(v, torch.Tensor)] == [
        torch.float32,
        torch.int32,
        torch.bool,
    ]


def test_sampling_probs_rule():
    definition = make_definition({"probs": (["3", "7"], "float32")}, op_type="sampling")
    probs = gen_inputs(definition, Workload(uuid="w"))[0]
    torch.testing.assert_close(probs.sum(-1), torch.ones(3))
    plain = make_definition({"probs": (["3", "7"], "float32")})
    assert gen_inputs(plain, Workload(uuid="w"))[0].min() < 0


def test_unresolvable_axes_are_a_harness_error():
    definition = make_definition(
        {"x": (["m"], "float32")}, axes={"n": {"type": "var"}, "m": {"type": "expr", "expression": "n * 2"}}
    )
    with pytest.raises(HarnessError, match="cannot resolve axes"):
        resolve_axes(definition, Workload(uuid="w"))
    assert resolve_axes(definition, Workload(uuid="w", axes={"n": 3})) == {"n": 3, "m": 6}


# -------------------------------------------------------------------------------------------- outputs


def test_allocate_outputs_zeros_shapes_dtypes():
    definition = make_definition(
        {"x": (["n"], "float32")},
        outputs={
            "y": (["n", "d"], "float32"),
            "idx": (["2", "n"], "int64"),
            "h": (["d"], "bfloat16"),
            "zero_d": ([], "float32"),
            "scalar": (None, "float32"),
        },
        axes={"n": {"type": "var"}, "d": {"type": "const", "value": 3}},
    )
    axes = resolve_axes(definition, Workload(uuid="w", axes={"n": 4}))
    outs = allocate_outputs(definition, axes)
    assert [tuple(o.shape) for o in outs] == [(4, 3), (2, 4), (3,), (), ()]
    assert [o.dtype for o in outs] == [
        torch.float32,
        torch.int64,
        torch.bfloat16,
        torch.float32,
        torch.float32,
    ]
    assert all(not o.any() for o in outs)
    again = allocate_outputs(definition, axes)
    assert again[0].data_ptr() != outs[0].data_ptr()  # fresh tensors every call


# ------------------------------------------------------------------------------------------ blob paths


def test_resolve_blob_path_prefix_stripping(tmp_path):
    root = tmp_path / "root"
    (root / "blob" / "w").mkdir(parents=True)
    target = root / "blob" / "w" / "t.safetensors"
    target.write_bytes(b"x")
    assert resolve_blob_path("data/flashinfer-trace/blob/w/t.safetensors", [root]) == target
    assert resolve_blob_path("blob/w/t.safetensors", [root]) == target
    # stripping only removes leading parts: the file name alone does not search sub-folders
    assert resolve_blob_path("t.safetensors", [root]) == Path("t.safetensors")


def test_resolve_blob_path_root_priority_beats_longer_match(tmp_path):
    first, second = tmp_path / "first", tmp_path / "second"
    (second / "a" / "b").mkdir(parents=True)
    (second / "a" / "b" / "t.safetensors").write_bytes(b"2")
    first.mkdir()
    (first / "t.safetensors").write_bytes(b"1")
    # the first root wins even though the second holds the full relative path
    assert resolve_blob_path("a/b/t.safetensors", [first, second]) == first / "t.safetensors"
    assert resolve_blob_path("a/b/t.safetensors", [second, first]) == second / "a" / "b" / "t.safetensors"


def test_resolve_blob_path_full_path_before_stripped(tmp_path):
    root = tmp_path / "r"
    (root / "a").mkdir(parents=True)
    (root / "a" / "t.safetensors").write_bytes(b"full")
    (root / "t.safetensors").write_bytes(b"stripped")
    assert resolve_blob_path("a/t.safetensors", [root]) == root / "a" / "t.safetensors"


def test_resolve_blob_path_fallbacks(tmp_path):
    assert str(resolve_blob_path("missing/t.safetensors", [tmp_path])) == "missing/t.safetensors"
    absolute = str(tmp_path / "nowhere.safetensors")
    assert str(resolve_blob_path(absolute, [tmp_path / "other"])) == absolute
    (tmp_path / "dir.safetensors").mkdir()  # a directory is not a blob
    assert str(resolve_blob_path("dir.safetensors", [tmp_path])) == "dir.safetensors"


# ----------------------------------------------------------------------------------------- safetensors


@pytest.fixture
def blob_definition():
    return make_definition({"x": (["n", "4"], "float32"), "k": (["n"], "int32")}, axes={"n": {"type": "var"}})


def _blob_workload(path: str, x_key: str = "x", k_key: str = "k") -> Workload:
    return Workload.model_validate(
        {
            "uuid": "w",
            "axes": {"n": 3},
            "inputs": {
                "x": {"type": "safetensors", "path": path, "tensor_key": x_key},
                "k": {"type": "safetensors", "path": path, "tensor_key": k_key},
            },
        }
    )


def test_load_safetensors_and_gen_inputs(tmp_path, blob_definition):
    from safetensors.torch import save_file

    x = torch.arange(12, dtype=torch.float32).reshape(3, 4)
    k = torch.tensor([1, 2, 3], dtype=torch.int32)
    (tmp_path / "blob").mkdir()
    save_file({"x": x, "k": k}, str(tmp_path / "blob" / "w.safetensors"))
    workload = _blob_workload("prefix/blob/w.safetensors")
    axes = resolve_axes(blob_definition, workload)
    loaded = load_safetensors_inputs(blob_definition, workload, axes, [tmp_path])
    assert torch.equal(loaded["x"], x) and torch.equal(loaded["k"], k)
    assert loaded["x"].is_contiguous()
    got = gen_inputs(blob_definition, workload, safetensors_cache=loaded)
    assert torch.equal(got[0], x) and torch.equal(got[1], k)
    with pytest.raises(HarnessError, match="was not loaded"):
        gen_inputs(blob_definition, workload)


@pytest.mark.parametrize(
    "tensors, match",
    [
        ({"x": torch.zeros(3, 5), "k": torch.zeros(3, dtype=torch.int32)}, "shape"),
        ({"x": torch.zeros(3, 4, dtype=torch.float64), "k": torch.zeros(3, dtype=torch.int32)}, "dtype"),
        ({"x": torch.zeros(3, 4), "k": torch.zeros(3, dtype=torch.int64)}, "dtype"),
        ({"x": torch.zeros(3, 4)}, "'k'"),
    ],
    ids=["shape", "dtype-float", "dtype-int", "missing-key"],
)
def test_load_safetensors_mismatch_errors(tmp_path, blob_definition, tensors, match):
    from safetensors.torch import save_file

    save_file(tensors, str(tmp_path / "w.safetensors"))
    workload = _blob_workload("w.safetensors")
    with pytest.raises(HarnessError) as info:
        load_safetensors_inputs(
            blob_definition, workload, resolve_axes(blob_definition, workload), [tmp_path]
        )
    message = str(info.value)
    assert message.startswith("Failed to load safetensors: ") and match in message


def test_load_safetensors_missing_file(tmp_path, blob_definition):
    workload = _blob_workload("nowhere/w.safetensors")
    with pytest.raises(HarnessError, match="Failed to load safetensors"):
        load_safetensors_inputs(
            blob_definition, workload, resolve_axes(blob_definition, workload), [tmp_path]
        )
