"""capjax.erg."""
