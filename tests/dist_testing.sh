# dist_testing: what the mpirun tests (test_dist.sh, test_zero.sh) share,
# sourced after their header comment: script_testing.sh, one lavapipe
# thread per rank, `mpi NP ARGS...` (mpirun with a timeout), $cmp_py
# (compare_runs.py), a small corpus in $work/corpus.txt, and
# `recipe ARCH EXTRA-MODEL-KEYS`, the tests' recipe on it: 5 steps of 8
# sequences, warmup, clipping, 1 MiB buckets.
. "$SRC/tests/script_testing.sh"
if ! command -v mpirun >/dev/null; then echo "FAIL: mpirun not found (apt-get install openmpi-bin)"; exit 1; fi
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 LP_NUM_THREADS=1
export OMPI_MCA_rmaps_base_oversubscribe=1
cmp_py="$py $SRC/tests/compare_runs.py"
mpi() { local np=$1; shift; timeout 300 mpirun --oversubscribe -np "$np" "$@"; }

for i in $(seq 1 600); do
  echo "the $((i % 7)) quick brown foxes jump over $((i * 13 % 11)) lazy dogs near river $((i % 5))"
done > "$work/corpus.txt"
recipe() { # arch extra-model-keys
  cat <<YAML
seed: 3
output_dir: $work/unused
model: {arch: $1, dim: 96, n_heads: 4, hidden_dim: 192, max_seq_len: 32 $2}
dataset: {type: text, path: $work/corpus.txt, packed: true}
batch_size: 8
max_steps: 5
optimizer: {lr: 3.0e-3, weight_decay: 0.1}
lr_scheduler: {type: cosine, warmup_steps: 2}
clip_grad_norm: 1.0
log_every_n_steps: 1
dist: {bucket_mb: 1}
YAML
}
