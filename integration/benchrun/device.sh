#!/usr/bin/env bash
# The save-speed figures on a many-core machine, in one short run: torch.save
# of a ~1 GiB training state, a Hugging Face Trainer saving ~1.2 GB
# checkpoints (GPT-2, 8 layers of 1024, AdamW, on the GPU where there is one)
# and the make-bench Trainer (4 layers of 256, on the CPU), each into a ckptfs
# mount (passthrough and daemon-written for the 1 GiB save), a go-fuse
# passthrough loopback and a plain directory, side by side.
#
#   make device-bin     # here: static binaries in .device/
#   bash integration/benchrun/device.sh .device OUT [PART...]   # there, as root, in the repository
#
# PARTs (default: all, about 11 minutes): save1g (5.5 min at most), trainer1g
# (3.5), trainer (2). A lent machine runs a command for 10 minutes at most:
# run "save1g trainer1g", then "trainer" if its time allows.
#
# Each part has its own time limit and writes OUT/NAME.json (benchrun's
# results) and OUT/NAME.log, so that a part cut short leaves the others'.
# Needs python3 with torch and transformers, /dev/fuse, and root.
set -u
bin=$(cd "$1" && pwd)
out=$(mkdir -p "$2" && cd "$2" && pwd)
py=${CKPTFS_PYTHON:-$(command -v python3)}
export CKPTFS_PYTHON=$py PYTHONUNBUFFERED=1

{
	echo "cores $(nproc), $(awk '/MemTotal/ {printf "%.0f GiB", $2/1048576}' /proc/meminfo), kernel $(uname -r)"
	ls -l /dev/fuse
	"$py" -c 'import torch, transformers; print("torch", torch.__version__, "transformers", transformers.__version__, "cuda", torch.cuda.is_available())'
} 2>&1 | tee "$out/machine.log"

parts=" ${*:3} "
[ "$parts" = "  " ] && parts=" save1g trainer1g trainer "

# part NAME SECONDS BENCHRUN-FLAGS...: runs if NAME was asked for.
part() {
	local name=$1 limit=$2
	shift 2
	case $parts in *" $name "*) ;; *) return ;; esac
	local dir
	dir=$(mktemp -d)
	echo "== $name (at most $limit s)"
	timeout --kill-after=20 "$limit" "$bin/benchrun" --bin "$bin/ckptfs" --python "$py" --out "$dir" "$@" >"$out/$name.log" 2>&1
	echo "exit $? after $SECONDS s"
	tail -n 5 "$out/$name.log"
	cp "$dir/benchmarks.json" "$out/$name.json" 2>/dev/null
	# a part killed at its limit may leave its mounts behind
	grep -o ' /tmp/ckptfs-bench-[^ ]*' /proc/mounts | xargs -r -n1 umount -l 2>/dev/null
}

# Five repetitions of the 1 GiB save: three (the first lent machine's run)
# left its ratio to within ±10%. Its pause stays 6 s, as the device's
# figures so far were measured (make bench's default is 20 s: save1g.go),
# and so that the part fits its limit. The small Trainer, which matched the
# loopback floor there, runs last, if the machine's time allows.
part save1g 330 --only save1g --reps 5 --save1g-pause 6
part trainer1g 200 --only savestall --reps 2 --trainer-layers 8 --trainer-width 1024 --trainer-gpu
part trainer 110 --only savestall --reps 3
