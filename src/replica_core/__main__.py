"""``python -m replica_core``: the ``replica-core`` command."""
from replica_core.cli import entry

entry()
