#!/usr/bin/env python3
"""The queries behind kvfleet's Grafana dashboards and alert rules, checked
without Grafana: a library for the live-data test and a CLI (stdlib only).

  load_dashboards(dir)           every panel (rows' nested ones too) and its target exprs
  substitute(expr, vars, scrape) Grafana's variables replaced the way Grafana would
  check_live(url, dir, vars, s)  each target through Prometheus' /api/v1/query: at least
                                 one series with a finite value, or a failure naming it;
                                 each variable's label_values(): at least one value
  lint_dashboards(dir)           the house rules (datasource variable everywhere, `=~` on
                                 every variable, no literal ranges, ...)
  metric_names(expr)             metric names a PromQL expression reads
  names_in_dashboards(dir), names_in_rules(dir), names_in_metrics_doc(path)
  missing_from_scrape(url, names) names Prometheus has no series of

CLI (exit 0 when every check passes, 1 otherwise):
  dashboard_queries.py --prometheus http://127.0.0.1:9090 --var namespace=local \\
      --var model=SmolLM2-135M-Instruct --var worker='.*' --scrape-interval 1 \\
      --metrics-doc docs/metrics.md --rules deploy/helm/kvfleet/rules [--check-scrape]
Without --prometheus only the static checks run (lint, names against the doc).
"""
from __future__ import annotations

import argparse
import dataclasses
import json
import math
import re
import sys
import urllib.error
import urllib.parse
import urllib.request
from pathlib import Path

REPO = Path(__file__).resolve().parents[3]
DEFAULT_DASHBOARDS = REPO / "deploy/helm/kvfleet/dashboards"
DEFAULT_RULES = REPO / "deploy/helm/kvfleet/rules"
DEFAULT_METRICS_DOC = REPO / "docs/metrics.md"

# Series the dashboards and rules may read that docs/metrics.md does not list.
PROMETHEUS_OWN = {"up"}


# --- Dashboards ---------------------------------------------------------------------------------

@dataclasses.dataclass
class Target:
    ref_id: str
    expr: str
    instant: bool = False
    hidden: bool = False


@dataclasses.dataclass
class Panel:
    id: int | None
    title: str
    type: str
    targets: list[Target]
    raw: dict = dataclasses.field(repr=False, default_factory=dict)


@dataclasses.dataclass
class Dashboard:
    path: Path
    uid: str
    title: str
    panels: list[Panel]           # every panel but rows, nested ones included, in order
    raw: dict = dataclasses.field(repr=False, default_factory=dict)


def _walk_panels(panels: list[dict]):
    for p in panels:
        yield p
        # A collapsed row keeps its panels inside it; an expanded one has none.
        yield from _walk_panels(p.get("panels") or [])


def load_dashboard(path: Path | str) -> Dashboard:
    path = Path(path)
    raw = json.loads(path.read_text())
    panels = []
    for p in _walk_panels(raw.get("panels") or []):
        if p.get("type") == "row":
            continue
        targets = [Target(ref_id=t.get("refId", ""), expr=t.get("expr", ""), instant=bool(t.get("instant")),
                          hidden=bool(t.get("hide")))
                   for t in p.get("targets") or []]
        panels.append(Panel(id=p.get("id"), title=p.get("title", ""), type=p.get("type", ""), targets=targets, raw=p))
    return Dashboard(path=path, uid=raw.get("uid", ""), title=raw.get("title", ""), panels=panels, raw=raw)


def load_dashboards(directory: Path | str) -> list[Dashboard]:
    files = sorted(Path(directory).glob("*.json"))
    if not files:
        raise FileNotFoundError(f"no dashboard JSON in {directory}")
    return [load_dashboard(f) for f in files]


# --- Grafana variables --------------------------------------------------------------------------

def _duration(seconds: float) -> str:
    """A Prometheus duration: whole seconds as `4s`, anything finer in milliseconds."""
    ms = round(seconds * 1000)
    return f"{ms // 1000}s" if ms % 1000 == 0 else f"{ms}ms"


def rate_interval_s(scrape_interval_s: float, interval_s: float | None = None) -> float:
    """Grafana's $__rate_interval: max($__interval + scrape interval, 4 x scrape interval).

    $__interval depends on the panel's width and time range; without one it is taken
    to be the scrape interval. Never under 4 s, so a 1 s scrape still rates over 4 samples.
    """
    interval = scrape_interval_s if interval_s is None else interval_s
    return max(interval + scrape_interval_s, 4 * scrape_interval_s, 4.0)


_PROMQL_REGEX_SPECIAL = re.compile(r"([\\^$.|?*+()\[\]{}])")


def _format_value(name: str, value) -> str:
    """A variable's value as Grafana writes it into a Prometheus query.

    A string is used as it is (a regex: `.*`, `worker-0|worker-1`, or a plain value);
    a list is a multi-value selection: each value regex-escaped, joined as `(a|b)`.
    """
    if isinstance(value, (list, tuple)):
        if not value:
            raise ValueError(f"variable {name!r} has an empty selection")
        if len(value) == 1:
            value = value[0]
            return _PROMQL_REGEX_SPECIAL.sub(r"\\\\\1", str(value))
        return "(" + "|".join(_PROMQL_REGEX_SPECIAL.sub(r"\\\\\1", str(v)) for v in value) + ")"
    return str(value)


_VARIABLE = re.compile(r"\$\{(\w+)(?::[\w-]+)?\}|\[\[(\w+)(?::[\w-]+)?\]\]|\$(\w+)")


def substitute(expr: str, variables: dict, scrape_interval_s: float, *, interval_s: float | None = None,
               range_s: float = 60, rate_interval: float | None = None) -> str:
    """`expr` with every Grafana variable replaced: `$x`, `${x}`, `${x:fmt}`, `[[x]]`.

    Built-ins: $__rate_interval (see rate_interval_s, or `rate_interval` seconds if
    given), $__interval (default: the scrape interval), $__range (default 60 s), and
    their _ms / _s forms; $datasource (the variables' value, else "prometheus").
    An unknown variable raises KeyError: a query Grafana would send broken.
    """
    interval = scrape_interval_s if interval_s is None else interval_s
    rate = rate_interval if rate_interval is not None else rate_interval_s(scrape_interval_s, interval)
    builtins = {
        "__rate_interval": _duration(rate), "__rate_interval_ms": str(round(rate * 1000)),
        "__interval": _duration(interval), "__interval_ms": str(round(interval * 1000)),
        "__range": _duration(range_s), "__range_s": str(round(range_s)), "__range_ms": str(round(range_s * 1000)),
    }

    def replace(m: re.Match) -> str:
        name = m.group(1) or m.group(2) or m.group(3)
        if name in builtins:
            return builtins[name]
        if name in variables:
            return _format_value(name, variables[name])
        if name == "datasource":
            return "prometheus"
        raise KeyError(f"variable ${name} has no value (given: {', '.join(sorted(variables)) or 'none'}) in: {expr}")

    return _VARIABLE.sub(replace, expr)


# --- Prometheus HTTP API ------------------------------------------------------------------------

class PrometheusError(RuntimeError):
    """Prometheus refused a query (its reason) or could not be asked."""


class PrometheusUnreachable(PrometheusError):
    """No answer at all: check_live stops at the first rather than failing every target."""


def _api(prometheus_url: str, path: str, params: dict | None = None, timeout_s: float = 15) -> dict:
    url = prometheus_url.rstrip("/") + path
    data = urllib.parse.urlencode(params).encode() if params is not None else None
    request = urllib.request.Request(url, data=data)
    if data is not None:
        request.add_header("Content-Type", "application/x-www-form-urlencoded")
    try:
        with urllib.request.urlopen(request, timeout=timeout_s) as response:
            body = json.load(response)
    except urllib.error.HTTPError as e:
        # Prometheus answers a bad query with 400 and its reason in the JSON body.
        try:
            reason = json.load(e).get("error", str(e))
        except (ValueError, AttributeError):
            reason = str(e)
        raise PrometheusError(f"{e.code}: {reason}") from None
    except (urllib.error.URLError, OSError) as e:
        raise PrometheusUnreachable(f"cannot reach {url}: {e}") from None
    if body.get("status") != "success":
        raise PrometheusError(body.get("error", f"status {body.get('status')}"))
    return body["data"]


def instant_query(prometheus_url: str, expr: str, time: float | None = None) -> list[tuple[dict, float]]:
    """(labels, value) of every series an instant query returns (a scalar is one unlabelled series)."""
    params = {"query": expr}
    if time is not None:
        params["time"] = f"{time:.3f}"
    data = _api(prometheus_url, "/api/v1/query", params)
    kind, result = data["resultType"], data["result"]
    if kind == "vector":
        return [(s["metric"], float(s["value"][1])) for s in result]
    if kind == "scalar":
        return [({}, float(result[1]))]
    if kind == "matrix":
        return [(s["metric"], float(s["values"][-1][1])) for s in result if s["values"]]
    raise PrometheusError(f"a {kind} result is no series")


def check_live(prometheus_url: str, dashboards_dir: Path | str, variables: dict, scrape_interval_s: float,
               **substitute_options) -> dict:
    """Runs every visible target of every dashboard as an instant query.

    A target passes when at least one series has a finite value (not NaN, not +-Inf).
    Each query variable's label_values() must list at least one value too.
    Returns, per dashboard file name: title, uid, panels_checked (panels with a
    target), targets, series (returned in all), finite_series, variables_checked,
    panel_results (per panel: panel, targets, series, finite_series) and
    failures, each {panel (or "variable $name"), ref_id, expr (as sent), reason}.
    """
    report = {}
    for d in load_dashboards(dashboards_dir):
        entry = {"title": d.title, "uid": d.uid, "panels_checked": 0, "targets": 0, "series": 0, "finite_series": 0,
                 "variables_checked": 0, "panel_results": [], "failures": []}
        # The drop-downs first: a variable that lists nothing leaves every panel empty in Grafana.
        for name, query in variable_queries(d):
            entry["variables_checked"] += 1
            failure = {"panel": f"variable ${name}", "ref_id": "", "expr": query}
            try:
                expr = substitute(query, variables, scrape_interval_s, **substitute_options)
                failure["expr"] = expr
                if not label_values(prometheus_url, expr):
                    entry["failures"].append({**failure, "reason": "lists no value"})
            except PrometheusUnreachable:
                raise
            except (KeyError, ValueError, PrometheusError) as e:
                entry["failures"].append({**failure, "reason": str(e).strip("'\"")})
        for panel in d.panels:
            visible = [t for t in panel.targets if not t.hidden and t.expr.strip()]
            if not visible:
                continue
            entry["panels_checked"] += 1
            result = {"panel": panel.title, "targets": len(visible), "series": 0, "finite_series": 0}
            entry["panel_results"].append(result)
            for t in visible:
                entry["targets"] += 1
                failure = {"panel": panel.title, "ref_id": t.ref_id, "expr": t.expr}
                try:
                    expr = substitute(t.expr, variables, scrape_interval_s, **substitute_options)
                    failure["expr"] = expr
                    series = instant_query(prometheus_url, expr)
                except PrometheusUnreachable:
                    raise
                except (KeyError, ValueError, PrometheusError) as e:
                    entry["failures"].append({**failure, "reason": str(e).strip("'\"")})
                    continue
                finite = sum(1 for _, v in series if math.isfinite(v))
                entry["series"] += len(series)
                entry["finite_series"] += finite
                result["series"] += len(series)
                result["finite_series"] += finite
                if not series:
                    entry["failures"].append({**failure, "reason": "no series"})
                elif not finite:
                    values = sorted({str(v) for _, v in series})
                    entry["failures"].append({**failure, "reason": f"{len(series)} series, none finite "
                                                                   f"({', '.join(values)})"})
        report[d.path.name] = entry
    return report


_LABEL_VALUES = re.compile(r"^\s*label_values\((?:(.*),)?\s*(\w+)\s*\)\s*$", re.DOTALL)


def variable_queries(d: Dashboard) -> list[tuple[str, str]]:
    """(name, query) of the dashboard's Prometheus query variables."""
    out = []
    for v in d.raw.get("templating", {}).get("list", []):
        if v.get("type") != "query":
            continue
        q = v.get("query")
        q = q.get("query", "") if isinstance(q, dict) else (q or v.get("definition", ""))
        out.append((v.get("name", ""), q))
    return out


def label_values(prometheus_url: str, query: str) -> list[str]:
    """What Grafana's `label_values([selector,] label)` lists, through /api/v1/label/<label>/values."""
    m = _LABEL_VALUES.match(query)
    if not m:
        raise ValueError(f"not a label_values() query: {query}")
    selector, label = m.group(1), m.group(2)
    params = [("match[]", selector.strip())] if selector and selector.strip() else []
    path = f"/api/v1/label/{label}/values" + ("?" + urllib.parse.urlencode(params) if params else "")
    return list(_api(prometheus_url, path))


def scraped_names(prometheus_url: str) -> set[str]:
    return set(_api(prometheus_url, "/api/v1/label/__name__/values"))


def missing_from_scrape(prometheus_url: str, names) -> list[str]:
    """The names (as queries use them: `x_bucket`, not `x`) Prometheus holds no series of."""
    present = scraped_names(prometheus_url)
    return sorted(n for n in set(names) if n not in present)


# --- Metric names in PromQL ---------------------------------------------------------------------

_KEYWORDS = {"by", "without", "on", "ignoring", "group_left", "group_right", "bool", "offset", "and", "or",
             "unless", "atan2", "inf", "nan", "start", "end"}
_GROUPING = {"by", "without", "on", "ignoring", "group_left", "group_right"}
_AGGREGATIONS = {"sum", "min", "max", "avg", "group", "stddev", "stdvar", "count", "count_values", "bottomk",
                 "topk", "quantile", "limitk", "limit_ratio"}
_TOKEN = re.compile(r"""
      (?P<string>"(?:[^"\\]|\\.)*"|'(?:[^'\\]|\\.)*'|`[^`]*`)
    | (?P<comment>\#[^\n]*)
    | (?P<variable>\$\{[^}]*\}|\[\[\w+(?::[\w-]+)?\]\]|\$\w+)
    | (?P<number>(?:0[xX][0-9a-fA-F]+|\d+\.?\d*(?:[eE][+-]?\d+)?|\.\d+(?:[eE][+-]?\d+)?)[a-zA-Z0-9_]*)
    | (?P<ident>[a-zA-Z_:][a-zA-Z0-9_:]*)
    | (?P<space>\s+)
    | (?P<other>.)
""", re.VERBOSE | re.DOTALL)


def _tokens(expr: str):
    for m in _TOKEN.finditer(expr):
        kind = m.lastgroup
        if kind not in ("space", "comment"):
            yield kind, m.group()


def metric_names(expr: str) -> set[str]:
    """Metric names `expr` reads: identifiers that are not functions, aggregations,
    keywords, label names (inside braces or grouping lists), durations or strings."""
    toks = list(_tokens(expr))
    names, depth_brace, depth_bracket, i = set(), 0, 0, 0
    while i < len(toks):
        kind, text = toks[i]
        nxt = toks[i + 1][1] if i + 1 < len(toks) else ""
        if kind == "other":
            depth_brace += {"{": 1, "}": -1}.get(text, 0)
            depth_bracket += {"[": 1, "]": -1}.get(text, 0)
        elif kind == "ident" and depth_brace == 0 and depth_bracket == 0:
            lower = text.lower()
            if lower in _GROUPING and nxt == "(":
                # Skip the label list: by (a, b), on (c), group_left (d).
                depth = 0
                i += 1
                while i < len(toks):
                    if toks[i][1] == "(":
                        depth += 1
                    elif toks[i][1] == ")":
                        depth -= 1
                        if depth == 0:
                            break
                    i += 1
            elif lower in _KEYWORDS:
                pass
            elif nxt == "(":
                pass  # a function call
            elif text in _AGGREGATIONS and nxt.lower() in ("by", "without"):
                pass  # sum by (x) (...)
            else:
                names.add(text)
        i += 1
    return names


def names_in_dashboards(directory: Path | str) -> set[str]:
    """Names the targets read, and the selectors of the query variables' label_values()."""
    names = set()
    for d in load_dashboards(directory):
        names |= {n for p in d.panels for t in p.targets for n in metric_names(t.expr)}
        for _, query in variable_queries(d):
            m = _LABEL_VALUES.match(query)
            names |= metric_names(m.group(1) or "") if m else set()
    return names


# --- Rules files ---------------------------------------------------------------------------------

def _unquote(text: str) -> str:
    if text.startswith("'"):
        return text[1:text.rindex("'")].replace("''", "'")
    if text.startswith('"'):
        return json.loads(text[:text.rindex('"') + 1])
    return re.sub(r"\s+#.*$", "", text).strip()


def rule_exprs(path: Path | str) -> list[tuple[str, str]]:
    """(alert or record name, expr) of every rule in a Prometheus rules file.

    A small reader of the shapes rules files use (stdlib has no YAML): `expr:` as a
    plain or quoted scalar on one line, a plain scalar continued on deeper lines, or a
    block scalar (`|`, `|-`, `>`, `>-`).
    """
    lines = Path(path).read_text().splitlines()
    out, name = [], ""
    for i, line in enumerate(lines):
        m = re.match(r"^\s*(?:-\s+)?(alert|record):\s*(.*)$", line)
        if m:
            name = _unquote(m.group(2).strip())
            continue
        m = re.match(r"^(\s*(?:-\s+)?)expr:(?:\s+(.*))?$", line)
        if not m:
            continue
        key_column, rest = len(m.group(1)), (m.group(2) or "").strip()
        following = []
        for later in lines[i + 1:]:
            if later.strip() and len(later) - len(later.lstrip()) <= key_column:
                break
            following.append(later)
        while following and not following[-1].strip():
            following.pop()
        if rest[:1] in ("|", ">"):
            indent = min((len(l) - len(l.lstrip()) for l in following if l.strip()), default=0)
            body = [l[indent:] for l in following]
            expr = ("\n" if rest[0] == "|" else " ").join(body)
        elif rest[:1] in ("'", '"'):
            expr = _unquote(rest)
        else:
            expr = " ".join([_unquote(rest)] + [_unquote(l.strip()) for l in following if l.strip()])
        out.append((name, expr.strip()))
    return out


def names_in_rules(rules_dir: Path | str) -> set[str]:
    files = sorted(Path(rules_dir).glob("*.y*ml"))
    if not files:
        raise FileNotFoundError(f"no rules files in {rules_dir}")
    return {n for f in files for _, expr in rule_exprs(f) for n in metric_names(expr)}


# --- docs/metrics.md ------------------------------------------------------------------------------

def names_in_metrics_doc(path: Path | str) -> set[str]:
    return set(re.findall(r"`(kvfleet_[a-z0-9_]+)`", Path(path).read_text()))


def undocumented(names, documented: set[str]) -> list[str]:
    """Names neither documented nor Prometheus' own; a histogram's _bucket/_sum/_count
    count as its documented base name."""
    out = []
    for n in sorted(set(names)):
        base = re.sub(r"_(bucket|sum|count)$", "", n)
        if n not in documented and base not in documented and n not in PROMETHEUS_OWN:
            out.append(n)
    return out


# --- House rules ----------------------------------------------------------------------------------

_MATCHER = re.compile(r"""([a-zA-Z_]\w*)\s*(=~|!~|!=|=)\s*("(?:[^"\\]|\\.)*"|'(?:[^'\\]|\\.)*')""")
_RANGE = re.compile(r"\[([^\[\]]*)\]")
_ALLOWED_RANGES = {"$__rate_interval", "$__range", "$__interval", "${__rate_interval}", "${__range}",
                   "${__interval}"}
_DATASOURCE_UIDS = {"${datasource}", "$datasource"}


def lint_dashboard(d: Dashboard) -> list[str]:
    raw, where = d.raw, d.path.name
    problems = []
    if not raw.get("uid"):
        problems.append(f"{where}: no uid")
    if raw.get("id") is not None:
        problems.append(f"{where}: has an id (Grafana assigns one per instance; leave it out)")
    if int(raw.get("schemaVersion", 0)) < 36:
        problems.append(f"{where}: schemaVersion {raw.get('schemaVersion')} is older than Grafana 9")
    variables = {v.get("name"): v for v in raw.get("templating", {}).get("list", [])}
    ds = variables.get("datasource")
    if not ds or ds.get("type") != "datasource" or ds.get("query") != "prometheus":
        problems.append(f"{where}: no `datasource` variable of type datasource, query prometheus")
    for name in ("namespace", "model", "worker"):
        v = variables.get(name)
        if not v:
            problems.append(f"{where}: no `{name}` variable")
            continue
        if v.get("type") != "query" or not v.get("multi") or not v.get("includeAll") or v.get("allValue") != ".*":
            problems.append(f"{where}: variable {name} must be a multi-value query variable with All = .*")
        if (v.get("datasource") or {}).get("uid") not in _DATASOURCE_UIDS:
            problems.append(f"{where}: variable {name} does not query the $datasource")
    for p in _walk_panels(raw.get("panels") or []):
        label = f"{where}: panel {p.get('title')!r}"
        if p.get("type") == "row" and not p.get("targets"):
            continue
        if (p.get("datasource") or {}).get("uid") not in _DATASOURCE_UIDS:
            problems.append(f"{label}: datasource is not ${{datasource}}")
        if "gridPos" not in p:
            problems.append(f"{label}: no gridPos")
        if not p.get("targets"):
            problems.append(f"{label}: no targets")
        for t in p.get("targets") or []:
            tl = f"{label} {t.get('refId')}"
            expr = t.get("expr", "")
            if (t.get("datasource") or {}).get("uid") not in _DATASOURCE_UIDS:
                problems.append(f"{tl}: target datasource is not ${{datasource}}")
            for label_name, op, value in _MATCHER.findall(expr):
                if ("$" in value or "[[" in value) and op != "=~":
                    problems.append(f"{tl}: {label_name}{op}{value} uses a variable without =~")
            for r in _RANGE.findall(re.sub(r"\[\[\w+\]\]", "", expr)):
                body = r.split(":")[0].strip()
                if body not in _ALLOWED_RANGES:
                    problems.append(f"{tl}: range [{r}] is a literal; use $__rate_interval (or $__range)")
            try:
                substitute(expr, {"namespace": ".*", "model": ".*", "worker": ".*"}, 15)
            except KeyError as e:
                problems.append(f"{tl}: {e}")
    return problems


def lint_dashboards(directory: Path | str) -> list[str]:
    dashboards = load_dashboards(directory)
    problems = [p for d in dashboards for p in lint_dashboard(d)]
    uids = [d.uid for d in dashboards]
    problems += [f"uid {u} is used by more than one dashboard" for u in sorted({u for u in uids if uids.count(u) > 1})]
    return problems


# --- CLI --------------------------------------------------------------------------------------------

def _parse_var(text: str) -> tuple[str, str]:
    name, sep, value = text.partition("=")
    if not sep or not name:
        raise argparse.ArgumentTypeError(f"--var takes NAME=VALUE, not {text!r}")
    return name, value


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--prometheus", help="Prometheus base URL; without it only the static checks run")
    ap.add_argument("--dashboards", type=Path, default=DEFAULT_DASHBOARDS, help="directory of dashboard JSON")
    ap.add_argument("--var", type=_parse_var, action="append", default=[], metavar="NAME=VALUE",
                    help="a template variable's value, used as a regex (repeat; e.g. worker=.*)")
    ap.add_argument("--scrape-interval", type=float, default=15, help="seconds (for $__rate_interval)")
    ap.add_argument("--interval", type=float, help="$__interval in seconds (default: the scrape interval)")
    ap.add_argument("--rate-interval", type=float, help="$__rate_interval in seconds (default: Grafana's rule)")
    ap.add_argument("--range", type=float, default=60, help="$__range in seconds (default 60)")
    ap.add_argument("--metrics-doc", type=Path, help="check every metric name against this docs/metrics.md")
    ap.add_argument("--rules", type=Path, help="directory of rules files whose names are checked too")
    ap.add_argument("--check-scrape", action="store_true",
                    help="with --prometheus: every metric name must have series in Prometheus")
    ap.add_argument("--json", type=Path, help="write the live report here as JSON")
    args = ap.parse_args(argv)

    ok = True
    problems = lint_dashboards(args.dashboards)
    dashboards = load_dashboards(args.dashboards)
    n_panels = sum(len(d.panels) for d in dashboards)
    print(f"lint: {len(dashboards)} dashboards, {n_panels} panels: "
          + ("ok" if not problems else f"{len(problems)} problem(s)"))
    for p in problems:
        print(f"  FAIL {p}")
    ok &= not problems

    names = names_in_dashboards(args.dashboards)
    print(f"metric names in dashboards: {len(names)}")
    if args.rules:
        rule_names = names_in_rules(args.rules)
        print(f"metric names in rules ({args.rules}): {len(rule_names)}")
        names |= rule_names
    if args.metrics_doc:
        missing = undocumented(names, names_in_metrics_doc(args.metrics_doc))
        print(f"names against {args.metrics_doc}: " + ("all documented" if not missing else
                                                        f"{len(missing)} not documented: {', '.join(missing)}"))
        ok &= not missing

    if args.prometheus:
        try:
            ok &= _live(args, names)
        except PrometheusError as e:
            print(f"FAIL {e}")
            ok = False
    print("dashboard_queries: " + ("OK" if ok else "FAILED"))
    return 0 if ok else 1


def _live(args, names: set[str]) -> bool:
    """The live checks of the CLI: every target, then (--check-scrape) every name."""
    ok = True
    variables = dict(args.var)
    report = check_live(args.prometheus, args.dashboards, variables, args.scrape_interval,
                        interval_s=args.interval, range_s=args.range, rate_interval=args.rate_interval)
    rate = args.rate_interval or rate_interval_s(args.scrape_interval, args.interval)
    print(f"live: {args.prometheus}, $__rate_interval={_duration(rate)}, $__range={_duration(args.range)}, "
          f"variables {variables}")
    for name, e in report.items():
        print(f"{name} ({e['title']}): {e['panels_checked']} panels checked, {e['targets']} targets, "
              f"{e['series']} series returned ({e['finite_series']} finite), {e['variables_checked']} variables, "
              f"{len(e['failures'])} failures")
        for f in e["failures"]:
            print(f"  FAIL {f['panel']!r} {f['ref_id']}: {f['reason']}\n       {f['expr']}")
        ok &= not e["failures"]
    if args.json:
        args.json.write_text(json.dumps(report, indent=2) + "\n")
    if args.check_scrape:
        absent = missing_from_scrape(args.prometheus, names)
        print("names in the scrape: " + ("all present" if not absent else
                                         f"{len(absent)} absent: {', '.join(absent)}"))
        ok &= not absent
    return ok

if __name__ == "__main__":
    sys.exit(main())
