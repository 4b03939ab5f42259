"""A tiny randomly initialised GPT-2 and its data for the HF Trainer tests (no downloads);
``make_model`` is also the replay --model-fn of the captured case."""
from __future__ import annotations

import torch

VOCAB, SEQ = 64, 16


def make_model():
    from transformers import GPT2Config, GPT2LMHeadModel
    torch.manual_seed(0)
    cfg = GPT2Config(vocab_size=VOCAB, n_positions=SEQ, n_embd=16, n_layer=1, n_head=2,
                     resid_pdrop=0.0, embd_pdrop=0.0, attn_pdrop=0.0,
                     use_cache=False)  # as the Trainer runs it (TrainingArguments.use_cache)
    return GPT2LMHeadModel(cfg)


class Sequences(torch.utils.data.Dataset):
    """Arithmetic progressions mod VOCAB: learnable, so the loss falls."""

    def __len__(self):
        return 64

    def __getitem__(self, i):
        g = torch.Generator().manual_seed(i)
        start = torch.randint(0, VOCAB, (1,), generator=g)
        stride = torch.randint(1, 4, (1,), generator=g)
        ids = (start + stride * torch.arange(SEQ)) % VOCAB
        return {"input_ids": ids, "labels": ids.clone()}
