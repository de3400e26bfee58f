"""Per-block saved bytes: live(after fwd, 2 layers) - live(after fwd, 1 layer) vs formula."""
from meas import main
def blk(m, prec, ckpt, b, s):
    if m == "gpt2":
        h, a, f = 768, 12, 3072
        if ckpt: return 4*b*s*h + 5056
        if prec == "fp32": return 40*b*s*h + 20*b*s*f + 12*b*a*s*s + 16*b*s + 28
        if prec == "amp_bf16": return 24*b*s*h + 10*b*s*f + 6*b*a*s*s + 16*b*s + 26 + 2*(4*h*h + 2*h*f)
        return 20*b*s*h + 10*b*s*f + 6*b*a*s*s + 8*b*s + 26
    if m == "llama":
        h, a, f, kv, d = 1024, 16, 2816, 4, 64
        if ckpt: return 4*b*s*h + 5056
        if prec == "fp32": return 48*b*s*h + 16*b*s*f + 4*b*a*s*s + 8*b*s + 8
        if prec == "amp_bf16": return 42*b*s*h + 8*b*s*f + 6*b*a*s*s + 8*b*s + 8 + 2*(2*h*h + 2*h*kv*d + 3*h*f)
        return 32*b*s*h + 8*b*s*f + 6*b*a*s*s + 8*b*s + 8
    h, a, f = 768, 12, 3072
    if ckpt: return 4*b*s*h + 5056
    return 40*b*s*h + 8*b*s*f + 12*b*a*s*s + 16*b*s + 8
print("| model | prec | ckpt | b | s | measured L2-L1 (B) | formula (B) | diff |")
print("|---|---|---|---|---|---|---|---|")
for m, prec, ck in [("gpt2", "fp32", 0), ("gpt2", "amp_bf16", 0), ("gpt2", "pure_bf16", 0), ("gpt2", "fp32", 1),
                    ("llama", "fp32", 0), ("llama", "amp_bf16", 0), ("llama", "pure_bf16", 0), ("llama", "fp32", 1), ("bert", "fp32", 0), ("bert", "fp32", 1)]:
    for b, s in [(1, 64), (2, 96), (3, 40)]:
        r = [main(m, L, b, s, prec, "ckpt" if ck else "none", "none", 1, verbose=False)["act"] for L in (1, 2)]
        meas = r[1] - r[0]; fo = blk(m, prec, ck, b, s)
        print(f"| {m} | {prec} | {'full' if ck else 'none'} | {b} | {s} | {meas:,} | {fo:,} | {meas - fo} |", flush=True)
