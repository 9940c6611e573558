"""``serve``: a local web page to play any agent and to replay recorded evaluations, with the
agent's reasoning at every decision (``docs/serve.md``).

``app.py`` is the HTTP side (FastAPI), ``matches.py`` a person's games per browser session,
``replays.py`` the games of an ``evaluate --record`` file, ``views.py`` what the page shows
as JSON, ``static/`` the page itself (plain HTML, CSS and JavaScript, nothing fetched from
elsewhere); the command is ``commands/serve.py``.
"""
