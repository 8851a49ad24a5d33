#!/usr/bin/env bash
# Prints the header every recorded GPU run starts with: date, host, GPU, driver, CUDA, PyTorch.
echo "date: $(date -u +%Y-%m-%dT%H:%M:%SZ)"
echo "host: $(uname -r) $(nproc) cpus"
nvidia-smi --query-gpu=index,name,driver_version,memory.total,pci.bus_id --format=csv,noheader 2>&1 | sed 's/^/gpu: /'
echo "cuda driver library: $(ldconfig -p 2>/dev/null | awk '/libcuda.so.1 /{print $NF; exit}')"
echo "nvcc: $(nvcc --version 2>/dev/null | tail -n 2 | head -n 1)"
python3 -c 'import torch; print("torch:", torch.__version__, "cuda", torch.version.cuda)' 2>/dev/null || echo "torch: not available"
echo "command: $*"
