"""The subject of the lessons: each race strategy as an application writes it."""
