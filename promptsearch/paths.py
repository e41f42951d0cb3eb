"""Where things live: the data folder (flag, env var, or ../shared/data), the score cache."""

from __future__ import annotations

import os
import socket
import sys
from pathlib import Path

from .errors import DataError

ENV_VAR = "PROMPTSEARCH_DATA_DIR"
CACHE_ENV = "PROMPTSEARCH_CACHE"
STS_FOLDERS = ("STS12-en-test", "STS13-en-test", "STS14-en-test", "STS15-en-test", "STS16-en-test")

DEV_SET = "stsb-dev"  # the set a search scores on and training chooses its checkpoint by, unless told another


def hub_offline_if_unreachable() -> bool:
    """Before a Hugging Face Hub id is loaded: if the hub does not answer one connection within a
    few seconds, switch the hub libraries to offline mode (as ``HF_HUB_OFFLINE=1`` would), so that a
    cached copy still loads and a missing one fails at once instead of after ~30 s of retries.
    Returns whether the libraries are offline (set here or by the environment)."""
    from huggingface_hub import constants  # lazy: start-up time

    if constants.HF_HUB_OFFLINE:
        return True
    import urllib.parse  # lazy: start-up time
    import urllib.request  # lazy: start-up time (it loads http and ssl)

    if urllib.request.getproxies():  # behind a proxy a direct connection proves nothing: leave it to the libraries
        return False
    url = urllib.parse.urlsplit(constants.ENDPOINT)
    try:
        socket.create_connection((url.hostname, url.port or (443 if url.scheme == "https" else 80)), timeout=3).close()
        return False
    except OSError:
        constants.HF_HUB_OFFLINE = True
        if "datasets" in sys.modules:
            sys.modules["datasets"].config.HF_HUB_OFFLINE = True
        return True


def local_folder(name: str) -> str | None:
    """The absolute path of the local folder ``name`` names from here (None: a hub id, ``default``, nothing here):
    what a results file records beside the model's name as given, so that the name is found again from elsewhere.

    :param name: the model as named.
    :returns: the folder's absolute path, or None."""
    return os.path.abspath(name) if name != "default" and Path(name).is_dir() else None


def model_here(name: str, cwd: str | None, folder: str | None = None) -> str:
    """A model as a results file recorded it, named so that it is found from here: the folder the file recorded
    it was (``folder``, ``local_folder`` of the folder its last run loaded) while it is there; else a relative name
    under the folder its command last ran in (``cwd``); else the name as recorded (a hub id, ``default``, a folder
    moved with its project and named from inside it).

    :param name: the model as recorded.
    :param cwd: the folder the search's command last ran in (None: not recorded).
    :param folder: the model's folder as recorded (None: not recorded).
    :returns: the name to load it by from here."""
    if name == "default":
        return name
    if folder and Path(folder).is_dir():
        return folder
    if cwd and not os.path.isabs(name) and (Path(cwd) / name).is_dir():
        return str(Path(cwd) / name)
    return name


def same_model(recorded: str, given: str, cwd: str | None = None, folder: str | None = None) -> bool:
    """Whether a model named now (``given``) is the one a results file recorded: the same name, or the same local
    folder under another (a relative and an absolute path, a link), which a refusal of "another model" would be of
    its spelling.

    :param recorded: the model as the file recorded it.
    :param given: the model as named now.
    :param cwd: the folder the file's command last ran in (None: not recorded).
    :param folder: the model's folder as the file recorded it (None: not recorded).
    :returns: whether both name one model: the same text, or folders that are the same one."""
    if recorded == given:
        return True
    if "default" in (recorded, given):
        return False
    a, b = Path(model_here(recorded, cwd, folder)), Path(given)
    return a.is_dir() and b.is_dir() and a.resolve() == b.resolve()


def cache_dir() -> Path:
    """``$XDG_CACHE_HOME/promptsearch`` (default ``~/.cache/promptsearch``)."""
    return Path(os.environ.get("XDG_CACHE_HOME", Path.home() / ".cache")) / "promptsearch"


def default_cache_path() -> Path:
    """The score cache: ``$PROMPTSEARCH_CACHE`` or ``<cache dir>/scores.jsonl``."""
    if os.environ.get(CACHE_ENV):
        return Path(os.environ[CACHE_ENV])
    return cache_dir() / "scores.jsonl"


# the folder holding the promptsearch package: a checkout's root (setup puts the data in ../shared/data beside it)
CHECKOUT = Path(__file__).resolve().parents[1]


def _candidates() -> list[Path]:
    """Where the data is looked for without a flag or $PROMPTSEARCH_DATA_DIR: beside the current folder, then
    beside the checkout promptsearch runs from (so a command run from another folder finds it), each once."""
    places = [base / rel for base in (Path.cwd(), CHECKOUT) for rel in ("../shared/data", "data", "../data")]
    seen, out = set(), []
    for c in places:
        key = os.path.normpath(c)
        if key not in seen:
            seen.add(key)
            out.append(Path(key))
    return out


def data_dirs(data_dir: str | os.PathLike | None = None) -> tuple[Path, Path]:
    """(sts folder, train folder) from the flag, the env var or the defaults.

    The given folder may be the ``sts/`` folder itself or its parent holding ``sts/`` and
    ``train/``; ``train/`` is looked for beside ``sts/``.
    """
    given = data_dir or os.environ.get(ENV_VAR)
    if given:
        p = Path(given).expanduser()
        src = "data_dir=" if data_dir else ENV_VAR
        if p.exists() and not p.is_dir():
            raise DataError(f"data directory {p} ({src}) is a file, not a folder; point it at the STS data folder "
                            "(e.g. ../shared/data/sts)")
        if not p.is_dir():
            raise DataError(f"data directory {p} ({src}) does not exist; point it at the STS data (e.g. "
                            "../shared/data/sts)")
        if (p / "sts").is_dir():
            return p / "sts", p / "train"
        if (p / "STSBenchmark").is_dir() or any((p / d).is_dir() for d in STS_FOLDERS):
            return p, p.parent / "train"
        raise DataError(f"data directory {p} ({src}) holds no STSBenchmark/ or sts/ folder; point it at the "
                        "SentEval-layout STS data")
    looked = _candidates()
    for c in looked:
        if (c / "sts" / "STSBenchmark").is_dir():
            return (c / "sts").resolve(), (c / "train").resolve()
    raise DataError(f"no data directory: none of {', '.join(str(c / 'sts') for c in looked)} holds STSBenchmark/; "
                    f"pass data_dir= or set {ENV_VAR} to the STS data folder")


def sts_dir(data_dir=None) -> Path:
    return data_dirs(data_dir)[0]


def train_dir(data_dir=None) -> Path:
    return data_dirs(data_dir)[1]
