"""What a batch keeps across runs: the ledger (what is graded) and the gradebook (every run's scores)."""
