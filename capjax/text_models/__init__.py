"""Pretrained models in Flax: a BERT-family encoder, a GPT-2 decoder and CLIP (image and text towers, the CLIP
score), their tokenizers, and the loading of Hugging Face checkpoints converted by
`python -m capjax.tools.convert_weights --format=hf_bert|hf_gpt2|hf_clip`."""
