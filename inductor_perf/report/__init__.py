"""The only formatters: text, markdown and JSON of summaries, comparisons and ranks; the HTML page."""
