"""The regex IR every front end builds and every back end reads: nodes (`nodes.py`), rule
sets of nodes that name each other (`rules.py`), and the DAG walk over both."""
