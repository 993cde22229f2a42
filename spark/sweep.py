"""spark-submit entry point for configuration sweeps.

    spark-submit [--master URL] spark/sweep.py GRID.toml [--out DIR] [--slices N]

Without a master spark-submit runs ``local[*]``. Executors must be able to import replica_core
(see README "Spark").
"""
import sys

from replica_core.cli import main

if __name__ == "__main__":
    sys.exit(main(["sweep", *sys.argv[1:]]))
