"""Destination-passing wrapper around the task's PyTorch reference (the pipeline's end-to-end baseline).

Not for the leaderboard: it imports the reference from this project's `references/` through the harness.
"""

from __future__ import annotations

from harness.tasks import load_task

_TASK = "077_sam_hq_vision_encoder_window_partition_attention"


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
    result = load_task(_TASK).reference(
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
    results = result if isinstance(result, tuple | list) else (result,)
    for dst, src in zip((output,), results, strict=True):
        dst.copy_(src)
