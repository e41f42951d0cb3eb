"""The Textual app driven with run_test() and a Pilot, in an 80x24 terminal."""

import asyncio
import json

from textual.widgets import DataTable, Input

from promptsearch.tui import PromptSearchApp


def _results(path, rows, validation=None):
    validation = validation or {}
    path.write_text(json.dumps({
        "schema": "promptsearch.results/1", "model": "tiny", "dataset": "stsb-dev", "strategy": "greedy",
        "denoise": True,
        "settings": {}, "created": "", "updated": "", "stats": {"scored": len(rows), "cached": 0, "seconds": 1.0,
                                                                "templates_per_minute": 1.0},
        "templates": [{"template": t, "spearman": s, "denoise": True, "seconds": 1.0, "order": i + 1,
                       **({"validation": validation[t]} if t in validation else {})}
                      for i, (t, s) in enumerate(rows)]}))


async def _wait_for(pilot, cond, timeout=30.0):
    waited = 0.0
    while not cond():
        await pilot.pause(0.1)
        waited += 0.1
        assert waited < timeout, "timed out"


def test_leaderboard_follows_the_results_file(tmp_path):
    path = tmp_path / "best.json"
    _results(path, [("[X] means [MASK] .", 70.0), ("[X] is [MASK] .", 68.0)])

    async def scenario():
        app = PromptSearchApp(results=str(path), poll_seconds=0.1)
        async with app.run_test(size=(80, 24)) as pilot:
            table = app.screen.query_one("#board", DataTable)
            await _wait_for(pilot, lambda: table.row_count == 2)
            assert "best so far" in str(app.screen.query_one("#info").render())
            # another process writes a better template: the leaderboard picks it up
            _results(path, [("[X] means [MASK] .", 70.0), ("[X] is [MASK] .", 68.0), ("This [X] means [MASK] .", 75.5)],
                     validation={"This [X] means [MASK] .": {"stsb": 71.0, "sickr": 66.25}})
            await _wait_for(pilot, lambda: table.row_count == 3)
            assert table.get_row_at(0)[3] == "This [X] means [MASK] ."
            assert table.get_row_at(0)[2] == "stsb 71.00 · sickr 66.25"  # held-out scores beside the dev score
            assert table.get_row_at(1)[2] == ""  # not validated
            assert app.screen.query_one("#spark").data == [70.0, 68.0, 75.5]
            await pilot.press("question_mark")
            assert app.screen.__class__.__name__ == "HelpScreen"
            await pilot.press("escape")
            assert app.screen.__class__.__name__ == "LeaderboardScreen"

    asyncio.run(scenario())


def test_predictions_screen_updates_for_typed_sentences(tmp_path, bert_enc):
    path = tmp_path / "best.json"
    _results(path, [("This sentence : \"[X]\" means [MASK] .", 70.0)])

    async def scenario():
        app = PromptSearchApp(results=str(path), encoder=bert_enc, poll_seconds=0.1)
        async with app.run_test(size=(80, 24)) as pilot:
            await _wait_for(pilot, lambda: app.screen.query_one("#board", DataTable).row_count == 1)
            await pilot.press("enter")  # predict with the selected template
            assert app.screen.__class__.__name__ == "PredictionsScreen"
            assert app.screen.query_one("#template", Input).value == 'This sentence : "[X]" means [MASK] .'
            raw = app.screen.query_one("#raw", DataTable)
            den = app.screen.query_one("#denoised", DataTable)
            await pilot.click("#sentence")
            await pilot.press(*"a man is playing a guitar .", "enter")
            await _wait_for(pilot, lambda: den.row_count == 5)

            def rows(t):  # (token, probability)
                return [tuple(t.get_row_at(i)) for i in range(t.row_count)]

            first = (rows(raw), rows(den))
            app.screen.query_one("#sentence", Input).value = ""
            await pilot.press(*"the stock market fell sharply today .", "enter")
            await _wait_for(pilot, lambda: (rows(raw), rows(den)) != first)
            assert first[0] != first[1]  # denoising changes the predictions
            await pilot.press("escape")
            assert app.screen.__class__.__name__ == "LeaderboardScreen"

    asyncio.run(scenario())


def test_a_mistyped_results_file_is_said_as_one(tmp_path):
    """From a user's trial: ``tui --results retrievl.json`` waited for the file without a word on the retrieval.json
    beside it. A missing file is still waited for (a search to come writes it), and a near name is said."""
    from promptsearch.tui.sources import ResultsFileSource

    (tmp_path / "retrieval.json").write_text("{}")
    assert ResultsFileSource(tmp_path / "retrievl.json").load().error == \
        f"waiting for {tmp_path / 'retrievl.json'} ... (no such file yet; did you mean 'retrieval.json'?)"
    assert ResultsFileSource(tmp_path / "best.json").load().error == f"waiting for {tmp_path / 'best.json'} ..."


def test_optuna_source_reads_a_study(tmp_path):
    import optuna

    from promptsearch.tui.sources import OptunaSource

    storage = f"sqlite:///{tmp_path / 's.db'}"
    src = OptunaSource(storage, "s")
    assert src.changed() and "waiting for study" in src.load().error
    study = optuna.create_study(study_name="s", storage=storage, direction="maximize")
    for t, v in [("[X] means [MASK] .", 70.0), ("[X] is [MASK] .", 72.5)]:
        tr = study.ask()
        tr.set_user_attr("template", t)
        study.tell(tr, v)
    assert src.changed() and not src.changed()
    b = src.load()
    assert b.rows[0] == (72.5, "[X] is [MASK] .") and b.trials == 2 and b.history == [70.0, 72.5]


def test_predictions_on_a_causal_lm_use_promptEOL(tmp_path, tiny_gpt2_dir):
    from conftest import CAUSAL_T, make_encoder

    path = tmp_path / "best.json"
    _results(path, [(CAUSAL_T, 5.0)])
    enc = make_encoder(tiny_gpt2_dir)

    async def scenario():
        app = PromptSearchApp(results=str(path), encoder=enc, poll_seconds=0.1)
        async with app.run_test(size=(80, 24)) as pilot:
            await pilot.press("p")  # the predictions screen with the masked-LM default template
            assert app.screen.__class__.__name__ == "PredictionsScreen"
            await pilot.click("#sentence")
            await pilot.press(*"a man is playing a guitar .", "enter")
            den = app.screen.query_one("#denoised", DataTable)
            await _wait_for(pilot, lambda: den.row_count == 5)
            assert app.screen.query_one("#template", Input).value == CAUSAL_T  # switched to PromptEOL

    asyncio.run(scenario())


def test_leaderboard_plots_the_results_file(tmp_path, monkeypatch):
    import webbrowser

    opened = []
    monkeypatch.setattr(webbrowser, "open", lambda url: opened.append(url) or True)
    path = tmp_path / "best.json"
    _results(path, [("[X] means [MASK] .", 70.0), ("[X] is [MASK] .", 68.0)])

    async def scenario():
        app = PromptSearchApp(results=str(path), poll_seconds=0.1)
        async with app.run_test(size=(80, 24)) as pilot:
            await pilot.press("g")
            await _wait_for(pilot, lambda: app.screen.plotted)
            assert app.screen.plotted == f"wrote {tmp_path / 'best.svg'}"

    asyncio.run(scenario())
    assert (tmp_path / "best.svg").read_text().startswith("<?xml") and opened == [(tmp_path / "best.svg").as_uri()]


def test_leaderboard_lists_the_chosen_answer_first_and_says_so(tmp_path):
    """A greedy file whose answer (x_chosen) is not its highest score: the header says "chosen", the
    answer is row 1, and a strategy's templates are "scored", not "trials"."""
    path = tmp_path / "best.json"
    _results(path, [("[X] means [MASK] .", 70.0), ("[X] is [MASK] .", 71.0)])
    d = json.loads(path.read_text())
    d["x_chosen"] = "[X] means [MASK] ."
    path.write_text(json.dumps(d))

    async def scenario():
        app = PromptSearchApp(results=str(path), poll_seconds=0.1)
        async with app.run_test(size=(120, 24)) as pilot:
            table = app.screen.query_one("#board", DataTable)
            await _wait_for(pilot, lambda: table.row_count == 2)
            info = str(app.screen.query_one("#info").render())
            assert "chosen" in info and "[X] means [MASK] ." in info and "trials" not in info and "2 scored" in info
            assert table.get_row_at(0)[3] == "[X] means [MASK] ."

    asyncio.run(scenario())


def test_leaderboard_follows_a_retrieval_results_file(tmp_path):
    """A retrieval run's file: candidates by nDCG@10 (four decimals), the answer first even when another scored
    higher, the check on unseen queries in the held-out column; Enter opens no [MASK] predictions."""
    import numpy as np

    from promptsearch.eval.retrieval import RetrievalCandidate
    from promptsearch.search.retrieval import RetrievalEntry, RetrievalResults

    path = tmp_path / "r.json"
    res = RetrievalResults.open(path, "tiny", {"name": "demo", "fingerprint": "f" * 16, "queries": 3, "corpus": 9},
                                "fp32", {})
    own, q = RetrievalCandidate.of("", "", "mean"), RetrievalCandidate.of("query: ", "", "mean")
    res.add(RetrievalEntry(own, {"ndcg@10": 0.9574}, "own", 1.0, np.array([0.9, 1.0, 0.97])))
    res.add(RetrievalEntry(q, {"ndcg@10": 0.9645}, "library", 1.0, np.array([1.0, 1.0, 0.89])))
    res.own, res.best = own, own
    res.verdict = {"kept": True, "challenger": q.to_json(), "gain": 0.007, "se": 0.004, "min_gain": 0.004,
                   "taken": True, "unseen": {"queries": 52, "own": 0.9529, "chosen": 0.9393, "gain": -0.0136,
                                             "se": 0.01, "min_gain": 0.01, "taken": False}}
    res.save()

    async def scenario():
        app = PromptSearchApp(results=str(path), poll_seconds=0.1)
        async with app.run_test(size=(80, 24)) as pilot:  # a terminal's usual width
            table = app.screen.query_one("#board", DataTable)
            await _wait_for(pilot, lambda: table.row_count == 2)
            assert [str(c.label) for c in table.columns.values()] == ["#", "ndcg@10", "held-out", "candidate"]
            assert table.get_row_at(0)[1:] == ["0.9574", "unseen 52 0.9529", own.shown]  # the answer first
            assert table.get_row_at(1)[1:] == ["0.9645", "unseen 52 0.9393", q.shown]
            # the check on unseen queries (why the lower score is first) on screen, not past a long candidate's column
            shown = app.export_screenshot().replace("&#160;", " ")
            assert "unseen 52 0.9529" in shown and "unseen 52 0.9393" in shown
            info = str(app.screen.query_one("#info").render())
            assert "greedy on tiny" in info and "chosen" in info and "2 scored" in info
            screen = app.screen
            await pilot.press("enter")
            await pilot.pause(0.2)
            assert app.screen is screen  # no predictions screen for a pair of prompts

    asyncio.run(scenario())


def test_a_several_sets_retrieval_file_names_its_score_as_their_mean(tmp_path):
    import numpy as np

    from promptsearch.eval.retrieval import RetrievalCandidate
    from promptsearch.search.retrieval import RetrievalEntry, RetrievalResults
    from promptsearch.tui.sources import retrieval_board

    sets = [{"name": "a", "queries": 2, "corpus": 5}, {"name": "b", "queries": 1, "corpus": 4}]
    path = tmp_path / "r.json"
    res = RetrievalResults.open(path, "tiny", {"name": "a,b", "fingerprint": "f" * 16, "queries": 3, "corpus": 9,
                                               "objective": "mean", "sets": sets}, "fp32", {})
    own = RetrievalCandidate.of("", "", "mean")
    res.add(RetrievalEntry(own, {"ndcg@10": 0.9, "a:ndcg@10": 0.85, "b:ndcg@10": 0.95}, "own", 1.0,
                           np.array([0.8, 0.9, 0.95])))
    res.own = res.best = own
    res.save()
    board = retrieval_board(path)
    assert board.metric == "ndcg@10, mean of 2 sets" and board.rows == [(0.9, own.shown)]


def _cut_retrieval_run(tiny_bert_encoder_only_dir, tmp_path):
    """A retrieval search run by its command in a folder of its own, then cut short: its verdict and all but two
    scores taken out of the file. (path, the whole run's file, the command line.)"""
    from conftest import beir_folder, run_cli, small_retrieval_data

    beir = beir_folder(tmp_path / "beir", small_retrieval_data(20, 80))
    path = tmp_path / "r.json"
    (tmp_path / "there").mkdir()
    argv = ["retrieval", "--model", str(tiny_bert_encoder_only_dir), "--data", str(beir), "--out", "../r.json",
            "--cache-dir", str(tmp_path / "cache"), "--readouts", "cls", "-q"]
    r = run_cli(argv, cwd=tmp_path / "there")  # a process of its own: the file's write lock is its
    assert r.returncode == 0, r.stderr[-2000:]
    whole = json.loads(path.read_text())
    cut = {k: v for k, v in whole.items() if k not in ("best", "verdict")}
    cut["entries"] = whole["entries"][:2]  # the model's own and one more: the rest to score again
    path.write_text(json.dumps(cut))
    return path, whole, argv


def test_s_resumes_an_interrupted_retrieval_search_with_the_command_that_wrote_it(tiny_bert_encoder_only_dir,
                                                                                 tmp_path):
    """The TUI's "s" started only STS searches; a retrieval file said to run the command by hand. The file now keeps
    the command that ran its search (its arguments and folder), and "s" runs it again in a child process: a search
    cut short scores what the file lacks and ends with its verdict, the board following it. Here the file was
    copied elsewhere first: the search resumes the copy the TUI follows, not the file its command named."""
    import os
    import shutil
    from pathlib import Path

    first, whole, argv = _cut_retrieval_run(tiny_bert_encoder_only_dir, tmp_path)
    assert whole["command"]["argv"] == argv
    assert Path(whole["command"]["cwd"]).resolve() == (tmp_path / "there").resolve()
    (tmp_path / "moved").mkdir()
    path = tmp_path / "moved" / "r.json"
    shutil.copy(first, path)
    before = first.read_bytes()

    async def scenario():
        app = PromptSearchApp(results=str(path), poll_seconds=0.1)
        async with app.run_test(size=(140, 24)) as pilot:
            table = app.screen.query_one("#board", DataTable)
            await _wait_for(pilot, lambda: table.row_count == 2)
            assert "chosen" not in str(app.screen.query_one("#info").render())
            await pilot.press("s")
            assert app.screen.search_status.startswith("running: promptsearch retrieval --model ")
            await pilot.press("s")  # at once again: refused, not a second search
            assert len(app.searches) == 1
            await _wait_for(pilot, lambda: app.screen.search_status.startswith("search "), timeout=300)
            assert app.screen.search_status == "search finished", app.screen.search_status
            await _wait_for(pilot, lambda: table.row_count == len(whole["entries"]))
            assert "chosen" in str(app.screen.query_one("#info").render())
        assert not app.running_searches()

    asyncio.run(scenario())
    again = json.loads(path.read_text())
    assert again["best"] == whole["best"] and len(again["entries"]) == len(whole["entries"])
    assert {json.dumps(e["metrics"], sort_keys=True) for e in again["entries"]} == \
        {json.dumps(e["metrics"], sort_keys=True) for e in whole["entries"]}  # the same numbers, rescored
    assert first.read_bytes() == before  # the file the command named is untouched
    assert again["command"]["argv"].count("--out") == 1 and again["command"]["argv"][-1] == os.path.abspath(path)
    log = (tmp_path / "moved" / "r.json.log").read_text()
    assert "resuming" not in log and "chosen: query prompt" in log  # -q: the results only


def test_s_resumes_a_template_search_with_its_own_command_not_a_default_greedy_one(tiny_bert_dir, tmp_path):
    """On a template search's file, "s" started a greedy search of the TUI's model and dev set: a file written by
    another command, model or dev set was refused, or not what its run was. The file now keeps its command too, and
    "s" runs it again: here a ``score`` run cut short scores the template it lacks."""
    from conftest import run_cli

    path = tmp_path / "s.json"
    templates = ["[X] means [MASK] .", "This sentence : \"[X]\" means [MASK] .", "[X] is [MASK] ."]
    argv = ["score", "--model", str(tiny_bert_dir), "--dataset", "sts16", "--no-cache", "-q", "--no-bf16",
            "--validate-top", "0", "--out", str(path), *templates]
    r = run_cli(argv, cwd=tmp_path)
    assert r.returncode == 0, r.stderr[-2000:]
    whole = json.loads(path.read_text())
    assert whole["x_command"] == {"argv": argv, "cwd": str(tmp_path)}
    scores = {t["template"]: t["spearman"] for t in whole["templates"]}
    cut = dict(whole, templates=[t for t in whole["templates"] if t["template"] != templates[1]])
    path.write_text(json.dumps(cut))

    async def scenario():
        app = PromptSearchApp(results=str(path), poll_seconds=0.1, model="not-this-model", dataset="sickr")
        async with app.run_test(size=(140, 24)) as pilot:
            table = app.screen.query_one("#board", DataTable)
            await _wait_for(pilot, lambda: table.row_count == len(scores) - 1)
            await pilot.press("s")
            assert app.screen.search_status.startswith("running: promptsearch score --model ")
            await _wait_for(pilot, lambda: app.screen.search_status.startswith("search "), timeout=300)
            assert app.screen.search_status == "search finished", app.screen.search_status
            await _wait_for(pilot, lambda: table.row_count == len(scores))

    asyncio.run(scenario())
    again = json.loads(path.read_text())
    assert {t["template"]: t["spearman"] for t in again["templates"]} == scores  # the same numbers, one rescored
    assert again["model"] == str(tiny_bert_dir) and again["dataset"] == "sts16"


def test_the_tui_ends_the_search_it_started_when_it_ends(tiny_bert_encoder_only_dir, tmp_path):
    """A child watched by a thread kept the app from ending until the search was done. Quit at once: the app ends
    without waiting for it, and the search ends with the TUI (``end_searches``), its scores kept."""
    import time

    path, _, _ = _cut_retrieval_run(tiny_bert_encoder_only_dir, tmp_path)

    async def scenario():
        app = PromptSearchApp(results=str(path), poll_seconds=0.1)
        async with app.run_test(size=(140, 24)) as pilot:
            table = app.screen.query_one("#board", DataTable)
            await _wait_for(pilot, lambda: table.row_count == 2)
            await pilot.press("s")
            assert app.running_searches()
        return app

    t0 = time.monotonic()
    app = asyncio.run(scenario())
    assert time.monotonic() - t0 < 20 and app.running_searches()  # the app ended; the search had not
    app.end_searches()
    assert not app.running_searches() and app.searches[0].returncode in (143, -15)  # SIGTERM, as the command takes it


def test_a_retrieval_file_without_its_command_says_what_to_run(tmp_path):
    from promptsearch.cli.options import recorded_command
    from promptsearch.tui.resume import _without_out, shown, why_not

    out = str(tmp_path / "r.json")
    assert "does not record the command" in why_not(None, out) and f"--out {out}" in why_not(None, out)
    assert "does not record the command" in why_not({"argv": ["tui"], "cwd": str(tmp_path)}, out)
    assert "run promptsearch greedy … --out" in why_not(None, out, search="greedy")
    assert why_not({"argv": ["greedy", "--model", "m"], "cwd": str(tmp_path)}, out, search="greedy") is None
    assert "does not record the command" in why_not({"argv": ["retrieval", 3], "cwd": str(tmp_path)}, out)
    assert "run promptsearch retrieval … --out" in why_not(None, out, search="retrieval")
    assert "is gone" in why_not({"argv": ["retrieval"], "cwd": str(tmp_path / "nowhere")}, out)
    assert why_not({"argv": ["retrieval", "--data", "demo"], "cwd": str(tmp_path)}, out) is None
    for url, hidden in [("postgresql://me:s3cret@db/x", "postgresql://me:***@db/x"),
                        ("postgresql://me:pa/ss@db/x", "postgresql://me:***@db/x"),
                        ("postgresql://me@db/x?password=s3cret", "postgresql://me@db/x?password=***"),
                        ("postgresql:///db?user=me&PASSWORD=s3cret&host=/tmp", "postgresql:///db?user=me&PASSWORD=***"
                                                                               "&host=/tmp")]:
        args = type("Args", (), {"command_line": ["retrieval", "--storage", url, "--data", "demo"]})()
        kept = recorded_command(args)
        assert kept is not None and kept["masked"] and kept["argv"][2] == hidden, kept
        assert "s3cret" not in json.dumps(kept) and "ss@" not in json.dumps(kept) and "password" in why_not(kept, out)
    args = type("Args", (), {"command_line": ["retrieval", "--storage=sqlite:///r.db", "--out=a.json"]})()
    kept = recorded_command(args)
    assert kept == {"argv": args.command_line, "cwd": str(__import__("os").getcwd())}
    assert _without_out(["retrieval", "--out", "a", "-q", "--out=b", "--data", "d"]) == ["retrieval", "-q", "--data",
                                                                                        "d"]
    assert shown(kept) == "promptsearch retrieval --storage=sqlite:///r.db"


def test_no_flag_takes_the_name_the_command_line_rides_under():
    """``main`` passes the command line as given in the namespace, as ``command_line``: a flag of that dest would
    overwrite it."""
    import argparse

    from promptsearch.cli.parser import build_parser

    def dests(parser):
        for action in parser._actions:
            yield action.dest
            if isinstance(action, argparse._SubParsersAction):
                for sub in action.choices.values():
                    yield from dests(sub)

    found = list(dests(build_parser()))
    assert "model" in found and "command_line" not in found


def test_a_search_the_tui_started_ends_with_it_as_sigterm_ends_the_command(tmp_path):
    import signal
    import subprocess
    import sys

    from promptsearch.tui.resume import end

    child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(120)"])
    end(child, seconds=30)
    assert child.returncode == -signal.SIGTERM
    end(child)  # ended already: nothing to do
