"""torch.compile of the task's reference with TF32 matmuls: our stand-in for the official scoring baseline.

The leaderboard's baseline T_b is "an optimized PyTorch implementation"; on B200 its times match torch.compile
with TF32 matmuls. Default mode, no CUDA graphs: CUDA-graph memory pools ran out of memory at 1024x1024.
Inputs on the CPU (tests, smoke checks) run the reference eagerly: this is a GPU baseline.
"""

from __future__ import annotations

import torch

from harness.tasks import load_task

_TASK = "077_sam_hq_vision_encoder_window_partition_attention"
_MODE = "default"
_compiled = None


def _compiled_reference():
    global _compiled
    if _compiled is None:
        config = torch._dynamo.config  # one process evaluates all 16 shapes: leave room for recompiles
        for knob in ("recompile_limit", "cache_size_limit"):
            if hasattr(config, knob):
                setattr(config, knob, max(getattr(config, knob), 64))
        _compiled = torch.compile(load_task(_TASK).reference, mode=_MODE)
    return _compiled


def run(
    hidden_states,
    qkv_weight,
    qkv_bias,
    proj_weight,
    proj_bias,
    rel_pos_h,
    rel_pos_w,
    layer_norm1_weight,
    layer_norm1_bias,
    layer_norm2_weight,
    layer_norm2_bias,
    mlp_lin1_weight,
    mlp_lin1_bias,
    mlp_lin2_weight,
    mlp_lin2_bias,
    layer_norm_eps,
    output,
):
    inputs = (
        hidden_states,
        qkv_weight,
        qkv_bias,
        proj_weight,
        proj_bias,
        rel_pos_h,
        rel_pos_w,
        layer_norm1_weight,
        layer_norm1_bias,
        layer_norm2_weight,
        layer_norm2_bias,
        mlp_lin1_weight,
        mlp_lin1_bias,
        mlp_lin2_weight,
        mlp_lin2_bias,
        layer_norm_eps,
    )
    if not hidden_states.is_cuda:
        results = load_task(_TASK).reference(*inputs)
    else:
        previous = torch.get_float32_matmul_precision()
        torch.set_float32_matmul_precision("high")  # TF32 matmuls, restored below
        try:
            results = _compiled_reference()(*inputs)
        finally:
            torch.set_float32_matmul_precision(previous)
    results = results if isinstance(results, tuple | list) else (results,)
    for dst, src in zip(
        (output,),
        results,
        strict=True,
    ):
        dst.copy_(src)
