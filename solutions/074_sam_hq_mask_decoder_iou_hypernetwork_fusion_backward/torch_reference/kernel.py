"""The PyTorch reference called in destination-passing style (the pipeline's end-to-end baseline).

Not for the leaderboard: it calls this project's reference through the harness.
"""

from __future__ import annotations

from harness.baselines import run_reference

_TASK = "074_sam_hq_mask_decoder_iou_hypernetwork_fusion_backward"


def run(
    grad_iou_scores,
    grad_hyper_weights,
    iou_token_out,
    mask_tokens_out,
    iou_proj_in_weight,
    iou_proj_in_bias,
    iou_hidden_weight,
    iou_hidden_bias,
    iou_proj_out_weight,
    iou_proj_out_bias,
    iou_hidden1,
    iou_hidden1_relu,
    iou_hidden2,
    iou_hidden2_relu,
    hyper_proj_in_weights,
    hyper_proj_in_biases,
    hyper_hidden_weights,
    hyper_hidden_biases,
    hyper_proj_out_weights,
    hyper_proj_out_biases,
    hyper_hidden1_0,
    hyper_hidden1_1,
    hyper_hidden1_2,
    hyper_hidden1_3,
    hyper_hidden1_relu_0,
    hyper_hidden1_relu_1,
    hyper_hidden1_relu_2,
    hyper_hidden1_relu_3,
    hyper_hidden2_0,
    hyper_hidden2_1,
    hyper_hidden2_2,
    hyper_hidden2_3,
    hyper_hidden2_relu_0,
    hyper_hidden2_relu_1,
    hyper_hidden2_relu_2,
    hyper_hidden2_relu_3,
    grad_iou_token_out,
    grad_mask_tokens_out,
    grad_iou_proj_in_weight,
    grad_iou_proj_in_bias,
    grad_iou_hidden_weight,
    grad_iou_hidden_bias,
    grad_iou_proj_out_weight,
    grad_iou_proj_out_bias,
    grad_hyper_proj_in_weights,
    grad_hyper_proj_in_biases,
    grad_hyper_hidden_weights,
    grad_hyper_hidden_biases,
    grad_hyper_proj_out_weights,
    grad_hyper_proj_out_biases,
):
    run_reference(_TASK, list(locals().values()))  # inputs then outputs, in definition order
