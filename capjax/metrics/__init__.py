"""capjax.metrics."""
