# Folded stacks (root first, "frames count" per line) -> how many samples in the comparator's place are named
# fxprofCompare (bench/jit.sh). Under V8's sort builtins, the first JIT frame (a V8 code name, or a raw
# address: unnamed; not V8's builtins, which perf names "Builtin:X" from the jitdump) is the function sort
# called, which can only be the comparator.
import collections
import re
import sys

c = collections.Counter()
for line in open(sys.argv[1], errors='replace'):
    stack, n = line.rstrip('\n').rsplit(' ', 1)
    fr = stack.split(';')
    idx = [i for i, f in enumerate(fr) if 'ArrayTimSort' in f or 'ArrayPrototypeSort' in f]
    if not idx:
        continue
    after = fr[idx[-1] + 1:]
    first = next((f for f in after if re.match(
        r'(JS|Stub|RegExp|Function|LazyCompile|Script|Eval):|0x', f)), None)
    if first:
        c[first[:60]] += int(n)
tot = sum(c.values())
ok = sum(v for k, v in c.items() if 'fxprofCompare' in k)
wrong = ', '.join([f'{k} {v}' for k, v in c.most_common() if 'fxprofCompare' not in k][:3])
print(f"{ok}/{tot} ({100 * ok / max(tot, 1):.1f}%)" + (f"; others: {wrong}" if wrong else ''))
