"""What only the suite's own tests and CI use: the command line, the shared-server check, the divergence register."""
