"""Judging a day: its plan (sample, estimate, budget gate) and budget line, the judging of the
partition, batch mode's ledger, and the guards of the judging step's process."""

# Runs of `seer_daily_job` carry this tag with the evaluator kind (lexical or openai).
EVALUATOR_TAG = "seer/evaluator"
