#!/usr/bin/python3
"""Where a litgpt FSDP1 trace peaks in backward: marks around every unit's backward hooks.

Runs one case of litgpt_fsdp1_cases.py with a mark before and after each unit's pre-backward hook
(its unshard and the BACKWARD_PRE prefetch of the block below) and its post-backward hook (reshard and
reduce-scatter), then prints the live bytes at each mark of step 2's backward, the peak between two
marks and the operators running at the step's peak. The step-peak records' two missing rules
(docs/multi-gpu.md, litgpt's FSDPStrategy) were found this way: the 8-layer record peaks in the top
block's backward, one bf16 block input above the walk; the 4-layer one in block 1's, beside block 0
prefetched.
Run from the repository root:
  /usr/bin/python3 tools/trace/fsdp1_backward_marks.py cpu-fsdp1-litgpt-full-llama-v1k-l8-n4-b4-s256
"""
import sys

import litgpt_fsdp1_cases as F1
import tracer

CURRENT = {}
NAMES = {}  # id(unit) -> its name
_enter = tracer.Tracker.__enter__
_read = tracer.Tracker.read
_pre_backward = F1._PreBackward.backward
_post_backward = F1.FlatUnit.post_backward
_shard = F1.ShardedGPT.shard


def _tracking_enter(self):
    CURRENT["tracker"] = self
    return _enter(self)


def _reading_ops(self, results):  # the operators' time spans, besides the allocation events
    _read(self, results)
    self.ops = [(e.start_us(), e.start_us() + e.duration_us(), e.name()) for e in results.events()
                if e.name() != "[memory]"]


def _mark(name):
    tr = CURRENT.get("tracker")
    if tr:
        tr.mark(name)


def _marked_pre_backward(ctx, g):
    name = NAMES.get(id(ctx.unit), "?")
    _mark(f"pre-backward {name}")
    out = _pre_backward(ctx, g)
    _mark(f"gathered {name}")
    return out


def _marked_post_backward(self):
    name = NAMES.get(id(self), "?")
    _mark(f"post-backward {name}")
    _post_backward(self)
    _mark(f"reduced {name}")


def _naming_shard(self, n):
    _shard(self, n)
    NAMES.update({id(u): f"block {i}" for i, u in enumerate(self.units)})
    NAMES[id(self.root)] = "root"


def main(case_id):
    tracer.Tracker.__enter__ = _tracking_enter
    tracer.Tracker.read = _reading_ops
    F1._PreBackward.backward = staticmethod(_marked_pre_backward)
    F1.FlatUnit.post_backward = _marked_post_backward
    F1.ShardedGPT.shard = _naming_shard
    case = [c for c in F1.cases() if c["id"] == case_id][0]
    record = F1.run_case(case)
    tr = CURRENT["tracker"]
    start, end = tr.pos["s2_fwd"], tr.pos["s2_bwd"]
    peak = max(range(start, end + 1), key=lambda i: tr.cum[i])
    print(f"{case_id}: measured {record['measured_bytes']}, step 2's backward peak {tr.cum[peak]} at event {peak}")
    marks = sorted((p, n) for n, p in tr.pos.items() if start <= p <= end)
    for (p, n), (q, _) in zip(marks, marks[1:] + [(end, "")]):
        print(f"{p:7d} {n:22s} live {tr.cum[p]:>12,}   peak until the next mark {max(tr.cum[p:q + 1]):>12,}")
    at = tr.at_us[peak]
    running = sorted((e - s, n) for s, e, n in tr.ops if s <= at <= e)
    print("running at the peak:", ", ".join(n for _, n in running[:3]))


if __name__ == "__main__":
    main(sys.argv[1])
