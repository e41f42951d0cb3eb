"""Write docs/index.md from README.md: the site's home page is the README with its links made relative to docs/
(a repository file the README links to is plain text on the site). tests/test_docs.py checks the two agree.

    python scripts/sync_index.py
"""
import re
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
readme = (REPO / "README.md").read_text(encoding="utf-8")
index = re.sub(r"\[(`[^`]+`)\]\((?!https?:)[^)]*\.(?:lock|toml|sh|py)\)", r"\1", readme.replace("](docs/", "]("))
(REPO / "docs" / "index.md").write_text(index, encoding="utf-8")
