"""Tensors -> Verdict: comparing a student's result with the reference and naming the mistake."""
