"""A trained workdir as a servable export (`python -m capjax.export`): a TensorFlow SavedModel that captions encoded
images (`build`, `tf_graph`) and a `jax.export` function with its parameters, which `load_jax` serves with JAX alone
(`serving`). The names below load on first use, so that the command's `--help` loads neither JAX nor TensorFlow.
"""

from capjax import cli

__getattr__ = cli.lazy_attributes(__name__, {"load_jax": "capjax.export.serving"})
