"""What to fix first: findings ranked by the time they would save per step (docs/advisor.md)."""
