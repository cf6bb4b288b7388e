"""Build a tiny, randomly initialised Llama chat model for real-engine tests.

It is a real transformers checkpoint (safetensors, a byte-level BPE tokenizer
trained here with ``tokenizers``, a ChatML-style chat template), so vLLM loads
it like any other model; head_dim is 64 because vLLM's CPU attention needs >= 32.
"""

from __future__ import annotations

import json
from pathlib import Path

CHAT_TEMPLATE = (
    "{% for m in messages %}"
    "{{ '<|im_start|>' + m['role'] + '\\n' + m['content'] + '<|im_end|>\\n' }}"
    "{% endfor %}"
    "{% if add_generation_prompt %}{{ '<|im_start|>assistant\\n' }}{% endif %}"
)
SPECIAL = ["<|endoftext|>", "<|im_start|>", "<|im_end|>"]
_TEXT = [
    "Leaves change color in autumn because chlorophyll breaks down.",
    "Coffee and tea both contain caffeine; tea contains less.",
    'JSON objects look like {"color": "red", "count": 3} with keys and values.',
    "To bake bread, mix flour, water, salt and yeast, then knead and bake.",
    "Nuclear power has supporters and opponents who debate its risks.",
    "The quick brown fox jumps over the lazy dog 0123456789 times.",
]


def build_tiny_llama(dest: Path, seed: int = 0) -> Path:
    """Write the tiny model to ``dest`` (a folder) and return it."""
    import torch
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import LlamaConfig, LlamaForCausalLM, PreTrainedTokenizerFast

    dest.mkdir(parents=True, exist_ok=True)
    bpe = Tokenizer(models.BPE())
    bpe.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    bpe.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=600,
        special_tokens=SPECIAL,
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
    )
    bpe.train_from_iterator(_TEXT * 20, trainer=trainer)
    tokenizer = PreTrainedTokenizerFast(
        tokenizer_object=bpe,
        bos_token="<|endoftext|>",
        eos_token="<|im_end|>",
        pad_token="<|endoftext|>",
        additional_special_tokens=["<|im_start|>"],
    )
    tokenizer.chat_template = CHAT_TEMPLATE
    tokenizer.save_pretrained(str(dest))

    torch.manual_seed(seed)
    config = LlamaConfig(
        vocab_size=len(tokenizer),
        hidden_size=256,
        intermediate_size=512,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=4,
        max_position_embeddings=2048,
        bos_token_id=tokenizer.bos_token_id,
        eos_token_id=tokenizer.eos_token_id,
        pad_token_id=tokenizer.pad_token_id,
        tie_word_embeddings=True,
        torch_dtype="float32",
    )
    model = LlamaForCausalLM(config)
    model.save_pretrained(str(dest), safe_serialization=True)
    (dest / "generation_config.json").write_text(
        json.dumps({"eos_token_id": tokenizer.eos_token_id, "bos_token_id": tokenizer.bos_token_id})
    )
    return dest
