"""The lifecycle core: pure code from observations of one pod to its timeline and findings.

Imports no Django, Celery, Channels or kubernetes client (a test guards this).
"""
