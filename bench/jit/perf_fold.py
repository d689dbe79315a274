# `perf script -F comm,ip,sym` of a -g recording -> folded stacks, root first (bench/jit.sh).
import sys, collections
c = collections.Counter(); cur = []
for line in open(sys.argv[1], errors='replace'):
    line = line.rstrip('\n')
    if not line.strip():
        if cur: c[';'.join(reversed(cur))] += 1
        cur = []; continue
    if not line.startswith((' ', '\t')): cur = []; continue
    parts = line.strip().split(' ', 1)
    sym = parts[1] if len(parts) > 1 else parts[0]
    if sym == '[unknown]': sym = parts[0]
    cur.append(sym)
if cur: c[';'.join(reversed(cur))] += 1
for k, v in c.items(): print(k, v)
