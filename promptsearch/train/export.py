"""sentence-transformers export: ``SentenceTransformer(dir).encode(...)`` gives the same
vectors as ``PromptEncoder.from_pretrained(dir).encode(...)``.

The directory's ``modules.json`` names one module, :class:`PromptModule`: it wraps the
prompt (template, [MASK] state, denoising) around the encoder, so tokenization, template
rendering and bias subtraction are promptsearch's own code on both paths.
"""

from __future__ import annotations

import json
from pathlib import Path

import torch
from sentence_transformers.base.modules.input_module import InputModule

from ..encoding import PromptEncoder
from ..model.loading import _quiet_transformers
from ..model.saved import read_config, write_config

MODULE_REF = "promptsearch.train.export.PromptModule"


def write_sentence_transformers_files(directory) -> None:
    d = Path(directory)
    (d / "modules.json").write_text(json.dumps([{"idx": 0, "name": "0", "path": "", "type": MODULE_REF}], indent=2) + "\n",
                                    encoding="utf-8")
    (d / "config_sentence_transformers.json").write_text(json.dumps({"model_type": "SentenceTransformer",
                                                                     "similarity_fn_name": "cosine"}, indent=2) + "\n",
                                                         encoding="utf-8")


class PromptModule(InputModule):
    """A sentence-transformers input module: sentences in, denoised [MASK] vectors out."""

    save_in_root = True

    def __init__(self, model_name_or_path: str, bf16: bool = False):
        """``bf16=False``: sentence-transformers manages precision itself (``model.half()``,
        ``model_kwargs={"torch_dtype": ...}``), so the module adds no autocast of its own."""
        super().__init__()
        self.model_name_or_path = str(model_name_or_path)
        self.enc = PromptEncoder.from_pretrained(self.model_name_or_path, device="cpu", bf16=bf16, show_progress_bar=False)
        self.prompt = self.enc.prompt  # registered, so SentenceTransformer.to(device) moves it (soft prompts too)
        self.auto_model = self.enc.encoder
        self.tokenizer = self.enc.tokenizer

    @classmethod
    def load(cls, model_name_or_path: str, subfolder: str = "", **kwargs) -> "PromptModule":
        return cls(str(Path(model_name_or_path) / subfolder) if subfolder else model_name_or_path)

    def preprocess(self, inputs, prompt=None, **kwargs) -> dict:
        enc = self.enc
        ids = enc.sentence_ids(enc.prepare([str(x) for x in inputs]), enc.default_template)
        n = max((len(s) for s in ids), default=0)
        padded = torch.full((len(ids), max(n, 1)), -1, dtype=torch.long)
        for i, s in enumerate(ids):
            padded[i, : len(s)] = torch.as_tensor(s, dtype=torch.long)
        return {"sentence_ids": padded, "sentence_lengths": torch.as_tensor([len(s) for s in ids])}

    def forward(self, features: dict, **kwargs) -> dict:
        enc = self.enc
        ids = [row[:n].tolist() for row, n in zip(features["sentence_ids"], features["sentence_lengths"].tolist())]
        features["sentence_embedding"] = self.prompt(ids, enc.default_template, denoise=enc.default_denoise,
                                                     layer=enc.default_layer)
        return features

    def get_sentence_embedding_dimension(self) -> int:
        return int(self.enc.word_embeddings.shape[1])

    def save(self, output_path: str, *args, **kwargs) -> None:
        out = Path(output_path)
        if out.resolve() != Path(self.model_name_or_path).resolve():
            with _quiet_transformers():
                (self.enc.model.lm or self.enc.model.mlm or self.auto_model).save_pretrained(out)
                self.tokenizer.save_pretrained(out)
            write_config(out, read_config(self.model_name_or_path))
        write_sentence_transformers_files(out)
