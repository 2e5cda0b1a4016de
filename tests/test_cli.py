"""capjax.cli's start-up filters: TensorFlow's native start-up lines, which ignore TF_CPP_MIN_LOG_LEVEL."""

import os

from capjax import cli

# What `import tensorflow` and its first device probe write to file descriptor 2 (TensorFlow 2.21, no GPU).
TF_STARTUP = """\
WARNING: All log messages before absl::InitializeLog() is called are written to STDERR
I0000 00:00:1796220288.692645     582 port.cc:153] oneDNN custom operations are on. You may see slightly different \
numerical results due to floating-point round-off errors from different computation orders. To turn them off, set the \
environment variable `TF_ENABLE_ONEDNN_OPTS=0`.
I0000 00:00:1796220288.702024     582 cudart_stub.cc:31] Could not find cuda drivers on your machine, GPU will not \
be used.
I0000 00:00:1796220289.186971     582 cpu_feature_guard.cc:227] This TensorFlow binary is optimized to use available \
CPU instructions in performance-critical operations.
To enable the following instructions: AVX2 AVX512F AVX512_VNNI AVX512_BF16 FMA, in other operations, rebuild \
TensorFlow with the appropriate compiler flags.
E0000 00:00:1796220312.384098     582 cuda_platform.cc:52] failed call to cuInit: INTERNAL: CUDA error: Failed call \
to cuInit: UNKNOWN ERROR (303)
"""
KEPT = "E0000 00:00:1796220312.384098     582 op_kernel.cc:1830] OP_REQUIRES failed: a real error\nplain text\n"


def test_tensorflows_native_startup_lines_are_dropped_and_other_lines_kept(capfd):
  with cli.quiet_native_startup():
    os.write(2, (TF_STARTUP + KEPT).encode())
  assert capfd.readouterr().err == KEPT
