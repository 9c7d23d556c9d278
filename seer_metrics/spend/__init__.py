"""What judging may spend: the day's sample, the budget, and the cost estimated before any call."""
