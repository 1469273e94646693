"""The klog wire formats a kubelet writes, without any knowledge of what the messages mean.

Three layers, each a pure function over text:

* journald prefixes (``journalctl -o short | short-iso | short-precise``) in front of a kubelet line, or a
  log store's own timestamp (``kubectl logs --timestamps``, CRI log files, Cloud Logging / Loki exports);
* the klog text header (``I1019 00:23:45.896841     273 kubelet.go:1761] ``) and its structured body
  (``"message" key=value ...``, values quoted with Go escapes, bare tokens, ``&{...}`` structs,
  JSON objects/arrays and multi-line ``key=<`` blocks);
* JSON logging (``--logging-format=json``: ``{"ts": <epoch ms>, "caller": ..., "msg": ..., "v": 4}``).

What the messages mean (pod-worker transitions, markers) lives in ``kubelet_log.py``. Nothing here raises
on bad input: every function returns ``None`` (or a partial result) instead.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

import orjson

__all__ = [
    "JournaldPrefix",
    "KlogHeader",
    "KlogBody",
    "JsonRecord",
    "split_journald_prefix",
    "unwrap_line",
    "parse_klog_header",
    "parse_klog_body",
    "parse_json_record",
    "unquote_go",
    "opens_block",
]

_MONTHS = {
    m: i
    for i, m in enumerate(
        ("jan", "feb", "mar", "apr", "may", "jun", "jul", "aug", "sep", "oct", "nov", "dec"), 1
    )
}

# `Oct 19 00:23:45 kind-worker kubelet[273]: ` and `Dec 30 15:33:13.375379 host kubelet[8362]: `
_JOURNALD_SHORT = re.compile(
    r"(?P<mon>[A-Za-z]{3}) {1,2}(?P<day>\d{1,2}) (?P<hms>\d{2}:\d{2}:\d{2})(?:\.(?P<frac>\d{1,9}))? "
    r"(?P<host>\S+) (?P<ident>[^\s\[\]:]+)(?:\[(?P<pid>\d+)\])?: ?"
)
# `2024-06-07T06:54:47+0000 host kubelet[1]: ` (also `+00:00`, `Z` and fractional seconds)
_JOURNALD_ISO = re.compile(
    r"(?P<date>\d{4}-\d{2}-\d{2})T(?P<hms>\d{2}:\d{2}:\d{2})(?:[.,](?P<frac>\d{1,9}))?"
    r"(?P<off>Z|[+-]\d{2}:?\d{2}) (?P<host>\S+) (?P<ident>[^\s\[\]:]+)(?:\[(?P<pid>\d+)\])?: ?"
)

# Syslog as a daemon forwards it: RFC 3164 is the short form behind a `<PRI>` (`<30>Nov 29 18:13:10 host
# kubelet[3112]: …`); RFC 5424 is `<PRI>1 TIMESTAMP HOST APP-NAME PROCID MSGID STRUCTURED-DATA MSG`.
_SYSLOG_PRI = re.compile(r"<\d{1,3}>")
_SYSLOG_5424 = re.compile(
    r"1 (?P<date>\d{4}-\d{2}-\d{2})T(?P<hms>\d{2}:\d{2}:\d{2})(?:[.,](?P<frac>\d{1,9}))?"
    r"(?P<off>Z|[+-]\d{2}:\d{2}) (?P<host>\S+) (?P<ident>\S+) (?P<pid>\S+) \S+ (?:-|(?:\[[^\]]*\])+) ?"
)

# A copy from a log store with its own timestamp in front: `kubectl logs --timestamps`
# (`2024-06-07T06:54:47.123456789Z I0607 …`), a CRI log file (`… stderr F I0607 …`), a Cloud Logging or
# Loki export (`2024-06-07 06:54:47.123 UTC	I0607 …`). Only recognised when a klog header or a JSON
# record follows, so a journald short-iso line (host and ident next) is never taken for one.
_STORE_PREFIX = re.compile(
    r"(?P<date>\d{4}-\d{2}-\d{2})[T ](?P<hms>\d{2}:\d{2}:\d{2})(?:[.,](?P<frac>\d{1,9}))?"
    r" ?(?P<off>Z|UTC|[+-]\d{2}:?\d{2})?[ \t]+(?:(?:stdout|stderr) [FP] )?(?=[IWEF]\d{4} |\{)"
)

# klog FormatHeader: Lmmdd hh:mm:ss.uuuuuu threadid file:line] msg  (pid right-aligned in 7 columns,
# or with the spaces collapsed by a log pipeline).
_KLOG_HEADER = re.compile(
    r"(?P<sev>[IWEF])(?P<mon>\d{2})(?P<day>\d{2}) (?P<hour>\d{2}):(?P<min>\d{2}):(?P<sec>\d{2})\.(?P<usec>\d{6})"
    r"\s+(?P<pid>\d+)\s+(?P<caller>[^\s\]]+?:\d+)\] ?"
)

_KEY = re.compile(r"[^\s=\"]+")


@dataclass(frozen=True, slots=True)
class JournaldPrefix:
    """A journald prefix: who wrote the line and, for ``short-iso``, the full date."""

    host: str
    ident: str
    pid: int | None
    month: int  # 1-12
    day: int
    year: int | None  # only short-iso carries a year
    utcoffset: timedelta | None  # only short-iso carries an offset
    hms: tuple[int, int, int] | None = None  # the wall-clock time journald wrote (hour, minute, second)


@dataclass(frozen=True, slots=True)
class KlogHeader:
    """The klog text header: severity letter, month/day/time (no year, no zone), pid and caller."""

    severity: str
    month: int
    day: int
    hour: int
    minute: int
    second: int
    microsecond: int
    pid: int
    caller: str


@dataclass(slots=True)
class KlogBody:
    """A structured klog body: the message and its key/value pairs (values decoded, see below).

    ``structured`` is False for printf-style lines (no leading quote); then ``message`` is the whole
    text and ``values`` is empty. Values are ``str`` (quoted strings unquoted, bare tokens and Go
    structs as printed), or what JSON decoded for ``{...}`` / ``[...]`` values, or the joined lines of a
    multi-line ``key=<`` block. ``truncated`` says a quoted string or bracket ran off the end (or the
    body did not read as ``key=value``); ``cut`` names the keys whose value ran off the end of the line,
    ``message_cut`` says the message itself did.
    """

    message: str
    structured: bool
    values: dict[str, Any] = field(default_factory=dict)
    truncated: bool = False
    # Keys whose value ran off the end of the line (a quote or bracket never closed, or a pager's "…"):
    # what they hold is a prefix of the real value, never the value.
    cut: set[str] = field(default_factory=set)
    message_cut: bool = False


@dataclass(slots=True)
class JsonRecord:
    """One JSON-format kubelet line: time (UTC, microseconds), message, caller, severity and the rest."""

    observed_at: datetime
    message: str
    caller: str | None
    severity: str
    values: dict[str, Any]
    level: int | None = None  # the record's ``v`` (klog verbosity), absent on error lines


# What tools put before a log line when they quote it: indentation, a list bullet (`minikube logs`
# "Problems detected": `  - `), `grep -n`'s line number (`4582: `, `\t 4582: `). Taken off only where a
# journald prefix or a klog header follows.
_WRAPPER = re.compile(r"[ \t]*(?:[-*] +|\d+:[ \t]*)?")
_LINE_START = re.compile(r"[A-Za-z]{3} {1,2}\d{1,2} \d{2}:\d{2}:\d{2}|\d{4}-\d{2}-\d{2}T|[IWEF]\d{4} \d{2}:")
# journald's `short` prefix with a month name in another locale (`4月 09 21:43:37 host kubelet[1]: `, zh_CN;
# `Okt`, `Mär`):
# the month and day are read from the klog header the line carries (`I0409 ...`).
_LOCAL_SHORT = re.compile(
    r"(?P<mon>\S+) {1,2}(?P<day>\d{1,2}) (?P<rest>\d{2}:\d{2}:\d{2}(?:\.\d{1,9})? \S+ "
    r"[^\s\[\]:]+(?:\[\d+\])?: ?)(?P<klog>[IWEF](?P<kmon>\d{2})(?P<kday>\d{2}) )"
)
# A syslog ident without the time and host (`hyperkube[1001]: I0511 ...`, a CI artifact's per-unit log).
_BARE_IDENT = re.compile(r"(?P<ident>[A-Za-z][\w.@-]*)\[\d+\]: (?=[IWEF]\d{4} \d{2}:)")
_MONTH_NAMES = ("Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec")


def unwrap_line(line: str, keep_ident: Callable[[str], bool] | None = None) -> str:
    """``line`` without what a tool quoting it put before it, and with a localized journald month read
    from the klog header; the line unchanged when none of these applies. ``keep_ident`` decides whether
    a bare ``ident[pid]: `` before a klog header is the kubelet's (then taken off; else kept). Never raises.
    """
    if not line:
        return line
    m = _WRAPPER.match(line)
    if m is not None and m.end() and _LINE_START.match(line, m.end()):
        line = line[m.end() :]
    local = _LOCAL_SHORT.match(line)
    if local is not None and local.group("mon").lower()[:3] not in _MONTHS:
        kmon, kday = int(local.group("kmon")), int(local.group("kday"))
        if 1 <= kmon <= 12 and int(local.group("day")) == kday:
            return f"{_MONTH_NAMES[kmon - 1]} {kday:02d} {local.group('rest')}{line[local.start('klog') :]}"
    bare = _BARE_IDENT.match(line)
    if bare is not None and keep_ident is not None and keep_ident(bare.group("ident")):
        return line[bare.end() :]
    return line


def split_journald_prefix(line: str) -> tuple[JournaldPrefix | None, str]:
    """Split a journald prefix off ``line``.

    Returns ``(prefix, rest)`` where ``rest`` is the text the process wrote, or ``(None, line)`` when
    the line has no recognised journald prefix. Never raises.
    """
    if not line:
        return None, line
    first = line[0]
    if first == "<":
        return _split_syslog(line)
    if first.isdigit():
        store = _split_store_prefix(line)
        if store[0] is not None:
            return store
        m = _JOURNALD_ISO.match(line)
        if m is None:
            return None, line
        try:
            y, mo, d = (int(x) for x in m.group("date").split("-"))
            off = m.group("off")
            offset: timedelta | None
            if off == "Z":
                offset = timedelta(0)
            else:
                sign = -1 if off[0] == "-" else 1
                digits = off[1:].replace(":", "")
                offset = sign * timedelta(hours=int(digits[:2]), minutes=int(digits[2:4]))
            if not (1 <= mo <= 12 and 1 <= d <= 31):
                return None, line
        except (ValueError, IndexError):
            return None, line
        pid = m.group("pid")
        prefix = JournaldPrefix(
            m.group("host"), m.group("ident"), int(pid) if pid else None, mo, d, y, offset, _hms(m)
        )
        return prefix, line[m.end() :]
    if first.isalpha() and len(line) > 16:
        # A klog header also starts with a letter; journald's starts with a month name and a space.
        if line[3:4] != " ":
            return None, line
        m = _JOURNALD_SHORT.match(line)
        if m is None:
            return None, line
        month = _MONTHS.get(m.group("mon").lower())
        if month is None:
            return None, line
        pid = m.group("pid")
        prefix = JournaldPrefix(
            m.group("host"),
            m.group("ident"),
            int(pid) if pid else None,
            month,
            int(m.group("day")),
            None,
            None,
            _hms(m),
        )
        return prefix, line[m.end() :]
    return None, line


def _split_syslog(line: str) -> tuple[JournaldPrefix | None, str]:
    """A syslog line (``<PRI>`` then RFC 3164's short form, or RFC 5424) as a journald prefix."""
    pri = _SYSLOG_PRI.match(line)
    if pri is None:
        return None, line
    rest = line[pri.end() :]
    m = _SYSLOG_5424.match(rest)
    if m is None:
        prefix, body = split_journald_prefix(rest) if rest[:1] != "<" else (None, rest)
        return (prefix, body) if prefix is not None else (None, line)
    try:
        y, mo, d = (int(x) for x in m.group("date").split("-"))
        off = m.group("off")
        offset = timedelta(0)
        if off != "Z":
            sign = -1 if off[0] == "-" else 1
            offset = sign * timedelta(hours=int(off[1:3]), minutes=int(off[4:6]))
        if not (1 <= mo <= 12 and 1 <= d <= 31):
            return None, line
    except (ValueError, IndexError):
        return None, line
    pid = m.group("pid")
    ident = m.group("ident")
    if ident == "-":  # no app name: nothing says which process wrote it; read the text as it is
        return None, rest[m.end() :]
    prefix = JournaldPrefix(
        m.group("host"),
        ident,  # not "-" (returned above)
        int(pid) if pid.isdigit() else None,
        mo,
        d,
        y,
        offset,
        _hms(m),
    )
    return prefix, rest[m.end() :]


def _split_store_prefix(line: str) -> tuple[JournaldPrefix | None, str]:
    """A log store's own timestamp in front of a kubelet line (see ``_STORE_PREFIX``), as a prefix that
    carries the year and, when written, the offset (``Z`` / ``UTC``: zero)."""
    m = _STORE_PREFIX.match(line)
    if m is None:
        return None, line
    try:
        y, mo, d = (int(x) for x in m.group("date").split("-"))
        off = m.group("off")
        offset: timedelta | None
        if off is None:
            offset = None
        elif off in ("Z", "UTC"):
            offset = timedelta(0)
        else:
            sign = -1 if off[0] == "-" else 1
            digits = off[1:].replace(":", "")
            offset = sign * timedelta(hours=int(digits[:2]), minutes=int(digits[2:4]))
        if not (1 <= mo <= 12 and 1 <= d <= 31):
            return None, line
    except (ValueError, IndexError):
        return None, line
    prefix = JournaldPrefix("", "kubelet", None, mo, d, y, offset, _hms(m))
    return prefix, line[m.end() :]


def _hms(m: re.Match[str]) -> tuple[int, int, int] | None:
    hour, minute, second = (int(x) for x in m.group("hms").split(":"))
    return (hour, minute, second) if hour < 24 and minute < 60 and second < 61 else None


def parse_klog_header(text: str) -> tuple[KlogHeader, str] | None:
    """Parse the klog header at the start of ``text``.

    Returns ``(header, body)`` with the body after ``] ``, or None when ``text`` does not start with a
    klog header (or its month/day/time fields are out of range). Never raises.
    """
    if len(text) < 30 or text[0] not in "IWEF":
        return None
    m = _KLOG_HEADER.match(text)
    if m is None:
        return None
    sev, mon, dd, hh, mi, ss, us, pid, caller = m.groups()
    month, day, hour, minute, second = int(mon), int(dd), int(hh), int(mi), int(ss)
    if not (1 <= month <= 12 and 1 <= day <= 31 and hour < 24 and minute < 60 and second < 61):
        return None
    # a leap second is folded into :59
    header = KlogHeader(sev, month, day, hour, minute, min(second, 59), int(us), int(pid), caller)
    return header, text[m.end() :]


_GO_ESCAPES = {
    "n": "\n",
    "t": "\t",
    "r": "\r",
    '"': '"',
    "\\": "\\",
    "'": "'",
    "a": "\a",
    "b": "\b",
    "f": "\f",
    "v": "\v",
}


def _scan_quoted(text: str, start: int) -> tuple[str, int, bool]:
    """Decode the Go-quoted string starting at ``text[start] == '"'``.

    Returns ``(value, index after the closing quote, complete)``. An unterminated string returns the
    rest of the text and ``complete=False``.
    """
    i = start + 1
    n = len(text)
    # Fast path: no escapes before the closing quote.
    end = text.find('"', i)
    if end != -1 and text.find("\\", i, end) == -1:
        return text[i:end], end + 1, True
    out: list[str] = []
    while i < n:
        c = text[i]
        if c == '"':
            return "".join(out), i + 1, True
        if c != "\\" or i + 1 >= n:
            out.append(c)
            i += 1
            continue
        e = text[i + 1]
        if e in _GO_ESCAPES:
            out.append(_GO_ESCAPES[e])
            i += 2
        elif e in "xuU":
            width = {"x": 2, "u": 4, "U": 8}[e]
            digits = text[i + 2 : i + 2 + width]
            try:
                out.append(chr(int(digits, 16)) if len(digits) == width else "\\" + e + digits)
            except (ValueError, OverflowError):
                out.append("\\" + e + digits)
            i += 2 + width
        elif e in "01234567":
            digits = text[i + 1 : i + 4]
            try:
                out.append(chr(int(digits, 8)))
            except ValueError:
                out.append("\\" + digits)
            i += 4
        else:
            out.append(e)
            i += 2
    return "".join(out), n, False


def unquote_go(text: str) -> str:
    """Decode a Go ``strconv.Quote``d string (with its quotes); returns ``text`` unchanged otherwise."""
    if len(text) >= 2 and text[0] == '"':
        value, end, complete = _scan_quoted(text, 0)
        if complete and end == len(text):
            return value
    return text


_OPEN = {"{": "}", "[": "]", "(": ")"}


def _scan_token(text: str, start: int) -> tuple[str, int, bool]:
    """Scan a bare value up to whitespace at bracket depth 0 (``&{..}``, ``map[..]``, ``[a b]``, JSON).

    Quoted strings inside brackets are skipped over. Returns ``(raw, end, complete)``; an unbalanced
    bracket swallows the rest of the line and returns ``complete=False``.
    """
    n = len(text)
    i = start
    stack: list[str] = []
    while i < n:
        c = text[i]
        if c == '"' and stack:
            _, i, ok = _scan_quoted(text, i)
            if not ok:
                return text[start:], n, False
            continue
        if c in _OPEN:
            stack.append(_OPEN[c])
        elif stack and c == stack[-1]:
            stack.pop()
        elif not stack and c in " \t\n":
            break
        i += 1
    return text[start:i], i, not stack


def _decode_bare(raw: str) -> Any:
    if raw and raw[0] in "{[" and raw[-1] in "}]":
        try:
            return orjson.loads(raw)
        except orjson.JSONDecodeError:
            return raw
    return raw


def opens_block(text: str) -> bool:
    """True when ``text`` (a klog line or the tail after a `` >``) opens a multi-line ``key=<`` block."""
    stripped = text.rstrip()
    return stripped.endswith("=<") and not stripped.endswith('"=<')


def parse_klog_body(body: str, block_lines: list[list[str]] | None = None) -> KlogBody:
    """Parse a klog message body: ``"message" key=value ...``.

    ``block_lines`` holds, in order, the lines of each multi-line ``key=<`` block the body opened (each
    already stripped of its leading tab). The text after a block's closing `` >`` continues ``body``
    after a newline, so a ``<`` followed by a newline or the end of ``body`` takes the next block
    (``kubelet_log`` does this joining). Never raises.
    """
    if not body.startswith('"'):
        text = body.strip()
        return KlogBody(message=text, structured=False, message_cut=text.endswith(ELLIPSIS))
    message, i, complete = _scan_quoted(body, 0)
    result = KlogBody(message=message, structured=True, truncated=not complete, message_cut=not complete)
    values = result.values
    n = len(body)
    blocks = iter(block_lines or ())
    while i < n:
        while i < n and body[i] in " \t\n":
            i += 1
        if i >= n:
            break
        km = _KEY.match(body, i)
        if km is None or km.end() >= n or body[km.end()] != "=":
            # Not key=value: skip one token (it always advances: body[i] is not blank).
            _, i, _ = _scan_token(body, i)
            result.truncated = True
            continue
        key = km.group(0)
        i = km.end() + 1
        if i >= n:
            values[key] = ""
            break
        c = body[i]
        if c == '"':
            value, i, ok = _scan_quoted(body, i)
            values[key] = value
            if not ok:
                result.truncated = True
                result.cut.add(key)
        elif c == "<" and (i + 1 == n or body[i + 1] == "\n"):
            lines = next(blocks, None)
            values[key] = "\n".join(lines) if lines is not None else ""
            if lines is None:
                result.truncated = True
                result.cut.add(key)
            i += 1
        else:
            raw, i, ok = _scan_token(body, i)
            values[key] = _decode_bare(raw)
            if not ok or (i >= n and raw.endswith(ELLIPSIS)):
                result.truncated = True
                result.cut.add(key)
    return result


# What `systemctl status` and pagers put where they cut a long line.
ELLIPSIS = "\u2026"


def _ms_to_datetime(ts: Any) -> datetime | None:
    if isinstance(ts, bool) or not isinstance(ts, int | float):
        return None
    try:
        micros = round(ts * 1000)
        return datetime(1970, 1, 1, tzinfo=UTC) + timedelta(microseconds=micros)
    except (OverflowError, ValueError):
        return None


def parse_json_record(text: str) -> JsonRecord | None:
    """Parse one ``--logging-format=json`` line.

    ``ts`` is epoch milliseconds (float); ``v`` is the verbosity on info lines and is absent on error
    lines, which carry ``err`` (severity ``E``). Returns None for anything that is not a JSON object
    with a numeric ``ts`` and a string ``msg``. Never raises.
    """
    try:
        obj = orjson.loads(text)
    except (orjson.JSONDecodeError, TypeError, ValueError):
        return None
    if not isinstance(obj, dict):
        return None
    msg = obj.get("msg")
    at = _ms_to_datetime(obj.get("ts"))
    if not isinstance(msg, str) or at is None:
        return None
    caller = obj.get("caller")
    severity = "I" if "v" in obj else ("E" if "err" in obj else "I")
    values = {k: v for k, v in obj.items() if k not in ("ts", "msg", "caller", "v")}
    level = obj.get("v")
    return JsonRecord(
        at,
        msg,
        caller if isinstance(caller, str) else None,
        severity,
        values,
        level if isinstance(level, int) and not isinstance(level, bool) else None,
    )
