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


# ---- a searched representation as a plain sentence-transformers model ----------------------------
def export_representation(model: str, key: str, out, model_path: str | None = None) -> str:
    """Write a sentence-transformers folder for the representation ``key`` of ``model`` (a results
    entry: ``prompt [X] @mean``, ``@sentence-mean``, ``@cls``): a Transformer, a Pooling module with
    ``include_prompt`` as searched, and the prompt in ``config_sentence_transformers.json``
    (``prompts`` and ``default_prompt_name``), so ``SentenceTransformer(out).encode`` gives its vectors
    with neither ``trust_remote_code`` nor promptsearch. What sentence-transformers cannot express is
    refused with a one-line reason, before anything is written. Returns a one-line description."""
    import warnings

    from ..errors import PromptSearchError
    from ..template import EntryKey, Template, quote

    k = EntryKey.parse(key)
    if k.members:
        raise PromptSearchError(f"{quote(key)} is an ensemble: sentence-transformers runs one pass and one pooling, so it "
                                "cannot average several; export one of its members")
    template, readout, layer = k.template, k.readout, k.layer
    if readout is None:
        raise PromptSearchError(f"{quote(key)} reads the [MASK] state{' at a layer' if layer is not None else ''}, which "
                                "sentence-transformers' Pooling cannot; fine-tune it (promptsearch finetune) for a folder that "
                                "loads with trust_remote_code, or export a pooled read-out (@mean, @sentence-mean, @cls)")
    t = Template.parse(template)
    if t.pieces[1].strip() or t.order != ("X",):
        raise PromptSearchError(f"{quote(t.text)} has text after [X]: a sentence-transformers prompt goes before the "
                                "sentence only; export a prompt of the form 'PREFIX [X]'")
    prompt = t.pieces[0]
    if readout == "sentence-mean" and not prompt.strip():
        raise PromptSearchError("'[X] @sentence-mean' has no prompt: sentence-transformers' include_prompt=False leaves out "
                                "a prompt's tokens only, so it would pool the [CLS] token too; export '[X] @mean' instead")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        from sentence_transformers import SentenceTransformer
        from sentence_transformers.sentence_transformer.modules import Pooling, Transformer

        with _quiet_transformers():
            tr = Transformer(model_path or model)
        pool = Pooling(tr.get_embedding_dimension() if hasattr(tr, "get_embedding_dimension")
                       else tr.get_word_embedding_dimension(), pooling_mode="cls" if readout == "cls" else "mean",
                       include_prompt=readout != "sentence-mean")
        kw = {"prompts": {"promptsearch": prompt}, "default_prompt_name": "promptsearch"} if prompt else {}
        st = SentenceTransformer(modules=[tr, pool], similarity_fn_name="cosine", device="cpu", **kw)
        st.save(str(out))
    return (f"wrote {out}: SentenceTransformer({str(out)!r}).encode(sentences) gives {t.text} @{readout} of {model}"
            + (f" (prompt {prompt!r}, default)" if prompt else ""))
