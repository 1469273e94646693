"""Parsers: raw inputs (kubelet logs, API objects, kubectl output) to observations.

Pure: imports no Django, Celery, Channels or kubernetes client (a test guards this).
"""
