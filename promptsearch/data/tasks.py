"""Tasks by name: the built-in STS sets, or any data set a user names (see ``user``)."""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

from ..errors import DataError, PromptSearchError, did_you_mean
from ..paths import sts_dir
from ..template import quote
from .sts import (
    SPLIT_ALIASES,
    STS_YEARS,
    TASK_ALIASES,
    TASK_GROUPS,
    TASK_NAMES,
    STSData,
    read_sick,
    read_sts_year,
    read_stsb,
)
from .user import FILE_BUILDERS, PairFormat, _split_spec, is_user_dataset, load_pairs


def expand_tasks(spec: str | list[str]) -> list[str]:
    """``"sts-all"`` → the 7 tasks; ``"stsb-dev,my.csv"`` → both; unknown names → DataError.

    :param spec: a comma list of task names, groups and user data sets, or a list of them.
    :returns: the task names, each once, in order.
    :raises promptsearch.errors.DataError: for an unknown name, or none."""
    names = spec.split(",") if isinstance(spec, str) else list(spec)
    out: list[str] = []
    for n in (x.strip() for x in names if x.strip()):
        low = _builtin_name(n)
        group = TASK_GROUPS.get(low, [low] if low in TASK_NAMES else [n])
        for t in group:
            if t not in TASK_NAMES and not is_user_dataset(t):
                if Path(_split_spec(t)[0]).suffix.lower() in FILE_BUILDERS:  # a data file's name: it is missing
                    raise DataError(f"no data file {n!r} (looked in {Path.cwd()}); give the path of an existing file")
                raise DataError(f"unknown task {n!r}{did_you_mean(low, ['sts-all', *TASK_NAMES, *TASK_ALIASES])}; "
                                f"choose from "
                                f"sts-all, {', '.join(TASK_NAMES)}, or give a data file, a dataset folder or a hub id "
                                "(owner/name[:config][@split])")
            if t not in out:
                out.append(t)
    if not out:
        raise DataError("no task given; use e.g. tasks=stsb-dev or tasks=sts-all")
    return out


TABLE_NAMES = {v.lower(): k for k, v in TASK_NAMES.items()}  # the names tables print, each read as its set


def _builtin_name(name: str) -> str:
    """``name`` lower-cased, as the built-in task or group it is another name of (an alias, the name a table prints,
    or "_" for "-"), else lower-cased as it is (a user data set's spec keeps its own spelling where it is read). A
    file or folder of that name here is the user's data set (a SentEval folder ``STSBenchmark``), unless it is a
    built-in name as it is."""
    low = name.lower()
    if Path(name).exists():
        return SPLIT_ALIASES.get(low, low)
    if low in TABLE_NAMES:  # as a table prints it (STS-B dev, SICK-R trial)
        return TABLE_NAMES[low]
    dashed = low.replace("_", "-")
    joined = re.sub(r"^(sts)-(b|1[2-6])(?=-|$)|^(sick)-(r)(?=-|$)", lambda m: "".join(filter(None, m.groups())),
                    dashed)  # sts-b-dev, sick-r-test, sts-12: the names' own parts joined as the built-in names are
    for key in (low, dashed, joined):
        key = TASK_ALIASES.get(key, key)
        if key in TASK_NAMES or key in TASK_GROUPS:
            return key
    return low


def load_task(task: str, data_dir=None, fmt: PairFormat | None = None) -> STSData:
    """A built-in task by name, or a user data set (``fmt``: its columns and subsets).

    :param task: a built-in task (``stsb-dev``, ``sts12`` ...), or a file, dataset folder or hub id
        (``owner/name[:config][@split]``).
    :param data_dir: the data folder of the built-in tasks (None: the default location).
    :param fmt: the columns of a user data set (None: found by name).
    :returns: the task's pairs.
    :raises promptsearch.errors.DataError: for an unknown task or data that cannot be read as scored pairs."""
    task = SPLIT_ALIASES.get(task, task)  # as expand_tasks gives a name: a user's folder 'stsbenchmark' stays theirs
    if task in STS_YEARS:
        return read_sts_year(task, data_dir)
    if task.startswith("stsb-original-"):
        return read_stsb(task[len("stsb-original-"):], data_dir, original=True)
    if task in TASK_NAMES and task.startswith("stsb"):
        return read_stsb(task.split("-", 1)[1] if "-" in task else "test", data_dir)
    if task in TASK_NAMES and task.startswith("sick"):
        return read_sick({"sickr": "test", "sick-trial": "dev", "sick-train": "train"}[task], data_dir)
    if is_user_dataset(task):
        return load_pairs(task, fmt)
    raise DataError(f"unknown task {task!r}")


def one_dataset(spec: str) -> str:
    """The one data set a search or a dev evaluation scores on (a group such as sts-all is several).

    :param spec: the task name or data set.
    :returns: the task name.
    :raises promptsearch.PromptSearchError: where ``spec`` names more or fewer than one data set."""
    tasks = expand_tasks(spec)
    if len(tasks) != 1:
        raise PromptSearchError(f"dataset={quote(spec)} names {len(tasks)} data sets ({', '.join(tasks)}); a search "
                                "scores on one, e.g. stsb-dev")
    return tasks[0]


def scoring_sets(spec: str) -> list[str]:
    """The dev set(s) a search scores on: one, or a comma list (``stsb-dev,sick-trial``). A group such as
    sts-all is the test sets, for reporting: refused here.

    :param spec: a dev set or a comma list of them.
    :returns: the task names, in order.
    :raises promptsearch.PromptSearchError: for an empty spec, a group, an unknown name or a set named twice."""
    if not str(spec).strip(" ,"):
        raise PromptSearchError("dataset= is empty; name the dev set(s) to score on, e.g. dataset=stsb-dev or "
                                "dataset=stsb-dev,sick-trial")
    tasks = expand_tasks(spec)
    if any(_builtin_name(n.strip()) in TASK_GROUPS for n in spec.split(",")):
        raise PromptSearchError(f"dataset={quote(spec)} names {len(tasks)} data sets ({', '.join(tasks)}), test sets "
                                "for reporting; a search scores on dev sets, e.g. stsb-dev or stsb-dev,sick-trial")
    seen: dict[tuple, str] = {}
    for t in tasks:  # one file under two spellings (p.csv, ./p.csv) is one set: the objective would count it twice
        same = seen.setdefault(resolved_task(t), t)
        if same != t:
            raise PromptSearchError(f"dataset={quote(spec)} names one data set twice ({same} and {t}); give each set "
                                    "once")
    return tasks


def resolved_task(task: str) -> tuple:
    """What a task name reads: a user file's resolved path (with its config and split), else the name."""
    name, config, split = _split_spec(task)
    p = Path(name)
    return (str(p.resolve()), config, split) if p.exists() else (task,)


@dataclass(frozen=True)
class DevSets:
    """The dev set(s) a search scores on, parsed once where the text enters (``parse``) and passed on
    as this object: the ``names`` in order, written back as ``stsb-dev`` or ``stsb-dev,sick-trial``
    (``text``, what a results file and a score cache record)."""

    names: tuple[str, ...]

    @classmethod
    def parse(cls, spec: "str | DevSets") -> "DevSets":
        """``spec`` read once (a ``DevSets`` is returned as it is); a one-line error for a bad one.

        :param spec: ``stsb-dev``, ``stsb-dev,sick-trial`` ..., or a ``DevSets``.
        :returns: the dev sets.
        :raises promptsearch.PromptSearchError: as ``scoring_sets``."""
        return spec if isinstance(spec, DevSets) else cls(tuple(scoring_sets(spec)))

    @property
    def text(self) -> str:
        return ",".join(self.names)

    def __str__(self) -> str:
        return self.text

    def __len__(self) -> int:
        return len(self.names)

    def __iter__(self):
        return iter(self.names)


def check_data(tasks, data_dir=None) -> None:
    """Fail fast on a missing data folder — when a built-in task needs it (user data sets do not).

    :param tasks: task names (as ``expand_tasks`` gives them).
    :param data_dir: the data folder (None: the default location).
    :raises promptsearch.errors.DataError: when a built-in task is named and the data folder is missing."""
    if any(t in TASK_NAMES for t in tasks):
        sts_dir(data_dir)
