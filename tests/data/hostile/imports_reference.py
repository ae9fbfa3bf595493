# Hostile: a three-line "solution" that finds the installed grader and imports the trusted reference.
import os, sys
sys.path.append(os.path.dirname(os.path.dirname(sys.modules["grader"].__file__)))
from reference import causal_mask, padding_mask, combine_masks, masked_attention  # noqa: E402,F401
