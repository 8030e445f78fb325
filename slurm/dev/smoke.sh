#!/usr/bin/env bash
# shellcheck disable=SC2016 # $CUDA_VISIBLE_DEVICES is for the job to expand
# Smoke test of a running test bed (after up.sh): prints what each check sees
# and exits non-zero at the first failure. Takes ~30 s (jobs sleep 5 s; the
# slurmctld stop/start cycle is part of it; a job on cluster-b unless SLURM_DEV_CLUSTERS=1).
# Leaves no jobs or files behind.
#   slurm/dev/smoke.sh
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

step() { printf '\n== %s\n' "$*"; }
fail() { echo "SMOKE FAIL: $*" >&2; exit 1; }
as_alice() { runuser -u alice -- "$@"; }
job_state() { squeue -h -j "$1" -o %T 2>/dev/null || true; }

step sinfo
out=$(sinfo) && echo "$out"
grep -q '^gpu\* .* idle ' <<<"$out" || fail "partition gpu* not idle"
sinfo -h -o '%P %G' | grep -qx 'debug gpu:a100:4' || fail "debug partition / gres gpu:a100:4 missing"

step "nodes: one step per node, each sees its own hostname"
cd /home/alice # the job's working directory must be accessible to alice
out=$(as_alice srun -N "$SLURM_DEV_NODES" --ntasks-per-node=1 hostname | sort | xargs) && echo "$out"
[[ $out == "${NODES[*]}" ]] || fail "expected ${NODES[*]}"

step "on one node: two gpu:2 jobs get disjoint GPUs, a third gpu:1 pends on Resources"
node=${NODES[0]}
wrap='echo $CUDA_VISIBLE_DEVICES; sleep 5'
j1=$(as_alice sbatch --parsable -w "$node" --gres=gpu:2 -o smoke-%j.out --wrap "$wrap")
j2=$(as_alice sbatch --parsable -w "$node" --gres=gpu:2 -o smoke-%j.out --wrap "$wrap")
trap 'scancel $j1 $j2 ${j3:-} 2>/dev/null || true; rm -f /home/alice/smoke-*.out' EXIT
wait_for "jobs $j1 $j2 running" 20 bash -c "[[ \$(squeue -h -j $j1,$j2 -t R -o %i | wc -l) == 2 ]]"
j3=$(as_alice sbatch --parsable -w "$node" --gres=gpu:1 -o smoke-%j.out --wrap 'echo $CUDA_VISIBLE_DEVICES')
sleep 1
squeue -h -a -o '%i|%P|%T|%u|%r|%b|%j|%k'
[[ $(squeue -h -j "$j3" -o %T:%r) == PENDING:Resources ]] || fail "job $j3 is not PENDING:Resources"
wait_for "jobs to finish" 30 bash -c "[[ -z \$(squeue -h -j $j1,$j2,$j3 -o %i) ]]"
gpus=$(cat "smoke-$j1.out" "smoke-$j2.out" | sort | xargs)
echo "CUDA_VISIBLE_DEVICES of $j1/$j2: $gpus; of $j3: $(cat "smoke-$j3.out")"
[[ $gpus == "0,1 2,3" ]] || fail "expected 0,1 and 2,3"

step sacct
# A finished job's Partition can stay empty for a few seconds: poll.
sacct_rows() { sacct -a -X -n -P -j "$j1,$j2,$j3" -o JobID,JobName,Partition,User,State,ExitCode,Start,End,Elapsed,NodeList,AllocTRES,Comment; }
wait_for "sacct rows complete" 20 bash -c "$(declare -f sacct_rows); j1=$j1 j2=$j2 j3=$j3; [[ \$(sacct_rows | grep -c '|gpu|alice|COMPLETED|') == 3 ]]"
sacct_rows
[[ $(sacct_rows | grep -c 'gres/gpu=2') == 2 ]] || fail "AllocTRES lacks gres/gpu=2"

step "too long for partition debug: rejected at submit"
if as_alice sbatch --parsable --time=2:00:00 -p debug --wrap true; then fail "not rejected"; fi

if ((SLURM_DEV_CLUSTERS > 1)); then
  step "cluster-b: sbatch/squeue/sacct -M from the default configuration; without -M, unseen"
  # shellcheck source=/dev/null
  source "$DEV_DIR/services/cluster_b.sh"
  sinfo -M all -h -o '%P %G' | grep -qx "gpu\* gpu:a100:2" || fail "sinfo -M all lacks $CLUSTER_B's gpu:a100:2"
  name=smoke-b-$$  # job ids are per cluster: tell the job by its name
  jb=$(as_alice sbatch -M "$CLUSTER_B" --parsable --gres=gpu:2 -J "$name" -o smoke-b-%j.out --wrap 'echo $(hostname) $CUDA_VISIBLE_DEVICES; sleep 2')
  jb=${jb%%;*}
  trap 'scancel ${j1:-} ${j2:-} ${j3:-} 2>/dev/null || true; scancel -M $CLUSTER_B $jb 2>/dev/null || true; rm -f /home/alice/smoke-*.out' EXIT
  as_alice squeue -M "$CLUSTER_B" -h -o '%i %j %P %T %u %b'
  as_alice squeue -M "$CLUSTER_B" -h -o %j | grep -qx "$name" || fail "squeue -M $CLUSTER_B does not list $name"
  if squeue -h -a -o %j | grep -qx "$name"; then fail "squeue without -M lists $CLUSTER_B's $name"; fi
  wait_for "$CLUSTER_B's job $jb COMPLETED in sacct -M" 30 bash -c "sacct -M $CLUSTER_B -X -n -P -j $jb -o State,Partition | grep -qx 'COMPLETED|gpu'"
  sacct -M "$CLUSTER_B" -X -n -P -j "$jb" -o JobID,Cluster,Partition,User,State,NodeList,AllocTRES
  [[ $(cat "smoke-b-$jb.out") == "$CLUSTER_B_NODE 0,1" ]] || fail "expected '$CLUSTER_B_NODE 0,1', got '$(cat "smoke-b-$jb.out")'"
fi

step ldap
ldapwhoami -x -H "ldap://127.0.0.1:$LDAP_PORT" -D "uid=alice,ou=people,$LDAP_SUFFIX" -w alice-pw
out=$(ldapsearch -x -LLL -H "ldap://127.0.0.1:$LDAP_PORT" -b "ou=people,$LDAP_SUFFIX" '(uid=alice)' memberOf) && echo "$out"
grep -q "memberOf: cn=portal-users,ou=groups,$LDAP_SUFFIX" <<<"$out" || fail "alice lacks memberOf"

step "redis, postgres"
redis-cli -p "$REDIS_PORT" ping
psql "postgres://gpuportal:gpuportal@127.0.0.1:$PG_PORT/gpuportal" -Atc 'select 1'

step "slurmctld down and back"
"$DEV_DIR/slurmctld.sh" stop
t0=$EPOCHREALTIME
if squeue; then fail "squeue worked with slurmctld stopped"; fi
echo "squeue failed after $(awk "BEGIN { printf \"%.1f\", $EPOCHREALTIME - $t0 }") s (expected)"
"$DEV_DIR/slurmctld.sh" start
squeue || fail "squeue after restart"

printf '\nSMOKE OK\n'
