"""Predictions: top-5 [MASK] tokens for a template and a sentence, without / with denoising."""

from __future__ import annotations

import random
from typing import Any

from textual import work
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, Vertical
from textual.screen import Screen
from textual.widgets import DataTable, Footer, Header, Input, Static

from ..data import load_task
from ..errors import PromptSearchError
from ..library import default_template, named_template

DEFAULT_TEMPLATE = 'This sentence : "[X]" means [MASK] .'


class PredictionsScreen(Screen):
    app: Any  # the PromptSearchApp (app.py imports this module: it cannot be named here without a cycle)

    BINDINGS = [
        Binding("ctrl+r", "random_sentence", "Random STS-B dev sentence"),
        Binding("escape", "app.show_leaderboard", "Leaderboard"),
    ]

    def __init__(self, template: str | None = None, name: str | None = None):
        super().__init__(name=name)
        self.template = template or DEFAULT_TEMPLATE
        self._sentences: list[str] | None = None

    def compose(self) -> ComposeResult:
        yield Header(show_clock=False)
        with Vertical(id="predictions"):
            yield Input(value=self.template, placeholder="template with [X] and [MASK] (causal LMs: no [MASK], or "
                                                         "PromptEOL)",
                        id="template")
            yield Input(placeholder="type a sentence and press Enter (ctrl+r: a random STS-B dev sentence)",
                        id="sentence")
            with Horizontal(id="columns"):
                yield DataTable(id="raw", cursor_type="none")
                yield DataTable(id="denoised", cursor_type="none")
            yield Static("", id="status")
        yield Footer()

    def on_mount(self) -> None:
        for tid, title in (("#raw", "without denoising"), ("#denoised", "with denoising")):
            t = self.query_one(tid, DataTable)
            t.add_columns(title, "p")
        self.query_one("#sentence", Input).focus()

    def set_template(self, template: str) -> None:
        """Use ``template`` (the screen may not be composed yet: compose() reads self.template)."""
        self.template = template
        for inp in self.query("#template").results(Input):
            inp.value = template

    def on_input_submitted(self, event: Input.Submitted) -> None:
        sentence = self.query_one("#sentence", Input).value.strip()
        template = self.query_one("#template", Input).value.strip()
        if sentence:
            self.query_one("#status", Static).update("predicting ...")
            self.predict(sentence, template)

    @work(thread=True, exclusive=True, group="predict")
    def predict(self, sentence: str, template: str) -> None:
        from ..eval.predict import predict  # lazy: start-up time (torch and the model load on the first prediction)

        try:
            enc = self.app.get_encoder()
            if enc.model.causal and template == DEFAULT_TEMPLATE:  # the masked-LM default: a causal LM's instead
                template = default_template(enc.model.config.model_type, causal=True)
                self.app.call_from_thread(self.set_template, template)
            pred = predict(enc, enc.prepare([sentence]), named_template(template), top_k=5)[0]
        except PromptSearchError as exc:
            self.app.call_from_thread(self.query_one("#status", Static).update, f"[red]{exc}[/red]")
            return
        self.app.call_from_thread(self.show, pred)

    def show(self, pred) -> None:
        for tid, rows in (("#raw", pred.raw), ("#denoised", pred.denoised)):
            t = self.query_one(tid, DataTable)
            t.clear()
            for tok, p in rows:
                t.add_row(tok, f"{p:.3f}")
        note = "" if self.app.get_encoder().model.has_mlm_head else "  (no MLM head: projection on word embeddings)"
        self.query_one("#status", Static).update(f"{pred.sentence}{note}")

    def action_random_sentence(self) -> None:
        if self._sentences is None:
            try:
                self._sentences = list(dict.fromkeys(load_task(self.app.dataset).sentences()))
            except Exception as exc:  # no data folder: say so, keep typing possible
                self.notify(str(exc), severity="warning")
                return
        s = random.choice(self._sentences)
        inp = self.query_one("#sentence", Input)
        inp.value = s
        self.predict(s, self.query_one("#template", Input).value.strip())
