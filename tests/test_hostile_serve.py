"""`python -m capjax.serve` against bad input (tests/hostile/harness.py runs the cases): each fails before it serves,
most before it listens; the port in use is a port this module holds."""

from __future__ import annotations

import socket

from capjax import config_util
from hostile.harness import REPO, case, not_flags, runner

SERVE = "capjax.serve"
VOCAB = b"<PAD>\n<BOS>\n<EOS>\n<UNK>\nsquare\ncircle\n"
# A folder with an export's four files (the cheap check passes; what is in them is never read before the bind).
EXPORT_LOOKALIKE = {"e/export.json": b'{"image_size": 32}', "e/jax/decode.jaxexport": b"\0", "e/jax/params.npz": b"\0",
                    "e/jax/vocab.txt": VOCAB}
# The `:shapes,debug` config as a run saves it (config.json), without a checkpoint beside it.
SHAPES_CONFIG = config_util.load(f"{REPO}/configs/t2t.py:shapes,debug").to_json().encode()


def _held_port() -> int:
  """A loopback port this module listens on for the whole session, so that the in-use case finds it taken."""
  global _HELD
  _HELD = socket.socket()
  _HELD.bind(("127.0.0.1", 0))
  _HELD.listen(1)
  return _HELD.getsockname()[1]


HELD_PORT = _held_port()

CASES = [
    case(SERVE, "neither-export-nor-workdir", "--port=0", match="neither"),
    case(SERVE, "both-export-and-workdir", "--export={t}/folder", "--workdir={t}/folder", "--port=0", match="both"),
    case(SERVE, "no-port", "--export={t}/folder", match="--port"),
    case(SERVE, "port-out-of-range", "--export={t}/folder", "--port=70000", match="port"),
    case(SERVE, "port-not-a-number", "--export={t}/folder", "--port=http", match="port"),
    case(SERVE, "port-in-use", "--export={t}/e", f"--port={HELD_PORT}", files=EXPORT_LOOKALIKE,
         match="cannot listen"),
    case(SERVE, "export-missing", "--export={t}/nothing", "--port=0", match="not a directory"),
    case(SERVE, "export-is-a-file", "--export={t}/alt.tsv", "--port=0", match="not a directory"),
    case(SERVE, "export-of-no-export", "--export={t}/folder", "--port=0", match="not an export"),
    case(SERVE, "export-without-its-function", "--export={t}/e", "--port=0",
         files={k: v for k, v in EXPORT_LOOKALIKE.items() if "decode" not in k}, match="decode.jaxexport"),
    case(SERVE, "export-manifest-damaged", "--export={t}/e", "--port=0",
         files={**EXPORT_LOOKALIKE, "e/export.json": b'{"cut'}, match="cannot be loaded"),
    case(SERVE, "export-with-step", "--export={t}/e", "--step=3", "--port=0", files=EXPORT_LOOKALIKE, match="--step"),
    case(SERVE, "workdir-missing", "--workdir={t}/nothing", "--port=0", match="not a directory"),
    case(SERVE, "workdir-of-no-run", "--workdir={t}/folder", "--port=0", match="no config.json"),
    case(SERVE, "workdir-config-damaged", "--workdir={t}/w", "--port=0", files={"w/config.json": b'{"cut'},
         match="damaged"),
    case(SERVE, "workdir-without-checkpoint", "--workdir={t}/w", "--port=0",
         files={"w/config.json": SHAPES_CONFIG, "w/vocab.txt": VOCAB}, match="no checkpoint"),
    case(SERVE, "max-batch-zero", "--export={t}/folder", "--port=0", "--max_batch=0", match="max_batch"),
    case(SERVE, "max-wait-nan", "--export={t}/folder", "--port=0", "--max_wait_ms=nan", match="max_wait_ms"),
    case(SERVE, "max-bytes-negative", "--export={t}/folder", "--port=0", "--max_bytes=-5", match="max_bytes"),
    *not_flags(SERVE, "--export={t}/folder", "--port=0"),
]

test_bad_input_is_one_error_line_and_changes_nothing = runner(CASES)
