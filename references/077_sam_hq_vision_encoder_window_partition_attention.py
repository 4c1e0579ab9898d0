"""Reference for 077: one windowed-attention block of the SAM-HQ ViT-B image encoder.

x -> LayerNorm1 -> zero-pad height/width to multiples of 14 -> 14x14 windows -> 12-head attention
(head_dim 64) with decomposed 2-D relative-position bias -> output projection -> un-window, crop ->
residual -> LayerNorm2 -> MLP 768 -> 3072 -> GELU (erf) -> 768 -> residual.
Padding comes after LayerNorm1, so padded tokens are exact zeros entering the qkv projection; they are
not masked and take part in the attention of their window as keys and values.
Relative-position bias of query (qh, qw) against key (kh, kw), per head:
  q[qh, qw] . rel_pos_h[qh - kh + 13] + q[qh, qw] . rel_pos_w[qw - kw + 13]  (q before scaling).
"""

from __future__ import annotations

import torch
import torch.nn.functional as F

_WINDOW = 14
_NUM_HEADS = 12


def _layer_norm(x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor, eps: float) -> torch.Tensor:
    mean = x.mean(dim=-1, keepdim=True)
    var = x.var(dim=-1, keepdim=True, unbiased=False)
    return (x - mean) / torch.sqrt(var + eps) * weight + bias


def _to_windows(x: torch.Tensor) -> torch.Tensor:  # [B, Hp, Wp, C] -> [B * nh * nw, 14, 14, C]
    b, hp, wp, c = x.shape
    x = x.reshape(b, hp // _WINDOW, _WINDOW, wp // _WINDOW, _WINDOW, c)
    return x.permute(0, 1, 3, 2, 4, 5).reshape(-1, _WINDOW, _WINDOW, c)


def _from_windows(x: torch.Tensor, b: int, hp: int, wp: int) -> torch.Tensor:  # inverse of _to_windows
    c = x.shape[-1]
    x = x.reshape(b, hp // _WINDOW, wp // _WINDOW, _WINDOW, _WINDOW, c)
    return x.permute(0, 1, 3, 2, 4, 5).reshape(b, hp, wp, c)


def _relative_table(rel_pos: torch.Tensor) -> torch.Tensor:  # [27, D] -> [14 (query), 14 (key), D]
    pos = torch.arange(_WINDOW, device=rel_pos.device)
    return rel_pos[pos[:, None] - pos[None, :] + (_WINDOW - 1)]


def _window_attention(
    windows: torch.Tensor,  # [Nw, 14, 14, C]
    qkv_weight: torch.Tensor,  # [3C, C]
    qkv_bias: torch.Tensor,  # [3C]
    rel_pos_h: torch.Tensor,  # [27, D]
    rel_pos_w: torch.Tensor,  # [27, D]
) -> torch.Tensor:  # [Nw, 14, 14, C] before the output projection
    n, _, _, c = windows.shape
    head_dim = c // _NUM_HEADS
    tokens = _WINDOW * _WINDOW
    qkv = F.linear(windows, qkv_weight, qkv_bias).reshape(n, tokens, 3, _NUM_HEADS, head_dim)
    q, k, v = qkv.permute(2, 0, 3, 1, 4)  # each [Nw, heads, 196, D]

    scores = (q @ k.transpose(-2, -1)) * head_dim**-0.5  # [Nw, heads, 196, 196]
    q_grid = q.reshape(n, _NUM_HEADS, _WINDOW, _WINDOW, head_dim)  # [Nw, heads, qh, qw, D]
    bias_h = torch.einsum("bnhwd,hkd->bnhwk", q_grid, _relative_table(rel_pos_h))  # k = key row
    bias_w = torch.einsum("bnhwd,wkd->bnhwk", q_grid, _relative_table(rel_pos_w))  # k = key column
    bias = (bias_h[..., :, None] + bias_w[..., None, :]).reshape(n, _NUM_HEADS, tokens, tokens)
    # The official softmax runs in float32 whatever the input dtype; keep that rounding.
    probs = torch.softmax(scores + bias, dim=-1, dtype=torch.float32).to(q.dtype)
    out = (probs @ v).transpose(1, 2)  # [Nw, 196, heads, D]
    return out.reshape(n, _WINDOW, _WINDOW, c)


@torch.no_grad()
def run(
    hidden_states: torch.Tensor,  # [B, H, W, 768]
    qkv_weight: torch.Tensor,  # [2304, 768]
    qkv_bias: torch.Tensor,  # [2304]
    proj_weight: torch.Tensor,  # [768, 768]
    proj_bias: torch.Tensor,  # [768]
    rel_pos_h: torch.Tensor,  # [27, 64]
    rel_pos_w: torch.Tensor,  # [27, 64]
    layer_norm1_weight: torch.Tensor,  # [768]
    layer_norm1_bias: torch.Tensor,  # [768]
    layer_norm2_weight: torch.Tensor,  # [768]
    layer_norm2_bias: torch.Tensor,  # [768]
    mlp_lin1_weight: torch.Tensor,  # [3072, 768]
    mlp_lin1_bias: torch.Tensor,  # [3072]
    mlp_lin2_weight: torch.Tensor,  # [768, 3072]
    mlp_lin2_bias: torch.Tensor,  # [768]
    layer_norm_eps: float,  # scalar
) -> torch.Tensor:  # [B, H, W, 768]
    batch, height, width, _ = hidden_states.shape
    padded_h = -(-height // _WINDOW) * _WINDOW
    padded_w = -(-width // _WINDOW) * _WINDOW

    x = _layer_norm(hidden_states, layer_norm1_weight, layer_norm1_bias, layer_norm_eps)
    x = F.pad(x, (0, 0, 0, padded_w - width, 0, padded_h - height))  # zeros after the norm
    attn = _window_attention(_to_windows(x), qkv_weight, qkv_bias, rel_pos_h, rel_pos_w)
    attn = F.linear(attn, proj_weight, proj_bias)
    attn = _from_windows(attn, batch, padded_h, padded_w)[:, :height, :width, :]
    x = hidden_states + attn

    mlp = _layer_norm(x, layer_norm2_weight, layer_norm2_bias, layer_norm_eps)
    mlp = F.linear(F.gelu(F.linear(mlp, mlp_lin1_weight, mlp_lin1_bias)), mlp_lin2_weight, mlp_lin2_bias)
    return x + mlp
