"""Reference for 075: one two-way transformer block of the SAM-HQ mask decoder.

Sparse prompt tokens (queries, T per prompt) and dense image tokens (keys, S per prompt) update each other:
  1. self-attention on the tokens (8 heads x 32), residual, LayerNorm1;
  2. token -> image cross-attention (8 heads x 16 inside a 128-wide projection), residual, LayerNorm2;
  3. token MLP 256 -> 2048 -> ReLU -> 256, residual, LayerNorm3;
  4. image -> token cross-attention (queries from the image), residual on the image tokens, LayerNorm4.
Positional embeddings are added to attention query/key inputs, never to values. As in the official
reference the self-attention residual is always added; `skip_first_layer_pe` only drops the token PE
from the self-attention query/key input. Every (batch, point) pair is an independent sequence.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F

_NUM_HEADS = 8
_LAYER_NORM_EPS = 1e-6


def _layer_norm(x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor) -> torch.Tensor:
    # Biased variance as the mean of squared deviations, then (x - mean) / sqrt(var + eps) * w + b.
    centered = x - x.mean(dim=-1, keepdim=True)
    var = (centered**2).mean(dim=-1, keepdim=True)
    return centered / torch.sqrt(var + _LAYER_NORM_EPS) * weight + bias


def _split_heads(x: torch.Tensor) -> torch.Tensor:  # [N, L, C] -> [N, heads, L, C / heads]
    n, length, width = x.shape
    return x.reshape(n, length, _NUM_HEADS, width // _NUM_HEADS).transpose(1, 2)


def _attention(
    q_in: torch.Tensor,  # [N, Lq, 256] query-side input
    k_in: torch.Tensor,  # [N, Lk, 256] key-side input
    v_in: torch.Tensor,  # [N, Lk, 256] value-side input
    q_w: torch.Tensor,  # [D, 256], D = 256 (self) or 128 (cross)
    q_b: torch.Tensor,  # [D]
    k_w: torch.Tensor,  # [D, 256]
    k_b: torch.Tensor,  # [D]
    v_w: torch.Tensor,  # [D, 256]
    v_b: torch.Tensor,  # [D]
    out_w: torch.Tensor,  # [256, D]
    out_b: torch.Tensor,  # [256]
) -> torch.Tensor:  # [N, Lq, 256]
    q = _split_heads(F.linear(q_in, q_w, q_b))
    k = _split_heads(F.linear(k_in, k_w, k_b))
    v = _split_heads(F.linear(v_in, v_w, v_b))
    scores = torch.matmul(q, k.transpose(-2, -1)) * q.shape[-1] ** -0.5  # [N, heads, Lq, Lk]
    # The official softmax runs in float32 whatever the input dtype; keep that rounding.
    probs = torch.softmax(scores, dim=-1, dtype=torch.float32).to(q.dtype)
    out = torch.matmul(probs, v).transpose(1, 2)  # [N, Lq, heads, D / heads]
    return F.linear(out.reshape(out.shape[0], out.shape[1], -1), out_w, out_b)


@torch.no_grad()
def run(
    queries: torch.Tensor,  # [B, P, T, 256]
    keys: torch.Tensor,  # [B, P, S, 256]
    query_point_embedding: torch.Tensor,  # [B, P, T, 256]
    key_point_embedding: torch.Tensor,  # [B, P, S, 256]
    self_attn_q_weight: torch.Tensor,  # [256, 256]
    self_attn_q_bias: torch.Tensor,  # [256]
    self_attn_k_weight: torch.Tensor,  # [256, 256]
    self_attn_k_bias: torch.Tensor,  # [256]
    self_attn_v_weight: torch.Tensor,  # [256, 256]
    self_attn_v_bias: torch.Tensor,  # [256]
    self_attn_out_weight: torch.Tensor,  # [256, 256]
    self_attn_out_bias: torch.Tensor,  # [256]
    layer_norm1_weight: torch.Tensor,  # [256]
    layer_norm1_bias: torch.Tensor,  # [256]
    cross_t2i_q_weight: torch.Tensor,  # [128, 256]
    cross_t2i_q_bias: torch.Tensor,  # [128]
    cross_t2i_k_weight: torch.Tensor,  # [128, 256]
    cross_t2i_k_bias: torch.Tensor,  # [128]
    cross_t2i_v_weight: torch.Tensor,  # [128, 256]
    cross_t2i_v_bias: torch.Tensor,  # [128]
    cross_t2i_out_weight: torch.Tensor,  # [256, 128]
    cross_t2i_out_bias: torch.Tensor,  # [256]
    layer_norm2_weight: torch.Tensor,  # [256]
    layer_norm2_bias: torch.Tensor,  # [256]
    mlp_lin1_weight: torch.Tensor,  # [2048, 256]
    mlp_lin1_bias: torch.Tensor,  # [2048]
    mlp_lin2_weight: torch.Tensor,  # [256, 2048]
    mlp_lin2_bias: torch.Tensor,  # [256]
    layer_norm3_weight: torch.Tensor,  # [256]
    layer_norm3_bias: torch.Tensor,  # [256]
    cross_i2t_q_weight: torch.Tensor,  # [128, 256]
    cross_i2t_q_bias: torch.Tensor,  # [128]
    cross_i2t_k_weight: torch.Tensor,  # [128, 256]
    cross_i2t_k_bias: torch.Tensor,  # [128]
    cross_i2t_v_weight: torch.Tensor,  # [128, 256]
    cross_i2t_v_bias: torch.Tensor,  # [128]
    cross_i2t_out_weight: torch.Tensor,  # [256, 128]
    cross_i2t_out_bias: torch.Tensor,  # [256]
    layer_norm4_weight: torch.Tensor,  # [256]
    layer_norm4_bias: torch.Tensor,  # [256]
    skip_first_layer_pe: bool,  # scalar
) -> tuple[torch.Tensor, torch.Tensor]:
    batch, points, n_queries, hidden = queries.shape
    n_keys = keys.shape[2]
    sequences = batch * points
    # One sequence per (batch, point) pair: [N, T, 256] and [N, S, 256].
    tokens = queries.reshape(sequences, n_queries, hidden)
    image = keys.reshape(sequences, n_keys, hidden)
    token_pe = query_point_embedding.reshape(sequences, n_queries, hidden)
    image_pe = key_point_embedding.reshape(sequences, n_keys, hidden)

    # 1. Self-attention on the tokens.
    qk_in = tokens if skip_first_layer_pe else tokens + token_pe
    attn = _attention(
        qk_in,
        qk_in,
        tokens,
        self_attn_q_weight,
        self_attn_q_bias,
        self_attn_k_weight,
        self_attn_k_bias,
        self_attn_v_weight,
        self_attn_v_bias,
        self_attn_out_weight,
        self_attn_out_bias,
    )
    tokens = _layer_norm(tokens + attn, layer_norm1_weight, layer_norm1_bias)

    # 2. Tokens attend to the image.
    image_with_pe = image + image_pe
    attn = _attention(
        tokens + token_pe,
        image_with_pe,
        image,
        cross_t2i_q_weight,
        cross_t2i_q_bias,
        cross_t2i_k_weight,
        cross_t2i_k_bias,
        cross_t2i_v_weight,
        cross_t2i_v_bias,
        cross_t2i_out_weight,
        cross_t2i_out_bias,
    )
    tokens = _layer_norm(tokens + attn, layer_norm2_weight, layer_norm2_bias)

    # 3. Token MLP.
    mlp = F.linear(F.relu(F.linear(tokens, mlp_lin1_weight, mlp_lin1_bias)), mlp_lin2_weight, mlp_lin2_bias)
    tokens = _layer_norm(tokens + mlp, layer_norm3_weight, layer_norm3_bias)

    # 4. The image attends to the tokens (queries come from the image side).
    attn = _attention(
        image_with_pe,
        tokens + token_pe,
        tokens,
        cross_i2t_q_weight,
        cross_i2t_q_bias,
        cross_i2t_k_weight,
        cross_i2t_k_bias,
        cross_i2t_v_weight,
        cross_i2t_v_bias,
        cross_i2t_out_weight,
        cross_i2t_out_bias,
    )
    image = _layer_norm(image + attn, layer_norm4_weight, layer_norm4_bias)

    return (
        tokens.reshape(batch, points, n_queries, hidden),
        image.reshape(batch, points, n_keys, hidden),
    )
