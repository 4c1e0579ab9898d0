"""The PyTorch reference called in destination-passing style (the pipeline's end-to-end baseline).

Not for the leaderboard: it calls this project's reference through the harness.
"""

from __future__ import annotations

from harness.baselines import run_reference

_TASK = "075_sam_hq_mask_decoder_two_way_transformer"


def run(
    queries,
    keys,
    query_point_embedding,
    key_point_embedding,
    self_attn_q_weight,
    self_attn_q_bias,
    self_attn_k_weight,
    self_attn_k_bias,
    self_attn_v_weight,
    self_attn_v_bias,
    self_attn_out_weight,
    self_attn_out_bias,
    layer_norm1_weight,
    layer_norm1_bias,
    cross_t2i_q_weight,
    cross_t2i_q_bias,
    cross_t2i_k_weight,
    cross_t2i_k_bias,
    cross_t2i_v_weight,
    cross_t2i_v_bias,
    cross_t2i_out_weight,
    cross_t2i_out_bias,
    layer_norm2_weight,
    layer_norm2_bias,
    mlp_lin1_weight,
    mlp_lin1_bias,
    mlp_lin2_weight,
    mlp_lin2_bias,
    layer_norm3_weight,
    layer_norm3_bias,
    cross_i2t_q_weight,
    cross_i2t_q_bias,
    cross_i2t_k_weight,
    cross_i2t_k_bias,
    cross_i2t_v_weight,
    cross_i2t_v_bias,
    cross_i2t_out_weight,
    cross_i2t_out_bias,
    layer_norm4_weight,
    layer_norm4_bias,
    skip_first_layer_pe,
    output_queries,
    output_keys,
):
    run_reference(_TASK, list(locals().values()))  # inputs then outputs, in definition order
