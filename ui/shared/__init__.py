"""What every page shares: the URL and its widgets, links, the page frame, tables and the bounded cache."""
