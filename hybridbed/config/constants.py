"""Model constants that more than one package uses, each with the source of its value."""

from __future__ import annotations

# Hadoop's mapreduce.reduce.shuffle.parallelcopies default: a reducer fetches from at most this many map
# outputs at once (emulated workers and the simulator alike).
PARALLEL_FETCHES = 5
# Hadoop's mapreduce.reduce.shuffle.read.timeout and .connect.timeout defaults (Fetcher.DEFAULT_READ_TIMEOUT and
# DEFAULT_CONNECTION_TIMEOUT, 3 minutes): a fetch connection that connects or reads nothing this long fails,
# and its fetcher takes another host (docs/reliability.md: what each backend then fetches again).
SHUFFLE_READ_TIMEOUT_S = 180.0
# HDFS's dfs.client.socket-timeout default (60 s): a map's read of its input block that stalls this long fails.
HDFS_READ_TIMEOUT_S = 60.0

MB = 1_000_000

# How a trace's job sizes become tasks (workloads/derivation.py), from Hadoop and the JobPacker paper.
# Hadoop's dfs.blocksize default (hdfs-default.xml); FileInputFormat splits at the block size.
HADOOP_BLOCK_BYTES = 128 * MB
# The JobPacker paper's Fig. 5 job (§4.3.1): 3472 maps and 169 reduces; its green zone's edge (where one
# rack pair's share D_s / (r_map * r_red) crosses 1.125 GB) puts its shuffle at about 90 GB.
FIG5_MAPS, FIG5_REDUCES, FIG5_SHUFFLE_BYTES = 3472, 169, 90_000 * MB
# Fig. 5's per-task times: the map stage's wave time is the table's step per map wave saved (630 at six
# waves, 211 at one); the reduce stage is the single-wave plateau (201) less one map wave.
FIG5_MAP_S = (630 - 211) / 5
FIG5_REDUCE_S = 201 - FIG5_MAP_S
# Container launch and JVM start, part of every task's time (no paper number; about a second in YARN).
TASK_OVERHEAD_S = 1.0
# Fig. 5's job gets its 169 reducers: ceil(90 GB / 533 MB) = 169.
REDUCE_INPUT_BYTES = 533 * MB
# Fig. 5 gives no output size; its reducers' time is taken as all reduce input.
MAP_RATE_BYTES_S = HADOOP_BLOCK_BYTES / (FIG5_MAP_S - TASK_OVERHEAD_S)
REDUCE_RATE_BYTES_S = REDUCE_INPUT_BYTES / (FIG5_REDUCE_S - TASK_OVERHEAD_S)
