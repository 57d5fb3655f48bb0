#!/usr/bin/env python3
"""Derives the hourly demand series of data/forecast/ from the real traces (run once, by hand).

  bench/forecast/derive_series.py /work/shared/traces data/forecast/trace-demand.csv

The product and the tests read only the CSV this writes (series,timestamp,value), never the traces.
Series (mean over each hour, time-weighted, of what was running):
  dlrm/gpus            GPUs held by DLRM v2025 HN instances (whole GPUs)
  dlrm/cpus            vCPUs requested by all DLRM v2025 instances (HN + CN)
  dlrm/gpus/app_K      GPUs of the K-th largest app by GPU-time (top 8)
  openb/gpus           GPUs held by openb v2023 pods (num_gpu, or gpu_milli/1000 for one GPU)
  openb/gpus/shared    the same, pods asking for a fraction of one GPU only
  openb/cpus           vCPUs requested by openb pods
The traces' clocks are relative; hour 0 of each is put at a nominal Monday, 2026-01-05T00:00:00Z
(the real calendar dates are not published). openb: the last 34 days only (where 8,119 of its
8,152 pods arrive).
"""
import csv, sys, os, datetime
from collections import defaultdict

T0 = datetime.datetime(2026, 1, 5, tzinfo=datetime.timezone.utc)

def add_interval(acc, start, end, amount):
    """Adds amount x (seconds in each hour) / 3600 to acc[hour] over [start, end)."""
    if end <= start or amount == 0:
        return
    h = int(start // 3600)
    while h * 3600 < end:
        lo, hi = max(start, h * 3600), min(end, (h + 1) * 3600)
        if hi > lo:
            acc[h] += amount * (hi - lo) / 3600.0
        h += 1

def dlrm(path):
    rows = list(csv.DictReader(open(path)))
    end_all = max(float(r['deletion_time'] or 0) for r in rows)
    hours = int(end_all // 3600)  # whole hours only
    series = defaultdict(lambda: defaultdict(float))
    app_time = defaultdict(float)
    for r in rows:
        s = float(r['scheduled_time']) if r['scheduled_time'] else 0.0
        e = float(r['deletion_time']) if r['deletion_time'] else end_all
        g = int(r['gpu_request'])
        add_interval(series['dlrm/gpus'], s, e, g)
        add_interval(series['dlrm/cpus'], s, e, float(r['cpu_request']))
        app_time[r['app_name']] += g * (e - s)
    top = sorted(app_time, key=lambda a: -app_time[a])[:8]
    for k, app in enumerate(top):
        for r in rows:
            if r['app_name'] != app or r['gpu_request'] == '0':
                continue
            s = float(r['scheduled_time']) if r['scheduled_time'] else 0.0
            e = float(r['deletion_time']) if r['deletion_time'] else end_all
            add_interval(series['dlrm/gpus/app_%d' % (k + 1)], s, e, 1)
    return {n: [v[h] for h in range(hours)] for n, v in series.items()}

def openb(path):
    rows = list(csv.DictReader(open(path)))
    end_all = max(float(r['deletion_time']) for r in rows)
    hours = int(end_all // 3600)
    first = hours - 34 * 24
    first -= first % 24  # start on a day boundary of the relative clock
    series = defaultdict(lambda: defaultdict(float))
    for r in rows:
        if not r['scheduled_time']:
            continue
        s, e = float(r['scheduled_time']), float(r['deletion_time'])
        n, m = int(r['num_gpu']), int(r['gpu_milli'])
        g = m / 1000.0 if n == 1 else float(n)
        add_interval(series['openb/gpus'], s, e, g)
        if n == 1 and m < 1000:
            add_interval(series['openb/gpus/shared'], s, e, g)
        add_interval(series['openb/cpus'], s, e, int(r['cpu_milli']) / 1000.0)
    return {n: [v[h] for h in range(first, hours)] for n, v in series.items()}

def main():
    traces, out = sys.argv[1], sys.argv[2]
    all_series = {}
    all_series.update(dlrm(os.path.join(traces, 'alibaba-gpu-v2025-dlrm/disaggregated_DLRM_trace.csv')))
    all_series.update(openb(os.path.join(traces, 'alibaba-gpu-2023/csv/openb_pod_list_default.csv')))
    with open(out, 'w') as f:
        f.write('series,timestamp,value\n')
        for name in sorted(all_series):
            for h, v in enumerate(all_series[name]):
                t = (T0 + datetime.timedelta(hours=h)).strftime('%Y-%m-%dT%H:%M:%SZ')
                f.write('%s,%s,%.3f\n' % (name, t, v))
    for name in sorted(all_series):
        v = all_series[name]
        print('%-22s %4d hours, mean %.1f, min %.1f, max %.1f' % (name, len(v), sum(v) / len(v), min(v), max(v)))

main()
