"""The tracing pieces every CPU trace script shares, held once.

The method is the project's ground-truth harness (shared/ground-truth/measure.py, which the
repository does not import): torch.profiler(profile_memory=True) sees every allocation and free
of c10's CPU allocator, so the running sum of those events is the tensor bytes live at each
instant, counted from an empty start; phase boundaries are "marks", allocations of unique odd
sizes that are then taken out of the sum. On top of the tracker: storage-level byte counts,
the optimizers of the harness, one training step with its five phase marks, the readings of
the marked steps, saved-tensor listings and record files.

Scripts under tools/trace/ import it directly; scripts elsewhere put tools/trace on sys.path
first. tools/trace/README.md shows a script's use of it.
"""
import gc
import json
import math
import os
import time

import torch
from torch.profiler import ProfilerActivity, profile

PHASES = ("start", "fwd", "bwd", "opt", "end")


# ----------------------------------------------------------------------------
# allocation tracking and peak measurement
# ----------------------------------------------------------------------------


def memory_events(results):
    """(start_us, index, nbytes) of every CPU allocation (+) and free (-) the profiler saw, in time order."""
    events = []
    for i, e in enumerate(results.events()):
        if e.name() == "[memory]" and e.device_type() == torch._C._autograd.DeviceType.CPU:
            events.append((e.start_us(), i, e.nbytes()))
    events.sort()
    return events


class Tracker:
    """Live CPU tensor bytes over a `with` block, with named marks to read them at."""

    BASE = 3_333_331  # odd byte counts never produced by fp32/bf16/int64 tensors of real shapes

    def __init__(self):
        self.k = 0
        self.size2name = {}

    def __enter__(self):
        gc.collect()
        self.prof = profile(activities=[ProfilerActivity.CPU], profile_memory=True)
        self.prof.__enter__()
        self.mark("__start__")
        return self

    def mark(self, name):
        self.k += 2
        n = self.BASE + self.k
        self.size2name[n] = name
        t = torch.empty(n, dtype=torch.uint8)
        del t

    def __exit__(self, *a):
        self.mark("__end__")
        self.prof.__exit__(None, None, None)
        self.read(self.prof.profiler.kineto_results)
        del self.prof
        return False

    def read(self, results):
        """Folds the allocator events into the running sum; a mark's event sets its position."""
        events = memory_events(results)
        self.cum = [0]  # live bytes after each event
        self.at_us = [0]  # when each event happened
        self.deltas = [0]  # the bytes each event allocated (+) or freed (-)
        self.pos = {}
        for at, _, n in events:
            if abs(n) in self.size2name:
                if n > 0:
                    self.pos[self.size2name[n]] = len(self.cum) - 1
                continue
            self.cum.append(self.cum[-1] + n)
            self.at_us.append(at)
            self.deltas.append(n)
        self.n_events = len(events)

    def live(self, name):
        return self.cum[self.pos[name]]

    def peak(self, a, b):
        return max(self.cum[self.pos[a]: self.pos[b] + 1])


# ----------------------------------------------------------------------------
# bytes held, counted by storage
# ----------------------------------------------------------------------------


def storage_key(t):
    """(address, bytes) of the storage under t; a view shares its base's key."""
    try:
        st = t.storage()
        return st.data_ptr(), st.nbytes() if hasattr(st, "nbytes") else st.size() * st.element_size()
    except Exception:  # complex views and the like
        return t.data_ptr(), t.numel() * t.element_size()


def tensor_bytes(ts):
    """Bytes of the distinct storages under ts (None entries skipped)."""
    seen = {}
    for t in ts:
        if t is None:
            continue
        key, nbytes = storage_key(t)
        seen[key] = nbytes
    return sum(seen.values())


def optimizer_state_bytes(optimizers):
    """Bytes of every tensor in the state of the given optimizers."""
    return tensor_bytes([v for o in optimizers for s in o.state.values() for v in s.values() if torch.is_tensor(v)])


def parameter_count(model):
    return sum(p.numel() for p in model.parameters())


# ----------------------------------------------------------------------------
# seeding, optimizers and the marked training step
# ----------------------------------------------------------------------------


def reset_seed(value=0):
    """Every case starts from the same generator state, so its weights and inputs repeat."""
    torch.manual_seed(value)


def make_opt(name, params, foreach=None):
    """The harness's optimizers and learning rates, by name."""
    if name == "adamw":
        return torch.optim.AdamW(params, lr=1e-4, foreach=foreach)
    if name == "adam":
        return torch.optim.Adam(params, lr=1e-4, foreach=foreach)
    if name == "sgd":
        return torch.optim.SGD(params, lr=1e-3, foreach=foreach)
    if name == "sgd_momentum":
        return torch.optim.SGD(params, lr=1e-3, momentum=0.9, foreach=foreach)
    raise ValueError(name)


def in_precision(prec, forward):
    """forward, run under CPU bfloat16 autocast where prec is "amp_bf16" (the harness's mixed
    precision) and as it is otherwise."""
    def run():
        if prec == "amp_bf16":
            with torch.autocast("cpu", dtype=torch.bfloat16):
                return forward()
        return forward()
    return run


def train_step(tracker, n, forward, optimizer, after_backward=None, backward=None):
    """Training step n: forward() -> loss, backward, optimizer step, zero_grad(set_to_none),
    with the marks s{n}_start, _fwd, _bwd, _opt, _end; backward(loss), when given, replaces
    loss.backward() (a framework that reduces gradients after it); after_backward(n) runs
    before the optimizer step (where the gradients are live). The optimizer is anything with
    step() and zero_grad(set_to_none=...). Returns the loss value."""
    tracker.mark(f"s{n}_start")
    loss = forward()
    tracker.mark(f"s{n}_fwd")
    if backward is None:
        loss.backward()
    else:
        backward(loss)
    tracker.mark(f"s{n}_bwd")
    if after_backward is not None:
        after_backward(n)
    optimizer.step()
    tracker.mark(f"s{n}_opt")
    optimizer.zero_grad(set_to_none=True)
    value = float(loss)
    del loss
    tracker.mark(f"s{n}_end")
    return value


class GradientBytes:
    """An after_backward for train_step: keeps in .bytes the storage bytes of the gradients of
    params() at the given step (a callable, so that nothing here holds the model alive)."""

    def __init__(self, params, step=2):
        self.params = params
        self.step = step
        self.bytes = None

    def __call__(self, n):
        if n == self.step:
            self.bytes = tensor_bytes([p.grad for p in self.params()])


def train_two_steps(tracker, forward, optimizer, after_backward=None):
    """train_step 1 and 2; returns the seconds each took and the last loss value."""
    seconds, value = [], None
    for n in (1, 2):
        t0 = time.time()
        value = train_step(tracker, n, forward, optimizer, after_backward)
        seconds.append(time.time() - t0)
    return seconds, value


def tower_step_readings(tracker, detail):
    """`detail` with the end of the trace, the step readings and the marks an image step places
    around the vision tower in step 2 ("tower_in_2", "tower_out_2"): the live bytes at both and
    the peak between them."""
    detail["end_live"] = tracker.live("__end__")
    detail.update(step_readings(tracker, phase_peaks=True))
    detail["s2_tower_in"] = tracker.live("tower_in_2")
    detail["s2_tower_peak"] = tracker.peak("tower_in_2", "tower_out_2")
    detail["s2_tower_out"] = tracker.live("tower_out_2")
    return detail


def records_without(path, prefixes):
    """The records of `path` (none when it does not exist) whose ids start with none of `prefixes`
    (a string or a tuple): what a script keeps before appending its own."""
    if not os.path.exists(path):
        return []
    return [r for r in read_records(path) if not r["id"].startswith(prefixes)]


def traced_generate(build, vocab_size, batch, context, new_tokens, generate):
    """A greedy generate() traced from the model's construction to its end: build() makes the model
    (put in eval mode here), generate(model, ids, new_tokens, tracker) runs the loop on random ids of
    (batch, context) and marks f"step{k}" after each new token. Returns the parameter count, the peak
    from the inputs to the end (the measured bytes) and the phase peaks (a record's `detail`)."""
    reset_seed()
    with Tracker() as tr:
        model = build().eval()
        tr.mark("built")
        ids = torch.randint(0, vocab_size, (batch, context))
        tr.mark("inputs")
        out = generate(model, ids, new_tokens, tr)
        tr.mark("done")
        params = parameter_count(model)
        del out, ids, model
    detail = {"built": tr.live("built"), "prefill_peak": tr.peak("inputs", "step0")}
    if new_tokens > 1:
        detail["decode_peak"] = tr.peak("step0", f"step{new_tokens - 1}")
        detail["first_decode_peak"] = tr.peak("step0", "step1")
    return params, tr.peak("inputs", "done"), detail


def step_readings(tracker, steps=(1, 2), phase_peaks=True):
    """Live bytes at each phase mark of the given steps, the step's peak and, with phase_peaks,
    the peak of its forward, backward and optimizer phases."""
    r = {}
    for s in steps:
        for ph in PHASES:
            r[f"s{s}_{ph}"] = tracker.live(f"s{s}_{ph}")
        r[f"s{s}_peak"] = tracker.peak(f"s{s}_start", f"s{s}_end")
        if phase_peaks:
            r[f"s{s}_peak_fwd"] = tracker.peak(f"s{s}_start", f"s{s}_fwd")
            r[f"s{s}_peak_bwd"] = tracker.peak(f"s{s}_fwd", f"s{s}_bwd")
            r[f"s{s}_peak_opt"] = tracker.peak(f"s{s}_bwd", f"s{s}_opt")
    return r


# ----------------------------------------------------------------------------
# saved-tensor listings
# ----------------------------------------------------------------------------


def track_module_path(model, keep=lambda path: True, bottom=None):
    """Registers hooks that keep the path of the module now running on top of the returned
    stack (bottom, when given, is there before any module runs)."""
    stack = [] if bottom is None else [bottom]

    def leave(mod, inp, out):
        stack.pop()  # returns nothing: a forward hook's return value would replace the output

    for path, mod in model.named_modules():
        if keep(path):
            mod.register_forward_pre_hook(lambda m, i, p=path: stack.append(p))
            mod.register_forward_hook(leave)
    return stack


def saving_tensors(pack):
    """Context in which pack(t) sees each tensor autograd saves for backward (and keeps it as is)."""
    return torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t)


# ----------------------------------------------------------------------------
# records
# ----------------------------------------------------------------------------


def record_head(case_id, source):
    """The first fields of every record: its id, the script that made it, the measure and device."""
    return {"id": case_id, "source": source, "measure": "cpu-tensor-peak", "device": "cpu"}


def peak_fields(r):
    """The three headline figures of a record, from a reading of two marked steps."""
    return {"measured_bytes": r["s2_peak"], "first_step_peak_bytes": r["s1_peak"], "after_forward_bytes": r["s2_fwd"]}


def activation_bytes(r):
    """Bytes the 2nd step's forward leaves live (what it saved for backward, and its output)."""
    return r["s2_fwd"] - r["s2_start"]


def components(r):
    """Where the bytes go, from a reading with the enumerated params_enum, opt_enum and (where the
    script counts them) grads_enum: parameters, gradients, optimizer state, activations."""
    c = {"params": r["params_enum"]}
    if "grads_enum" in r:
        c["grads"] = r["grads_enum"]
    c.update(optimizer=r["opt_enum"], activations=activation_bytes(r))
    return c


def read_records(path):
    """The records already in path, or none."""
    return json.load(open(path)) if os.path.exists(path) else []


def finite_or_null(value):
    """value with every non-finite float (a diverged loss) as None: JSON has no Infinity or NaN."""
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, dict):
        return {k: finite_or_null(v) for k, v in value.items()}
    if isinstance(value, list):
        return [finite_or_null(v) for v in value]
    return value


def write_records(path, records, final_newline=False):
    with open(path, "w") as f:
        json.dump(finite_or_null(records), f, indent=1, allow_nan=False)
        if final_newline:
            f.write("\n")
