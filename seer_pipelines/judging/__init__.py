"""Judging a day: its plan (sample, estimate, budget gate) and budget line, the judging of the
partition, batch mode's ledger, and the guards of the judging step's process."""
