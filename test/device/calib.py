#!/usr/bin/env python3
"""One calibration load for calibrate.sh: a device-to-device copy (prints
TB/s, read+write counted) or a bf16 matmul loop (prints TFLOP/s) on GPU 0
for a fixed time; --seconds 0 only creates the context and runs one kernel
(a restart)."""

import argparse
import sys
import time


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--kind", choices=["copy", "matmul"], default="copy")
    ap.add_argument("--seconds", type=float, default=10.0)
    args = ap.parse_args()
    import torch

    d = torch.device("cuda", 0)
    if args.kind == "copy":
        src = torch.empty(1 << 30, dtype=torch.uint8, device=d)
        dst = torch.empty_like(src)
        step, unit = lambda: dst.copy_(src), 2 * src.numel() / 1e12
    else:
        a = torch.randn(8192, 8192, device=d, dtype=torch.bfloat16)
        b = torch.randn(8192, 8192, device=d, dtype=torch.bfloat16)
        step, unit = lambda: torch.matmul(a, b), 2 * 8192**3 / 1e12
    step()
    torch.cuda.synchronize(d)
    if args.seconds <= 0:
        print(0)
        return 0
    n, t0 = 0, time.monotonic()
    while time.monotonic() - t0 < args.seconds:
        for _ in range(10):
            step()
        torch.cuda.synchronize(d)
        n += 10
    print(f"{n * unit / (time.monotonic() - t0):.4f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
