"""Render the TUI's screens to SVG (docs/tui-*.svg) at 80x24 with the default model.

    python scripts/tui_screenshots.py
"""

import asyncio
from pathlib import Path

from textual.widgets import DataTable

from promptsearch.tui import PromptSearchApp

DOCS = Path(__file__).resolve().parents[1] / "docs"


async def main() -> None:
    app = PromptSearchApp(results=str(DOCS / "results" / "greedy-default.json"), model="default", poll_seconds=0.5)
    async with app.run_test(size=(80, 24)) as pilot:
        await pilot.pause(1.0)
        app.save_screenshot("tui-leaderboard.svg", str(DOCS))
        await pilot.press("down", "down", "down")
        await pilot.press("enter")
        await pilot.pause(0.3)
        await pilot.click("#sentence")
        await pilot.press(*"i am sad.", "enter")
        den = app.screen.query_one("#denoised", DataTable)
        for _ in range(600):
            if den.row_count:
                break
            await pilot.pause(0.1)
        await pilot.pause(0.3)
        app.save_screenshot("tui-predictions.svg", str(DOCS))


if __name__ == "__main__":
    asyncio.run(main())
