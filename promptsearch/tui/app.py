"""``promptsearch tui``: a leaderboard that follows a running search, and [MASK] predictions."""

from __future__ import annotations

import subprocess
import threading

from textual.app import App
from textual.binding import Binding
from textual.screen import ModalScreen
from textual.widgets import Static

from ..data import DEV_SET
from ..errors import PromptSearchError
from . import resume
from .leaderboard import LeaderboardScreen
from .predictions import PredictionsScreen
from .sources import OptunaSource, ResultsFileSource

HELP = """[b]promptsearch tui[/b]

[b]Leaderboard[/b]  an STS search's templates ranked by their dev score (a
retrieval search's candidates by nDCG@10), refreshed while a search writes
the results file (or the Optuna study) in another process.
  ↑/↓ move · enter: predict with the selected [MASK] template · s: resume
  the search that wrote the results file, with its command (no file yet: start
  a greedy STS search into it) · g: plot it (promptsearch plot) · r: reload

[b]Predictions[/b]  top-5 [MASK] tokens without and with template denoising.
  type a sentence, enter · ctrl+r: random STS-B dev sentence · esc: back

l leaderboard · p predictions · ? help · q quit"""


class HelpScreen(ModalScreen):
    BINDINGS = [Binding("escape,question_mark,q", "dismiss", "Close")]

    def compose(self):
        yield Static(HELP, id="help")


class PromptSearchApp(App):
    TITLE = "promptsearch"
    CSS_PATH = "app.tcss"
    BINDINGS = [
        Binding("l", "show_leaderboard", "Leaderboard"),
        Binding("p", "show_predictions", "Predictions"),
        Binding("question_mark", "help", "Help"),
        Binding("q", "quit", "Quit"),
    ]

    def __init__(self, results: str | None = None, storage: str | None = None, study_name: str | None = None,
                 model: str = "default", encoder=None, poll_seconds: float = 1.0, mask_head: str | None = None,
                 dataset: str = DEV_SET):
        super().__init__()
        if bool(storage) != bool(study_name):
            raise PromptSearchError("--storage and --study-name go together (or give --results FILE)")
        self.source: OptunaSource | ResultsFileSource
        if storage and study_name:
            self.source = OptunaSource(storage, study_name)
            self.sub_title = f"study {study_name}"
        else:
            self.source = file_source = ResultsFileSource(results or "best.json")
            self.sub_title = str(file_source.path)
        self.model_name = model
        self.mask_head = mask_head
        self.dataset = dataset
        self._encoder = encoder
        self._lock = threading.Lock()
        self.poll_seconds = poll_seconds
        self.searches: list[subprocess.Popen] = []  # searches this app started in child processes

    def running_searches(self) -> list[subprocess.Popen]:
        """The searches this app started in child processes that still run."""
        return [c for c in self.searches if c.poll() is None]

    def end_searches(self) -> None:
        """End the searches this app started that still run (each keeps its scores): the TUI's searches end with it."""
        for child in self.running_searches():
            resume.end(child)

    def on_mount(self) -> None:
        self.install_screen(LeaderboardScreen(self.source, self.poll_seconds), name="leaderboard")
        self.install_screen(PredictionsScreen(), name="predictions")
        self.push_screen("leaderboard")

    def get_encoder(self):
        """The model for predictions, loaded once (in the worker thread that first asks)."""
        with self._lock:
            if self._encoder is None:
                from ..encoding import PromptEncoder  # lazy: start-up time (torch loads with the first prediction)

                self._encoder = PromptEncoder.from_pretrained(self.model_name, mask_head=self.mask_head,
                                                              show_progress_bar=False)
            return self._encoder

    def action_show_leaderboard(self) -> None:
        self.switch_screen("leaderboard")

    def action_show_predictions(self) -> None:
        self.switch_screen("predictions")

    def open_predictions(self, template: str | None) -> None:
        screen = self.get_screen("predictions")
        assert isinstance(screen, PredictionsScreen)
        self.switch_screen("predictions")
        if template:
            screen.set_template(template)

    def action_help(self) -> None:
        self.push_screen(HelpScreen())
