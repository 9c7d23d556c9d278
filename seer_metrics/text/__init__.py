"""Text handling: cleaning what no database accepts, JSON Lines reading, redaction."""
