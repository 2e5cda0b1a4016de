"""The PyTorch eager train step that `train_step_speed.py --vs=pytorch` races: what a user of this field would
write with `nn.Transformer` for the paper's T2T 8×8 on frozen features.

6+6 pre-norm layers, d 512, 8 heads, ff 2048, dropout 0.1, 64 visual tokens projected from 1536-d cells with
sinusoidal positions, 16 caption positions, the output projection tied to the word embedding, label smoothing 0.1
over non-PAD targets, Adagrad at 0.01 (initial accumulator 0.1, as capjax's). torch is a benchmark extra
(`pip install -e '.[bench]'`), never a dependency of the library.
"""

from __future__ import annotations

import math

import numpy as np
import torch
from torch import nn


def sinusoidal(length: int, dim: int) -> torch.Tensor:
  position = torch.arange(length, dtype=torch.float32)[:, None]
  inv = torch.exp(torch.arange(0, dim, 2, dtype=torch.float32) * (-math.log(1e4) / dim))
  table = torch.zeros(length, dim)
  table[:, 0::2] = torch.sin(position * inv)
  table[:, 1::2] = torch.cos(position * inv)
  return table


class T2T(nn.Module):
  """nn.Transformer between projected visual tokens and the caption, logits through the tied embedding."""

  def __init__(self, vocab: int, d: int = 512, heads: int = 8, ff: int = 2048, layers: int = 6,
               feature_dim: int = 1536, visual_tokens: int = 64, length: int = 16, dropout: float = 0.1):
    super().__init__()
    self.d = d
    self.embed = nn.Embedding(vocab, d)
    nn.init.normal_(self.embed.weight, std=d**-0.5)
    self.visual = nn.Linear(feature_dim, d)
    self.transformer = nn.Transformer(d, heads, layers, layers, ff, dropout, batch_first=True, norm_first=True)
    self.register_buffer("visual_positions", sinusoidal(visual_tokens, d))
    self.register_buffer("text_positions", sinusoidal(length, d))
    self.register_buffer("causal", nn.Transformer.generate_square_subsequent_mask(length))

  def forward(self, features: torch.Tensor, tokens: torch.Tensor) -> torch.Tensor:
    memory = self.visual(features.flatten(1, 2)) + self.visual_positions
    y = self.embed(tokens) * math.sqrt(self.d) + self.text_positions[:tokens.shape[1]]
    out = self.transformer(memory, y, tgt_mask=self.causal, tgt_is_causal=True)
    return out @ self.embed.weight.T


class Step:
  """One optimizer step on a fixed batch: forward, label-smoothed loss over non-PAD targets, backward, Adagrad."""

  def __init__(self, batch: dict[str, np.ndarray], vocab: int, seed: int = 0):
    torch.manual_seed(seed)
    self.model = T2T(vocab).train()
    self.optimizer = torch.optim.Adagrad(self.model.parameters(), lr=0.01, initial_accumulator_value=0.1)
    self.features = torch.from_numpy(batch["image"])
    self.inputs = torch.from_numpy(batch["inputs"]).long()
    self.targets = torch.from_numpy(batch["targets"]).long()
    self.vocab = vocab

  def __call__(self) -> float:
    self.optimizer.zero_grad(set_to_none=True)
    logits = self.model(self.features, self.inputs)
    loss = nn.functional.cross_entropy(logits.reshape(-1, self.vocab), self.targets.reshape(-1),
                                       ignore_index=0, label_smoothing=0.1)
    loss.backward()
    self.optimizer.step()
    return loss.item()
