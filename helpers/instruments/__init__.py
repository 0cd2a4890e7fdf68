"""Instruments of the race lab: forced schedules, the explorer, threaded runs, histories, measurements, plots."""
