"""spark-submit entry point for one big cluster split into fetcher lanes.

    spark-submit [--master URL] spark/shard.py SCENARIO.toml [--shards N] [--out DIR] [--set K=V]

Without a master spark-submit runs ``local[*]``. Executors must be able to import replica_core
(see README "Spark").
"""
import sys

from replica_core.cli import main

if __name__ == "__main__":
    sys.exit(main(["shard", *sys.argv[1:]]))
