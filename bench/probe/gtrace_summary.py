#!/usr/bin/env python3
"""gtrace_summary.py — summarise the FCO_GEMV_TRACE build's output (`make gemv-trace`; the print
kernel's lines "gtrace block B sm S pair P t0 T: view .. init .. issue0 .. ..."), one file a
configuration (plain or .xz): python3 bench/probe/gtrace_summary.py out/gtrace-*.txt

Per block the median over calls of each stage (ns from the block's own start; "start" = the
block's start after the earliest block of that call), then per role (a pair launch: even blocks
own a pair, odd ones help; else every block is an owner) the 10th / 50th / 90th percentile over
blocks. Then how often a pair's owner sees its first data (data0, from the call's first start)
more than 1 µs after its helper, and the blocks whose first data came last. Stages a path does
not record (a negative or absurd value) are left out.
"""
import lzma
import re
import statistics
import sys

KEYS = ['start', 'view', 'ctx', 'path', 'entry', 'pentry', 'init', 'issue0', 'data0', 'lastmma',
        'out', 'handoff', 'finish', 'end']
LINE = re.compile(r'gtrace block (\d+) sm (\d+) pair (\d+) t0 (\d+): (.*)')


def pct(v, q):
    v = sorted(v)
    return v[min(len(v) - 1, int(q * (len(v) - 1) + 0.5))]


def calls_of(path):
    calls, cur, pair = [], {}, 0
    opener = lzma.open if path.endswith('.xz') else open
    f = opener(path, 'rt', errors='replace')
    for line in f:
        m = LINE.match(line)
        if not m:
            continue
        b, sm, pair, t0 = int(m.group(1)), int(m.group(2)), int(m.group(3)), int(m.group(4))
        if b == 0 and cur:
            calls.append(cur)
            cur = {}
        rec = {k: int(v) for k, v in re.findall(r'(\w+) (-?\d+)', m.group(5))}
        rec = {k: v for k, v in rec.items() if 0 <= v < 10**8}
        rec['t0'], rec['sm'] = t0, sm
        cur[b] = rec
    if cur:
        calls.append(cur)
    for c in calls:
        first = min(r['t0'] for r in c.values())
        for r in c.values():
            r['start'] = r['t0'] - first
    return calls, pair


def summarise(path):
    calls, pair = calls_of(path)
    name = path.rsplit('/', 1)[-1]
    if not calls:
        print('%s: no trace lines' % name)
        return
    blocks = sorted(set().union(*[set(c) for c in calls]))
    med = {}
    for b in blocks:
        recs = [c[b] for c in calls if b in c]
        med[b] = {k: statistics.median(r[k] for r in recs) for k in KEYS if all(k in r for r in recs)}
        med[b]['sm'] = statistics.mode(r['sm'] for r in recs)
    role = {b: ('helper' if pair and b % 2 else 'owner') for b in blocks}
    print('== %s: %d calls, %d blocks, %s' % (name, len(calls), len(blocks),
                                             'pairs' if pair else 'no pairs'))
    print('%-7s %-6s' % ('role', 'pct') + ''.join('%9s' % k for k in KEYS))
    for ro in ('owner', 'helper'):
        bs = [b for b in blocks if role[b] == ro]
        if not bs:
            continue
        for q in (0.1, 0.5, 0.9):
            row = []
            for k in KEYS:
                v = [med[b][k] for b in bs if k in med[b]]
                row.append('%9d' % pct(v, q) if v else '%9s' % '-')
            print('%-7s p%-5d' % (ro, int(q * 100)) + ''.join(row))
    if pair:
        late = total = 0
        lag = []
        for c in calls:
            for b in c:
                if b % 2 == 0 and b + 1 in c and 'data0' in c[b] and 'data0' in c[b + 1]:
                    d = (c[b]['data0'] + c[b]['start']) - (c[b + 1]['data0'] + c[b + 1]['start'])
                    lag.append(d)
                    total += 1
                    late += d > 1000
        if total:
            print('owner data0 - helper data0 (same call, from the call\'s first start): p10 %d p50 %d '
                  'p90 %d ns; > 1 us in %d of %d pair-calls' % (pct(lag, 0.1), pct(lag, 0.5),
                                                            pct(lag, 0.9), late, total))
    last = sorted((b for b in blocks if 'data0' in med[b]),
                  key=lambda b: -(med[b]['data0'] + med[b]['start']))[:8]
    print('latest first data (block role sm start data0 end): ' + '; '.join(
        '%d %s sm%d %d %d %d' % (b, role[b][0], med[b]['sm'], med[b]['start'], med[b]['data0'],
                                 med[b].get('end', -1)) for b in last))


if __name__ == '__main__':
    for p in sys.argv[1:]:
        summarise(p)
