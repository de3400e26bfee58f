"""GPT-2 ckpt: recompute+backward peak of block 0, small vocab (V=64) so the loss region is negligible."""
import os; os.environ["VOCAB"] = "64"
from meas import main
h, a, f, V = 768, 12, 3072, 64
for L, b, s in [(2, 2, 256), (2, 1, 384), (3, 2, 128)]:
    r = main("gpt2", L, b, s, "fp32", "ckpt", "none", 1, verbose=False)
    G = r["params"]; bsh, bsf, bs = b*s*h, b*s*f, b*s
    Gblk = 4*(12*h*h + 13*h)
    Bfull = 40*bsh + 20*bsf + 12*b*a*s*s + 16*bs + 28
    pred = (G - 4*1024*h - Gblk) + (8*bsh + 5056 + 8*s) + Bfull + 4*f*h + 4*h + 8*bsf - 4*bsh + 8
    print(L, b, s, "measured peak_bwd-start", r["peak_bwd"], "pred", pred, "err", pred - r["peak_bwd"], r["at_bwd"][:2])
