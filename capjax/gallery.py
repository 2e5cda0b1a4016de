"""Pictures for people: a gallery of images with generated (errors in red) and reference captions, and a
loss curve from the training history.
"""

from __future__ import annotations

import json
import textwrap
from collections.abc import Sequence
from typing import Any

import numpy as np
from PIL import Image, ImageDraw, ImageFont

TILE = 192
TEXT_W = 330
ROW_H = TILE + 16
GOOD, BAD, REF, INK = (20, 120, 40), (200, 30, 30), (90, 90, 90), (0, 0, 0)


def _font(size: int) -> ImageFont.ImageFont:
  try:
    return ImageFont.load_default(size=size)
  except TypeError:  # Pillow without FreeType: fixed-size bitmap font
    return ImageFont.load_default()


def _spans(caption: str, objects: list[dict[str, Any]] | None) -> list[tuple[str, tuple[int, int, int]]]:
  if objects is None:
    return [(caption, INK)]
  from capjax.metrics import grounded  # noqa: PLC0415
  return [(text, GOOD if ok else BAD) for text, ok in grounded.annotate_caption(caption, objects)]


def _draw_spans(draw: ImageDraw.ImageDraw, xy: tuple[int, int], spans, font, width: int) -> int:
  """Draws coloured word spans with wrapping; returns the y below the text."""
  x0, y = xy
  x = x0
  line_h = font.size + 4 if hasattr(font, "size") else 14
  for text, colour in spans:
    for word in text.split():
      w = draw.textlength(word + " ", font=font)
      if x + w > x0 + width and x > x0:
        x, y = x0, y + line_h
      draw.text((x, y), word, fill=colour, font=font)
      x += w
  return y + line_h


def write_gallery(path: str, images: Sequence[np.ndarray], predictions: Sequence[str],
                  references: Sequence[Sequence[str]], objects: Sequence[list[dict[str, Any]]] | None,
                  columns: int = 2) -> None:
  n = len(images)
  rows = max((n + columns - 1) // columns, 1)
  canvas = Image.new("RGB", (columns * (TILE + TEXT_W + 16), rows * ROW_H + 8), "white")
  draw = ImageDraw.Draw(canvas)
  big, small = _font(15), _font(12)
  for k in range(n):
    r, c = divmod(k, columns)
    x, y = c * (TILE + TEXT_W + 16) + 8, r * ROW_H + 8
    canvas.paste(Image.fromarray(np.asarray(images[k], np.uint8)).resize((TILE, TILE), Image.NEAREST), (x, y))
    tx = x + TILE + 8
    ty = _draw_spans(draw, (tx, y), _spans(predictions[k], objects[k] if objects else None), big, TEXT_W - 8)
    for ref in references[k][:4]:
      for line in textwrap.wrap("ref: " + ref, width=48):
        draw.text((tx, ty), line, fill=REF, font=small)
        ty += 15
  canvas.save(path)


def write_loss_curve(path: str, history_path: str) -> None:
  import matplotlib  # noqa: PLC0415
  matplotlib.use("Agg")
  import matplotlib.pyplot as plt  # noqa: PLC0415
  with open(history_path, encoding="utf-8") as f:
    records = [json.loads(line) for line in f if line.strip()]
  steps = [r["step"] for r in records]
  fig, ax = plt.subplots(figsize=(6, 3.5), dpi=100)
  ax.plot(steps, [r["loss"] for r in records], lw=1)
  ax.set_xlabel("step")
  ax.set_ylabel("training loss")
  ax.set_yscale("log")
  ax.grid(alpha=0.3)
  fig.tight_layout()
  fig.savefig(path)
  plt.close(fig)
