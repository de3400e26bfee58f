"""Dump memory events (>= thr bytes) with innermost op, between two marks.  args as meas.py + phase + thr"""
import sys
from meas import main
a = sys.argv[1:]
ph, thr = a[8], int(a[9]) if len(a) > 9 else 100000
r = main(a[0], int(a[1]), int(a[2]), int(a[3]), a[4], a[5], a[6], int(a[7]), verbose=False)
tr = r["tr"]; st = int(a[7])
marks = {"fwd": (f"s{st}_start", f"s{st}_fwd"), "bwd": (f"s{st}_fwd", f"s{st}_bwd"), "opt": (f"s{st}_bwd", f"s{st}_opt")}[ph]
i0, i1 = tr.pos[marks[0]], tr.pos[marks[1]]
s0 = tr.live(f"s{st}_start")
pk = max(tr.cum[i0:i1 + 1])
for k in range(i0 + 1, i1 + 1):
    if abs(tr.deltas[k]) >= thr or tr.cum[k] == pk:
        ops = tr.ops_at(k)
        print(f"{tr.cum[k]-s0:>13} {tr.deltas[k]:>+12} {'PEAK' if tr.cum[k]==pk else '    '} {' < '.join(o.replace('autograd::engine::evaluate_function: ','EF:') for o in ops[:3])}")
