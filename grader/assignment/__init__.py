"""An assignment as the grader reads it: spec.toml, its cases and concepts, and the student kit's layout."""
