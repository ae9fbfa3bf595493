"""grading"""
