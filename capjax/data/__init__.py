"""capjax.data."""
