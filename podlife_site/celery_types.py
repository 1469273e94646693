"""Celery's ``shared_task`` with types: Celery ships no annotations, so a task it decorates would be untyped.

``task(**options)`` and ``bound_task(**options)`` are ``shared_task(**options)`` (the same call, the same
task object); they only tell mypy that the task is called with its function's parameters and returns its
function's result, and which of Celery's methods the product uses.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Concatenate, ParamSpec, Protocol, TypeVar, cast

from celery import shared_task

P = ParamSpec("P")
R_co = TypeVar("R_co", covariant=True)
R = TypeVar("R")


class Task(Protocol[P, R_co]):
    """The part of a Celery task the product uses: a direct call runs the function in the caller."""

    name: str

    def __call__(self, *args: P.args, **kwargs: P.kwargs) -> R_co: ...

    # Celery's AsyncResult; ignore_result=True on every task, so nothing reads it.
    def delay(self, *args: P.args, **kwargs: P.kwargs) -> Any: ...

    def apply_async(
        self, args: tuple[Any, ...] | None = None, kwargs: dict[str, Any] | None = None, **options: Any
    ) -> Any: ...


def task(**options: Any) -> Callable[[Callable[P, R]], Task[P, R]]:
    """``@shared_task(**options)``, typed."""

    def decorate(fn: Callable[P, R]) -> Task[P, R]:
        # cast: Celery is untyped (its task is Any to mypy); the task object calls ``fn`` with its arguments.
        return cast("Task[P, R]", shared_task(**options)(fn))

    return decorate


def bound_task(**options: Any) -> Callable[[Callable[Concatenate[Any, P], R]], Task[P, R]]:
    """``@shared_task(bind=True, **options)``, typed: the function's first parameter is the running task
    (Celery's untyped ``Task``, hence Any), which callers do not pass."""

    def decorate(fn: Callable[Concatenate[Any, P], R]) -> Task[P, R]:
        # cast: as in ``task``; with bind=True Celery passes the task itself as the first argument.
        return cast("Task[P, R]", shared_task(bind=True, **options)(fn))

    return decorate
