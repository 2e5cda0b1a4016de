r"""Serves a captioner over HTTP on this machine: an export (`python -m capjax.export`'s folder), or a trained workdir
exported in memory (nothing written).

usage: python -m capjax.serve --export=E | --workdir=W [--step=N]  --port=P [--host=127.0.0.1] [--max_batch=16] \
           [--max_wait_ms=10] [--max_bytes=20000000]

  POST /caption   an image's bytes (Content-Type image/*) or a multipart form's `image` field
                  -> {"captions": [{"text": ..., "score": ...}, ...]}, the k best, best first
  GET /           a page to drop or pick an image on and see its captions
  GET /healthz    {"ok": true, ...} with the batching counters (images, decode_calls, batch_sizes)

Concurrent requests are decoded together: one worker takes up to --max_batch images, or those that came within
--max_wait_ms of the first, and decodes them in one call, padded to a power of two (each size compiled at start-up).
A request that is no image (not one, truncated, empty, too many pixels) gets 400, one over --max_bytes 413 (refused
from its Content-Length, before the body is read), each as {"error": ...}. SIGTERM (or Ctrl-C) stops accepting,
answers the requests in flight and exits. --port=0 takes a free port, which the first line on stdout names.
"""

from __future__ import annotations

import json
import os
import signal
import threading
import time
from collections.abc import Sequence

from absl import flags

from capjax import cli, files

FLAGS = flags.FlagValues()
_EXPORT = flags.DEFINE_string("export", None, "an export's folder (python -m capjax.export --output)",
                              flag_values=FLAGS)
_WORKDIR = flags.DEFINE_string("workdir", None, "a trained run's workdir, exported in memory (instead of --export)",
                               flag_values=FLAGS)
_STEP = flags.DEFINE_integer("step", None, "with --workdir: checkpoint step (default: the best by validation CIDEr-D)",
                             lower_bound=0, flag_values=FLAGS)
_PORT = flags.DEFINE_integer("port", None, "the port to listen on (0: a free one)", lower_bound=0, upper_bound=65535,
                             flag_values=FLAGS, required=True)
_HOST = flags.DEFINE_string("host", "127.0.0.1", "the address to listen on", flag_values=FLAGS)
_MAX_BATCH = flags.DEFINE_integer("max_batch", 16, "the most images one decode call takes", lower_bound=1,
                                  upper_bound=1024, flag_values=FLAGS)
_MAX_WAIT_MS = flags.DEFINE_float("max_wait_ms", 10.0, "how long a batch waits for more images after its first",
                                  lower_bound=0.0, upper_bound=10_000.0, flag_values=FLAGS)
_MAX_BYTES = flags.DEFINE_integer("max_bytes", 20_000_000, "the largest request body taken (bytes)", lower_bound=1,
                                  flag_values=FLAGS)

DRAIN_S = 10.0  # after SIGTERM, how long the requests in flight get to finish
EXPORT_FILES = ("export.json", "jax/decode.jaxexport", "jax/params.npz", "jax/vocab.txt")


def _check_model_flags() -> tuple[str | None, str | None]:
  """(export, workdir), one of them None, after the checks that need no JAX."""
  export, workdir = _EXPORT.value, _WORKDIR.value
  if (export is None) == (workdir is None):
    given = "both --export and --workdir" if export is not None else "neither --export nor --workdir"
    cli.fail(f"{given} given — give one: an export's folder (python -m capjax.export), or a trained workdir to "
             "export in memory")
  if export is not None:
    export = os.path.expanduser(export)
    if _STEP.value is not None:
      cli.fail("--step goes with --workdir: an export holds one checkpoint — drop --step, or give --workdir")
    if not os.path.isdir(export):
      cli.fail(f"--export={export} is not a directory — give the folder python -m capjax.export wrote")
    missing = [name for name in EXPORT_FILES if not os.path.isfile(os.path.join(export, name))]
    if missing:
      cli.fail(f"--export={export} is not an export (no {', '.join(missing)}) — give the folder python -m "
               "capjax.export wrote, or export the workdir first")
    return export, None
  workdir = os.path.expanduser(workdir)
  if not os.path.isdir(workdir):
    cli.fail(f"--workdir={workdir} is not a directory — give the workdir of a training run")
  if not os.path.isfile(os.path.join(workdir, "config.json")):
    cli.fail(f"--workdir={workdir} has no config.json, so it holds no training run — give the workdir of a "
             "training run")
  return None, workdir


def _load(export: str | None, workdir: str | None):
  """(the `serving.Served` of the export, or of the workdir's checkpoint exported in memory: one code path, the
  `jax.export` function either way; None) or (None, why it cannot be loaded)."""
  from capjax.export import serving  # noqa: PLC0415 (JAX loads after the flags are good)
  if export is not None:
    try:
      return serving.load(export), None
    except (OSError, ValueError, KeyError, TypeError) as error:  # a damaged export: its manifest, function or arrays
      return None, f"--export={export} cannot be loaded ({type(error).__name__}: {error}) — export the workdir again"
  import jax  # noqa: PLC0415
  import ml_collections  # noqa: PLC0415
  from capjax.config_util import ConfigError  # noqa: PLC0415
  from capjax.data.sources import DatasetNotBuiltError  # noqa: PLC0415
  from capjax.export import build  # noqa: PLC0415
  from capjax.models.inception_resnet_v2 import WeightsError  # noqa: PLC0415
  saved, wrong = files.json_object(os.path.join(workdir, "config.json"))
  if saved is None:
    return None, f"{wrong} — give the workdir of a training run"
  try:
    dec = build.decoder(ml_collections.ConfigDict(saved), workdir, _STEP.value)
  except (ConfigError, DatasetNotBuiltError, FileNotFoundError, NotADirectoryError, WeightsError) as error:
    return None, str(error)
  return serving.Served(build.export_jax(dec), jax.device_put(jax.tree.leaves(dec.params)), dec.vocab,
                        dec.image_size), None


def main(argv: Sequence[str]) -> int:
  cli.parse(FLAGS, argv, __doc__)
  export, workdir = _check_model_flags()
  cli.quiet_library_logs()
  from capjax.serve import endpoints  # noqa: PLC0415
  try:
    server = endpoints.Server(_HOST.value, _PORT.value, _MAX_BYTES.value)  # before the model: a port in use fails fast
  except (OSError, OverflowError) as error:
    cli.fail(f"cannot listen on {_HOST.value}:{_PORT.value} ({getattr(error, 'strerror', None) or error}) — give "
             "another --port (0 takes a free one), or stop what listens there")
  try:
    return _serve(server, export, workdir)
  finally:
    server.server_close()


def _serve(server, export: str | None, workdir: str | None) -> int:
  import numpy as np  # noqa: PLC0415
  from capjax.serve.batcher import Batcher  # noqa: PLC0415
  start = time.monotonic()
  with cli.quiet_native_startup():  # JAX's and TensorFlow's start-up notices are no news; the error line comes after
    served, message = _load(export, workdir)
  if message is not None:
    cli.fail(message)
  batcher = Batcher(served.decode, _MAX_BATCH.value, _MAX_WAIT_MS.value)
  k = batcher.warm(np.zeros((served.image_size, served.image_size, 3), np.uint8))
  server.attach(served, batcher, k)
  batcher.start()
  stop = threading.Event()
  previous = signal.signal(signal.SIGTERM, lambda signum, frame: stop.set())
  thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.1}, name="capjax-serve-http")
  thread.start()
  host, port = server.server_address[:2]
  print(json.dumps({"serving": export or workdir, "url": f"http://{host}:{port}/", "k": k,
                    "batch_sizes": batcher.sizes, "ready_s": round(time.monotonic() - start, 1)}), flush=True)
  try:
    while not stop.wait(0.5):  # short waits: the main thread runs Python's signal handlers between them
      pass
  finally:  # SIGTERM, or Ctrl-C (KeyboardInterrupt, which cli.run turns into its `interrupted:` line afterwards)
    server.shutdown()  # no new connection is accepted; those accepted are answered
    thread.join()
    left = server.drain(DRAIN_S)
    batcher.stop()
    signal.signal(signal.SIGTERM, previous)  # only now: a second SIGTERM during the drain changes nothing
    print(json.dumps({"stopped": True, "unanswered": left, **batcher.stats()}), flush=True)
  return 0


if __name__ == "__main__":
  cli.run(main)
