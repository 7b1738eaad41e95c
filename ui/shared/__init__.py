"""What two pages or more use: the URL and its widgets, links, the page frame, tables, caching, figures."""
