"""Leaderboard: templates ranked by STS-B dev score (or a retrieval run's candidates by nDCG@10), updated live while
a search runs."""

from __future__ import annotations

import webbrowser
from typing import Any

from rich.markup import escape
from rich.text import Text
from textual import work
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Vertical
from textual.screen import Screen
from textual.widgets import DataTable, Footer, Header, Sparkline, Static

from ..errors import PromptSearchError
from ..representation import template_of
from . import resume
from .sources import Board


class LeaderboardScreen(Screen):
    app: Any  # the PromptSearchApp (app.py imports this module: it cannot be named here without a cycle)

    BINDINGS = [
        Binding("enter", "open_predictions", "Predict with template", show=True),
        Binding("s", "start_search", "Start search"),
        Binding("r", "reload", "Reload"),
        Binding("g", "plot", "Plot results"),
    ]

    def __init__(self, source, poll_seconds: float = 1.0, name: str | None = None):
        super().__init__(name=name)
        self.source = source
        self.poll_seconds = poll_seconds
        self.board = Board()
        self.search_status = ""
        self.plotted = ""  # what the last plot wrote (or why it failed)
        self._columns = ""  # the score column's name the table has (set at the first refresh)

    def compose(self) -> ComposeResult:
        yield Header(show_clock=False)
        with Vertical(id="leaderboard"):
            yield Static("", id="info")
            yield Sparkline([], id="spark")
            yield DataTable(id="board", cursor_type="row", zebra_stripes=True)
        yield Footer()

    def on_mount(self) -> None:
        self.refresh_board(force=True)
        self.set_interval(self.poll_seconds, self.refresh_board)

    def refresh_board(self, force: bool = False) -> None:
        if not (self.source.changed() or force):
            return
        self.board = b = self.source.load()
        table = self.query_one("#board", DataTable)
        if self._columns != b.metric:  # a retrieval file's candidates and nDCG@10, or templates and Spearman
            table.clear(columns=True)
            table.add_columns("#", b.metric, "held-out", b.item)  # the long one last: the rest fit a narrow terminal
            self._columns = b.metric
        table.clear()
        for i, (score, template) in enumerate(b.rows, 1):
            table.add_row(str(i), f"{score:.{b.places}f}", b.held_out_text(template), template, key=template)
        self.query_one("#spark", Sparkline).data = b.history or [0.0]
        self._update_info()

    def _update_info(self) -> None:
        b = self.board
        if b.error:
            text = Text(b.error)
        else:
            best = f"{b.best:.{b.places}f}" if b.best is not None else "-"
            kind = b.variant or ("denoised" if b.denoise else "raw")
            count = f"{b.trials} trials · " if b.unit == "trials" else ""
            text = Text.from_markup(f"[b]{escape(b.strategy)}[/b] on [b]{escape(b.model)}[/b] · {escape(b.dataset)} "
                                    f"({kind}) · {count}{len(b.rows)} scored · ")
            if b.chosen:  # a template's brackets are text, not markup
                score = next(s for s, k in b.rows if k == b.chosen)
                text.append("chosen ")
                text.append(b.chosen[:48], style="bold")
                text.append(f" {score:.{b.places}f} (listed first) · best scored {best}")
            else:
                text.append_text(Text.from_markup(f"best so far [b]{best}[/b]"))
        if self.search_status:
            text.append("\n")
            text.append_text(Text.from_markup(self.search_status))
        self.query_one("#info", Static).update(text)

    def selected_template(self) -> str | None:
        table = self.query_one("#board", DataTable)
        if not self.board.rows or table.cursor_row is None:
            return None
        return template_of(self.board.rows[min(table.cursor_row, len(self.board.rows) - 1)][1])

    def _no_predictions(self) -> bool:
        """A row without a [MASK] to predict (a retrieval candidate): said why, and True."""
        if self.board.no_predictions:
            self.notify(self.board.no_predictions, severity="warning")
            return True
        return False

    def action_open_predictions(self) -> None:
        if not self._no_predictions():
            self.app.open_predictions(self.selected_template())

    def on_data_table_row_selected(self, event: DataTable.RowSelected) -> None:
        """Enter on a row (the table consumes the key and says so with this event)."""
        if self._no_predictions():
            return
        self.app.open_predictions(template_of(str(event.row_key.value)) if event.row_key else self.selected_template())

    def action_reload(self) -> None:
        self.refresh_board(force=True)

    def action_plot(self) -> None:
        """Draw the results file's pictures beside it (``promptsearch plot``) and open the first."""
        path = getattr(self.source, "path", None)
        if path is None:
            self.notify("plots are drawn from a results file: start the TUI with --results FILE", severity="warning")
            return
        self.make_plot(str(path))

    @work(thread=True, exclusive=True, group="plot")
    def make_plot(self, path: str) -> None:
        from ..search.plots import plot_results  # lazy: start-up time (matplotlib)

        try:
            files = plot_results(path)
            msg, severity = "wrote " + ", ".join(map(str, files)), "information"
            webbrowser.open(files[0].resolve().as_uri())  # a viewer where there is a desktop; nothing otherwise
        except PromptSearchError as exc:
            msg, severity = f"plot failed: {exc}", "error"
        self.plotted = msg
        self.app.call_from_thread(self.notify, msg, severity=severity)

    def action_start_search(self) -> None:
        path = getattr(self.source, "path", None)
        if path is None:
            self.notify("searches launch into a results file: start the TUI with --results FILE", severity="warning")
            return
        if self.search_status.startswith("running"):
            self.notify("a search is already running")
            return
        # its own command resumes it; a file of another kind than a greedy search's is resumed by its command only
        if self.board.command is not None or self.board.search != "greedy":
            why = resume.why_not(self.board.command, str(path), self.board.search)
            if why:
                self.notify(why, severity="warning")
                return
            self.resume_search(str(path), dict(self.board.command or {}))
            return
        # a template search's file without its command (or no file yet): a greedy search here, into it
        self._set_status(f"running: greedy on {self.app.dataset} into {path}")  # at once: a second "s" finds it
        self.run_search(str(path))

    def resume_search(self, out: str, command: dict) -> None:
        """The search that wrote ``out``, run again by its recorded command in a child process: it scores
        what the file does not hold and ends with its verdict, and the board follows the file. The child is
        watched by a timer, not waited for in a thread (a thread would keep the app from ending until the search
        is done); the app ends it as it ends (``end_searches``), its scores kept."""
        try:
            child = resume.start(command, out)
        except OSError as exc:
            self._set_status(f"search failed: {exc}")
            return
        self.app.searches.append(child)
        self._set_status(f"running: {resume.shown(command)} (its output: {resume.log_path(out)})")

        def check() -> None:
            if child.poll() is None:
                return
            timer.stop()
            code = child.returncode
            self._set_status("search finished" if code == 0
                             else f"search failed (exit {code}): {resume.last_line(out)}")

        timer = self.set_interval(0.2, check)

    @work(thread=True, exclusive=True, group="search")
    def run_search(self, out: str) -> None:
        from ..search import greedy_search  # lazy: start-up time (torch loads with the first search)

        try:
            greedy_search(self.app.get_encoder(), out, self.app.model_name, self.app.dataset)
            msg = "search finished"
        except PromptSearchError as exc:
            msg = f"search failed: {exc}"
        self.app.call_from_thread(self._set_status, msg)

    def _set_status(self, text: str) -> None:
        self.search_status = text
        self._update_info()
