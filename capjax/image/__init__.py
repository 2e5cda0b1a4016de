"""capjax.image."""
