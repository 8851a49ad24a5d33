"""Exits 0 when two torch_infer.py outputs are bitwise identical; prints the difference."""
import sys

import torch

a, b = torch.load(sys.argv[1]), torch.load(sys.argv[2])
ok = True
for key in a:
    same = torch.equal(a[key], b[key])
    diff = (a[key] - b[key]).abs().max().item()
    print(f"  {key}: identical={same} max_abs_diff={diff}")
    ok &= same
sys.exit(0 if ok else 1)
