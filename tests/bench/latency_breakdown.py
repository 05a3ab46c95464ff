#!/usr/bin/env python3
"""Where a benchmark phase's latency went: p50/p99 of Prometheus histograms between two /metrics snapshots.

Used by tests/bench/reconciler.sh around its latency run, to tell the manager's own time from the apiserver's:
the apiserver's request durations (by verb and resource), and the manager's reconcile durations. Quantiles are
read from the bucket counts as Prometheus' histogram_quantile does (linear within a bucket).

Usage: latency_breakdown.py BEFORE AFTER METRIC [LABEL=REGEX ...] [--by LABEL,LABEL]
"""
import re
import sys
from collections import defaultdict

SAMPLE = re.compile(r'^([a-zA-Z_:][a-zA-Z0-9_:]*)\{(.*)\} ([0-9.eE+-]+|NaN|\+Inf)$')
LABEL = re.compile(r'([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\]|\\.)*)"')


def buckets(path, metric, filters, by):
    """{group: {le: count}} for METRIC_bucket lines matching every filter."""
    groups = defaultdict(lambda: defaultdict(float))
    for line in open(path):
        match = SAMPLE.match(line.strip())
        if not match or match.group(1) != metric + "_bucket":
            continue
        labels = dict(LABEL.findall(match.group(2)))
        if not all(re.fullmatch(pattern, labels.get(name, "")) for name, pattern in filters):
            continue
        group = tuple(labels.get(name, "") for name in by)
        le = float("inf") if labels["le"] == "+Inf" else float(labels["le"])
        groups[group][le] += float(match.group(3))
    return groups


def quantile(q, counts):
    """histogram_quantile over cumulative (le, count) pairs."""
    ordered = sorted(counts.items())
    total = ordered[-1][1] if ordered else 0
    if total <= 0:
        return float("nan")
    rank, lower, below = q * total, 0.0, 0.0
    for le, cumulative in ordered:
        if cumulative >= rank:
            if le == float("inf"):
                return lower
            inside = cumulative - below
            return lower + (le - lower) * ((rank - below) / inside if inside else 1.0)
        lower, below = le, cumulative
    return lower


def main():
    args = sys.argv[1:]
    by = []
    if "--by" in args:
        at = args.index("--by")
        by = args[at + 1].split(",")
        del args[at:at + 2]
    before, after, metric = args[:3]
    filters = [tuple(f.split("=", 1)) for f in args[3:]]
    old, new = buckets(before, metric, filters, by), buckets(after, metric, filters, by)
    for group in sorted(new):
        delta = {le: count - old.get(group, {}).get(le, 0.0) for le, count in new[group].items()}
        total = delta.get(float("inf"), 0)
        if total <= 0:
            continue
        name = " ".join(f"{k}={v}" for k, v in zip(by, group)) or metric
        print(f"  {name}: {total:.0f}, p50 {1000 * quantile(0.5, delta):.0f} ms, p99 {1000 * quantile(0.99, delta):.0f} ms")


if __name__ == "__main__":
    main()
