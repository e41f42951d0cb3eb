"""What crosses a layer is an object: checked on the package's source (issue 33's "done when")."""

import ast
import re
from pathlib import Path

import pytest

from promptsearch.cli.flags import as_flags, flag_table
from promptsearch.cli.parser import build_parser

PKG = Path(__file__).resolve().parents[1] / "promptsearch"
# the command line and the TUI speak in flags; pgcluster passes flags to initdb
SPEAKS_FLAGS = ("cli/", "tui/", "pgcluster.py")


def _sources():
    return sorted(p for p in PKG.rglob("*.py"))


def _strings(path: Path):
    """(line, text) of every string literal that is not a docstring."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    docs = {id(n.body[0].value) for n in ast.walk(tree)
            if isinstance(n, (ast.Module, ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)) and n.body
            and isinstance(n.body[0], ast.Expr) and isinstance(n.body[0].value, ast.Constant)}
    for n in ast.walk(tree):
        if isinstance(n, ast.Constant) and isinstance(n.value, str) and id(n) not in docs:
            yield n.lineno, n.value


def _library_strings(skip=()):
    """(path relative to the package, line, text) of every non-docstring string literal of the modules
    whose path does not start with one of ``skip``."""
    for p in _sources():
        rel = str(p.relative_to(PKG))
        if not rel.startswith(tuple(skip)):
            for line, text in _strings(p):
                yield rel, line, text


def _functions():
    """Every function of the package: (its file relative to the package, the node, its parameter names)."""
    for p in _sources():
        for n in ast.walk(ast.parse(p.read_text(encoding="utf-8"))):
            if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef)):
                a = n.args
                yield str(p.relative_to(PKG)), n, [x.arg for x in a.posonlyargs + a.args + a.kwonlyargs]


def test_no_function_takes_more_than_eight_parameters():
    long = [f"{rel}:{n.lineno} {n.name} ({len(names)})" for rel, n, names in _functions()
            if len([x for x in names if x not in ("self", "cls")]) > 8]
    assert not long, long


# Where the data is, in which columns, and whether progress shows travel as one DataOptions; only the data
# floor's readers, which DataOptions is unpacked into, take them apart (STS tasks, retrieval data).
TRAVELLERS = {"data_dir", "fmt", "show_progress_bar"}
TAKE_THEM_APART = {("data/tasks.py", "load_task"), ("data/retrieval.py", "load_retrieval")}


def test_data_location_columns_and_progress_travel_as_one_object():
    apart = [f"{rel}:{n.lineno} {n.name} {sorted(TRAVELLERS & set(names))}" for rel, n, names in _functions()
             if len(TRAVELLERS & set(names)) > 1 and (rel, n.name) not in TAKE_THEM_APART]
    assert not apart, apart


def test_library_messages_name_parameters_not_flags():
    found = [f"{rel}:{line} {text[:70]!r}" for rel, line, text in _library_strings(SPEAKS_FLAGS)
             if re.search(r"(?<![\w-])--[a-z][a-z-]+", text)]
    assert not found, found


def test_representation_keys_are_built_and_parsed_in_one_module():
    """``T @layer L`` and ``A + B`` are written and read by representation.py alone, and read-out names are compared
    there (a description of a sentence-transformers stack joins its modules with ' + ': model/stack.py)."""
    found = [f"{rel}:{line} {text!r}" for rel, line, text in _library_strings(("representation.py", "model/stack.py"))
             if "@layer" in text or text in (" + ", "sentence-")]  # a key's text, or a pattern that parses one
    assert not found, found


def test_the_command_line_says_a_parameter_as_its_flag():
    table = flag_table(build_parser(), "greedy")
    assert as_flags("pass data_dir= or set X", table) == "pass --data-dir or set X"
    assert as_flags("layers='1,x': give all", table) == "--layers '1,x': give all"
    assert as_flags("pareto=True makes one objective per set, e.g. dataset=a,b.", table) == \
        "--pareto makes one objective per set, e.g. --dataset a,b."
    assert as_flags("fp32 (bf16=True forces it)", table) == "fp32 (--bf16 forces it)"
    assert as_flags("passed as mask_head=", table) == "passed as --mlm-head"
    # no such flags
    assert as_flags("a=b and x.json=1 and flavour='greedy'", table) == "a=b and x.json=1 and flavour='greedy'"


def test_an_api_caller_is_told_the_parameter_and_a_cli_user_the_flag(tiny_bert_dir, tmp_path, capsys):
    from promptsearch import rep
    from promptsearch.cli import main
    from promptsearch.data import load_task
    from promptsearch.errors import PromptSearchError
    from promptsearch.eval.objective import Objective
    from promptsearch.eval.sts import STSEvaluator

    with pytest.raises(PromptSearchError, match=r"^objective='max'.*mean or min"):
        Objective({"sts16": STSEvaluator(load_task("sts16"))}, "max")
    with pytest.raises(PromptSearchError, match=r"^head='x'.*L-H"):
        rep(pooling="ditto", head="x")
    code = main(["eval", "--model", str(tiny_bert_dir), "--pooling", "ditto", "--head", "x", "--tasks", "sts16", "-q"])
    err = capsys.readouterr().err
    assert code == 2 and "--head 'x'" in err and "L-H" in err and "head=" not in err, err


def test_every_strategy_shares_one_base_with_no_op_hooks(tmp_path):
    from promptsearch.search import GivenTemplates, Strategy, run_strategy
    from promptsearch.search.generate import GenerateSearch
    from promptsearch.search.greedy import Greedy
    from promptsearch.search.optuna_search import OptunaSearch

    assert all(issubclass(c, Strategy) for c in (Greedy, OptunaSearch, GenerateSearch, GivenTemplates))
    base = Strategy()
    assert base.settings() == {} and base.validation_extra(None) == [] and base.check(None) is None
    assert base.min_gain == "auto"

    class Duck:  # the shape of a strategy without the base: refused before any file is opened
        name = "duck"

        def run(self, scorer, results):
            pass

    with pytest.raises(TypeError, match="subclass it"):
        run_strategy(Duck(), None, tmp_path / "o.json")
    assert not (tmp_path / "o.json").exists()


def test_a_child_dies_with_the_test_process_that_started_it(tmp_path):
    """Even when the test process itself is killed (SIGKILL: no cleanup runs), its children end."""
    import os
    import signal
    import subprocess
    import sys
    import time

    parent = subprocess.Popen([sys.executable, "-c", (
        "import sys, time; sys.path.insert(0, sys.argv[1]); from conftest import spawn; "
        "c = spawn(['sleep', '60']); print(c.pid, flush=True); time.sleep(60)"), str(Path(__file__).parent)],
        stdout=subprocess.PIPE, text=True)
    child = int(parent.stdout.readline())
    os.kill(child, 0)  # running
    parent.kill()
    parent.wait()
    deadline = time.time() + 10
    while time.time() < deadline:
        try:
            os.kill(child, 0)
        except ProcessLookupError:
            break
        try:  # reaped by init once dead; a zombie still answers kill(0): look at its state
            if open(f"/proc/{child}/stat").read().split(")")[-1].split()[0] == "Z":
                break
        except FileNotFoundError:
            break
        time.sleep(0.1)
    else:
        os.kill(child, signal.SIGKILL)
        raise AssertionError("the child outlived the process that started it")


def _args_assignments(tree: ast.AST) -> list[int]:
    """Lines where ``args.<attr>`` is assigned, augmented, annotated, deleted or set with setattr."""
    found = []
    for n in ast.walk(tree):
        targets = n.targets if isinstance(n, (ast.Assign, ast.Delete)) else \
            [n.target] if isinstance(n, (ast.AugAssign, ast.AnnAssign, ast.For)) else []
        for t in targets:
            for x in ast.walk(t):  # tuple targets: a, args.x = ...
                if isinstance(x, ast.Attribute) and isinstance(x.value, ast.Name) and x.value.id == "args":
                    found.append(x.lineno)
        if isinstance(n, ast.Call) and isinstance(n.func, ast.Name) and n.func.id in ("setattr", "delattr") \
                and n.args and isinstance(n.args[0], ast.Name) and n.args[0].id == "args":
            found.append(n.lineno)
    return found


def test_the_command_line_never_changes_its_parsed_arguments():
    """The CLI turns arguments into objects and calls the library: a rule that would change an argument
    (a resumed file's precision, a folder's read-out, a worker's settings) is the library's (issue 47)."""
    found = [f"cli/{p.name}:{line}" for p in sorted((PKG / "cli").glob("*.py"))
             for line in _args_assignments(ast.parse(p.read_text(encoding="utf-8")))]
    assert not found, found


def test_an_assignment_to_args_is_seen():
    src = ("args.bf16 = True\nargs.a, b = 1, 2\nargs.n += 1\nsetattr(args, 'x', 1)\ndel args.y\n"
           "args.d.update({})\nx = args.z\nother.args = 1\n")
    assert sorted(_args_assignments(ast.parse(src))) == [1, 2, 3, 4, 5]


def _local_imports():
    """(file relative to the package, line number, source line) of every import inside a function."""
    for p in _sources():
        lines = p.read_text(encoding="utf-8").splitlines()
        for fn in ast.walk(ast.parse("\n".join(lines))):
            if isinstance(fn, (ast.FunctionDef, ast.AsyncFunctionDef)):
                for n in ast.walk(fn):
                    if isinstance(n, (ast.Import, ast.ImportFrom)):
                        yield str(p.relative_to(PKG)), n.lineno, lines[n.lineno - 1]


def test_every_function_local_import_says_why_it_is_not_at_the_top():
    local = list(_local_imports())
    assert len(local) > 10  # the walk finds them (the TUI and model loading import lazily)
    # a reason, not a linter's pragma: "# lazy: start-up time", "# here, not at the top: POSIX only", ...
    silent = [f"{f}:{n}: {line.strip()}" for f, n, line in local
              if not re.search(r"#\s*(?!noqa\b|type:)\w", line)]
    assert silent == [], "\n".join(silent)


def test_the_step_rule_is_written_once():
    """STS steps and retrieval steps are judged by one rule (issue 47 item 2): one ``Judged`` class, and the
    comparison of a gain with its threshold in one place."""
    classes = [str(p.relative_to(PKG)) for p in _sources()
               for n in ast.walk(ast.parse(p.read_text(encoding="utf-8")))
               if isinstance(n, ast.ClassDef) and n.name == "Judged"]
    assert classes == ["search/runner.py"]
    rules = [str(p.relative_to(PKG)) for p in _sources() if "gain > need" in p.read_text(encoding="utf-8")]
    assert rules == ["search/runner.py"]
