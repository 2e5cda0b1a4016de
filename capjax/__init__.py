"""capjax: Conceptual-Captions-style datasets and captioning models in JAX.

The package owns the library code; `configs/` holds run configurations and `tfds_builders/` the datasets.
"""

__version__ = "0.1.0"
