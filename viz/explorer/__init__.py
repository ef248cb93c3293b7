"""The backward stepper: `explore(loss)` writes one offline HTML page that walks the backward
pass node by node, with each op's local rule and the gradients the engine computed."""
from .page import Explorer, explore
from .rules import LOCAL_RULES, local_rule

__all__ = ["LOCAL_RULES", "Explorer", "explore", "local_rule"]
