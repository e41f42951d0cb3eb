"""Template libraries and grammars shipped in ``promptsearch/templates/`` (JSON)."""

from __future__ import annotations

import json
from importlib import resources
from pathlib import Path

from .errors import PromptSearchError
from .representation import Representation
from .template import Template


def _read(name_or_path: str) -> dict:
    p = Path(name_or_path)
    try:
        if p.suffix == ".json" and p.exists():
            text = p.read_text(encoding="utf-8")
        else:
            shipped = resources.files("promptsearch.templates").joinpath(f"{name_or_path}.json")
            text = shipped.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise PromptSearchError(f"no template file {name_or_path!r}; give a .json path or a shipped name") from None
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        raise PromptSearchError(f"{name_or_path}: invalid JSON at line {exc.lineno} column {exc.colno}: "
                                f"{exc.msg}") from None



def read_library(name_or_path: str) -> dict:
    """A shipped template library (its name: ``retrieval``, ``greedy`` ...) or a ``.json`` file, as its JSON object.

    :param name_or_path: a shipped name or a ``.json`` path.
    :returns: the parsed JSON.
    :raises promptsearch.PromptSearchError: for a file that cannot be found or is not JSON (one line)."""
    return _read(name_or_path)

def paper_templates(model_type: str = "bert", compat: str = "promptsearch") -> list[str]:
    """The three PromptBERT templates for a model family (RoBERTa-likes use ' quotes); with
    ``compat="reference"`` spelled exactly as the authors' scripts spell them.

    :param model_type: the model's ``config.model_type`` (``bert``, ``roberta`` ...).
    :param compat: ``"promptsearch"`` or ``"reference"``.
    :returns: the three templates' texts."""
    data = _read("paper")
    family = "roberta" if model_type in {"roberta", "xlm-roberta", "camembert", "longformer"} else "bert"
    if compat == "reference":
        family += "-reference"
    return [Template.parse(t).text for t in data[family]]


def default_template(model_type: str, causal: bool) -> str:
    """The template a command starts from when none is given: PromptEOL for a causal LM (it reads
    the last token), else the paper's first template in the model family's spelling.

    :param model_type: the model's ``config.model_type``.
    :param causal: whether the model is a causal LM.
    :returns: the template text."""
    return causal_templates()[0] if causal else paper_templates(model_type)[0]


def named_template(text: str) -> str:
    """A shipped causal-LM template by name (``PromptEOL``, ``PretendedCoT``, ``KnowledgeEnhancement``,
    case-insensitive), else the text as given.

    :param text: a shipped template's name, or a template.
    :returns: the template text."""
    if "[X]" in text or "*sent_0*" in text:
        return text
    names = {k.lower(): v for k, v in _read("causal")["templates"].items()}
    return names.get(text.strip().lower(), text)


def causal_templates() -> list[str]:
    """The shipped causal-LM templates (PromptEOL, Pretended CoT, Knowledge Enhancement)."""
    return [Template.parse(t).text for t in _read("causal")["templates"].values()]


def read_demos(path: str, param: str = "demos") -> list[tuple[str, str]]:
    """In-context demonstrations: ``sentence<TAB>word`` lines of ``path`` (``#`` comments).

    :param path: the file.
    :param param: the parameter the file was given as, named in errors.
    :returns: ``(sentence, word)`` pairs in file order.
    :raises promptsearch.PromptSearchError: for a file that cannot be read, a line that is not
        ``sentence<TAB>word``, a line holding ``[X]`` or ``[MASK]``, or a file with no demonstration."""
    try:
        lines = Path(path).read_text(encoding="utf-8-sig").splitlines()  # a byte-order mark is not text
    except (OSError, UnicodeDecodeError) as exc:
        raise PromptSearchError(f"cannot read {param}={path}: {getattr(exc, 'strerror', None) or exc}") from None
    shots = []
    for i, line in enumerate(lines, 1):
        if not line.strip() or line.lstrip().startswith("#"):
            continue
        parts = line.split("\t")
        if len(parts) != 2 or not parts[0].strip() or not parts[1].strip():
            raise PromptSearchError(f"{param}={path}:{i}: expected 'sentence<TAB>word', found {line[:60]!r}")
        slot = next((x for x in ("[X]", "[MASK]") if x in line), None)
        if slot:
            raise PromptSearchError(f"{param}={path}:{i}: a demonstration holds {slot}, which a template reserves; "
                                    "write the sentence and its word as plain text")
        shots.append((parts[0].strip(), parts[1].strip()))
    if not shots:
        raise PromptSearchError(f"{param}={path} holds no 'sentence<TAB>word' lines")
    return shots


def demo_template(template: str | Template, shots: list[tuple[str, str]]) -> str:
    """The template with demonstrations before it: each is the filled template with its word in place of
    [MASK] (a masked LM), or followed by its word (a causal LM's template, read at its last token).

    :param template: the template.
    :param shots: ``(sentence, word)`` demonstrations.
    :returns: the template text with the demonstrations before it."""
    t = Template.parse(template)
    close = '".' if t.text.endswith('"') else "."

    def shot(s: str, w: str) -> str:
        filled = t.fill(s)
        return filled.replace("[MASK]", w, 1) if "[MASK]" in t.text else filled + w + close

    return Template.parse(" ".join(shot(s, w) for s, w in shots) + " " + t.text).text


def with_demos(template: str, path: str) -> str:
    """The template with in-context demonstrations before it (PromptEOL style): ``path`` holds
    ``sentence<TAB>word`` lines; each becomes the filled template followed by its word.

    :param template: the template text.
    :param path: the demonstrations file.
    :returns: the template text with the demonstrations before it.
    :raises promptsearch.PromptSearchError: as ``read_demos``."""
    return demo_template(template, read_demos(path))


def load_json(name_or_path: str) -> dict:
    return _read(name_or_path)


def resolve_template(text: str | Template, demos: str | None = None) -> Template:
    """A template as a user gives it: a shipped name (PromptEOL ...) or text, with ``demos``
    (a 'sentence<TAB>word' file) put before it.

    :param text: a shipped template's name or a template.
    :param demos: a demonstrations file (None: none).
    :returns: the parsed template.
    :raises promptsearch.PromptSearchError: for a template that does not parse or a demonstrations file that
        cannot be read."""
    t = named_template(text.text if isinstance(text, Template) else text)
    return Template.parse(with_demos(t, demos) if demos else t)


def resolve_key(text: str, demos: str | None = None) -> Template | str:
    """A template as ``resolve_template`` gives it, or a results-entry key naming a layer or an
    ensemble (``T @layer L``, ``A + B``: each member resolved, the key returned as text).

    :param text: a template, a shipped template's name or a representation's key.
    :param demos: a demonstrations file put before each template (None: none).
    :returns: a ``Template``, or the key text.
    :raises promptsearch.PromptSearchError: as ``resolve_template``."""
    key = Representation.parse(text)
    if not key.members and not key.names_readout_or_layer:
        return resolve_template(text, demos)
    return Representation.ensemble(Representation(resolve_template(m.template, demos).text, m.layer, m.readout)
                             for m in key.parts).text


def read_templates(items=(), file: str | None = None, demos: str | None = None) -> list[Template]:
    """Templates given as arguments and/or in ``file`` (one a line, ``#`` comments).

    :param items: templates or shipped names.
    :param file: a file of templates, one a line.
    :param demos: a demonstrations file put before each template (None: none).
    :returns: the parsed templates, the arguments' first.
    :raises promptsearch.PromptSearchError: for no template at all, a file that cannot be read or is not
        UTF-8, or a template that does not parse."""
    items = list(items or [])
    if file:
        try:
            lines = Path(file).read_text(encoding="utf-8").splitlines()
        except OSError as exc:
            raise PromptSearchError(f"cannot read file={file}: {exc.strerror or exc}") from None
        except UnicodeDecodeError as exc:
            line = Path(file).read_bytes()[: exc.start].count(b"\n") + 1
            raise PromptSearchError(f"file={file}:{line}: not valid UTF-8 (byte {exc.object[exc.start]:#04x}); "
                                    "save the file as UTF-8") from None
        items += [x.strip() for x in lines if x.strip() and not x.lstrip().startswith("#")]
    if not items:
        raise PromptSearchError("give templates as arguments or with file= (one per line)")
    return [resolve_template(t, demos) for t in items]
