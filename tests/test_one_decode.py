"""Every reader of stored observations reads their payloads through ``timelines/observation_rows.py``
(issue #37: the compact form of an observation changes how a payload is stored; one decode function, and
no SQL that looks into the payload column, keep that change to the store and that module). And every product read chooses its rows through it: no
product module filters the model on the columns the compact form replaces (``COLUMNS_REPLACED``).

A static check of the product's code: no ORM lookup into the payload (``payload__…``), no ``payload`` column
named to the ORM's value reads, and no SQL text that reads the payload column, outside the store (which
writes it) and ``observation_rows`` (which decodes it).

And the tests: outside the store's own format tests (``TESTS_ALLOWED``), no test reaches the payload or
the dedupe key of ``timelines.models.Observation``; they read stored observations through
``observation_rows`` (or ``tests/stored.py``, built on it), so that the compact switch changes the
store, ``observation_rows`` and that helper, and no test."""

from __future__ import annotations

import ast
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
ROOMS = ("timelines", "collectors", "dashboard", "alerts", "podlife_site")
ALLOWED = {"timelines/store.py", "timelines/observation_rows.py"}
# Pure code never touches the database; migrations are history.
SKIPPED = ("timelines/lifecycle/", "collectors/parsers/", "/migrations/")
ORM_READS = {"values", "values_list", "only", "defer", "order_by", "annotate", "F", "Cast", "json_text"}
# SQL operators on the payload (anywhere), or the payload column read in a statement.
SQL_OPERATOR = re.compile(r"\bpayload\s*(->|#>|@>|\?|::\s*(text|jsonb?)\b)", re.IGNORECASE)
SQL_READ = re.compile(r"(\.payload\b|\bpayload\s+AS\b)", re.IGNORECASE)
SQL_WORDS = re.compile(r"\b(SELECT|WHERE|FROM|CAST)\b")


# The tests that may touch the stored form itself: the codec's and the exactness tests, the tests of
# the store (its writes, keys, partitions) and of observation_rows, this check, and the tests' one helper
# that writes rows as an older podlife stored them.
TESTS_ALLOWED = {
    "tests/test_compact.py",
    "tests/test_payloads.py",
    "tests/test_read_back.py",
    "tests/test_observation_rows.py",
    "tests/test_store.py",
    "tests/test_store_writer.py",
    "tests/test_store_process.py",
    "tests/test_partitions.py",
    "tests/test_key_in_body.py",
    "tests/test_pod_id.py",
    "tests/test_one_decode.py",
    "tests/stored.py",
}
STORED_FIELDS = ("payload", "dedupe_key")
# The ORM calls that name a column by keyword (lookups and writes) or by a text argument (reads).
ORM_CALLS = {"filter", "exclude", "get", "create", "update", "get_or_create", "update_or_create"}
TEST_SQL = re.compile(r"\b(payload|dedupe_key)\b", re.IGNORECASE)


def _stored_field(name: str | None) -> bool:
    return any(name == field or (name or "").startswith(f"{field}__") for field in STORED_FIELDS)


def _model_names(tree: ast.AST) -> tuple[set[str], set[str]]:
    """The names this module binds to ``timelines.models.Observation`` and to ``timelines.models``."""
    model, module = set(), set()
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module == "timelines.models":
            model |= {alias.asname or alias.name for alias in node.names if alias.name == "Observation"}
        elif isinstance(node, ast.ImportFrom) and node.module == "timelines":
            module |= {alias.asname or alias.name for alias in node.names if alias.name == "models"}
        elif isinstance(node, ast.Import):
            module |= {alias.asname or alias.name for alias in node.names if alias.name == "timelines.models"}
    return model, module


def _is_model(node: ast.AST, model: set[str], module: set[str]) -> bool:
    if isinstance(node, ast.Name):
        return node.id in model
    if isinstance(node, ast.Attribute) and node.attr == "Observation":
        return ast.unparse(node.value) in module
    return False


# The query methods whose answer is still the model's rows (a query, or one row).
ROW_METHODS = {"all", "filter", "exclude", "order_by", "distinct", "select_related", "get", "first", "last"}


def _selects(node: ast.AST) -> bool:
    """``node`` calls ``observation_rows.selection``, whose answer is the model's rows (for ``rows``)."""
    return isinstance(node, ast.Call) and "selection" in (
        getattr(node.func, "attr", None),
        getattr(node.func, "id", None),
    )


def _rows_of_model(node: ast.AST | None, model: set[str], module: set[str]) -> bool:
    """``node`` is the model's rows: ``Observation.objects`` or a ``selection``, a query method's answer
    on them, a slice."""
    while node is not None:
        if _selects(node):
            return True
        if isinstance(node, ast.Attribute) and node.attr == "objects":
            return _is_model(node.value, model, module)
        if isinstance(node, ast.Subscript):
            node = node.value
        elif (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Attribute)
            and node.func.attr in ROW_METHODS
        ):
            node = node.func.value
        else:
            return False
    return False


def offences_in_test(path: Path) -> list[str]:
    """A test module's reaches into the stored payload or dedupe key of the model's rows:
    - ORM lookups, writes and reads that name them (``dedupe_key__in=``, ``values_list("payload")``),
      and the model built with them;
    - SQL text that names them;
    - in a module that names the model or calls ``observation_rows.selection`` (whose answer is the
      model's rows, for ``rows``): reading ``.payload`` / ``.dedupe_key`` of anything (its rows are at
      hand there), or handing its rows out of a function (``return Observation.objects…``)."""
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    model, module = _model_names(tree)
    names_model = any(_is_model(node, model, module) or _selects(node) for node in ast.walk(tree))
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Call):
            name = getattr(node.func, "attr", None) or getattr(node.func, "id", None)
            if name in ORM_CALLS or name in ORM_READS or _is_model(node.func, model, module):
                found += [
                    f"{node.lineno}: {name}({kw.arg}=)" for kw in node.keywords if _stored_field(kw.arg)
                ]
            if name in ORM_READS:
                found += [
                    f"{node.lineno}: {name}({arg.value!r})"
                    for arg in node.args
                    if isinstance(arg, ast.Constant)
                    and isinstance(arg.value, str)
                    and _stored_field(arg.value)
                ]
        elif isinstance(node, ast.Constant) and isinstance(node.value, str):
            text = node.value
            if TEST_SQL.search(text) and SQL_WORDS.search(text) and "timelines_observation" in text:
                found.append(f"{node.lineno}: SQL {text[:60]!r}")
        elif names_model and isinstance(node, ast.Attribute) and node.attr in STORED_FIELDS:
            found.append(f"{node.lineno}: .{node.attr} where the model's rows are at hand")
        elif names_model and isinstance(node, ast.Return) and _rows_of_model(node.value, model, module):
            found.append(f"{node.lineno}: returns the model's rows")
    return found


def offences(path: Path) -> list[str]:
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Call):
            found += [
                f"{node.lineno}: lookup {kw.arg}"
                for kw in node.keywords
                if (kw.arg or "").startswith("payload__")
            ]
            name = getattr(node.func, "attr", None) or getattr(node.func, "id", None)
            if name in ORM_READS:
                found += [
                    f"{node.lineno}: {name}({arg.value!r})"
                    for arg in node.args
                    if isinstance(arg, ast.Constant)
                    and isinstance(arg.value, str)
                    and (arg.value == "payload" or arg.value.startswith("payload__"))
                ]
        elif isinstance(node, ast.Constant) and isinstance(node.value, str):
            text = node.value
            if SQL_OPERATOR.search(text) or (SQL_READ.search(text) and SQL_WORDS.search(text)):
                found.append(f"{node.lineno}: SQL {text[:60]!r}")
    return found


def test_no_reader_looks_into_the_payload_column_but_the_one_decode() -> None:
    checked, bad = 0, {}
    for room in ROOMS:
        for path in sorted((ROOT / room).rglob("*.py")):
            rel = path.relative_to(ROOT).as_posix()
            if rel in ALLOWED or any(part in f"/{rel}" for part in SKIPPED):
                continue
            checked += 1
            if found := offences(path):
                bad[rel] = found
    assert checked > 50
    assert not bad, bad


def test_no_test_reaches_the_stored_payload_or_key_but_the_store_s_own() -> None:
    """Tests read stored observations back through ``observation_rows`` (``tests/stored.py``), never the
    model's payload or dedupe key: the compact switch then changes no test but the store's own."""
    checked, bad = 0, {}
    for path in sorted((ROOT / "tests").rglob("*.py")):
        rel = path.relative_to(ROOT).as_posix()
        if rel in TESTS_ALLOWED or "/fixtures/" in rel:
            continue
        checked += 1
        if found := offences_in_test(path):
            bad[rel] = found
    assert checked > 150
    assert not bad, bad


def test_the_check_finds_what_it_forbids(tmp_path: Path) -> None:
    """The check itself: each form it forbids, written as a reader would, is found."""
    sample = tmp_path / "sample.py"  # not in tests/, which the tests' check reads
    sample.write_text(
        "rows.filter(payload__kind='Deployment')\n"
        "rows.values_list('node', 'payload')\n"
        "rows.values_list('payload__uid')\n"
        'sql = "SELECT o.payload::text FROM timelines_observation o"\n'
        "sql2 = \"AND o.payload->>'resource' = 'pods' \"\n"
        'sql3 = "SELECT CAST(t.payload AS TEXT) FROM timelines_observation t"\n',
        encoding="utf-8",
    )
    assert len(offences(sample)) == 6, offences(sample)


def test_the_tests_check_finds_what_it_forbids(tmp_path: Path) -> None:
    """The tests' check itself: each way a test could reach the stored payload or key is found, and a
    lifecycle observation's payload, a count of the model's rows or the model's pod UIDs are not."""
    sample = tmp_path / "sample.py"  # not in tests/, which the tests' check reads
    sample.write_text(
        "from timelines.models import Observation as Row\n"
        "from timelines import models\n"
        "Row.objects.filter(dedupe_key__in=keys)\n"  # a lookup
        "Row.objects.filter(kind='pod', payload__static=True)\n"  # a lookup into the payload
        "Row.objects.values_list('dedupe_key', flat=True)\n"  # a read
        "models.Observation(cluster=c, payload={})\n"  # a write
        "row = Row.objects.get(kind='worker')\n"
        "row.payload['where']\n"  # an attribute where rows are at hand
        "def stored(): return Row.objects.filter(kind='pod').order_by('id')\n"  # rows handed out
        "def one(): return models.Observation.objects.first()\n"  # a row handed out
        "def picked(): return observation_rows.selection(c, kinds=['pod'])[:5]\n"  # rows handed out
        'sql = "SELECT dedupe_key FROM timelines_observation"\n'  # SQL
        "Row.objects.count()\n"
        "def uids(): return set(Row.objects.values_list('pod_uid', flat=True))\n",
        encoding="utf-8",
    )
    lifecycle = tmp_path / "lifecycle.py"
    lifecycle.write_text(
        "from timelines.lifecycle.observation import Observation\n"
        "o = Observation(kind='pod', source='api', observed_at=t, dedupe_key='k', payload={})\n"
        "o.payload['uid'], o.dedupe_key\n",
        encoding="utf-8",
    )
    assert len(offences_in_test(sample)) == 9, offences_in_test(sample)
    assert offences_in_test(lifecycle) == []


# -- the columns the compact form replaces (docs/storage.md "The row") -------------------------------------
COLUMNS_REPLACED = ("kind", "source", "node", "namespace", "name", "pod_uid", "dedupe_key", "payload")
# Besides the store and observation_rows, the partitions (retention's deletes) name the stored table.
COLUMNS_ALLOWED = {*ALLOWED, "timelines/partitions.py"}
# (module, function) that still name those columns, and why:
# - the export's per-pod read of observations (``pod_observations`` with ``_observation_columns``): one
#   lateral lookup per pod UID that ``timeline_reads.pod_rows`` shares with the derived tables, ordered by
#   dedupe key, the columns read as the bundle's text; the plan (docs/storage.md item 2) moves that order
#   after decoding, which changes the read, not only where it is written.
# - the admin's list of observations (``ObservationAdmin``: its columns, filters and searches are the
#   stored text columns); with the compact form it needs a list of decoded rows of its own.
# - the fleet page's count (``observation_count``): the planner's row estimate of the stored table, which
#   names no column.
COLUMNS_EXCEPTIONS = {
    ("dashboard/export/reads.py", "pod_observations"),
    ("dashboard/export/reads.py", "_observation_columns"),
    ("timelines/admin.py", "ObservationAdmin"),
    ("dashboard/fleet.py", "observation_count"),
}
# The query methods that name columns (by keyword, by text, or in a Q given to them).
QUERY_METHODS = ROW_METHODS | ORM_READS | {"exists", "count", "aggregate", "update", "delete", "extra"}
# SQL naming a column of a table alias (``o.pod_uid``), in text or in an f-string (``{t}.node``).
SQL_COLUMN = re.compile(r"(\b[a-z]|\})\.(" + "|".join(COLUMNS_REPLACED) + r")\b")
SQL_CONDITION = re.compile(r"\b(SELECT|WHERE|FROM|AND|OR|ORDER BY|IN|ANY|IS)\b")


def _replaced(text: str | None) -> bool:
    return (text or "").lstrip("-").split("__")[0] in COLUMNS_REPLACED


def _names_columns(call: ast.Call) -> list[str]:
    """What a query call names of the replaced columns: keywords, texts, and keywords of a ``Q`` in it."""
    found = [f"{kw.arg}=" for kw in call.keywords if _replaced(kw.arg)]
    found += [
        repr(arg.value)
        for arg in call.args
        if isinstance(arg, ast.Constant) and isinstance(arg.value, str) and _replaced(arg.value)
    ]
    for arg in call.args:
        for inner in ast.walk(arg):
            if isinstance(inner, ast.Call) and getattr(inner.func, "id", None) == "Q":
                found += [f"Q({kw.arg}=)" for kw in inner.keywords if _replaced(kw.arg)]
    return found


def _functions(tree: ast.AST) -> dict[ast.AST, str]:
    """Each node of ``tree`` and the name of the outermost function it is in ("" at module level)."""
    where: dict[ast.AST, str] = {}
    for top in ast.iter_child_nodes(tree):
        name = top.name if isinstance(top, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef) else ""
        for node in ast.walk(top):
            where[node] = name
    return where


def _model_rows(node: ast.AST | None, model: set[str], module: set[str], bound: set[str]) -> bool:
    """As ``_rows_of_model``, and a name ``bound`` to the model's rows (``rows = Observation.objects…``) in
    the function at hand."""
    while isinstance(node, ast.Call | ast.Subscript) and not _selects(node):
        if isinstance(node, ast.Subscript):
            node = node.value
        elif isinstance(node.func, ast.Attribute) and node.func.attr in ROW_METHODS:
            node = node.func.value
        else:
            break
    return (isinstance(node, ast.Name) and node.id in bound) or _rows_of_model(node, model, module)


def _bound_to_rows(
    tree: ast.AST, model: set[str], module: set[str], where: dict[ast.AST, str]
) -> dict[str, set[str]]:
    """Per function (``_functions``), the names it binds to the model's rows, however many steps
    (``obs = …; rows = obs.filter()``)."""
    bound: dict[str, set[str]] = {}
    while True:
        more = {
            (where[node], target.id)
            for node in ast.walk(tree)
            if isinstance(node, ast.Assign | ast.AnnAssign) and node.value is not None
            for target in (node.targets if isinstance(node, ast.Assign) else [node.target])
            if isinstance(target, ast.Name)
            and target.id not in bound.get(where[node], set())
            and _model_rows(node.value, model, module, bound.get(where[node], set()))
        }
        if not more:
            return bound
        for scope, name in more:
            bound.setdefault(scope, set()).add(name)


def column_offences(path: Path, rel: str = "") -> list[str]:
    """A product module's own choosing of stored observations by the columns the compact form replaces:
    - a query on the model's rows (``Observation.objects…`` or a ``selection``) that names one of them
      (``filter(node=…)``, ``exclude(node="")``, ``order_by("pod_uid")``, ``values_list("kind")``, a
      ``Q(namespace=…)`` given to it);
    - in a module that names the model or reads through ``pg_facts``: SQL text naming one of them on a
      table alias (``o.pod_uid = ANY(%s)``), the model's table handed to raw SQL (``Observation._meta``,
      the model given to a function).
    The exceptions (``COLUMNS_EXCEPTIONS``) are named by module and function."""
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    model, module = _model_names(tree)
    where = _functions(tree)
    bound = _bound_to_rows(tree, model, module, where)
    raw = bool(model) or "pg_facts" in path.read_text(encoding="utf-8")
    found = []
    for node in ast.walk(tree):
        if (rel, where.get(node, "")) in COLUMNS_EXCEPTIONS:
            continue
        if (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Attribute)
            and node.func.attr in QUERY_METHODS
            and _model_rows(node.func.value, model, module, bound.get(where[node], set()))
        ):
            found += [f"{node.lineno}: {node.func.attr}({n})" for n in _names_columns(node)]
        elif raw and isinstance(node, ast.Constant | ast.JoinedStr):
            text = node.value if isinstance(node, ast.Constant) else ast.unparse(node)
            if isinstance(text, str) and SQL_COLUMN.search(text) and SQL_CONDITION.search(text):
                found.append(f"{node.lineno}: SQL {text[:60]!r}")
        elif (
            isinstance(node, ast.Attribute) and node.attr == "_meta" and _is_model(node.value, model, module)
        ):
            found.append(f"{node.lineno}: the model's table in raw SQL")
        elif isinstance(node, ast.Call) and any(_is_model(arg, model, module) for arg in node.args):
            found.append(f"{node.lineno}: the model handed to {ast.unparse(node.func)}")
    return found


def test_no_product_read_chooses_observations_by_a_replaced_column_but_observation_rows() -> None:
    """Every product read of stored observations chooses its rows through ``observation_rows``
    (``selection`` and its helpers, the ``pg_…`` conditions): no other product module filters, orders or
    reads the model on a column the compact form replaces, nor names one in SQL on the stored table, so
    that the switch changes only ``observation_rows``, the store, the partitions and the migrations. The
    exceptions are ``COLUMNS_EXCEPTIONS``, each with its reason; a count of a cluster's rows is no filter
    on those columns (``dashboard/fleet.py``)."""
    checked, bad = 0, {}
    for room in ROOMS:
        for path in sorted((ROOT / room).rglob("*.py")):
            rel = path.relative_to(ROOT).as_posix()
            if rel in COLUMNS_ALLOWED or any(part in f"/{rel}" for part in SKIPPED):
                continue
            checked += 1
            if found := column_offences(path, rel):
                bad[rel] = found
    assert checked > 50
    assert not bad, bad


def test_the_column_check_finds_what_it_forbids(tmp_path: Path) -> None:
    """The product column check itself: each way a module could choose observations by a replaced
    column is found; a count of a cluster's rows, a lookup of another model, a ``selection`` given only
    arguments and an attribute of a decoded row are not."""
    sample = tmp_path / "sample.py"  # not in tests/, which the tests' check reads
    sample.write_text(
        "from timelines.models import Observation as Row, Pod\n"
        "from timelines import models, observation_rows\n"
        "Row.objects.filter(cluster=c, kind__in=kinds)\n"  # a lookup
        "Row.objects.filter(cluster=c).exclude(node='')\n"  # an exclusion
        "models.Observation.objects.filter(Q(namespace=ns, name=n) | Q(pod_uid=u))\n"  # 3 in Q
        "observation_rows.selection(c, kinds=k).order_by('-pod_uid', 'id')\n"  # an order
        "Row.objects.values_list('node', flat=True).distinct()\n"  # a read
        "obs = Row.objects.filter(cluster=c)\n"
        "rows = obs.filter(id__gt=0)\n"
        "rows.order_by('node', '-observed_at')[:5].values_list('id')\n"  # an order on a bound name
        "observation_rows.selection(c).filter(dedupe_key__startswith='x')\n"  # a lookup on a selection
        "sql = 'AND o.pod_uid = ANY(%s::text[]) ORDER BY o.observed_at'\n"  # SQL
        "sql2 = f'SELECT {t}.id, {t}.kind FROM {table} {t} WHERE x'\n"  # SQL in an f-string
        "table = Row._meta.db_table\n"  # the table handed to raw SQL
        "pod_rows(Row, c, uids)\n"  # the model handed to raw SQL
        "Row.objects.filter(cluster__in=clusters).count()\n"
        "Pod.objects.filter(namespace=ns, name=n)\n"
        "observation_rows.selection(c, node=n, kinds=k).order_by('observed_at', 'id')\n"
        "label = f'{row.name} on {row.node}'\n",
        encoding="utf-8",
    )
    assert len(column_offences(sample)) == 13, column_offences(sample)
