"""ERG's generator, a GPT-2 that grafts a retrieved style phrase onto a factual caption, one concern a module:
`vocab.py` (the word and byte-level BPE vocabularies), `model.py` (the `Generator`: prompts, KV-cached search and
nucleus sampling through `capjax.decode`), `pairs.py` (the (phrase, caption) pairs: stylized_scenes records, the
embedded data, JSONL/TSV files), `training.py` (a new generator sized for its pairs, training through
`capjax.small_trainer`), `storage.py` (save and load through `capjax.model_io`). `capjax.erg.generate` is the
command and re-exports the names its callers use; the layout of a sequence and the settings are explained there.
"""
