"""references/*.py against the official SOL-ExecBench references, on small shapes on the CPU.

Inputs follow the official name heuristics (weights randn / sqrt(fan_in), the rest standard normal), except
that LayerNorm weights and biases are random too, so that they are exercised. float64 runs must agree to
1e-9; one float32 run per task checks the fp32 path at a looser bound. The official references are imported
by path from $SOLBENCH_OFFICIAL (the `official` fixture skips without it).
"""

from __future__ import annotations

import ast
import math

import pytest
import torch

from harness.inputs import heuristic_kind
from harness.tasks import load_module, load_task

T074 = "074_sam_hq_mask_decoder_iou_hypernetwork_fusion_backward"
T075 = "075_sam_hq_mask_decoder_two_way_transformer"
T077 = "077_sam_hq_vision_encoder_window_partition_attention"
EPS_077 = 1e-6
F64_BOUND = 1e-9
SMALL = {  # task -> (var axes, scalar inputs) of a quick case
    T074: ({"batch_size": 2, "point_batch_size": 3}, {}),
    T075: (
        {"batch_size": 2, "point_batch_size": 1, "n_query_tokens": 3, "n_key_tokens": 16},
        {"skip_first_layer_pe": False},
    ),
    T077: ({"batch_size": 1, "height": 9, "width": 16}, {"layer_norm_eps": EPS_077}),
}


def _inputs(task: str, axes: dict[str, int], scalars: dict, seed: int, dtype=torch.float64) -> list:
    """Random inputs in definition order, drawn in float64 (then cast to `dtype`)."""
    definition = load_task(task).definition
    resolved = definition.resolve_axes(axes)
    gen = torch.Generator().manual_seed(seed)
    args = []
    for name, spec in definition.inputs.items():
        shape = definition.shape_of(spec, resolved)
        if shape is None:
            args.append(scalars[name])
            continue
        t = torch.randn(shape, generator=gen, dtype=torch.float64)
        kind = heuristic_kind(name, spec, shape, torch.float32)
        if kind == "norm_weight":
            t = 1 + 0.2 * t
        elif kind == "norm_bias":
            t = 0.2 * t
        elif kind == "weight_matrix":
            t = t / math.sqrt(shape[-1])
        else:
            assert kind is None, (name, kind)
        args.append(t.to(dtype))
    return args


def _official_run(official, task: str):
    return load_module(official / task / "reference.py", f"_official_reference_{task[:3]}").run


def _as_tuple(out) -> tuple[torch.Tensor, ...]:
    return out if isinstance(out, tuple) else (out,)


def _max_diff(ours, theirs) -> float:
    ours, theirs = _as_tuple(ours), _as_tuple(theirs)
    assert len(ours) == len(theirs)
    worst = 0.0
    for a, b in zip(ours, theirs, strict=True):
        assert a.shape == b.shape and a.dtype == b.dtype
        assert torch.isfinite(a).all()
        worst = max(worst, (a - b).abs().max().item())
    return worst


def _scale(out) -> float:
    return max(t.abs().max().item() for t in _as_tuple(out))


def _check(official, task, axes, scalars, seed, dtype=torch.float64):
    args = _inputs(task, axes, scalars, seed, dtype)
    ours = load_task(task).reference(*args)
    theirs = _official_run(official, task)(*args)
    return _max_diff(ours, theirs), _scale(theirs)


# --------------------------------------------------------------------------------- no official files


@pytest.mark.parametrize("task", [T074, T075, T077])
def test_signature_and_outputs(task):
    """run() takes the definition's inputs in order and returns its outputs' shapes and dtypes."""
    loaded = load_task(task)
    tree = ast.parse(loaded.reference_source)
    run = next(n for n in tree.body if isinstance(n, ast.FunctionDef) and n.name == "run")
    assert [a.arg for a in run.args.args] == list(loaded.definition.inputs)
    assert any("no_grad" in ast.unparse(d) for d in run.decorator_list)

    axes, scalars = SMALL[task]
    out = _as_tuple(loaded.reference(*_inputs(task, axes, scalars, seed=0, dtype=torch.float32)))
    resolved = loaded.definition.resolve_axes(axes)
    assert len(out) == len(loaded.definition.outputs)
    for t, (name, spec) in zip(out, loaded.definition.outputs.items(), strict=True):
        assert tuple(t.shape) == loaded.definition.shape_of(spec, resolved), name
        assert t.dtype == torch.float32 and torch.isfinite(t).all(), name


def test_074_matches_autograd():
    """The hand-written backward equals autograd through a consistent forward pass."""
    batch, points = 2, 3
    args = _inputs(T074, {"batch_size": batch, "point_batch_size": points}, {}, seed=1)
    names = list(load_task(T074).definition.inputs)
    a = dict(zip(names, args, strict=True))
    params = {
        k: v.clone().requires_grad_(True)
        for k, v in a.items()
        if k.endswith(("weight", "weights", "bias", "biases"))
    }
    iou_in = a["iou_token_out"].clone().requires_grad_(True)
    mask_in = a["mask_tokens_out"].clone().requires_grad_(True)

    def mlp(x, w1, b1, w2, b2, w3, b3):
        h1 = x @ w1.t() + b1
        h2 = h1.relu() @ w2.t() + b2
        return h1, h2, h2.relu() @ w3.t() + b3

    layer_names = (
        "proj_in_weight",
        "proj_in_bias",
        "hidden_weight",
        "hidden_bias",
        "proj_out_weight",
        "proj_out_bias",
    )
    iou_layers = [params[f"iou_{n}"] for n in layer_names]
    # The hypernetworks' tensors are stacked over the 4 MLPs and named in the plural (weights, biases).
    hyper_layers = [params[f"hyper_{n}{'es' if n.endswith('bias') else 's'}"] for n in layer_names]
    h1, h2, iou = mlp(iou_in, *iou_layers)
    a.update(iou_hidden1=h1, iou_hidden1_relu=h1.relu(), iou_hidden2=h2, iou_hidden2_relu=h2.relu())
    hyper = []
    for m in range(4):
        h1, h2, out = mlp(mask_in[:, :, m], *(t[m] for t in hyper_layers))
        a.update({f"hyper_hidden1_{m}": h1, f"hyper_hidden1_relu_{m}": h1.relu()})
        a.update({f"hyper_hidden2_{m}": h2, f"hyper_hidden2_relu_{m}": h2.relu()})
        hyper.append(out)
    loss = (iou * a["grad_iou_scores"]).sum() + (torch.stack(hyper, dim=2) * a["grad_hyper_weights"]).sum()
    loss.backward()

    ours = load_task(T074).reference(*(a[n].detach() for n in names))
    expected = [iou_in.grad, mask_in.grad] + [
        params[n.removeprefix("grad_")].grad for n in list(load_task(T074).definition.outputs)[2:]
    ]
    for got, want in zip(ours, expected, strict=True):
        torch.testing.assert_close(got, want, rtol=0, atol=1e-10)


# ------------------------------------------------------------------------------ against the official


@pytest.mark.parametrize("batch,points", [(1, 1), (1, 5), (4, 16)])
def test_074_float64(official, batch, points):
    diff, _ = _check(
        official, T074, {"batch_size": batch, "point_batch_size": points}, {}, seed=batch * 100 + points
    )
    assert diff <= F64_BOUND


@pytest.mark.parametrize(
    "batch,points,n_query,n_key,skip_pe",
    [
        (1, 1, 1, 37, False),
        (1, 1, 1, 37, True),
        (2, 1, 4, 64, False),
        (1, 2, 4, 64, True),
        (1, 2, 8, 37, True),
        (2, 2, 8, 64, False),
    ],
)
def test_075_float64(official, batch, points, n_query, n_key, skip_pe):
    axes = {"batch_size": batch, "point_batch_size": points, "n_query_tokens": n_query, "n_key_tokens": n_key}
    diff, _ = _check(official, T075, axes, {"skip_first_layer_pe": skip_pe}, seed=n_query * 1000 + n_key)
    assert diff <= F64_BOUND


@pytest.mark.parametrize("batch,height,width", [(1, 5, 9), (2, 14, 14), (1, 15, 29), (2, 28, 30)])
def test_077_float64(official, batch, height, width):
    axes = {"batch_size": batch, "height": height, "width": width}
    diff, _ = _check(official, T077, axes, {"layer_norm_eps": EPS_077}, seed=height * 100 + width)
    assert diff <= F64_BOUND


@pytest.mark.parametrize(
    "task,axes,scalars",
    [
        (T074, {"batch_size": 4, "point_batch_size": 16}, {}),
        (
            T075,
            {"batch_size": 2, "point_batch_size": 1, "n_query_tokens": 5, "n_key_tokens": 64},
            {"skip_first_layer_pe": True},
        ),
        (T077, {"batch_size": 1, "height": 15, "width": 29}, {"layer_norm_eps": EPS_077}),
    ],
    ids=["074", "075", "077"],
)
def test_float32(official, task, axes, scalars):
    diff, scale = _check(official, task, axes, scalars, seed=7, dtype=torch.float32)
    assert diff <= 1e-5 * max(1.0, scale)
