"""Recaptioning a built split with a trained captioner (`python -m capjax.recaption`): the resumable JSONL journal
(`journal.py`), the sharded, data-parallel decoding job (`job.py`) and the optional TFDS copy that joins each
example's original captions with the new ones (`tfds_output.py`)."""
