"""A small instant-query evaluator for the PromQL forms podlife's PrometheusRule uses, over one scrape.

Expressions are parsed by ``promql-parser`` (the Rust parser of Prometheus' grammar); this walks its tree.
Supported: vector selectors with =, !=, =~, !~ matchers; sum / max / min / count / avg with ``by`` or
``without``; comparisons (> < >= <= == !=) of a vector with a number, in filter mode; parentheses. Any
other form raises ``Unsupported`` naming it, so a rule that outgrows this evaluator fails its test
instead of passing untested.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass

import promql_parser
from prometheus_client.parser import text_string_to_metric_families

Labels = tuple[tuple[str, str], ...]  # sorted (name, value) pairs; __name__ included on raw samples


class Unsupported(ValueError):
    pass


@dataclass(frozen=True)
class Sample:
    labels: Labels
    value: float

    def label(self, name: str) -> str:
        return dict(self.labels).get(name, "")


def parse_scrape(text: str) -> list[Sample]:
    """Every sample of a Prometheus text exposition, with ``__name__`` among its labels."""
    out = []
    for family in text_string_to_metric_families(text):
        for s in family.samples:
            out.append(Sample(tuple(sorted({**s.labels, "__name__": s.name}.items())), float(s.value)))
    return out


_COMPARE: dict[str, Callable[[float, float], bool]] = {
    ">": lambda a, b: a > b,
    "<": lambda a, b: a < b,
    ">=": lambda a, b: a >= b,
    "<=": lambda a, b: a <= b,
    "==": lambda a, b: a == b,
    "!=": lambda a, b: a != b,
}
_AGGREGATE: dict[str, Callable[[list[float]], float]] = {
    "sum": sum,
    "max": max,
    "min": min,
    "count": len,
    "avg": lambda v: sum(v) / len(v),
}


def evaluate(expr: str, samples: list[Sample]) -> list[Sample]:
    """The instant vector ``expr`` yields over ``samples`` (an empty list: the alert does not fire)."""
    result = _eval(promql_parser.parse(expr), samples)
    if isinstance(result, float):
        raise Unsupported(f"{expr!r} is a scalar, not a vector an alert can fire on")
    return result


def _eval(node: object, samples: list[Sample]) -> list[Sample] | float:
    if isinstance(node, promql_parser.ParenExpr):
        return _eval(node.expr, samples)
    if isinstance(node, promql_parser.NumberLiteral):
        return float(node.val)
    if isinstance(node, promql_parser.VectorSelector):
        if node.offset is not None or node.at is not None:
            raise Unsupported(f"offset / @ in {node}")
        return [s for s in samples if _selects(node, s)]
    if isinstance(node, promql_parser.AggregateExpr):
        return _aggregate(node, samples)
    if isinstance(node, promql_parser.BinaryExpr):
        return _compare(node, samples)
    raise Unsupported(f"{type(node).__name__}: {node}")


def _selects(node: promql_parser.VectorSelector, s: Sample) -> bool:
    if node.name and s.label("__name__") != node.name:
        return False
    if node.matchers.or_matchers:
        raise Unsupported(f"'or' matchers in {node}")
    for m in node.matchers.matchers:
        value, op = s.label(m.name), str(m.op).rsplit(".", 1)[-1]
        ok = {
            "Equal": value == m.value,
            "NotEqual": value != m.value,
            "Re": re.fullmatch(m.value, value) is not None,
            "NotRe": re.fullmatch(m.value, value) is None,
        }.get(op)
        if ok is None:
            raise Unsupported(f"matcher {op}")
        if not ok:
            return False
    return True


def _aggregate(node: promql_parser.AggregateExpr, samples: list[Sample]) -> list[Sample]:
    op = str(node.op)
    if op not in _AGGREGATE or node.param is not None:
        raise Unsupported(f"aggregation {op}")
    inner = _eval(node.expr, samples)
    if isinstance(inner, float):
        raise Unsupported(f"{op} of a scalar")
    modifier = node.modifier
    by = modifier is None or modifier.type == promql_parser.AggModifierType.By
    names = set(modifier.labels) if modifier is not None else set()
    groups: dict[Labels, list[float]] = {}
    for s in inner:
        if by:
            key = tuple((k, v) for k, v in s.labels if k in names)
        else:
            key = tuple((k, v) for k, v in s.labels if k not in names and k != "__name__")
        groups.setdefault(key, []).append(s.value)
    return [Sample(key, _AGGREGATE[op](values)) for key, values in sorted(groups.items())]


def _compare(node: promql_parser.BinaryExpr, samples: list[Sample]) -> list[Sample]:
    op = str(node.op)
    if op not in _COMPARE:
        raise Unsupported(f"operator {op}")
    if node.modifier is not None and node.modifier.return_bool:
        raise Unsupported("comparison with bool")
    lhs, rhs = _eval(node.lhs, samples), _eval(node.rhs, samples)
    if isinstance(lhs, list) and isinstance(rhs, float):
        return [s for s in lhs if _COMPARE[op](s.value, rhs)]
    if isinstance(lhs, float) and isinstance(rhs, list):
        return [s for s in rhs if _COMPARE[op](lhs, s.value)]
    raise Unsupported(f"{op} between two vectors or two scalars")
