"""The library names what a caller can change as Python parameters (``dataset=``, ``layers='3,4'``,
``denoise=True``); the command line says the same things as its flags (``--dataset``,
``--layers 3,4``, ``--denoise``). ``as_flags`` rewrites a library message for the command line."""

from __future__ import annotations

import argparse
import re

# library parameters a flag of another name sets
ALIASES = {"mask_head": "mlm_head", "library": "prompts", "screening": "precision"}

_PARAM = re.compile(r"(?<![\w.\-/=])([a-z][a-z0-9_]*)=(?!=)('[^'\n]*'|\"[^\"\n]*\"|[^\s;)]*)")


def flag_table(parser: argparse.ArgumentParser, command: str | None = None) -> dict[str, list[argparse.Action]]:
    """Every long flag's actions by destination: ``command``'s own first, then every other command's."""
    subs = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
    parsers = [parser]
    for s in subs:
        choices = dict(s.choices)
        if command in choices:
            parsers.insert(0, choices.pop(command))
        parsers += list(choices.values())
    table: dict[str, list[argparse.Action]] = {}
    for p in parsers:
        for a in p._actions:
            if any(o.startswith("--") for o in a.option_strings):
                table.setdefault(a.dest, []).append(a)
    return table


def _flag(actions: list[argparse.Action], value: str) -> tuple[str, bool]:
    """(the flag, whether it takes the value)."""
    if value in ("True", "False"):  # a switch: the flag that sets it so
        want = value == "True"
        for a in actions:
            if a.nargs == 0 and getattr(a, "const", None) is want:
                return next(o for o in a.option_strings if o.startswith("--")), False
    a = actions[0]
    return next(o for o in a.option_strings if o.startswith("--")), a.nargs != 0


def as_flags(text: str, table: dict[str, list[argparse.Action]]) -> str:
    """``text`` with each ``param=value`` a flag names written as the flag (``--param value``)."""
    def one(m: re.Match) -> str:
        name, value = m.groups()
        actions = table.get(ALIASES.get(name, name))
        if not actions:
            return m.group(0)
        tail = ""
        if value and value[0] not in "'\"":
            stripped = value.rstrip(",.:")
            value, tail = stripped, value[len(stripped):]
        flag, takes = _flag(actions, value)
        return (f"{flag} {value}" if value and takes else flag) + tail

    return _PARAM.sub(one, text)
