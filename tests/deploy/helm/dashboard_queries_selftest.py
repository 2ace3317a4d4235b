#!/usr/bin/env python3
"""Tests of dashboard_queries.py (stdlib only).

The pure functions on chosen inputs; the house rules on the shipped dashboards;
and the HTTP path for real: a Prometheus on loopback scrapes a stand-in exporter
that serves every series the dashboards and rules read (labelled as
`kvfleet up --prometheus` labels them), loads the chart's rules, and every
dashboard target must return a finite series through check_live.

  dashboard_queries_selftest.py [--prometheus-bin PATH]   # default: prometheus on PATH

Exit 0 when all pass, 1 otherwise. Without a prometheus binary the live part
is reported as skipped and the rest still runs.
"""
from __future__ import annotations

import argparse
import http.server
import json
import math
import shutil
import socket
import subprocess
import sys
import tempfile
import threading
import time
import traceback
import urllib.request
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
import dashboard_queries as dq  # noqa: E402

REPO = dq.REPO
TESTS = []


def test(fn):
    TESTS.append(fn)
    return fn


def eq(got, want, what=""):
    if got != want:
        raise AssertionError(f"{what}: got {got!r}, want {want!r}")


# --- substitute -----------------------------------------------------------------------------------

@test
def substitute_builtins_and_forms():
    v = {"namespace": "local", "model": "SmolLM2", "worker": ".*"}
    eq(dq.substitute('rate(x{namespace=~"$namespace"}[$__rate_interval])', v, 1),
       'rate(x{namespace=~"local"}[4s])', "1 s scrape")
    # Grafana's rule: max(interval + scrape, 4 x scrape).
    eq(dq.substitute("[$__rate_interval]", v, 2), "[8s]", "2 s scrape")
    eq(dq.substitute("[$__rate_interval]", v, 15, interval_s=60), "[75s]", "interval + scrape")
    eq(dq.substitute("[$__rate_interval]", v, 1, rate_interval=30), "[30s]", "explicit")
    eq(dq.substitute("[$__rate_interval]", v, 0.5), "[4s]", "at least 4 s")
    eq(dq.substitute("[$__rate_interval]", v, 1.5), "[6s]", "")
    eq(dq.substitute("[$__rate_interval]", v, 1.25), "[5s]", "")
    eq(dq.substitute("[$__interval] [$__range] $__range_s $__interval_ms", v, 1, range_s=120),
       "[1s] [120s] 120 1000", "other built-ins")
    eq(dq.substitute("[$__interval]", v, 0.25), "[250ms]", "sub-second duration")
    eq(dq.substitute('{a=~"${namespace}", b=~"[[model]]", c=~"$worker", d=~"${model:regex}"}', v, 1),
       '{a=~"local", b=~"SmolLM2", c=~".*", d=~"SmolLM2"}', "variable forms")
    eq(dq.substitute("$datasource ${datasource}", v, 1), "prometheus prometheus", "datasource")
    eq(dq.substitute("$datasource", {**v, "datasource": "Prom"}, 1), "Prom", "datasource given")
    # $__rate_interval is not $__range followed by text, nor $__interval followed by _ms.
    eq(dq.substitute("$__rate_interval $__interval_ms $__range_ms", v, 1), "4s 1000 60000", "longest name")


@test
def substitute_multi_value_like_grafana():
    eq(dq.substitute('{pod=~"$worker"}', {"worker": ["worker-0", "worker-1"]}, 1), '{pod=~"(worker-0|worker-1)"}', "")
    eq(dq.substitute('{model=~"$model"}', {"model": ["a.b"]}, 1), '{model=~"a\\\\.b"}', "escaped")


@test
def substitute_unknown_variable_raises():
    try:
        dq.substitute('{pod=~"$pods"}', {"worker": ".*"}, 1)
    except KeyError as e:
        assert "$pods" in str(e), e
    else:
        raise AssertionError("no KeyError")


# --- metric_names ---------------------------------------------------------------------------------

@test
def metric_names_cases():
    cases = {
        'histogram_quantile(0.99, sum by (le, pod) (rate(kvfleet_x_seconds_bucket{namespace=~"$namespace", '
        'pod=~"$worker"}[$__rate_interval])))': {"kvfleet_x_seconds_bucket"},
        "sum(rate(a_total[5m])) / clamp_min(sum(rate(b_total[5m])), 1e-9)": {"a_total", "b_total"},
        "sum(a) by (pod) / on (pod) group_left (model) b": {"a", "b"},
        "sum without (instance) (a) > bool 0.5 and ignoring (x) c offset 5m": {"a", "c"},
        'up{component="worker"} == 0 or absent(kvfleet_y{job="a,b"})': {"up", "kvfleet_y"},
        'label_replace(m1, "dst", "$1", "src", "(.*)") unless m2 @ 1700000000': {"m1", "m2"},
        'count_values("v", m3) + topk(3, m4) + vector(0) + time() + scalar(m5)': {"m3", "m4", "m5"},
        "deriv(w[10m]) > 0\nand  # a comment naming not_a_metric\nw > 10": {"w"},
        "max_over_time(rate(m6[1m])[10m:30s]) + Inf - NaN + 0x1F + 1.5e3": {"m6"},
        'ns:recording:rule{a="b"} + on() group_right m7': {"ns:recording:rule", "m7"},
        "sum by (pod, le) (m8) + sum(m9) without (x)": {"m8", "m9"},
        'm10{__name__=~"other.*"} * ${var} + [[var]]': {"m10"},
    }
    for expr, want in cases.items():
        eq(dq.metric_names(expr), want, expr)


# --- rules files ------------------------------------------------------------------------------------

RULES_SAMPLE = """\
groups:
  - name: g
    rules:
      - alert: Plain
        expr: up{component="worker"} == 0   # trailing comment
        for: 2m
      - alert: Block
        expr: |-
          max by (pod) (a) > 0
          or
          b == 1
        labels:
          severity: x
      - alert: Folded
        expr: >
          sum(rate(c_total[5m]))
            > 1
      - record: job:d:rate5m
        expr: 'rate(d_total{x=''y''}[5m])'
      - alert: Double
        expr: "e > 1"
      - alert: Continued
        expr: f
          + g
"""


@test
def rule_exprs_shapes():
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp, "r.yaml")
        path.write_text(RULES_SAMPLE)
        got = dq.rule_exprs(path)
        eq(got, [("Plain", 'up{component="worker"} == 0'), ("Block", "max by (pod) (a) > 0\nor\nb == 1"),
                 ("Folded", "sum(rate(c_total[5m]))\n  > 1".replace("\n", " ")),
                 ("job:d:rate5m", "rate(d_total{x='y'}[5m])"), ("Double", "e > 1"), ("Continued", "f + g")],
           "exprs")
        eq(dq.names_in_rules(tmp), {"up", "a", "b", "c_total", "d_total", "e", "f", "g"}, "names")


@test
def rule_exprs_agree_with_a_yaml_parser_on_the_chart_rules():
    try:
        import yaml  # not stdlib: checked where PyYAML happens to be installed
    except ImportError:
        return "skipped (no PyYAML)"
    for f in sorted((REPO / "deploy/helm/kvfleet/rules").glob("*.yaml")):
        parsed = yaml.safe_load(f.read_text())
        want = [(r.get("alert") or r.get("record"), r["expr"].strip()) for g in parsed["groups"] for r in g["rules"]]
        eq(dq.rule_exprs(f), want, f.name)
    return None


@test
def chart_rules_threshold_shape():
    # The chart substitutes values.alerts.routerTtftP99Seconds for a trailing `> NUMBER`.
    exprs = dict(dq.rule_exprs(REPO / "deploy/helm/kvfleet/rules/kvfleet-alerts.yaml"))
    import re
    assert re.search(r"> [0-9.]+$", exprs["KvfleetRouterTtftP99High"]), exprs["KvfleetRouterTtftP99High"]
    assert "\n" not in exprs["KvfleetRouterTtftP99High"]


# --- documented names --------------------------------------------------------------------------------

@test
def undocumented_names():
    documented = {"kvfleet_a_seconds", "kvfleet_b_total", "kvfleet_c"}
    eq(dq.undocumented({"kvfleet_a_seconds_bucket", "kvfleet_a_seconds_count", "kvfleet_b_total", "up",
                        "kvfleet_c_bucket", "kvfleet_d", "kvfleet_c"}, documented),
       ["kvfleet_d"], "")
    assert "kvfleet_worker_kv_usage_ratio" in dq.names_in_metrics_doc(REPO / "docs/metrics.md")


# --- dashboards -------------------------------------------------------------------------------------------

DS = {"type": "prometheus", "uid": "${datasource}"}


def _dashboard(panels, worker_query='label_values(up{namespace=~"$namespace", model=~"$model"}, pod)', **extra):
    def var(name, query):
        return {"type": "query", "name": name, "datasource": DS, "multi": True, "includeAll": True, "allValue": ".*",
                "query": {"query": query, "refId": "StandardVariableQuery"}}
    return {"uid": "u", "title": "T", "schemaVersion": 39,
            "templating": {"list": [{"type": "datasource", "name": "datasource", "query": "prometheus"},
                                    var("namespace", "label_values(up, namespace)"),
                                    var("model", 'label_values(up{namespace=~"$namespace"}, model)'),
                                    var("worker", worker_query)]},
            "panels": panels, **extra}


def _panel(title, *exprs, **extra):
    return {"type": "timeseries", "title": title, "datasource": DS, "gridPos": {"h": 8, "w": 8, "x": 0, "y": 0},
            "targets": [{"refId": chr(65 + i), "expr": e, "datasource": DS} for i, e in enumerate(exprs)], **extra}


@test
def load_dashboards_includes_nested_panels():
    with tempfile.TemporaryDirectory() as tmp:
        d = _dashboard([
            {"type": "row", "title": "open", "collapsed": False, "panels": []},
            _panel("top", "a", "b"),
            {"type": "row", "title": "closed", "collapsed": True,
             "panels": [_panel("inside", "c"), _panel("hidden target", "d")]},
        ])
        d["panels"][2]["panels"][1]["targets"][0]["hide"] = True
        Path(tmp, "x.json").write_text(json.dumps(d))
        [got] = dq.load_dashboards(tmp)
        eq([p.title for p in got.panels], ["top", "inside", "hidden target"], "panels")
        eq([t.expr for p in got.panels for t in p.targets], ["a", "b", "c", "d"], "targets")
        eq(got.panels[2].targets[0].hidden, True, "hidden")


@test
def lint_catches_each_rule():
    bad = _dashboard([
        _panel("eq matcher", 'rate(x{pod="$worker"}[$__rate_interval])'),
        _panel("literal range", 'rate(x{pod=~"$worker"}[5m])'),
        _panel("fixed datasource", "x", datasource={"type": "prometheus", "uid": "abc"}),
        _panel("unknown variable", 'x{pod=~"$nope"}'),
    ], id=7)
    with tempfile.TemporaryDirectory() as tmp:
        Path(tmp, "bad.json").write_text(json.dumps(bad))
        problems = dq.lint_dashboards(tmp)
    text = "\n".join(problems)
    for needle in ("has an id", "pod=\"$worker\" uses a variable without =~", "range [5m] is a literal",
                   "'fixed datasource': datasource is not", "$nope"):
        assert needle in text, f"{needle!r} not in:\n{text}"


@test
def shipped_dashboards_follow_the_house_rules():
    problems = dq.lint_dashboards(dq.DEFAULT_DASHBOARDS)
    assert not problems, "\n".join(problems)
    dashboards = dq.load_dashboards(dq.DEFAULT_DASHBOARDS)
    eq(sorted(d.path.name for d in dashboards), ["cachemanager.json", "cluster-overview.json", "worker.json"], "")
    for d in dashboards:
        for p in d.panels:
            assert p.type in ("timeseries", "stat", "bargauge"), (d.path.name, p.title, p.type)
            for t in p.targets:
                if "rate(" in t.expr or "increase(" in t.expr:
                    assert "$__rate_interval" in t.expr or "$__range" in t.expr, t.expr


@test
def check_live_stops_when_prometheus_is_unreachable():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))  # bound, never listening: connections are refused
        url = f"http://127.0.0.1:{s.getsockname()[1]}"
        try:
            dq.check_live(url, dq.DEFAULT_DASHBOARDS, {"namespace": ".*", "model": ".*", "worker": ".*"}, 1)
        except dq.PrometheusUnreachable as e:
            assert "cannot reach" in str(e), e
        else:
            raise AssertionError("no PrometheusUnreachable")


# --- live: a real Prometheus on loopback ----------------------------------------------------------------------

LABELS = {
    "kvfleet_worker_requests_total": [{"finish_reason": r} for r in ("stop", "length", "cancelled", "error")],
    "kvfleet_worker_kv_blocks": [{"state": s} for s in ("used", "cached", "empty")],
    "kvfleet_router_requests_total": [{"method": "Chat", "code": "ok"}, {"method": "Generate", "code": "ok"}],
    "kvfleet_router_routing_decisions_total": [{"policy": "prefix_aware", "reason": r} for r in ("prefix_hit", "cold")],
    "kvfleet_router_workers": [{"state": s} for s in ("routable", "draining", "unreachable")],
    "kvfleet_cachemanager_indexed_blocks": [{"worker_id": "worker-0"}, {"worker_id": "worker-1"}],
    "kvfleet_worker_kv_peer_pulls_total": [{"outcome": o} for o in ("done", "partial", "unavailable")],
    "kvfleet_worker_kv_peer_bytes_total": [{"direction": d} for d in ("pulled", "served")],
    "kvfleet_router_kv_pull_decisions_total": [{"decision": d} for d in ("pull", "recompute")],
}
GAUGES_ENDING_IN_TOTAL = {"kvfleet_worker_kv_blocks_total"}
BUCKETS = ("0.001", "0.01", "0.1", "1", "10", "+Inf")


def _component(name: str) -> str:
    return name.split("_")[1]  # kvfleet_<component>_...


def _families(names: set[str]) -> dict[str, str]:
    """Family name -> type, for every name the queries read (histograms by their parts)."""
    out = {}
    for n in names:
        if n == "up":
            continue
        base = n
        for suffix in ("_bucket", "_sum", "_count"):
            if n.endswith(suffix):
                base, out[n[: -len(suffix)]] = None, "histogram"
        if base is None:
            continue
        out.setdefault(n, "counter" if n.endswith("_total") and n not in GAUGES_ENDING_IN_TOTAL else "gauge")
    return out


def _exposition(families: dict[str, str], component: str, started: float) -> str:
    t = time.time() - started
    lines = []
    for name, kind in sorted(families.items()):
        if _component(name) != component:
            continue
        label_sets = LABELS.get(name, [{}])
        if name.startswith("kvfleet_worker_spec_"):
            label_sets = [{"proposer": "ngram"}]
        lines.append(f"# TYPE {name} {kind}")
        for labels in label_sets:
            inner = ",".join(f'{k}="{v}"' for k, v in labels.items())
            if kind == "histogram":
                # 10 observations a second spread over the buckets: cumulative counts 1, 3, 6, 9, 10, 10.
                for le, share in zip(BUCKETS, (1, 3, 6, 9, 10, 10)):
                    sep = "," if inner else ""
                    lines.append(f'{name}_bucket{{{inner}{sep}le="{le}"}} {share * t:.3f}')
                lines.append(f"{name}_sum{{{inner}}} {2.5 * t:.3f}")
                lines.append(f"{name}_count{{{inner}}} {10 * t:.3f}")
            elif kind == "counter":
                lines.append(f"{name}{{{inner}}} {7 * t:.3f}")
            else:
                value = {"kvfleet_worker_engine_stalled": 0, "kvfleet_worker_kv_usage_ratio": 0.4}.get(name, 3)
                lines.append(f"{name}{{{inner}}} {value}")
    return "\n".join(lines) + "\n"


class _Exporter(http.server.ThreadingHTTPServer):
    daemon_threads = True


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _wait_ready(url: str, proc: subprocess.Popen, timeout_s: float = 30):
    deadline = time.time() + timeout_s
    while time.time() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"prometheus exited with {proc.returncode}")
        try:
            with urllib.request.urlopen(url + "/-/ready", timeout=1) as r:
                if r.status == 200:
                    return
        except OSError:
            pass
        time.sleep(0.2)
    raise RuntimeError("prometheus not ready in time")


def live_checks(prometheus_bin: str) -> list[str]:
    """Starts an exporter and a Prometheus, runs check_live; returns failures."""
    names = dq.names_in_dashboards(dq.DEFAULT_DASHBOARDS) | dq.names_in_rules(dq.DEFAULT_RULES)
    families = _families(names)
    started = time.time()

    class Handler(http.server.BaseHTTPRequestHandler):
        def do_GET(self):  # noqa: N802
            component = self.path.strip("/").split("-")[0]
            body = _exposition(families, component, started).encode()
            self.send_response(200)
            self.send_header("Content-Type", "text/plain; version=0.0.4")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args):
            pass

    exporter = _Exporter(("127.0.0.1", 0), Handler)
    threading.Thread(target=exporter.serve_forever, daemon=True).start()
    target = f"127.0.0.1:{exporter.server_address[1]}"
    tmp = Path(tempfile.mkdtemp(prefix="dashboard_queries_selftest."))
    port = _free_port()
    jobs = []
    for pod, component in (("router", "router"), ("cachemanager", "cachemanager"), ("worker-0", "worker"),
                           ("worker-1", "worker")):
        labels = {"namespace": "local", "pod": pod, "component": component, "model": "smol"}
        jobs.append({"job_name": f"kvfleet-{pod}", "metrics_path": f"/{pod}",
                     "static_configs": [{"targets": [target], "labels": labels}]})
    rules = [str(p) for p in sorted(dq.DEFAULT_RULES.glob("*.yaml"))]
    # JSON is YAML: no YAML writer needed.
    config = {"global": {"scrape_interval": "1s", "evaluation_interval": "1s"}, "rule_files": rules,
              "scrape_configs": jobs}
    (tmp / "prometheus.yml").write_text(json.dumps(config, indent=1))
    url = f"http://127.0.0.1:{port}"
    log = open(tmp / "prometheus.log", "w")
    proc = subprocess.Popen([prometheus_bin, f"--config.file={tmp / 'prometheus.yml'}",
                             f"--storage.tsdb.path={tmp / 'data'}", f"--web.listen-address=127.0.0.1:{port}"],
                            stdout=log, stderr=subprocess.STDOUT)
    failures = []
    try:
        _wait_ready(url, proc)
        time.sleep(9)  # several scrapes: a 4 s rate window needs two samples and an increase
        variables = {"namespace": "local", "model": "smol", "worker": ".*"}
        report = dq.check_live(url, dq.DEFAULT_DASHBOARDS, variables, 1)
        for name, e in report.items():
            print(f"    {name}: {e['panels_checked']} panels checked, {e['targets']} targets, "
                  f"{e['series']} series returned, {e['variables_checked']} variables")
            if e["variables_checked"] != 3:
                failures.append(f"{name}: {e['variables_checked']} variables checked, want namespace, model, worker")
            failures += [f"{name} {f['panel']!r} {f['ref_id']}: {f['reason']}: {f['expr']}" for f in e["failures"]]
            if e["panels_checked"] == 0 or e["series"] < e["targets"]:
                failures.append(f"{name}: fewer series than targets")
        absent = dq.missing_from_scrape(url, names)
        if absent:
            failures.append(f"absent from the scrape: {absent}")
        # The rules loaded into a real Prometheus, every one healthy.
        with urllib.request.urlopen(url + "/api/v1/rules") as r:
            groups = json.load(r)["data"]["groups"]
        loaded = [rule for g in groups for rule in g["rules"]]
        want = sum(len(dq.rule_exprs(f)) for f in rules)
        if len(loaded) != want or any(rule.get("health") not in ("ok", "unknown") for rule in loaded):
            failures.append(f"rules not all loaded and healthy: {[(x['name'], x.get('health')) for x in loaded]}")

        # What check_live reports as failures: no series, no finite value, a bad query, a bad variable.
        with tempfile.TemporaryDirectory() as bad_dir:
            Path(bad_dir, "bad.json").write_text(json.dumps(_dashboard([
                _panel("ok", 'sum(kvfleet_worker_requests_running{namespace=~"$namespace"})'),
                _panel("empty", 'kvfleet_no_such_metric{namespace=~"$namespace"}'),
                _panel("nan", 'sum(kvfleet_worker_requests_running{pod=~"$worker"}) * 0 / 0'),
                _panel("syntax", "sum(("),
                _panel("variable", 'up{pod=~"$unset"}'),
            ], worker_query='label_values(kvfleet_no_such_metric{namespace=~"$namespace"}, pod)')))
            bad = dq.check_live(url, bad_dir, variables, 1)["bad.json"]
            reasons = {f["panel"]: f["reason"] for f in bad["failures"]}
            if set(reasons) != {"empty", "nan", "syntax", "variable", "variable $worker"}:
                failures.append(f"bad dashboard failures: {reasons}")
            elif not (reasons["empty"] == "no series" and "none finite" in reasons["nan"]
                      and "parse error" in reasons["syntax"] and "$unset" in reasons["variable"]
                      and reasons["variable $worker"] == "lists no value"):
                failures.append(f"bad dashboard reasons: {reasons}")
            if bad["panels_checked"] != 5 or bad["targets"] != 5 or bad["variables_checked"] != 3:
                failures.append(f"bad dashboard counts: {bad}")

        # The CLI end to end, against the doc and the live scrape.
        argv = ["--prometheus", url, "--var", "namespace=local", "--var", "model=smol", "--var", "worker=.*",
                "--scrape-interval", "1", "--rules", str(dq.DEFAULT_RULES), "--check-scrape",
                "--metrics-doc", str(dq.DEFAULT_METRICS_DOC)]
        if dq.main(argv) != 0:
            failures.append("the CLI failed")
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        log.close()
        exporter.shutdown()
        exporter.server_close()
        if failures:
            print((tmp / "prometheus.log").read_text()[-3000:])
        shutil.rmtree(tmp, ignore_errors=True)
    return failures


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--prometheus-bin", default=shutil.which("prometheus"))
    args = ap.parse_args()
    failed = 0
    for fn in TESTS:
        try:
            note = fn()
            print(f"PASS {fn.__name__}" + (f" ({note})" if note else ""))
        except Exception:  # noqa: BLE001 - report every test
            failed += 1
            print(f"FAIL {fn.__name__}\n{traceback.format_exc()}")
    if args.prometheus_bin:
        print(f"live: {args.prometheus_bin} on loopback")
        try:
            problems = live_checks(args.prometheus_bin)
        except Exception:  # noqa: BLE001
            problems = [traceback.format_exc()]
        for p in problems:
            print(f"  FAIL {p}")
        print(("FAIL" if problems else "PASS") + " live_check_against_prometheus")
        failed += bool(problems)
    else:
        print("SKIP live_check_against_prometheus (no prometheus binary)")
    print(f"dashboard_queries_selftest: {len(TESTS) + bool(args.prometheus_bin) - failed} passed, {failed} failed")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
