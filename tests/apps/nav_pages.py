"""The registry entries of the test app nav_app.py (PageEntry works for any page file)."""

from ui.shared.links import PageEntry

PAGE_A = PageEntry("tests/apps/nav_a.py", "A", "a", ":material/looks_one:", "Binds p and schedule.")
PAGE_B = PageEntry("tests/apps/nav_b.py", "B", "b", ":material/looks_two:", "Binds p, m and schedule.")
