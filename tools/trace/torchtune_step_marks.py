#!/usr/bin/python3
"""Where a torchtune optimizer_in_bwd trace peaks: marks around every per-parameter AdamW step.

Runs one case of torchtune_cases.py with a mark before and after each optimizer step (one
optimizer per parameter, stepped in the AccumulateGrad hook), then prints the live bytes at each
mark of step 2, the interval holding the step's peak and the allocation events just before it
(each event: position, bytes allocated or freed, live bytes over the step's start). The wide
records' peak (docs/estimators.md, torchtune section) was found this way: inside the chunked
output projection's backward, before the first step.
Run from the repository root:
  /usr/bin/python3 tools/trace/torchtune_step_marks.py cpu-torchtune-full-llama-wide-b1-s128-chunked-ce-optim-in-bwd
"""
import sys

import torch

import torchtune_cases as TC
import tracer

CURRENT = {}
_enter = tracer.Tracker.__enter__


def _tracking_enter(self):
    CURRENT["tracker"] = self
    return _enter(self)


class MarkedAdamW(torch.optim.AdamW):
    steps = 0

    def step(self, *args, **kwargs):
        tr = CURRENT.get("tracker")
        MarkedAdamW.steps += 1
        name = f"{MarkedAdamW.steps}:{tuple(self.param_groups[0]['params'][0].shape)}"
        if tr:
            tr.mark("pre" + name)
        out = super().step(*args, **kwargs)
        if tr:
            tr.mark("post" + name)
        return out


def main(case_id, events_before=40):
    tracer.Tracker.__enter__ = _tracking_enter
    torch.optim.AdamW = MarkedAdamW  # torchtune_cases builds its optimizers through torch.optim
    case = [c for c in TC.cases() if c["id"] == case_id][0]
    record = TC.run_case(case)
    tr = CURRENT["tracker"]
    start, end = tr.pos["s2_start"], tr.pos["s2_end"]
    base = tr.cum[start]
    peak = max(range(start, end + 1), key=lambda i: tr.cum[i])
    print(f"{case_id}: measured {record['measured_bytes']}, step start {base}, peak +{tr.cum[peak] - base} at event {peak}")
    marks = sorted((p, n) for n, p in tr.pos.items() if start <= p <= end)
    for (p, n), nxt in zip(marks, marks[1:] + [(end + 1, "")]):
        print(f"{p:7d} {n:32s} +{tr.cum[p] - base}")
        if p < peak <= nxt[0]:
            print(f"        peak between {n} and {nxt[1]}")
    for i in range(max(start, peak - events_before), min(end, peak + 4) + 1):
        print(f"  event {i}: {tr.deltas[i]:+d} -> +{tr.cum[i] - base}")


if __name__ == "__main__":
    main(sys.argv[1])
