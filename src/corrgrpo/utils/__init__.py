"""Small helpers shared by the command-line tools."""
