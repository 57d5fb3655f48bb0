#!/usr/bin/env python3
"""Hourly series from the repository's NAB subset (data/nab/data), a second development set for
the forecaster: the real series' 5-minute rows averaged per hour (an hour with no row repeats the
hour before). Only series of at least 4 weeks are written (the backtest holds 2 weeks back).

  bench/forecast/nab_hourly.py > /tmp/nab-hourly.csv
  tessera forecast --backtest --input /tmp/nab-hourly.csv
"""
import collections, csv, datetime, glob, os, sys

root = os.path.join(os.path.dirname(os.path.abspath(__file__)), '..', '..', 'data', 'nab', 'data')
out = sys.stdout
out.write('series,timestamp,value\n')
for folder in ('realTweets', 'realTraffic', 'realAdExchange'):
    for path in sorted(glob.glob(os.path.join(root, folder, '*.csv'))):
        total, count = collections.defaultdict(float), collections.Counter()
        for r in csv.DictReader(open(path)):
            t = datetime.datetime.strptime(r['timestamp'], '%Y-%m-%d %H:%M:%S').replace(minute=0, second=0)
            total[t] += float(r['value'])
            count[t] += 1
        hours = sorted(total)
        t, prev, rows = hours[0], None, []
        while t <= hours[-1]:
            prev = total[t] / count[t] if t in total else prev
            rows.append((t, prev))
            t += datetime.timedelta(hours=1)
        if len(rows) < 4 * 168:
            continue
        name = os.path.basename(path)[:-4]
        for t, v in rows:
            out.write('%s,%s,%.4f\n' % (name, t.strftime('%Y-%m-%dT%H:00:00Z'), v))
