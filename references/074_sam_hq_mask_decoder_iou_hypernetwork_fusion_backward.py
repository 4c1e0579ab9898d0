"""Reference for 074: backward of SAM-HQ's IoU head and its four hypernetwork MLPs.

Both heads are three-layer MLPs, Linear -> ReLU -> Linear -> ReLU -> Linear: the IoU head 256 -> 1024 -> 1024
-> 4 on the IoU token, hypernetwork m (m = 0..3) 256 -> 256 -> 256 -> 32 on mask token m. Given the
gradient of each head's output and the activations saved by the forward pass, every layer y = x @ W.T + b
yields dW = dy.T @ x, db = sum over rows of dy and dx = dy @ W; each ReLU passes the gradient where its
saved pre-activation is > 0. The bias inputs belong to the signature but no backward formula reads them.
All rows (batch_size * point_batch_size of them, M below) are flattened into one matrix dimension.
"""

from __future__ import annotations

import torch


def _linear_backward(
    grad_out: torch.Tensor,  # [M, O]
    inp: torch.Tensor,  # [M, I] the layer's saved input
    weight: torch.Tensor,  # [O, I]
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """(dW [O, I], db [O], dx [M, I]) of y = inp @ weight.T + b."""
    return grad_out.t() @ inp, grad_out.sum(dim=0), grad_out @ weight


def _relu_backward(grad: torch.Tensor, pre_activation: torch.Tensor) -> torch.Tensor:
    return grad * (pre_activation > 0).to(grad.dtype)


def _mlp_backward(
    grad_out: torch.Tensor,  # [M, O] gradient of the MLP's output
    x: torch.Tensor,  # [M, C] the MLP's input
    h1: torch.Tensor,  # [M, H] first layer, pre-ReLU
    h1_relu: torch.Tensor,  # [M, H]
    h2: torch.Tensor,  # [M, H] second layer, pre-ReLU
    h2_relu: torch.Tensor,  # [M, H]
    w_in: torch.Tensor,  # [H, C]
    w_hidden: torch.Tensor,  # [H, H]
    w_out: torch.Tensor,  # [O, H]
) -> tuple[torch.Tensor, tuple[torch.Tensor, ...]]:
    """dx [M, C] and (dW_in, db_in, dW_hidden, db_hidden, dW_out, db_out) of the three-layer MLP."""
    dw_out, db_out, grad = _linear_backward(grad_out, h2_relu, w_out)
    grad = _relu_backward(grad, h2)
    dw_hidden, db_hidden, grad = _linear_backward(grad, h1_relu, w_hidden)
    grad = _relu_backward(grad, h1)
    dw_in, db_in, dx = _linear_backward(grad, x, w_in)
    return dx, (dw_in, db_in, dw_hidden, db_hidden, dw_out, db_out)


@torch.no_grad()
def run(
    grad_iou_scores: torch.Tensor,  # [B, P, 4]
    grad_hyper_weights: torch.Tensor,  # [B, P, 4, 32]
    iou_token_out: torch.Tensor,  # [B, P, 256]
    mask_tokens_out: torch.Tensor,  # [B, P, 4, 256]
    iou_proj_in_weight: torch.Tensor,  # [1024, 256]
    iou_proj_in_bias: torch.Tensor,  # [1024] (unused by the backward pass)
    iou_hidden_weight: torch.Tensor,  # [1024, 1024]
    iou_hidden_bias: torch.Tensor,  # [1024] (unused)
    iou_proj_out_weight: torch.Tensor,  # [4, 1024]
    iou_proj_out_bias: torch.Tensor,  # [4] (unused)
    iou_hidden1: torch.Tensor,  # [B, P, 1024] pre-ReLU
    iou_hidden1_relu: torch.Tensor,  # [B, P, 1024]
    iou_hidden2: torch.Tensor,  # [B, P, 1024] pre-ReLU
    iou_hidden2_relu: torch.Tensor,  # [B, P, 1024]
    hyper_proj_in_weights: torch.Tensor,  # [4, 256, 256]
    hyper_proj_in_biases: torch.Tensor,  # [4, 256] (unused)
    hyper_hidden_weights: torch.Tensor,  # [4, 256, 256]
    hyper_hidden_biases: torch.Tensor,  # [4, 256] (unused)
    hyper_proj_out_weights: torch.Tensor,  # [4, 32, 256]
    hyper_proj_out_biases: torch.Tensor,  # [4, 32] (unused)
    hyper_hidden1_0: torch.Tensor,  # [B, P, 256] pre-ReLU
    hyper_hidden1_1: torch.Tensor,  # [B, P, 256]
    hyper_hidden1_2: torch.Tensor,  # [B, P, 256]
    hyper_hidden1_3: torch.Tensor,  # [B, P, 256]
    hyper_hidden1_relu_0: torch.Tensor,  # [B, P, 256]
    hyper_hidden1_relu_1: torch.Tensor,  # [B, P, 256]
    hyper_hidden1_relu_2: torch.Tensor,  # [B, P, 256]
    hyper_hidden1_relu_3: torch.Tensor,  # [B, P, 256]
    hyper_hidden2_0: torch.Tensor,  # [B, P, 256] pre-ReLU
    hyper_hidden2_1: torch.Tensor,  # [B, P, 256]
    hyper_hidden2_2: torch.Tensor,  # [B, P, 256]
    hyper_hidden2_3: torch.Tensor,  # [B, P, 256]
    hyper_hidden2_relu_0: torch.Tensor,  # [B, P, 256]
    hyper_hidden2_relu_1: torch.Tensor,  # [B, P, 256]
    hyper_hidden2_relu_2: torch.Tensor,  # [B, P, 256]
    hyper_hidden2_relu_3: torch.Tensor,  # [B, P, 256]
) -> tuple[torch.Tensor, ...]:
    batch, points, hidden = iou_token_out.shape
    num_masks = mask_tokens_out.shape[2]

    def rows(t: torch.Tensor) -> torch.Tensor:  # [B, P, C] -> [M, C]
        return t.reshape(batch * points, t.shape[-1])

    # IoU head.
    grad_iou_token, iou_grads = _mlp_backward(
        rows(grad_iou_scores),
        rows(iou_token_out),
        rows(iou_hidden1),
        rows(iou_hidden1_relu),
        rows(iou_hidden2),
        rows(iou_hidden2_relu),
        iou_proj_in_weight,
        iou_hidden_weight,
        iou_proj_out_weight,
    )

    # The four hypernetworks: same MLP, weights stacked along dim 0, one mask token each.
    saved = (
        (hyper_hidden1_0, hyper_hidden1_relu_0, hyper_hidden2_0, hyper_hidden2_relu_0),
        (hyper_hidden1_1, hyper_hidden1_relu_1, hyper_hidden2_1, hyper_hidden2_relu_1),
        (hyper_hidden1_2, hyper_hidden1_relu_2, hyper_hidden2_2, hyper_hidden2_relu_2),
        (hyper_hidden1_3, hyper_hidden1_relu_3, hyper_hidden2_3, hyper_hidden2_relu_3),
    )
    grad_tokens = []
    hyper_grads = []
    for m in range(num_masks):
        h1, h1_relu, h2, h2_relu = (rows(t) for t in saved[m])
        dx, grads = _mlp_backward(
            rows(grad_hyper_weights[:, :, m, :]),
            rows(mask_tokens_out[:, :, m, :]),
            h1,
            h1_relu,
            h2,
            h2_relu,
            hyper_proj_in_weights[m],
            hyper_hidden_weights[m],
            hyper_proj_out_weights[m],
        )
        grad_tokens.append(dx)
        hyper_grads.append(grads)
    # Stack per-MLP (dW_in, db_in, dW_hidden, db_hidden, dW_out, db_out) along a new leading mask dim.
    stacked = tuple(torch.stack(per_mask) for per_mask in zip(*hyper_grads, strict=True))
    grad_mask_tokens = torch.stack(grad_tokens, dim=1).reshape(batch, points, num_masks, hidden)

    return (
        grad_iou_token.reshape(batch, points, hidden),
        grad_mask_tokens,
        *iou_grads,
        *stacked,
    )
