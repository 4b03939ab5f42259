"""precdx command-line entry point (`python cli.py ...` in a checkout; the installed console
script `precdx` calls the same `precdx.cli:main`). The commands live in engine/cli.py so that
an installed (or editable) package always runs the current code."""
from precdx.cli import main

if __name__ == "__main__":
    main()
