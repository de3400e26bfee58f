#!/usr/bin/env python3
"""Lines up a recorded caching-allocator history with the replay's own event stream.

A history is one of docs/data/gpu_allocator_history/*.json.gz (tools/gpu-measure/measure_gpu.py
--history: events [action, address, size, stream] in order, some with the innermost Python frames as
a fifth column). The replay's stream of the same run
comes from `memscale-allocator-check --events CASE FILES...` (lines "enter STEP MOMENT",
"alloc ID SIZE", "free ID").

  history_compare.py HISTORY.json.gz                  large allocations of the history
  history_compare.py HISTORY.json.gz --replay EVENTS  ... and of the replay, side by side
  options: --min-mib N (what counts as large, default 100), --steps 1,2 (steps to print),
           --frames (the recorded allocation's innermost Python frame)

Both streams are played through the same best-fit model of the allocator (allocator_model
below: the rules of include/memscale/allocator/caching_allocator.hpp, default settings, one
stream), so the segment a tensor lands in is comparable. The history's own placement is also
printed (its real segment), and the model's reserved peak over the history's requests is
checked against the measured one: equal means the rules are right and any difference of the
replay lies in its event order or sizes.

Steps of the history are found from the live bytes: each step's forward and backward is one
run of events above half the peak; a step ends where live bytes are lowest between two runs
(after zero_grad). Everything before the first run's low point counts as step 1 with setup.
"""
import argparse
import bisect
import difflib
import gzip
import json
import sys

MiB = 1 << 20


def round_size(n):
    return 512 if n < 512 else (n + 511) // 512 * 512


def segment_size(n):
    if n <= MiB:
        return 2 * MiB
    if n < 10 * MiB:
        return 20 * MiB
    return (n + 2 * MiB - 1) // (2 * MiB) * (2 * MiB)


class Block:
    __slots__ = ("addr", "size", "allocated", "prev", "next", "pool", "seg")

    def __init__(self, addr, size, pool, seg):
        self.addr, self.size, self.pool, self.seg = addr, size, pool, seg
        self.allocated = False
        self.prev = self.next = None


class allocator_model:
    """Best fit per pool by (size, address); split when the rest is large enough; merge on free.
    Each new segment lies below the ones before it (ties go to the newer segment), as CUDA hands
    them out and as in the C++ model: with that order the rules reproduce every history's reserved
    peak to the byte."""

    def __init__(self):
        self.free = {"small": [], "large": []}  # sorted (size, address)
        self.at = {}  # address -> free Block
        self.owner = {}  # tensor -> Block
        self.segments = []  # base address per segment, in creation order
        self.floor = 1 << 62  # each new segment's base, below the previous one
        self.reserved = self.peak = 0

    def alloc(self, tensor, size):
        r = round_size(size)
        pool = "small" if r <= MiB else "large"
        fl = self.free[pool]
        i = bisect.bisect_left(fl, (r, -1))
        if i < len(fl):
            _, a = fl.pop(i)
            b = self.at.pop(a)
        else:
            n = segment_size(r)
            self.floor -= n
            b = Block(self.floor, n, pool, len(self.segments))
            self.segments.append(self.floor)
            self.reserved += n
            self.peak = max(self.peak, self.reserved)
        rest = b.size - r
        if (pool == "small" and rest >= 512) or (pool == "large" and rest > MiB):
            tail = Block(b.addr + r, rest, pool, b.seg)
            tail.prev, tail.next = b, b.next
            if b.next:
                b.next.prev = tail
            b.next, b.size = tail, r
            self._insert(tail)
        b.allocated = True
        self.owner[tensor] = b
        return b

    def release(self, tensor):
        b = self.owner.pop(tensor)
        b.allocated = False
        for n in (b.prev, b.next):
            if n is None or n.allocated:
                continue
            fl = self.free[n.pool]
            fl.pop(bisect.bisect_left(fl, (n.size, n.addr)))
            del self.at[n.addr]
            if n is b.prev:
                b.addr, b.prev = n.addr, n.prev
                if n.prev:
                    n.prev.next = b
            else:
                b.next = n.next
                if n.next:
                    n.next.prev = b
            b.size += n.size
        self._insert(b)

    def _insert(self, b):
        self.at[b.addr] = b
        bisect.insort(self.free[b.pool], (b.size, b.addr))

    def where(self, b):
        return b.seg, (b.addr - self.segments[b.seg]) / MiB


def load_history(path):
    with gzip.open(path, "rt") as f:
        return json.load(f)


def history_rows(h):
    """(step, size, real segment, real offset MiB, model segment, model offset, live, reserved) of
    every alloc, plus the model's reserved peak over the history's requests."""
    events = h["events"]
    live, curve = 0, []
    for a, _, size, *_ in events:
        if a == "alloc":
            live += size
        elif a == "free_completed":
            live -= size
        curve.append(live)
    step_of = steps_from_live(curve)
    model = allocator_model()
    real_segments, reserved, rows = [], 0, []
    live = 0
    for i, (a, addr, size, *rest) in enumerate(events):
        if a == "segment_alloc":
            real_segments.append((addr, size))
            reserved += size
        elif a == "alloc":
            live += size
            b = model.alloc(addr, size)
            seg = next(k for k in range(len(real_segments) - 1, -1, -1)
                       if real_segments[k][0] <= addr < real_segments[k][0] + real_segments[k][1])
            rows.append({"index": i, "step": step_of[i], "size": size, "segment": seg,
                         "offset": (addr - real_segments[seg][0]) / MiB, "model": model.where(b),
                         "live": live, "reserved": reserved, "what": "alloc",
                         "frames": rest[1] if len(rest) > 1 else ""})
        elif a == "free_completed":
            live -= size
            model.release(addr)
    return rows, model.peak


def steps_from_live(curve):
    peak = max(curve)
    high = [v > peak / 2 for v in curve]
    runs, start = [], None
    for i, h in enumerate(high + [False]):
        if h and start is None:
            start = i
        elif not h and start is not None:
            runs.append((start, i))
            start = None
    bounds = []
    for (_, end), (nxt, _) in zip(runs, runs[1:]):
        low = min(range(end, nxt), key=lambda k: curve[k])
        bounds.append(low)
    step_of, step = [], 1
    for i in range(len(curve)):
        while step - 1 < len(bounds) and i > bounds[step - 1]:
            step += 1
        step_of.append(step)
    return step_of


def replay_rows(path):
    model = allocator_model()
    rows, live, step, moment, sizes = [], 0, 0, "setup", {}
    for i, line in enumerate(open(path)):
        p = line.split()
        if p[0] == "enter":
            step, moment = int(p[1]), p[2]
        elif p[0] == "alloc":
            size = int(p[2])
            sizes[p[1]] = size
            live += size
            b = model.alloc(p[1], size)
            rows.append({"index": i, "step": max(step, 1), "moment": moment, "size": size, "model": model.where(b),
                         "live": live, "reserved": model.reserved, "what": "alloc"})
        elif p[0] == "free":
            live -= sizes.pop(p[1])
            model.release(p[1])
    return rows, model.peak


def show(row, real, frames=False):
    seg, off = row["model"]
    text = f"{row['size'] / MiB:9.2f} MiB  model seg {seg:4d} +{off:8.2f}"
    if real:
        text += f"  (real seg {row['segment']:4d} +{row['offset']:8.2f})"
        if frames:
            text += "  " + row["frames"].split(";")[0][-40:]
    else:
        text += f"  {row['moment']:<22s}"
    return text + f"  live {row['live'] / 1e9:6.2f} GB  reserved {row['reserved'] / 1e9:6.2f} GB"


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("history")
    ap.add_argument("--replay", help="the replay's events (memscale-allocator-check --events)")
    ap.add_argument("--min-mib", type=float, default=100.0)
    ap.add_argument("--steps", default="1,2")
    ap.add_argument("--frames", action="store_true", help="print each recorded allocation's innermost Python frame "
                    "(histories recorded with frames: a fifth column)")
    a = ap.parse_args()
    h = load_history(a.history)
    steps = {int(s) for s in a.steps.split(",")}
    measured = h["memory_stats"]["reserved_bytes.all.peak"]
    rows, model_peak = history_rows(h)
    print(f"{h.get('case', a.history)}: {len(h['events'])} events")
    print(f"reserved peak: measured {measured:,}; the model over the history's own requests {model_peak:,} "
          f"({(model_peak - measured) / measured * 100:+.2f}%)")
    big = [r for r in rows if r["size"] >= a.min_mib * MiB]
    if not a.replay:
        for r in big:
            if r["step"] in steps:
                print(f"step {r['step']}  #{r['index']:6d}  {show(r, True, a.frames)}")
        return 0
    rrows, replay_peak = replay_rows(a.replay)
    print(f"reserved peak of the replay's stream through the same model: {replay_peak:,} "
          f"({(replay_peak - measured) / measured * 100:+.2f}%)")
    rbig = [r for r in rrows if r["size"] >= a.min_mib * MiB]
    for s in sorted(steps):
        left = [r for r in big if r["step"] == s]
        right = [r for r in rbig if r["step"] == s]
        print(f"\n== step {s}: {len(left)} large allocations recorded, {len(right)} replayed "
              f"(history | replay; '<' only recorded, '>' only replayed)")
        matcher = difflib.SequenceMatcher(a=[round_size(r["size"]) for r in left],
                                          b=[round_size(r["size"]) for r in right], autojunk=False)
        for tag, i1, i2, j1, j2 in matcher.get_opcodes():
            for k in range(max(i2 - i1, j2 - j1)):
                lr = left[i1 + k] if i1 + k < i2 else None
                rr = right[j1 + k] if j1 + k < j2 else None
                mark = "=" if tag == "equal" else ("<" if rr is None else (">" if lr is None else "~"))
                lt = show(lr, True, a.frames) if lr else ""
                rt = show(rr, False) if rr else ""
                print(f"{mark} {lt:<104s} | {rt}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
