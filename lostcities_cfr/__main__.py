"""``python -m lostcities_cfr``: dispatches to :func:`lostcities_cfr.cli.main`."""

from lostcities_cfr.cli import main

if __name__ == "__main__":
    main()
