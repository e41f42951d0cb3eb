"""sentence-transformers export: ``SentenceTransformer(dir).encode(...)`` gives the same
vectors as ``PromptEncoder.from_pretrained(dir).encode(...)``.

The directory's ``modules.json`` names one module, ``PromptModule``: it wraps the
prompt (template, [MASK] state, denoising) around the encoder, so tokenization, template
rendering and bias subtraction are promptsearch's own code on both paths.
"""

from __future__ import annotations

import errno
import json
import os
import shutil
import tempfile
from dataclasses import dataclass
from pathlib import Path

import sentence_transformers
import torch
import transformers
from safetensors.torch import save_file
from sentence_transformers.base.modules.input_module import InputModule

from ..encoding import PromptEncoder
from ..errors import PromptSearchError, first_line, note
from ..eval.retrieval import TASK_SLOT, fill_task
from ..fileio import RETRIEVAL, check_writable, recorded_place, results_kind
from ..model.loading import DEFAULT_MODEL, _quiet_transformers, check_model_path
from ..model.saved import check_finished, read_config, write_config
from ..model.stack import _quiet, load_stack
from ..model.weights import changed_weights, folder_of, weights_sample
from ..paths import model_here, same_model
from ..representation import Representation, readout_of
from ..template import SENT, quote

MODULE_REF = "promptsearch.train.export.PromptModule"


def write_sentence_transformers_files(directory) -> None:
    """Write ``modules.json`` (naming ``PromptModule``) and ``config_sentence_transformers.json`` into a trained
    [MASK] folder, so sentence-transformers loads it.

    :param directory: the trained folder."""
    d = Path(directory)
    (d / "modules.json").write_text(json.dumps([{"idx": 0, "name": "0", "path": "", "type": MODULE_REF}],
                                               indent=2) + "\n",
                                    encoding="utf-8")
    (d / "config_sentence_transformers.json").write_text(json.dumps({"model_type": "SentenceTransformer",
                                                                     "similarity_fn_name": "cosine"}, indent=2) + "\n",
                                                         encoding="utf-8")


class PromptModule(InputModule):
    """A sentence-transformers input module: sentences in, denoised [MASK] vectors out.

    The module a trained [MASK] folder's ``modules.json`` names; ``SentenceTransformer(folder,
    trust_remote_code=True)`` builds it through ``load``."""

    save_in_root = True

    def __init__(self, model_name_or_path: str, bf16: bool = False):
        """Load the folder's encoder with its template, denoise setting and soft prompt.

        :param model_name_or_path: a folder written by ``finetune`` or ``optiprompt``.
        :param bf16: autocast to bfloat16. False by default: sentence-transformers manages precision itself
            (``model.half()``, ``model_kwargs={"torch_dtype": ...}``), so the module adds no autocast of its own."""
        super().__init__()
        self.model_name_or_path = str(model_name_or_path)
        self.enc = PromptEncoder.from_pretrained(self.model_name_or_path, device="cpu", bf16=bf16,
                                                 show_progress_bar=False)
        self.prompt = self.enc.prompt  # registered, so SentenceTransformer.to(device) moves it (soft prompts too)
        self.auto_model = self.enc.encoder
        self.tokenizer = self.enc.tokenizer

    @classmethod  # sentence-transformers passes its other arguments by name: **kwargs takes them
    def load(cls, model_name_or_path: str, subfolder: str = "", **kwargs) -> "PromptModule":  # type: ignore[override]
        return cls(str(Path(model_name_or_path) / subfolder) if subfolder else model_name_or_path)

    def preprocess(self, inputs, prompt=None, **kwargs) -> dict:
        enc = self.enc
        assert enc.default_template is not None  # the folder's promptsearch.json names it
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
                self.enc.tokenizer.save_pretrained(out)
            cfg = read_config(self.model_name_or_path)
            assert cfg is not None  # the folder this module was loaded from is promptsearch's
            write_config(out, cfg)
        write_sentence_transformers_files(out)


# ---- a searched representation as a plain sentence-transformers model ----------------------------
# The one on-disk layout every consumer reads alike (checked in their source): sentence-transformers 2.x-6.x
# import modules.json's types literally before 6.0 (the legacy ``sentence_transformers.models.*`` names; 6.x maps
# them), pass every config key to __init__ (an unknown key is a TypeError), and read Dense weights from
# pytorch_model.bin before 3.0.1; Text Embeddings Inference parses exactly those four type names, reads
# ``1_Pooling/config.json`` by that path with the pooling_mode_cls_token / _mean_tokens booleans, and needs
# ``max_seq_length`` in sentence_bert_config.json; vLLM matches the Pooling type by name and takes the first true
# pooling_mode_* key (older versions), so the active mode is written first.
LEGACY = "sentence_transformers.models."
_BOOLEANS = {"cls": "pooling_mode_cls_token", "mean": "pooling_mode_mean_tokens", "max": "pooling_mode_max_tokens",
             "mean_sqrt_len_tokens": "pooling_mode_mean_sqrt_len_tokens",
             "weightedmean": "pooling_mode_weightedmean_tokens", "lasttoken": "pooling_mode_lasttoken"}
_ALWAYS = ("cls", "mean", "max", "mean_sqrt_len_tokens")  # the booleans sentence-transformers 2.0 knows


def pooling_config(dimension: int, mode: str, include_prompt: bool) -> dict:
    """``1_Pooling/config.json`` in the legacy form: the active mode's boolean first, the four 2.0 booleans always
    (an absent mean boolean would default to true), weightedmean / lasttoken only when active (2.3+), and
    ``include_prompt`` only when false (2.4+: an older reader then fails loudly instead of pooling the prompt).

    :param dimension: the token embeddings' dimension.
    :param mode: one of sentence-transformers' pooling modes.
    :param include_prompt: whether the prompt's tokens are pooled.
    :returns: the config as a dict."""
    cfg = {"word_embedding_dimension": int(dimension), _BOOLEANS[mode]: True}
    for m in _ALWAYS:
        cfg.setdefault(_BOOLEANS[m], False)
    if not include_prompt and mode != "lasttoken":
        cfg["include_prompt"] = False
    return cfg


@dataclass(frozen=True)
class FolderSpec:
    """What a sentence-transformers folder over a model's module stack computes: its one Pooling (``mode``,
    ``include_prompt``) and the prompts its encode methods prepend — ``prompts`` names ``query`` (what
    ``encode_query`` prepends) and ``document`` (``encode_document``), ``default_prompt_name`` the one plain
    ``encode`` prepends (None: none). ``title``: what it computes, in words (the model card's heading);
    ``retrieval``: the two sides are the point (the card shows ``encode_query`` / ``encode_document``)."""

    mode: str
    include_prompt: bool
    prompts: dict[str, str]
    default_prompt_name: str | None
    title: str
    retrieval: bool = False

    @property
    def readout(self) -> str:
        """The pooled read-out name of the Pooling (``sentence-mean`` …)."""
        return readout_of(self.mode, self.include_prompt)

    @classmethod
    def of(cls, k: Representation) -> "FolderSpec":
        """One representation: its prompt stored as ``query`` and ``document`` and made the default, so
        ``encode``, ``encode_query`` and ``encode_document`` all give ``k``.

        :param k: a prompt pooled by one of sentence-transformers' modes (checked by the caller).
        :returns: the spec."""
        pooling = k.st_pooling
        assert pooling is not None  # a prompt pooled by a sentence-transformers mode (the export checks it first)
        prompt = k.prompt or ""
        return cls(*pooling, {"query": prompt, "document": prompt}, "query" if prompt else None, k.text)

    @classmethod
    def of_retrieval(cls, query: Representation, document: Representation) -> "FolderSpec":
        """A query and a document representation in one folder: ``query``'s prompt stored as ``query``,
        ``document``'s as ``document``, no default (plain ``encode`` adds no prompt). One Pooling serves both:
        the same mode, and the same ``include_prompt`` where it matters (a side with no prompt pools alike either
        way: sentence-transformers measures no prompt length for an empty prompt).

        :param query: the query side: a prompt pooled by one of sentence-transformers' modes.
        :param document: the document side, likewise.
        :returns: the spec.
        :raises promptsearch.PromptSearchError: for a side sentence-transformers cannot compute, or sides that
            need two Pooling modules (sentence-transformers' Router, which export does not write)."""
        for side, k in (("query", query), ("document", document)):
            if (why := k.why_not_sentence_transformers()) is not None:
                raise PromptSearchError(f"the {side} side {quote(k.shown)} cannot be a sentence-transformers prompt: "
                                        f"{why}")
        (mq, iq), (md, idoc) = query.st_pooling or ("", True), document.st_pooling or ("", True)
        prompted = {inc for k, m, inc in ((query, mq, iq), (document, md, idoc)) if k.prompt and m != "lasttoken"}
        if mq != md or len(prompted) > 1:
            raise PromptSearchError(f"the query is read out by {query.readout} and the document by {document.readout}:"
                                    " that needs a Pooling module for each (sentence-transformers' Router), which "
                                    "export does not write; choose one read-out for both sides")
        title = f"query {quote(query.shown)}, document {quote(document.shown)}"
        return cls(mq, next(iter(prompted), True), {"query": query.prompt or "", "document": document.prompt or ""},
                   None, title, retrieval=True)


def _consumer_notes(spec: FolderSpec, stack) -> list[str]:
    """What some consumers of the folder do differently, said rather than hidden."""
    mode, include = spec.mode, spec.include_prompt
    notes = []
    if spec.retrieval and any(spec.prompts.values()):
        notes.append("the prompts are applied by sentence-transformers' encode_query / encode_document (>= 5.0) and "
                     "encode(prompt_name='query' / 'document') (>= 2.4); plain encode adds none; Text Embeddings "
                     "Inference applies one to a request that names it (prompt_name), vLLM not at all")
    elif any(spec.prompts.values()):
        notes.append("the prompt is applied by sentence-transformers >= 2.4 (encode, encode_query, encode_document); "
                     "Text Embeddings Inference applies it to a request that names the prompt 'query' (or when started "
                     "with that default prompt name), vLLM not at all")
    if not include and mode != "lasttoken":
        notes.append("include_prompt=False is read by sentence-transformers >= 2.4 only (TEI and vLLM pool the prompt "
                     "too)"
                     + ("; and sentence-transformers 6 reads the first token after the prompt where 2.4-5.x, TEI and "
                        "vLLM read [CLS]" if mode == "cls" else ""))
    if mode in ("max", "weightedmean", "mean_sqrt_len_tokens"):
        notes.append(f"{mode} pooling is sentence-transformers' alone (TEI refuses it; vLLM reads it as another mode)")
    if any(type(m).__name__ == "Dense" for m in stack.after_pooling()):
        notes.append("the Dense module is read by sentence-transformers, TEI's candle backend and vLLM; TEI's other "
                     "backends skip it")
    return notes


def _dense_files(module, folder: Path) -> None:
    """A Dense module as every sentence-transformers since 2.0 reads it: four config keys, ``linear.*`` weights in
    pytorch_model.bin and model.safetensors."""
    folder.mkdir(exist_ok=True)  # written again at each better fine-tuning checkpoint
    act = module.activation_function
    cfg = {"in_features": module.in_features, "out_features": module.out_features,
           "bias": module.linear.bias is not None,
           "activation_function": f"{type(act).__module__}.{type(act).__name__}"}
    (folder / "config.json").write_text(json.dumps(cfg, indent=2) + "\n", encoding="utf-8")
    state = {k: v.detach().float().cpu().contiguous() for k, v in module.linear.state_dict().items()}
    state = {f"linear.{k}": v for k, v in state.items()}
    save_file(state, str(folder / "model.safetensors"))
    torch.save(state, folder / "pytorch_model.bin")


def _model_card(spec: FolderSpec, model: str, description: str, notes: list[str]) -> str:
    what = "the query and document prompts" if spec.retrieval else "the representation"
    lines = [f"# {spec.title}", "", f"A sentence-transformers model written by `promptsearch export`: {what} "
             f"`{spec.title}` of `{model}`.", "", f"- base model: `{model}`", f"- modules: {description}", "",
             "```python", "from sentence_transformers import SentenceTransformer", "",
             "model = SentenceTransformer(\"path/to/this/folder\")"]
    if spec.retrieval:
        lines += ["queries = model.encode_query([\"who plays the guitar ?\"])  # the query prompt "
                  "(sentence-transformers < 5: encode(..., prompt_name=\"query\"))",
                  "documents = model.encode_document([\"a man is playing a guitar .\"])  # the document prompt "
                  "(< 5: prompt_name=\"document\")"]
    else:
        lines += ["vectors = model.encode([\"a man is playing a guitar .\"])  # the prompt, when there is one, is the "
                  "default"]
    lines += ["```", ""]
    if notes:
        lines += ["Other readers of this folder:", ""] + [f"- {n}" for n in notes] + [""]
    return "\n".join(lines)


def mask_model_card(k: Representation, model: str, mode: str) -> str:
    """The model card of a fine-tuned folder that reads the [MASK] state (promptsearch's module does)."""
    return "\n".join([
        f"# {k.text}", "", f"A model fine-tuned by promptsearch (mode {mode}) from `{model}`; its sentence "
        f"embedding is the representation `{k.text}` (the [MASK] state, less the template's bias where denoised).", "",
        f"- base model: `{model}`", "- modules: promptsearch's PromptModule (needs promptsearch installed)", "",
        "```python", "from sentence_transformers import SentenceTransformer", "",
        "model = SentenceTransformer(\"path/to/this/folder\", trust_remote_code=True)",
        "vectors = model.encode([\"a man is playing a guitar .\"])", "```", ""])


def _check_pooling_first(stack, model: str) -> None:
    """A one-line error for a stack whose Pooling is not the module after its Transformer (1_Pooling)."""
    if stack.pooling_index != 0:
        raise PromptSearchError(f"{model}: its Pooling is not the module after the Transformer; the layout every "
                                "reader reads puts it there (1_Pooling)")


def write_modules(folder: Path, stack, spec: "FolderSpec | Representation", length: int | None,
                  model: str) -> tuple[str, list[str]]:
    """Every file of a sentence-transformers folder for ``spec`` over ``stack`` but the transformer's weights and
    tokenizer: modules.json, the Pooling set to ``spec``'s, the stack's modules after it (Dense, Normalize …),
    sentence_bert_config.json (``length``: the max length), the prompts and the default prompt name, and a model
    card.

    :param folder: the folder to write into (it exists).
    :param stack: the model's sentence-transformers module stack (``promptsearch.model.stack.ModuleStack``).
    :param spec: what the folder computes; a representation (a prompt pooled by one of sentence-transformers'
        modes) stands for ``FolderSpec.of(k)``.
    :param length: the max length to write (None, or above a million: none).
    :param model: the model's name, for the model card and errors.
    :returns: ``(description, notes)``: the stack in words, and what other readers do differently.
    :raises promptsearch.PromptSearchError: for a stack whose Pooling is not the module after the Transformer."""
    spec = spec if isinstance(spec, FolderSpec) else FolderSpec.of(spec)
    mode, include = spec.mode, spec.include_prompt
    _check_pooling_first(stack, model)
    tr = stack.transformer
    sbert: dict[str, bool | int] = {"do_lower_case": bool(getattr(tr, "do_lower_case", False))}
    if length and length < 1_000_000:  # a tokenizer without a limit: none written, none applied (as the source)
        sbert = {"max_seq_length": int(length), **sbert}
    modules = [{"idx": 0, "name": "0", "path": "", "type": LEGACY + "Transformer"},
               {"idx": 1, "name": "1", "path": "1_Pooling", "type": LEGACY + "Pooling"}]
    (folder / "1_Pooling").mkdir(exist_ok=True)
    (folder / "1_Pooling" / "config.json").write_text(json.dumps(pooling_config(stack.dimension, mode, include),
                                                                 indent=2)
                                                      + "\n", encoding="utf-8")
    for i, m in enumerate(stack.after_pooling(), start=2):
        name = type(m).__name__
        path = f"{i}_{name}"
        if name == "Dense":
            _dense_files(m, folder / path)
        else:
            (folder / path).mkdir(exist_ok=True)  # a fine-tuning run writes its folder again at each better checkpoint
            m.save(str(folder / path))
        modules.append({"idx": i, "name": str(i), "path": path, "type": LEGACY + name})
    st_cfg = {"__version__": {"sentence_transformers": sentence_transformers.__version__,
                              "transformers": transformers.__version__, "pytorch": torch.__version__},
              "prompts": dict(spec.prompts), "default_prompt_name": spec.default_prompt_name,
              "similarity_fn_name": "cosine"}
    for name, obj in (("modules.json", modules), ("sentence_bert_config.json", sbert),
                      ("config_sentence_transformers.json", st_cfg)):
        (folder / name).write_text(json.dumps(obj, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")
    description = (stack.describe(spec.readout, prompts=spec.prompts) if spec.retrieval
                   else stack.describe(spec.readout, spec.prompts["query"]))
    if stack.max_seq_length != length:
        description = description.replace(f"{stack.max_seq_length} tokens", f"{length} tokens")
    notes = _consumer_notes(spec, stack)
    (folder / "README.md").write_text(_model_card(spec, model, description, notes), encoding="utf-8")
    return description, notes


def check_export(out, results: bool, template: str | None) -> Path:
    """Refuse, before anything loads, an export given neither or both of a search's ``results`` (whether one is
    given) and a ``template`` key, and an ``out`` that is a link to nothing, an existing file or non-empty
    folder, or not writable; ``out`` as a path."""
    if bool(results) == bool(template):
        raise PromptSearchError("give a results file (its chosen representation) or template=KEY, one of the two")
    out = Path(out)
    if out.is_symlink() and not out.exists():
        raise PromptSearchError(f"out={out} is a link to nothing; pass a new folder")
    if out.exists() and (not out.is_dir() or any(out.iterdir())):
        raise PromptSearchError(f"out={out} exists and is not an empty folder; pass a new folder")
    check_writable(out / "modules.json", "out", "my-model")
    return out


def export_target(results=None, template: str | None = None, model: str | None = None, max_length: int | None = None,
                  say=None) -> tuple[str, Representation, int | None]:
    """What an export writes, ``(model, representation, max length)``: a search's ``results`` (a
    ``Results``, loaded by the caller) give their chosen representation, their
    model (``model``, when given, must be it) and the max length it was scored with (``max_length``, when given,
    must be it); else the ``template`` key, on ``model`` (None: the default model) at ``max_length``. What a reader
    should know of the results' answer (an entry edited by hand) is told to ``say`` (default: stderr)."""
    say = say or note
    if results is None:
        assert template is not None  # the caller gives results or a template
        return model or DEFAULT_MODEL, Representation.parse(template), max_length
    if results.best is None:
        raise PromptSearchError(f"{results.path} holds no scored representation yet")
    place = recorded_place(results.extras)  # where its model was named
    found = _export_model(results.path, results.model or DEFAULT_MODEL, model, place,
                          results.extras.get("x_model_weights"))  # its weights checked
    for line in results.trust_notes():  # an entry edited by hand: exported, but not without a word
        say(f"note: {line}")
    v = results.baseline  # recorded unsettled when a run starts (resumed too), settled by its verdict
    if (v is not None and not v.settled) or (v is None and results.chosen is None):  # running, or stopped before it
        say(f"note: {results.path} holds no verdict yet (its search is still running, or was stopped before its "
            f"end): this exports its highest score so far, {results.best.entry_key.shown}, not weighed against the "
            "model's own; run the search's command again to finish it, then export")
    scored = (results.numbers or {}).get("pooled_max_length")
    if max_length is not None and scored is not None and max_length != scored:
        raise PromptSearchError(f"{results.path} was scored with max_length={scored}; drop max_length= (the export "
                                "keeps the length it was scored with)")
    return found, results.best.entry_key, max_length or scored


def _export_model(path, recorded: str, given: str | None, place: tuple, sample) -> str:
    """The model an export of the results file ``path`` reads, its weights those the file recorded (``sample``,
    ``check_scored_weights``): the one it recorded (``recorded``, named from here by ``place``,
    ``fileio.recorded_place``); or ``given`` when it names that one, or another folder holding those weights (the
    model folder moved on its own, a user's trial).

    :raises promptsearch.PromptSearchError: for another model given, a recorded folder that is not there, or one
        whose weights changed."""
    if given and not same_model(recorded, given, *place):
        folder = folder_of(given)
        if not (isinstance(sample, dict) and sample and folder is not None and weights_sample(folder) is not None
                and changed_weights(sample, folder) is None):
            raise PromptSearchError(f"{path} was searched on model {recorded!r}, not {given!r}; drop model= (or give "
                                    "the folder the model moved to: its weights are checked against the file's)")
        return given
    found = model_here(recorded, *place)
    if found != DEFAULT_MODEL and not Path(found).exists() and (place[1] or found.startswith((".", "/", "~"))):
        raise PromptSearchError(f"{path} was searched on the model folder {place[1] or found}, which is not there now; "
                                "give model= the folder where it is now (its weights are checked against the file's)")
    check_scored_weights(path, sample, found)
    return found


def check_scored_weights(path, recorded, model: str) -> None:
    """Refuse an export from the results file ``path`` of a model folder that no longer holds the weights its
    search scored (``recorded``: a hash of each weights file, ``model.weights.weights_sample``): retrained or replaced
    since, it would ship prompts chosen for another model under the file's numbers. Nothing is checked where
    nothing was recorded (an older file, a ``.bin`` checkpoint) or the model is a hub id.

    :param path: the results file.
    :param recorded: its record of the weights (None: none).
    :param model: the model the export reads, as resolved from here.
    :raises promptsearch.PromptSearchError: when the folder's weights differ from those recorded."""
    folder = folder_of(model)
    if folder is not None and (why := changed_weights(recorded, folder)):
        raise PromptSearchError(f"{path} was scored on other weights than {folder} holds now ({why}: retrained or "
                                "replaced since); search it again into a new out= to score these weights")


@dataclass(frozen=True)
class RetrievalAnswer:
    """What a retrieval search chose (its results file's ``best``), on its ``model``: the ``query`` and
    ``document`` prompts ("": none) and the pooled ``readout``; ``document_readout``: the document side's when a
    hand-written file gives the sides two (None: ``readout``); ``max_length``: the longest input it was scored with
    (None: the file does not say; the model's own)."""

    model: str
    query: str
    document: str
    readout: str
    document_readout: str | None = None
    max_length: int | None = None


def retrieval_answer(path, model: str | None = None, max_length: int | None = None,
                     description: str | None = None) -> RetrievalAnswer | None:
    """The answer of a retrieval results file (``"kind": "retrieval"``, written by the retrieval search): its
    ``best`` (``{"query", "document", "readout"}``; ``readout`` may be ``{"query": R, "document": R}`` in a file
    written by hand) and its ``model``.

    :param path: a results file.
    :param model: the model the caller names, when it does: it must be the file's.
    :param max_length: the max length the caller names, when it does: it must be the one the file was scored with.
    :param description: one sentence saying what the user's task is, filled into ``{task}`` in the chosen prompts (a
        search over several sets keeps ``{task}`` for each set to fill; a folder's prompts are plain text).
    :returns: the answer; None for a file that is not a retrieval results file (an STS search's, or none at all:
        ``promptsearch.search.results.Results.load`` reads and judges those).
    :raises promptsearch.PromptSearchError: for a retrieval results file with no ``best`` or a malformed one,
        another ``model`` or ``max_length``, or prompts naming ``{task}`` without a ``description`` (or one given for
        prompts that name none)."""
    if results_kind(path) != RETRIEVAL:
        return None
    d = json.loads(Path(path).read_text(encoding="utf-8"))  # a JSON object: results_kind read it
    best = d.get("best")
    if not best:
        raise PromptSearchError(f"{path} holds no chosen retrieval prompts yet (no \"best\"): its search stopped "
                                "before its verdict; run the search again with the same out= to finish it, then "
                                "export")
    given = best.get("readout") if isinstance(best, dict) else None
    sides = given if isinstance(given, dict) else {"query": given, "document": given}
    fields = {"query": best.get("query") if isinstance(best, dict) else None,
              "document": best.get("document") if isinstance(best, dict) else None,
              "readout": sides.get("query"), "document readout": sides.get("document")}
    if bad := [name for name, v in fields.items() if not isinstance(v, str)]:
        raise PromptSearchError(f"{path}: its \"best\" gives no {' / '.join(bad)} as text; a retrieval results file's "
                                "best is {\"query\": PROMPT, \"document\": PROMPT, \"readout\": READOUT}")
    if not isinstance(d.get("model"), str) or not d["model"]:
        raise PromptSearchError(f"{path} names no model (\"model\"); a retrieval results file names the one it scored")
    place = recorded_place(d)  # where its model was named
    found = _export_model(path, d["model"], model, place, d.get("model_weights"))  # its weights checked
    query, document, readout, document_readout = (str(v) for v in fields.values())  # each checked text above
    if TASK_SLOT in query + document:
        if description is None or not description.strip():
            raise PromptSearchError(f"{path}: its chosen prompts name {TASK_SLOT} (searched over several sets, each "
                                    "filling it with its own task); give description='one sentence saying what your "
                                    "task is' to write it into the folder's prompts")
        query, document = fill_task(query, description), fill_task(document, description)
    elif description is not None:
        raise PromptSearchError(f"{path}: its chosen prompts name no {TASK_SLOT} (their task is written in already); "
                                "drop description=")
    numbers = d["numbers"] if isinstance(d.get("numbers"), dict) else {}
    scored = numbers["pooled_max_length"] if isinstance(numbers.get("pooled_max_length"), int) else None
    if max_length is not None and scored is not None and max_length != scored:
        raise PromptSearchError(f"{path} was scored with max_length={scored}; drop max_length= (the export keeps the "
                                "length it was scored with)")
    return RetrievalAnswer(found, query, document, readout,
                           None if document_readout == readout else document_readout, max_length or scored)


def export_representation(model: str, k: Representation, out, model_path: str | None = None,
                          max_length: int | None = None) -> str:
    """Write a sentence-transformers folder for the representation ``k`` of ``model`` (a prompt pooled one of
    sentence-transformers' ways, ``query: [X] @sentence-mean``): the model's own module stack — its Transformer,
    its Dense and Normalize, its max length (``max_length``: the one ``k`` was scored with, when it was set) —
    with the Pooling set to ``k``'s mode and ``include_prompt`` and the prompt stored as ``query`` and
    ``document``, the default. ``SentenceTransformer(out).encode`` then gives ``k``'s vectors with neither
    ``trust_remote_code`` nor promptsearch, in a layout sentence-transformers 2.x-6.x, Text Embeddings Inference
    and vLLM read. What sentence-transformers cannot express is refused with a one-line reason before anything
    is written; the folder appears whole or not at all. Returns what was written, in a few lines.

    :param model: the model as the user named it (``"default"``, a hub id, a folder), named in the model card.
    :param k: the representation: a prompt pooled by one of sentence-transformers' modes.
    :param out: the folder to write (it must not exist, or be empty).
    :param model_path: where the model is read from, when not ``model`` itself.
    :param max_length: the max length ``k`` was scored with (None: the model's own).
    :returns: what was written and the notes that apply to it, a few lines.
    :raises promptsearch.PromptSearchError: for a representation sentence-transformers cannot express (a
        [MASK] state, a layer, text after [X], an ensemble), an unfinished fine-tuning folder, or a module
        stack whose Pooling is not the module after the Transformer; ``promptsearch.errors.ModelError`` for a
        model that cannot be read."""
    if (why := k.why_not_sentence_transformers()) is not None:
        extra = ("; fine-tune it (promptsearch finetune) for a folder that loads with trust_remote_code, or export a "
                 "pooled read-out (P[X] @mean …)") if not k.members and not k.pooled else ""
        raise PromptSearchError(f"{quote(k.text)} cannot be a sentence-transformers folder: {why}{extra}")

    description, notes = _write_folder(model, FolderSpec.of(k), out, model_path, max_length)
    lines = [f"wrote {out}: SentenceTransformer({str(out)!r}).encode(sentences) gives {k.text} of {model}",
             f"  {description}"]
    return "\n".join(lines + [f"note: {n}" for n in notes])


def export_retrieval(model: str, query: str, document: str, readout: str, out, model_path: str | None = None,
                     max_length: int | None = None, document_readout: str | None = None) -> str:
    """Write a sentence-transformers folder for a retrieval answer of ``model``: the model's own module stack (as
    ``export_representation`` writes it) with the Pooling set to ``readout`` and ``prompts`` =
    ``{"query": query, "document": document}``, no default prompt. Then ``SentenceTransformer(out).encode_query``
    gives ``query + "[X]"`` pooled by ``readout`` (``Representation.of(query + "[X]", readout=readout)``, as
    promptsearch scored it), ``encode_document`` likewise with ``document``, and plain ``encode`` adds no prompt
    (sentence-transformers' ``encode_query`` reads the prompt named ``query``, ``encode_document`` the first of
    ``document``, ``passage``, ``corpus``; an empty prompt is no prompt, and keeps ``encode`` from falling back to a
    default). Refused with a one-line reason before anything is written: a side sentence-transformers cannot
    compute, or sides that would need two Pooling modules (sentence-transformers' Router, which this does not
    write). The folder appears whole or not at all.

    :param model: the model as the user named it (``"default"``, a hub id, a folder), named in the model card.
    :param query: the query prompt: text before the query ("": none).
    :param document: the document prompt: text before the document ("": none).
    :param readout: a pooled read-out (``mean``, ``sentence-mean``, ``cls`` …), for both sides.
    :param out: the folder to write (it must not exist, or be empty).
    :param model_path: where the model is read from, when not ``model`` itself.
    :param max_length: the max length the prompts were scored with (None: the model's own).
    :param document_readout: the document side's read-out when it is not ``readout`` (a hand-written results
        file); export takes it only where one Pooling module computes both.
    :returns: what was written (what ``encode_query`` / ``encode_document`` give) and the notes that apply, a few
        lines.
    :raises promptsearch.PromptSearchError: for a prompt or read-out sentence-transformers cannot compute, sides
        needing different modules, an unfinished fine-tuning folder, or a module stack whose Pooling is not the
        module after the Transformer; ``promptsearch.errors.ModelError`` for a model that cannot be read."""
    kq = Representation.of(query + SENT, readout=readout)
    kd = Representation.of(document + SENT, readout=document_readout or readout)
    description, notes = _write_folder(model, FolderSpec.of_retrieval(kq, kd), out, model_path, max_length)
    lines = [f"wrote {out}: SentenceTransformer({str(out)!r}), the retrieval prompts of {model}:",
             f"  .encode_query(queries) gives {kq.shown}",
             f"  .encode_document(documents) gives {kd.shown}",
             "  .encode(texts) adds no prompt", f"  {description}"]
    return "\n".join(lines + [f"note: {n}" for n in notes])


def _write_folder(model: str, spec: FolderSpec, out, model_path: str | None,
                  max_length: int | None) -> tuple[str, list[str]]:
    """The one way an export writes its folder: the model's own stack read by sentence-transformers, the
    transformer's weights and tokenizer (``max_length``, when given, as its limit) and ``write_modules``
    written into a temporary folder beside ``out``, which then becomes ``out`` whole.

    :returns: ``(description, notes)`` from ``write_modules``.
    :raises promptsearch.PromptSearchError: for an unfinished fine-tuning folder or a module stack whose Pooling
        is not the module after the Transformer (before anything is written)."""
    check_finished(model_path or model)  # a folder finetune has not finished: its model is a checkpoint
    stack = load_stack(check_model_path(model_path or model))  # sentence-transformers reads the source: its own modules
    _check_pooling_first(stack, model)  # before anything is written (write_modules checks it for finetune too)
    length = max_length or stack.max_seq_length
    out = Path(out)
    try:
        out.parent.mkdir(parents=True, exist_ok=True)  # as sentence-transformers' save makes its folder's parents
        tmp = Path(tempfile.mkdtemp(prefix=f".{out.name}.", dir=out.parent if str(out.parent) else "."))
    except OSError as exc:  # a folder that refuses new files though its mode allows them (/proc, a full disk)
        raise PromptSearchError(f"out={out} cannot be written ({first_line(exc)}); choose a path in a writable "
                                "folder") from None
    try:
        tr = stack.transformer
        assert tr.tokenizer is not None  # a Transformer module reads text through its tokenizer
        with _quiet():
            tr.auto_model.save_pretrained(tmp)
            if length and length < 1_000_000:
                tr.tokenizer.model_max_length = length
            tr.tokenizer.save_pretrained(tmp)
        description, notes = write_modules(tmp, stack, spec, length, model)
        public(tmp)
        if out.is_dir():
            out.rmdir()  # an empty folder given as --out (the command refuses one that holds anything)
        os.replace(tmp, out)
    except OSError as exc:  # a full disk, a quota: nothing left behind, one line
        shutil.rmtree(tmp, ignore_errors=True)
        full = exc.errno in (errno.ENOSPC, errno.EDQUOT)
        raise PromptSearchError(f"out={out}: writing the folder failed ({first_line(exc)}); "
                                + ("free space or choose another path" if full else "choose another path")) from None
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    return description, notes


def public(folder: Path) -> None:
    """Every file and folder under ``folder`` (and it) readable by all as files usually are: 0666/0777 less the umask
    (safetensors and mkdtemp make 0600/0700)."""
    umask = os.umask(0)
    os.umask(umask)
    for f in [folder, *folder.rglob("*")]:
        os.chmod(f, (0o777 if f.is_dir() else 0o666) & ~umask)
