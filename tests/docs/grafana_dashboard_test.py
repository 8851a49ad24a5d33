#!/usr/bin/env python3
"""deploy/grafana/missile-dashboard.json is valid JSON, a Grafana dashboard with panels and
queries, and every metric its queries use is in the metrics table of docs/operations.md
(histogram series by their family name)."""
import json
import os
import re
import sys
import unittest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
DASHBOARD = os.path.join(ROOT, "deploy", "grafana", "missile-dashboard.json")
OPERATIONS = os.path.join(ROOT, "docs", "operations.md")


def documented_metrics():
    """The first column of the table under '## Metrics' in docs/operations.md."""
    metrics, inside = set(), False
    with open(OPERATIONS, encoding="utf-8") as f:
        for line in f:
            if line.startswith("## "):
                inside = line.strip() == "## Metrics"
                continue
            m = re.match(r"^\| `(missile_[a-z0-9_]+)` \|", line)
            if inside and m:
                metrics.add(m.group(1))
    return metrics


def queries(node):
    if isinstance(node, dict):
        for key, value in node.items():
            if key in ("expr", "query", "definition") and isinstance(value, str):
                yield value
            else:
                yield from queries(value)
    elif isinstance(node, list):
        for item in node:
            yield from queries(item)


def family(series):
    for suffix in ("_bucket", "_sum", "_count"):
        if series.endswith(suffix):
            return series[: -len(suffix)]
    return series


class GrafanaDashboardTest(unittest.TestCase):
    def test_dashboard_uses_only_documented_metrics(self):
        with open(DASHBOARD, encoding="utf-8") as f:
            dashboard = json.load(f)  # raises on invalid JSON
        self.assertTrue(dashboard.get("title"))
        self.assertTrue(dashboard.get("panels"))
        documented = documented_metrics()
        self.assertGreaterEqual(len(documented), 15, "the metrics table was not found")
        used = set()
        for q in queries(dashboard):
            used |= {family(s) for s in re.findall(r"\bmissile_[a-z0-9_]+", q)}
        self.assertTrue(used, "no query uses a missile_ metric")
        self.assertEqual(sorted(used - documented), [], "used but not in docs/operations.md")
        for panel in dashboard["panels"]:
            self.assertTrue(panel.get("targets"), panel.get("title"))


if __name__ == "__main__":
    sys.exit(unittest.main())
