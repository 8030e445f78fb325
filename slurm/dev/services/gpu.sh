# shellcheck shell=bash
# The GPU stand-in of the bed (no NVIDIA driver here): /usr/local/bin/nvidia-smi answers nvidia-smi's
# query interface for the fake GPUs from a state file beside each device, and /usr/local/bin/gpu-busy
# marks a job's GPUs busy while a command runs (slurm/dev/nvidia-smi, slurm/dev/gpu-busy). A real
# site has NVIDIA's own nvidia-smi and no gpu-busy: job templates tell the stand-in by its name.

gpu_standin_up() {
  local program node n
  for program in nvidia-smi gpu-busy; do
    sed "s|\"/var/lib/gpuportal/gpu\"|\"$STATE/gpu\"|" "$DEV_DIR/$program" >"/usr/local/bin/$program.new"
    chmod 755 "/usr/local/bin/$program.new"
    mv -f "/usr/local/bin/$program.new" "/usr/local/bin/$program"
  done
  # One state file per fake GPU, writable by the jobs' users (gpu-busy runs as them); the folder
  # stays root's. Missing or empty means idle.
  for node in "${NODES[@]}"; do
    for n in 0 1 2 3; do
      [[ -e $STATE/gpu/$node/nvidia$n.state ]] || : >"$STATE/gpu/$node/nvidia$n.state"
      chmod 666 "$STATE/gpu/$node/nvidia$n.state"
    done
  done
}
