#!/usr/bin/env python3
"""Edits an unpacked Slurm 22.05 source tree so that select/cons_tres serves a shard job from the
GPU with the fewest free shards that still hold it (best fit), ties to the lowest index.

    best_fit.py SLURM_SOURCE_DIR

Called by build.sh (same folder) on Debian's slurm-wlm source before it compiles the plugin; it
edits two files and commits nothing of Slurm's. docs/slurm.md, "Which GPU a shard job gets".

Why here: slurmctld chooses the GPU of a `--gres=shard:N` job in cons_tres's
_pick_specific_topo() (src/plugins/select/cons_common/gres_select_filter.c, linked into
select_cons_tres.so), and books the shards on the GPU it chose (gres_ctld.c copies the choice).
That function walks the GPUs (the shard gres's "topo" entries, one per GPU) by index and takes
the first with room: first fit. The edit keeps the walk and its every test (socket, busy device,
room) and changes only its order: the GPUs sorted by free shards, ascending, ties by index. The
first GPU with room in that order is the best fit. Slurm 23.02's LL_SHARED_GRES sorts the same
walk descending (least loaded), which bench/slurm_gpu_choice.cc shows strands twice as much.

Worked example (the slurm suite's check 2c): GPU 0 has 2 of 4 shards taken (2 free), GPU 1 has 3
(1 free). Order: GPU 1 (1 free), GPU 0 (2 free). A shard:1 job: GPU 1 has room -> GPU 1 (first
fit took GPU 0). A shard:2 job next: GPU 1 has 0 free, GPU 0 has 2 -> GPU 0, where first fit
would have left one shard on each GPU and no room for it.

The third walk of the function ("any resources": GPUs whose counts are unknown) stays by index.
Each anchor below must match exactly as often as expected, or the script stops naming it (a
Slurm version whose code moved is refused rather than patched blindly). Running it twice is
refused too (the marker), so build.sh always edits a fresh unpack.
"""
import sys

MARKER = "tessera best fit"

# The helper, inserted before _pick_specific_topo(): the GPUs' order for the walks.
ORDER_HELPER = r"""
/*
 * tessera best fit (docs/slurm.md, "Which GPU a shard job gets"): the order in which
 * _pick_specific_topo() tries the GPUs (topo entries) of a node: by free count (avail - alloc),
 * ascending, ties by index; by index where the counts are not known. Insertion sort: stable,
 * and a node has a handful of GPUs. Caller xfree()s.
 * Example: free {2, 1, 4, 1} -> order {1, 3, 0, 2}.
 */
static int *_tessera_topo_order(gres_node_state_t *gres_ns)
{
	int *order = xcalloc(MAX(gres_ns->topo_cnt, 1), sizeof(int));
	int k, j;

	for (k = 0; k < gres_ns->topo_cnt; k++) {
		order[k] = k;
		if (!gres_ns->topo_gres_cnt_alloc || !gres_ns->topo_gres_cnt_avail)
			continue;
		for (j = k; j > 0; j--) {
			int a = order[j - 1];
			uint64_t free_a = gres_ns->topo_gres_cnt_avail[a] -
					  gres_ns->topo_gres_cnt_alloc[a];
			uint64_t free_k = gres_ns->topo_gres_cnt_avail[k] -
					  gres_ns->topo_gres_cnt_alloc[k];
			if (gres_ns->topo_gres_cnt_alloc[a] >
			    gres_ns->topo_gres_cnt_avail[a])
				free_a = 0;
			if (gres_ns->topo_gres_cnt_alloc[k] >
			    gres_ns->topo_gres_cnt_avail[k])
				free_k = 0;
			if (free_a <= free_k)
				break;
			order[j] = a;
			order[j - 1] = k;
		}
	}
	return order;
}
"""

FILTER = "src/plugins/select/cons_common/gres_select_filter.c"
PLUGIN = "src/plugins/select/cons_tres/select_cons_tres.c"

# (file, anchor, replacement, how many times the anchor must occur). The anchors are Slurm
# 22.05.8's lines; the replacements are ours.
EDITS = [
    (FILTER,
     "/*\n * Select one specific GRES topo entry (set GRES bitmap) for this job on this\n",
     ORDER_HELPER.lstrip("\n") + "\n"
     "/*\n * Select one specific GRES topo entry (set GRES bitmap) for this job on this\n", 1),
    # Its locals: the order and its cursor.
    (FILTER,
     "\tbool use_busy_dev = gres_use_busy_dev(sock_gres->gres_state_node, 0);\n\n"
     "\tgres_js = sock_gres->gres_state_job->gres_data;\n"
     "\tgres_per_bit = gres_js->gres_per_node;\n",
     "\tbool use_busy_dev = gres_use_busy_dev(sock_gres->gres_state_node, 0);\n"
     "\tint *order, k; /* tessera best fit */\n\n"
     "\tgres_js = sock_gres->gres_state_job->gres_data;\n"
     "\tgres_per_bit = gres_js->gres_per_node;\n", 1),
    # The walk per socket, then the walk over any socket: in the order.
    (FILTER,
     "\t\tfor (t = 0; t < gres_ns->topo_cnt; t++) {\n"
     "\t\t\tif (use_busy_dev &&\n",
     "\t\tfor (k = 0; k < gres_ns->topo_cnt; k++) {\n"
     "\t\t\tt = order[k]; /* tessera best fit */\n"
     "\t\t\tif (use_busy_dev &&\n", 1),
    (FILTER,
     "\t/* Select available GRES with sufficient resources */\n"
     "\tfor (t = 0; (t < gres_ns->topo_cnt) && (alloc_gres_cnt == 0); t++) {\n",
     "\t/* Select available GRES with sufficient resources */\n"
     "\tfor (k = 0; (k < gres_ns->topo_cnt) && (alloc_gres_cnt == 0); k++) {\n"
     "\t\tt = order[k]; /* tessera best fit */\n", 1),
    # The order is made once the socket checks passed (their early returns stay leak-free).
    (FILTER,
     "\t * Third: Use any available GRES.\n\t */\n",
     "\t * Third: Use any available GRES.\n\t */\n"
     "\torder = _tessera_topo_order(gres_ns); /* tessera best fit */\n", 1),
    (FILTER,
     "\t\talloc_gres_cnt += gres_per_bit;\n\t}\n\n\txfree(used_sock);\n}\n",
     "\t\talloc_gres_cnt += gres_per_bit;\n\t}\n\n\txfree(used_sock);\n"
     "\txfree(order); /* tessera best fit */\n}\n", 1),
    # A line in slurmctld's log, so that an operator (and the slurm suite) sees which plugin runs.
    (PLUGIN,
     "extern int init(void)\n{\n\tcommon_init();\n",
     "extern int init(void)\n{\n\tcommon_init();\n"
     "\tif (running_in_slurmctld())\n"
     "\t\tinfo(\"tessera best fit: a shard or mps job gets the GPU with the fewest free that hold it\");\n", 1),
    (PLUGIN,
     '#include "src/common/xstring.h"\n',
     '#include "src/common/xstring.h"\n#include "src/common/run_in_daemon.h"\n', 1),
]


def main(argv):
    if len(argv) != 2:
        sys.exit("usage: best_fit.py SLURM_SOURCE_DIR")
    root = argv[1]
    texts = {}
    for path in (FILTER, PLUGIN):
        try:
            with open(f"{root}/{path}", encoding="utf-8") as f:
                texts[path] = f.read()
        except OSError as e:
            sys.exit(f"best_fit.py: cannot read {root}/{path}: {e.strerror}")
        if MARKER in texts[path]:
            sys.exit(f"best_fit.py: {root}/{path} is edited already ('{MARKER}'); unpack afresh")
    for path, anchor, replacement, count in EDITS:
        found = texts[path].count(anchor)
        if found != count:
            first = anchor.strip().splitlines()[0]
            sys.exit(f"best_fit.py: {root}/{path}: '{first}' found {found} times, expected {count}"
                     " (not Slurm 22.05.8's cons_tres?)")
        texts[path] = texts[path].replace(anchor, replacement)
    for path, text in texts.items():
        with open(f"{root}/{path}", "w", encoding="utf-8") as f:
            f.write(text)
    print(f"best_fit.py: edited {FILTER} (_pick_specific_topo: GPUs by free shards, ascending)"
          f" and {PLUGIN} (init's log line)")


if __name__ == "__main__":
    main(sys.argv)
