"""The web side: pages, the REST API, websocket consumers, figures, export/import views, read access.

It reads through ``dashboard/queries.py`` and never writes timelines; ``timelines/live.py`` is what pushes
to its consumers.
"""
