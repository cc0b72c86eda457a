#!/usr/bin/env python3
"""Small CUDA load for the device check: a bf16 matmul loop on every visible
GPU for a fixed time, so that utilization and SM clock are high and steady
while the exporter and nvidia-smi are read."""

import argparse
import sys
import time


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--seconds", type=float, default=30.0, help="how long to run")
    ap.add_argument("--size", type=int, default=8192, help="matrix side")
    args = ap.parse_args()
    try:
        import torch
    except ImportError:
        print("load.py: PyTorch is not installed (pip install torch)", file=sys.stderr)
        return 3
    if not torch.cuda.is_available():
        print("load.py: no CUDA device visible to PyTorch", file=sys.stderr)
        return 3
    devices = [torch.device("cuda", i) for i in range(torch.cuda.device_count())]
    mats = []
    for d in devices:
        a = torch.randn(args.size, args.size, device=d, dtype=torch.bfloat16)
        b = torch.randn(args.size, args.size, device=d, dtype=torch.bfloat16)
        mats.append((a, b))
    print(f"load.py: {len(devices)} GPU(s), {args.size}^3 bf16 matmuls for {args.seconds:.0f} s", flush=True)
    end = time.monotonic() + args.seconds
    n = 0
    while time.monotonic() < end:
        for a, b in mats:
            torch.matmul(a, b)
        n += 1
        if n % 50 == 0:
            for d in devices:
                torch.cuda.synchronize(d)
    for d in devices:
        torch.cuda.synchronize(d)
    flops = 2 * args.size**3 * n * len(devices)
    print(f"load.py: {n} rounds, {flops / args.seconds / 1e12:.0f} TFLOP/s in total", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
