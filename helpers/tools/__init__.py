"""What the suite's own tests and CI use, and the command line: the shared-server check, the divergence register, the ACL user and the learner's pre-flight check (``python -m helpers doctor``)."""
