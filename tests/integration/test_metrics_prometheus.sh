#!/bin/sh
# test_metrics_prometheus.sh - the daemon's /metrics against the real thing (Debian's
# prometheus package):
#   - vad starts with metrics_listen on a free localhost port; vactl makes some load;
#   - `promtool check metrics` accepts what /metrics serves;
#   - `promtool check rules` accepts packaging/prometheus/vad-rules.yml, and `promtool test
#     rules` fires its alerts on made-up series as expected (tests/fixtures/vad-rules-test.yml);
#   - packaging/grafana/vad-dashboard.json parses and every vad_* name its queries use is a
#     sample the endpoint serves;
#   - a real prometheus (temporary config and storage, its own free port) scrapes the daemon
#     every second, loads the rules, and its query API says up == 1 and vad_allocs_total > 0.
# Normal mode only: it checks the text, the packaging and the scrape, none of which a
# sanitizer build changes; test_metrics covers the daemon's HTTP and text code under ASan and
# TSan. Run by tests/run-tests with VAD_BUILD_DIR set; prints "N passed, N failed".
set -u

cd "$(dirname "$0")/../.." || exit 1
build=${VAD_BUILD_DIR:?VAD_BUILD_DIR must name the build tree (tests/run-tests sets it)}
mode=${VAD_TEST_MODE:-normal}
if [ "$mode" != normal ]; then
	echo "SKIP: a real Prometheus scrape in $mode mode (normal only: test_metrics covers the"
	echo "      daemon's metrics code under sanitizers)"
	echo "test_metrics_prometheus: 0 passed, 0 failed"
	exit 0
fi
for tool in prometheus promtool python3; do
	if ! command -v $tool >/dev/null 2>&1; then
		echo "FAIL: $tool is missing (scripts/install-deps installs the prometheus package)"
		echo "test_metrics_prometheus: 0 passed, 1 failed"
		exit 1
	fi
done

prom_pid=""
checks_cleanup_more() {
	if [ -n "$prom_pid" ]; then
		kill "$prom_pid" 2>/dev/null
		wait "$prom_pid" 2>/dev/null
	fi
}
# shellcheck source=tests/integration/checks.sh
. tests/integration/checks.sh
checks_begin vad-metrics-prom

# Two TCP ports free a moment ago (the kernel picked them).
ports=$(python3 -c '
import socket
s = [socket.socket() for _ in range(2)]
for x in s: x.bind(("127.0.0.1", 0))
print(" ".join(str(x.getsockname()[1]) for x in s))')
mport=${ports% *}
pport=${ports#* }

# fetch URL: its body on stdout; fails on an error status or no answer within 10 s.
fetch() {
	python3 -c 'import sys, urllib.request
sys.stdout.write(urllib.request.urlopen(sys.argv[1], timeout=10).read().decode())' "$1"
}

# until_true SECONDS COMMAND...: run COMMAND every 0.2 s until it succeeds; fails at the deadline.
until_true() {
	end=$(($(date +%s) + $1))
	shift
	while ! "$@" >"$tmp/last" 2>&1; do
		if [ "$(date +%s)" -ge "$end" ]; then
			cat "$tmp/last"
			return 1
		fi
		sleep 0.2
	done
}

cat >"$tmp/vad.conf" <<CONF
[vad]
socket = $tmp/vad.sock
stats_db = $tmp/stats.db
workers = 2
metrics_listen = 127.0.0.1:$mport

[arena default]
size = 256M
CONF
"$build/vad" -c "$tmp/vad.conf" --foreground >"$tmp/vad.log" 2>&1 &
daemon_pid=$!
vactl() { "$build/vactl" --socket "$tmp/vad.sock" "$@"; }
check "vad starts with metrics_listen = 127.0.0.1:$mport" until_true 30 vactl status

load() {
	for _ in 1 2 3 4 5; do
		vactl alloc 4K 64K 1M >/dev/null || return 1
	done
}
check "vactl makes load (15 allocations)" load

fetch_metrics() { fetch "http://127.0.0.1:$mport/metrics" >"$tmp/metrics"; }
check "GET /metrics answers" fetch_metrics
check "promtool check metrics accepts it" sh -c "promtool check metrics <'$tmp/metrics'"
same_families() {
	vactl metrics >"$tmp/metrics-socket" &&
		grep '^# TYPE' "$tmp/metrics" >"$tmp/a" && grep '^# TYPE' "$tmp/metrics-socket" >"$tmp/b" &&
		diff "$tmp/a" "$tmp/b"
}
check "vactl metrics prints the same families" same_families
check "promtool check rules accepts packaging/prometheus/vad-rules.yml" \
	promtool check rules packaging/prometheus/vad-rules.yml
check "promtool test rules: the alerts fire on made-up series (tests/fixtures/vad-rules-test.yml)" \
	sh -c "cd tests/fixtures && promtool test rules vad-rules-test.yml"

dashboard_names_exist() {
	python3 - "$1" "$2" <<'PY'
import json, re, sys
dash = json.load(open(sys.argv[1]))
served = {line.split("{")[0].split(" ")[0] for line in open(sys.argv[2])
          if line.strip() and not line.startswith("#")}
exprs = []
def walk(o):
    if isinstance(o, dict):
        for k, v in o.items():
            if k in ("expr", "query") and isinstance(v, str):
                exprs.append(v)
            walk(v)
    elif isinstance(o, list):
        for v in o:
            walk(v)
walk(dash)
assert dash.get("panels"), "no panels"
assert len(exprs) >= 10, "only %d queries" % len(exprs)
missing = sorted({n for e in exprs for n in re.findall(r"\bvad_[a-z0-9_]+", e)} - served)
if missing:
    sys.exit("names the endpoint does not serve: " + ", ".join(missing))
print("%d queries, every vad_* name served" % len(exprs))
PY
}
check "the Grafana dashboard parses and its queries name only served metrics" \
	dashboard_names_exist packaging/grafana/vad-dashboard.json "$tmp/metrics"

# ---- a real Prometheus scrapes it ------------------------------------------------------------
mkdir -p "$tmp/prom"
cat >"$tmp/prometheus.yml" <<YML
global:
  scrape_interval: 1s
  evaluation_interval: 1s
rule_files:
  - $PWD/packaging/prometheus/vad-rules.yml
scrape_configs:
  - job_name: vad
    static_configs:
      - targets: ["127.0.0.1:$mport"]
YML
prometheus --config.file="$tmp/prometheus.yml" --storage.tsdb.path="$tmp/prom" \
	--web.listen-address="127.0.0.1:$pport" --log.level=warn >"$tmp/prometheus.log" 2>&1 &
prom_pid=$!
prom_t0=$(date +%s)

# query PROMQL CHECK: the instant query's first value, given to the Python expression CHECK as v.
query() {
	python3 - "http://127.0.0.1:$pport/api/v1/query" "$1" "$2" <<'PY'
import json, sys, urllib.parse, urllib.request
url = sys.argv[1] + "?" + urllib.parse.urlencode({"query": sys.argv[2]})
r = json.load(urllib.request.urlopen(url, timeout=5))
res = r["data"]["result"]
if not res:
    sys.exit("no result yet for " + sys.argv[2])
v = float(res[0]["value"][1])
if not eval(sys.argv[3]):
    sys.exit("%s = %g" % (sys.argv[2], v))
print("%s = %g" % (sys.argv[2], v))
PY
}
check "prometheus scrapes vad: up{job=\"vad\"} == 1" until_true 90 query 'up{job="vad"}' 'v == 1'
check "prometheus has vad_allocs_total > 0 after the load" \
	until_true 60 query 'sum(vad_allocs_total{job="vad"})' 'v >= 15'
echo "prometheus: vad_allocs_total there $(($(date +%s) - prom_t0)) s after its start"
rules_loaded() {
	python3 - "http://127.0.0.1:$pport/api/v1/rules" <<'PY'
import json, sys, urllib.request
r = json.load(urllib.request.urlopen(sys.argv[1], timeout=5))
rules = [x for g in r["data"]["groups"] for x in g["rules"]]
bad = [x["name"] for x in rules if x.get("health") != "ok"]
if len(rules) < 7 or bad:
    sys.exit("%d rules, unhealthy: %s" % (len(rules), bad))
firing = [x["name"] for x in rules if x.get("state") == "firing"]
print("%d rules evaluated, firing: %s" % (len(rules), firing))
if "VadDown" in firing:
    sys.exit("VadDown fires while vad is up")
PY
}
check "prometheus evaluates every rule of vad-rules.yml without error" until_true 30 rules_loaded

kill "$prom_pid" 2>/dev/null
wait "$prom_pid" 2>/dev/null
prom_pid=""
stop_vad() {
	kill -TERM "$daemon_pid" && wait "$daemon_pid"
	rc=$?
	daemon_pid=""
	[ "$rc" -eq 0 ] || { cat "$tmp/vad.log"; return 1; }
}
check "vad stops cleanly (SIGTERM, exit 0)" stop_vad

echo "test_metrics_prometheus: $passed passed, $failed failed"
[ "$failed" -eq 0 ]
