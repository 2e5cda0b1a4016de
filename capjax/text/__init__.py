"""capjax.text: the Conceptual Captions text side (filters, hypernymization, stats) on NLTK + WordNet, offline.

Start at `pipeline.TextPipeline`; thresholds live in `config`, NLTK data is reached only through `resources`.
"""
