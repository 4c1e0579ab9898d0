"""torch.compile of the task's reference with TF32 matmuls: our stand-in for the official scoring baseline.

The leaderboard's baseline T_b is "an optimized PyTorch implementation"; on B200 its times match torch.compile
with TF32 matmuls. Mode reduce-overhead (CUDA graphs): the reference is many small kernels, so launch overhead
dominates; each call's fresh input addresses are copied into the graph's static inputs by cudagraph trees.
Inputs on the CPU (tests, smoke checks) run the reference eagerly: this is a GPU baseline.
"""

from __future__ import annotations

import torch

from harness.tasks import load_task

_TASK = "074_sam_hq_mask_decoder_iou_hypernetwork_fusion_backward"
_MODE = "reduce-overhead"
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
    inputs = (
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
    )
    if not grad_iou_scores.is_cuda:
        results = load_task(_TASK).reference(*inputs)
    else:
        previous = torch.get_float32_matmul_precision()
        torch.set_float32_matmul_precision("high")  # TF32 matmuls, restored below
        try:
            torch.compiler.cudagraph_mark_step_begin()  # the previous call's graph outputs are copied out
            results = _compiled_reference()(*inputs)
        finally:
            torch.set_float32_matmul_precision(previous)
    results = results if isinstance(results, tuple | list) else (results,)
    for dst, src in zip(
        (
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
        ),
        results,
        strict=True,
    ):
        dst.copy_(src)
