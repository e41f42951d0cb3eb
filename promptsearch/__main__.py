"""``python -m promptsearch`` and the ``promptsearch`` console script."""

import sys


def run() -> None:
    """Import the command line and run it; Ctrl-C while it is still importing (a cold start compiles
    every module) is the same one line as later."""
    try:
        from .cli import main
    except KeyboardInterrupt:
        print("promptsearch: interrupted", file=sys.stderr)
        sys.exit(130)
    sys.exit(main())


if __name__ == "__main__":
    run()
