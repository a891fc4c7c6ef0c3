"""Shared infrastructure the layers above use: settings (`config`), authentication (`auth`),
logging (`logs`), Prometheus metrics (`metrics`), overload refusals (`overload`) and the OS
memory trimmer (`rss_trim`). Nothing here knows about sessions or the loop."""
