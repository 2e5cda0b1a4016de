"""capjax.text: the Conceptual Captions text side on NLTK + WordNet, offline.

Modules: annotate (tokens, tags, lemmas, entities), filters, hypernymize, resolvers, concepts, pipeline (CLI),
stats (CLI), recaption (LLaVA caption cleaning), config (thresholds), resources (the one NLTK access point).
"""
