"""Student and CI commands: self-check, grade a pull request, release the student kit."""
