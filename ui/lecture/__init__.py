"""The Lecture page's own helpers: its words, its cached answers and its live figures."""
