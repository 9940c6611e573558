"""``python -m lostcities_cfr``: dispatches to :func:`lostcities_cfr.commands.main`."""

from lostcities_cfr.commands import main

if __name__ == "__main__":
    main()
