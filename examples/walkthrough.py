"""The article, runnable: a thin entry point for `transformer.walkthrough` (the lesson lives in the
installed package, so `python -m transformer explain` works without this folder).

    python examples/walkthrough.py [--section NAME] [--figures DIR] [--checkpoint PATH]
"""
import sys

from transformer.walkthrough import main


def load_plots():
    import viz.plots
    return viz.plots


if __name__ == "__main__":
    sys.exit(main(load_plots=load_plots))
