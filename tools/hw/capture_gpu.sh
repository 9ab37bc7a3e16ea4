#!/usr/bin/env bash
# Capture real nvidia-smi output and node_facts' GPU and kernel sections on a machine with an NVIDIA GPU, idle
# and under load, for tests/unit/fixtures/gpu_clocks/. Usage: tools/hw/capture_gpu.sh OUT_DIR
# The load, when this machine has PyTorch with CUDA, is a loop of matrix products for about 20 s; without it
# only the idle samples are taken (and said so in OUT_DIR/load.txt). Nothing on the GPU is changed (no -lgc,
# no -pm, no reset).
set -uo pipefail
out=${1:?usage: capture_gpu.sh OUT_DIR}
mkdir -p "$out"
here=$(cd "$(dirname "$0")/../.." && pwd)
Q=index,name,uuid,pci.bus_id,driver_version,compute_cap,pstate,memory.total,memory.used,memory.free,clocks.current.graphics,clocks.max.graphics,clocks.current.sm,clocks.max.sm,clocks.current.memory,clocks.max.memory,temperature.gpu,power.draw,utilization.gpu
date -u +%Y-%m-%dT%H:%M:%SZ > "$out/date.txt"
nvidia-smi --query-gpu=$Q --format=csv,nounits > "$out/query-idle.csv" 2>&1
nvidia-smi > "$out/nvidia-smi-idle.txt" 2>&1
uname -a > "$out/uname-a.txt"; getconf PAGESIZE > "$out/pagesize.txt"; cat /proc/cmdline > "$out/cmdline.txt"
cat /sys/module/nvidia/version > "$out/nvidia-version.txt" 2>&1
# node_facts' sections, gathered by the module's own code (no Ansible on this machine)
tmp=$(mktemp -d); mkdir -p "$tmp/ansible_collections/dgxspark"; ln -s "$here" "$tmp/ansible_collections/dgxspark/cluster"
PYTHONPATH=$tmp python3 - "$out/node-facts-gpu-kernel.json" <<'PY'
import json, shutil, subprocess, sys
from ansible_collections.dgxspark.cluster.plugins.module_utils import _node_facts as nf
def run(argv):
    p = subprocess.run(argv, capture_output=True, text=True)
    return p.returncode, p.stdout, p.stderr
options = nf.Options(sections=("memory", "kernel", "gpu"), nvidia_smi=nf.Tool.resolve("nvidia-smi", None, shutil.which("nvidia-smi")))
node = nf.gather(options, nf.make_runner(run, shutil.which("timeout"), 20.0))
json.dump(node, open(sys.argv[1], "w"), indent=1, sort_keys=True)
print("node_facts problems:", node.get("problems"))
PY
# load: PyTorch if present
python3 - > "$out/load.txt" 2>&1 <<'PY' &
import time
try:
    import torch
    assert torch.cuda.is_available()
except Exception as error:
    print(f"no load: PyTorch with CUDA is not available here ({error!r})")
    raise SystemExit(0)
a = torch.randn(8192, 8192, device="cuda", dtype=torch.float16); b = torch.randn_like(a)
end = time.time() + 20; n = 0
while time.time() < end:
    c = a @ b; n += 1
    if n % 50 == 0: torch.cuda.synchronize()
torch.cuda.synchronize(); print(f"load: {n} fp16 8192x8192 matrix products in 20 s with torch {torch.__version__}")
PY
load=$!
sleep 6
for _sample in 1 2 3 4 5 6; do nvidia-smi --query-gpu=$Q --format=csv,nounits,noheader; sleep 1; done > "$out/query-load.csv" 2>&1
sed -n 1p "$out/query-idle.csv" > "$out/query-load-header.txt"
nvidia-smi > "$out/nvidia-smi-load.txt" 2>&1
wait $load
ls -la "$out"
