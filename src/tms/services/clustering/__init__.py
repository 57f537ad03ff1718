"""Clustering: planning (`plan`) and execution (`execute`) of replacecommits that rewrite small
file groups into larger ones."""
