"""The builders' progress line, now `capjax.progress` (the recaptioning job in the library logs it too, and the library
imports nothing from the builders above it); this name stays for the builders and their tests."""

from absl import logging  # noqa: F401 (the builders' tests patch `progress.logging.info`)

from capjax.progress import Progress, _clock_text, _rate_text, log_shard  # noqa: F401

__all__ = ["Progress", "log_shard"]
