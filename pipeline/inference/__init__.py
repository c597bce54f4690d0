"""What the sweep and the report both infer from win counts: the fixed-n intervals and tests
(`stats`), the confidence sequences a stop rule reads (`anytime`), and the claims' verdict
rules with the claims a win count decides, each declared once (`claims`). Imports the engine
only; the sweep and the report import it."""
