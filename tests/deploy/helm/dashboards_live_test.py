#!/usr/bin/env python3
"""Every dashboard panel shows data from a live cluster.

Starts `kvfleet up --prometheus` (real cachemanager, two real workers and a
router serving the real default model, and Debian's Prometheus scraping each
of them every second with the chart's scrape labels and alert rules), drives
the router with `kvfleet load`, and while the load runs evaluates every
target of every dashboard through Prometheus' HTTP API with Grafana's
variables substituted (dashboard_queries.check_live): each must return at
least one series with a finite value. Then: every metric name the dashboards
and rules use is documented in docs/metrics.md and present in the scrape,
every rule file loaded, and no alert fires on a healthy cluster.

Prints, per dashboard, panels checked and series returned. Exit 0 on success,
1 on a failure, 77 (skipped) when the model or prometheus is missing.

  dashboards_live_test.py --cli build/tools/kvfleet/kvfleet --model models/X.gguf --repo .
"""
import argparse
import json
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import dashboard_queries as dq  # noqa: E402

SCRAPE_INTERVAL_S = 1
# Long enough for a $__rate_interval window (4 scrapes) to hold two samples of
# moving counters, and for the router's histograms to see finished requests.
WARM_UP_S = 12


class Failure(Exception):
    pass


def check(condition, message):
    if not condition:
        raise Failure(message)


def start_cluster(cli, model, log_dir):
    command = [cli, "up", "--model", model, "--workers", "2", "--threads", "1", "--kv-cache-memory", "256MiB",
               "--listen", "127.0.0.1:0", "--http-listen", "127.0.0.1:0", "--cachemanager-listen", "127.0.0.1:0", "--metrics-port", "0",
               "--prometheus", "--prometheus-port", "0", "--log-dir", log_dir,
               # Lower KV tiers, so the tier panels have series to show.
               "--kv-host-memory", "32MiB", "--kv-disk-dir", log_dir + "/kv-disk", "--kv-disk-size", "256MiB"]
    print("$ " + " ".join(command), flush=True)
    up = subprocess.Popen(command, stdout=subprocess.PIPE, text=True)
    prometheus, deadline = None, time.time() + 240
    for line in up.stdout:
        print(line, end="", flush=True)
        if line.startswith("kvfleet up prometheus="):
            prometheus = line.split("=", 1)[1].split()[0]
        if line.startswith("kvfleet up ready router="):
            threading.Thread(target=lambda: [print(l, end="") for l in up.stdout], daemon=True).start()
            check(prometheus, "kvfleet up printed no prometheus= line before its ready line")
            fields = dict(word.split("=", 1) for word in line.split()[3:])
            return up, fields["router"], fields["http"], prometheus
        if time.time() > deadline:
            break
    up.kill()
    raise Failure(f"kvfleet up never became ready (exit {up.wait()}); logs in {log_dir}")


def api(prometheus, path):
    with urllib.request.urlopen(prometheus + path, timeout=10) as r:
        return json.load(r)["data"]


class Load:
    """`kvfleet load` against the router in a loop, and a chat completion on
    its OpenAI-compatible port after each run, until stopped."""

    def __init__(self, cli, router, http):
        self.cli, self.router, self.http, self.stop, self.runs, self.errors = cli, router, http, threading.Event(), 0, []
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()

    def _run(self):
        while not self.stop.is_set():
            # A shared prefix so prefix-cache hits and prefix_aware decisions happen;
            # short outputs so requests keep finishing (the latency histograms move).
            r = subprocess.run([self.cli, "load", "--target", self.router, "--concurrency", "4", "--requests", "8",
                                "--prompt-tokens", "96", "--shared-prefix-tokens", "64", "--max-tokens", "24",
                                "--ignore-eos", "--warmup", "0", "--seed", str(self.runs)],
                               capture_output=True, text=True, timeout=300)
            if r.returncode != 0:
                self.errors.append(r.stderr[-2000:])
            elif self.runs == 0:
                print(r.stdout, end="", flush=True)
            body = json.dumps({"messages": [{"role": "user", "content": "Hi"}], "max_tokens": 4}).encode()
            request = urllib.request.Request(f"http://{self.http}/v1/chat/completions", data=body,
                                             headers={"Content-Type": "application/json"})
            try:
                with urllib.request.urlopen(request, timeout=120) as answer:
                    json.load(answer)
            except (OSError, ValueError) as e:
                self.errors.append(f"HTTP chat completion: {e}")
            self.runs += 1  # after the error, so a reader that sees the run also sees its error

    def finish(self):
        self.stop.set()
        self.thread.join(timeout=320)


def run(args):
    repo = Path(args.repo).resolve()
    chart = repo / "deploy/helm/kvfleet"
    log_dir = tempfile.mkdtemp(prefix="kvfleet-dashboards-")
    up, router, http, prometheus = start_cluster(args.cli, args.model, log_dir)
    load = None
    try:
        deadline, pods = time.time() + 30, []
        while time.time() < deadline:  # discovery of static targets is asynchronous
            targets = api(prometheus, "/api/v1/targets")["activeTargets"]
            pods = sorted(t["labels"]["pod"] for t in targets if t["health"] == "up")
            if len(pods) == 4:
                break
            time.sleep(0.5)
        print(f"prometheus {prometheus} scrapes {pods}")
        check(pods == ["cachemanager", "router", "worker-0", "worker-1"], f"scrape targets {pods}")
        rule_files = {g["file"] for g in api(prometheus, "/api/v1/rules")["groups"]}
        chart_rules = {str(p.resolve()) for p in (chart / "rules").glob("*.yaml")}
        check(chart_rules and chart_rules <= rule_files, f"rules loaded {rule_files}, chart has {chart_rules}")

        model_id = subprocess.run([args.cli, "models", "--router", router], capture_output=True, text=True,
                                  check=True).stdout.splitlines()[1].split()[0]
        load = Load(args.cli, router, http)
        started = time.time()
        while load.runs == 0 and time.time() < started + 120:
            time.sleep(0.5)
        check(load.runs > 0, "kvfleet load finished no run within 120 s")
        check(not load.errors, f"kvfleet load failed: {load.errors[:1]}")
        time.sleep(max(0.0, WARM_UP_S - (time.time() - started)))

        variables = {"namespace": "local", "model": model_id, "worker": ".*", "datasource": "prometheus"}
        report = dq.check_live(prometheus, chart / "dashboards", variables, SCRAPE_INTERVAL_S)
        failures = 0
        for name, e in report.items():
            print(f"{name} ({e['title']}): {e['panels_checked']} panels checked, {e['targets']} targets, "
                  f"{e['series']} series returned ({e['finite_series']} finite), {len(e['failures'])} failures")
            for r in e["panel_results"]:
                print(f"  {r['panel']}: {r['targets']} target(s), {r['series']} series ({r['finite_series']} finite)")
            for f in e["failures"]:
                print(f"  FAIL {f['panel']!r} {f['ref_id']}: {f['reason']}\n       {f['expr']}")
            failures += len(e["failures"])
        check(len(report) >= 3, f"{len(report)} dashboards found in {chart / 'dashboards'}")
        check(failures == 0, f"{failures} dashboard targets returned no finite series")

        names = dq.names_in_dashboards(chart / "dashboards") | dq.names_in_rules(chart / "rules")
        undocumented = dq.undocumented(names, dq.names_in_metrics_doc(repo / "docs/metrics.md"))
        check(not undocumented, f"not in docs/metrics.md: {undocumented}")
        absent = dq.missing_from_scrape(prometheus, names)
        check(not absent, f"not in the live scrape: {absent}")
        print(f"{len(names)} metric names used by dashboards and rules: all documented, all scraped")

        firing = [a["labels"]["alertname"] for a in api(prometheus, "/api/v1/alerts")["alerts"]
                  if a["state"] == "firing"]
        check(not firing, f"alerts firing on a healthy cluster: {firing}")
        load.finish()
        check(not load.errors, f"kvfleet load failed {len(load.errors)} time(s): {load.errors[:1]}")
        print(f"kvfleet load: {load.runs} runs against the router, no errors")
    finally:
        if load is not None:
            load.stop.set()
        up.send_signal(signal.SIGINT)
        try:
            up.wait(timeout=90)
        except subprocess.TimeoutExpired:
            up.kill()
    shutil.rmtree(log_dir, ignore_errors=True)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--cli", required=True)
    ap.add_argument("--model", required=True)
    ap.add_argument("--repo", required=True)
    args = ap.parse_args()
    if not Path(args.model).is_file():
        print(f"SKIP: no model at {args.model} (scripts/fetch_model.sh fetches it)")
        return 77
    if shutil.which("prometheus") is None:
        print("SKIP: no prometheus on PATH (scripts/setup.sh installs Debian's)")
        return 77
    try:
        run(args)
    except (Failure, dq.PrometheusError, subprocess.CalledProcessError) as e:
        print(f"FAIL: {e}")
        return 1
    print("dashboards_live_test: OK")
    return 0


if __name__ == "__main__":
    sys.exit(main())
