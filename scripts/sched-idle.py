#!/usr/bin/env python3
"""Where a box's idle CPU time goes during a load run, from `perf sched timehist -w`.

    perf sched record -a -o run.sched -- sleep 3      # mid-run
    perf sched timehist -i run.sched -w > run.th
    python3 scripts/sched-idle.py run.th

Prints each CPU's idle time and what woke it, the time both CPUs were idle at once, the
idle time of one CPU while another had a runnable thread waiting (from the threads'
scheduling delays), and run time and scheduling delay per thread name and CPU. Session 77
found with it that both statement workers ran on one CPU while the other idled.
"""
import bisect
import collections
import re
import sys

LINE = re.compile(r'\s*([\d.]+) \[(\d+)\]\s+(.*)$')


def name(task):
    return re.sub(r'\[.*', '', task)


def main(path):
    idle = collections.defaultdict(list)      # cpu -> [(start, end, what woke it)]
    waits = collections.defaultdict(list)     # cpu -> [(start, end, thread)] runnable, not running
    woke_from_idle = {}
    run = collections.Counter()
    delay = collections.Counter()
    for line in open(path):
        m = LINE.match(line)
        if not m:
            continue
        t, cpu, rest = float(m.group(1)), int(m.group(2)), m.group(3)
        if 'awakened:' in rest:
            waker, wakee = (x.strip() for x in rest.split('awakened:', 1))
            if waker.startswith('swapper') or waker.startswith('<idle>'):
                woke_from_idle[cpu] = name(wakee)
            continue
        f = rest.split()
        if len(f) < 4:
            continue
        try:
            sched_delay, ran = float(f[-2]) / 1e3, float(f[-1]) / 1e3
        except ValueError:
            continue
        run[(name(f[0]), cpu)] += ran
        delay[(name(f[0]), cpu)] += sched_delay
        if f[0] == '<idle>':
            # Woken from another CPU when no wake-up was seen on this one.
            idle[cpu].append((t - ran, t, woke_from_idle.pop(cpu, 'woken remotely')))
        elif sched_delay > 0:
            waits[cpu].append((t - ran - sched_delay, t - ran, name(f[0])))
    cpus = sorted(set(idle) | set(waits))
    causes = collections.Counter()
    for c in cpus:
        for s, e, why in idle[c]:
            causes[why] += e - s
    print('idle CPU time %.3f s; ended by:' % sum(causes.values()))
    for why, v in causes.most_common(8):
        print('  %-24s %.3f s' % (why, v))
    if len(cpus) == 2:
        a, b = sorted(idle[cpus[0]]), sorted(idle[cpus[1]])
        i = j = 0
        both = 0.0
        while i < len(a) and j < len(b):
            both += max(0.0, min(a[i][1], b[j][1]) - max(a[i][0], b[j][0]))
            if a[i][1] < b[j][1]:
                i += 1
            else:
                j += 1
        print('both CPUs idle at once %.3f s' % both)
    for x in cpus:
        for y in cpus:
            if x == y:
                continue
            w = sorted(waits[y])
            starts = [v[0] for v in w]
            total = 0.0
            who = collections.Counter()
            for s, e, _ in idle[x]:
                spans = []
                for ws, we, n in w[bisect.bisect_left(starts, s - 0.05):]:
                    if ws > e:
                        break
                    lo, hi = max(s, ws), min(e, we)
                    if hi > lo:
                        spans.append((lo, hi))
                        who[n] += hi - lo
                end = s
                for lo, hi in sorted(spans):     # their union
                    total += max(0.0, hi - max(lo, end))
                    end = max(end, hi)
            top = ', '.join('%s %.3f' % kv for kv in who.most_common(3))
            print('CPU %d idle while CPU %d had a thread waiting: %.3f s (%s)' % (x, y, total, top))
    print('run time and scheduling delay, ms:')
    for (n, c), v in sorted(run.items(), key=lambda kv: -kv[1])[:12]:
        print('  %-22s CPU %d  run %8.1f  delay %8.1f' % (n, c, 1e3 * v, 1e3 * delay[(n, c)]))


if __name__ == '__main__':
    main(sys.argv[1])
