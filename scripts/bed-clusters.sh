#!/usr/bin/env bash
# The bed's cluster files (#38, docs/admin/adding-a-cluster.md), so that the portal's services and the
# hub front both of the bed's clusters: CLUSTERS_DIR (/etc/gpuportal/clusters.d) holds gpuportal.toml
# (the default) and cluster-b.toml while the bed has cluster-b (SLURM_DEV_CLUSTERS as slurm/dev/lib.sh
# resolves it, and cluster-b's slurm.conf there), and neither while it has one: a file naming a cluster
# that is down for good would hold that cluster's work forever. Root's, rewritten only when changed.
# Run by scripts/up.sh once the bed is up, before the portal's services start (they read the files
# once), and by scripts/install.sh --dev. Never on a site: its cluster files are its administrator's.
set -euo pipefail
source "$(dirname "$0")/lib.sh"

[[ $EUID -eq 0 ]] || die "run as root"
bed_clusters=${SLURM_DEV_CLUSTERS:-$(cat "$GPUPORTAL_STATE/slurm/dev-clusters" 2>/dev/null || true)}

# cluster_file NAME CONTENT: CLUSTERS_DIR/NAME.toml, written only when it or its owner or mode changed.
cluster_file() {
  local file="$CLUSTERS_DIR/$1.toml"
  if [[ ! -f $file || $(cat "$file") != "$2" || $(stat -c %a:%U:%G "$file") != 644:root:root ]]; then
    say "writing $file"
    printf '%s\n' "$2" | install -o root -g root -m 0644 /dev/stdin "$file"
  fi
}

if [[ ${bed_clusters:-2} == 2 && -f /etc/slurm-cluster-b/slurm.conf ]]; then
  install -d -o root -g root -m 0755 "$CLUSTERS_DIR"
  # Each with its slurm.conf: the portal's own reads then need no `-M`, which costs each command a
  # slurmdbd lookup (squeue 10 ms against 97 ms on the bed); commands run as a user still name it.
  cluster_file gpuportal "$(printf 'name = "gpuportal"\ntitle = "GPU cluster"\ndefault = true\nslurm_conf = "/etc/slurm/slurm.conf"')"
  cluster_file cluster-b "$(printf 'name = "cluster-b"\ntitle = "Cluster B"\nslurm_conf = "/etc/slurm-cluster-b/slurm.conf"')"
elif [[ -e $CLUSTERS_DIR/gpuportal.toml || -e $CLUSTERS_DIR/cluster-b.toml ]]; then
  say "removing the bed's cluster files from $CLUSTERS_DIR (the bed has one cluster)"
  rm -f "$CLUSTERS_DIR/gpuportal.toml" "$CLUSTERS_DIR/cluster-b.toml"
  rmdir "$CLUSTERS_DIR" 2>/dev/null || true  # only while it holds nothing else
fi
