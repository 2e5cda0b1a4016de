"""Pretrained text models in Flax: a BERT-family encoder and a GPT-2 decoder, their tokenizers, and the loading of
Hugging Face checkpoints converted by `python -m capjax.tools.convert_weights --format=hf_bert|hf_gpt2`."""
