"""The PyTorch reference called in destination-passing style (the pipeline's end-to-end baseline).

Not for the leaderboard: it calls this project's reference through the harness.
"""

from __future__ import annotations

from harness.baselines import run_reference

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
    run_reference(_TASK, list(locals().values()))  # inputs then outputs, in definition order
