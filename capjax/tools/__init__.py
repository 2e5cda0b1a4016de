"""capjax.tools."""
