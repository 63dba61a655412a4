"""AegisBench evaluation side: prediction loading, the shared scorer, robustness summaries, runners, reports."""
