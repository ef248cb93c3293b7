"""The graph as SVG once per module state, laid out by Graphviz, so the page can open and close
modules with no Python behind it.

A view is the picture `draw_graph(collapse=depth, expand=expand + [focus])` draws: the default
view has no focus; clicking a module box in the page shows the view focused on that module (it
and its ancestors open, as `--expand` does); clicking an opened module's frame goes back to its
parent's view. Views are made breadth-first from the default, up to `max_views`.
"""
from __future__ import annotations

import re

from ..graph import build_scene
from ..render import pipe

DEFAULT = "default"
MAX_VIEWS = 160  # the default translator has 93 module states; each view is one SVG of the graph


def view_id(path: str) -> str:
    return f"module:{path}"


def svg_text(scene) -> str:
    """The scene drawn as SVG by the renderer viz.render finds, without the XML prologue."""
    svg = pipe(scene.to_graphviz("svg"), "svg").decode("utf-8")
    return re.sub(r"<!--.*?-->\n?", "", svg[svg.index("<svg"):], flags=re.S)


def _keys(scene, index: dict) -> dict:
    """node index (as text, a JSON key) -> the SVG node keys that show it (its record and its op, or its module box)."""
    keys = {}
    for obj_id, i in index.items():
        shown = [k for k in (scene.source_key.get(obj_id), scene.target_key.get(obj_id)) if k]
        if shown:
            keys[str(i)] = list(dict.fromkeys(shown))
    return keys


def _cluster_title(path: str) -> str:
    return f"cluster_{path or 'model'}"


def build_views(loss, model, depth, expand, rankdir: str, max_nodes: int, index: dict,
                max_views: int = MAX_VIEWS) -> tuple[dict, list]:
    """(views by id, notes): each view's svg, node keys, and what a click on a box or frame opens."""
    expand = list(expand or ())
    tensor_graph = hasattr(loss, "requires_grad")
    options = {"model": model, "collapse": depth, "rankdir": rankdir, "max_nodes": max_nodes} \
        if tensor_graph else {"rankdir": rankdir, "max_nodes": max_nodes}
    default = build_scene(loss, expand=expand, **options) if tensor_graph else build_scene(loss, **options)
    default_open = getattr(default, "tree", None)
    views, queue, notes = {}, [(DEFAULT, None, default)], []
    wanted = {DEFAULT}
    while queue:
        name, focus, scene = queue.pop(0)
        if scene is None:
            scene = build_scene(loss, expand=expand + [focus], **options)
        clicks = {}
        for key, path in scene.box_path.items():
            target = view_id(path)
            if target not in wanted and len(wanted) < max_views:
                wanted.add(target)
                queue.append((target, path, None))
            if target in wanted:
                clicks[key] = target
        if focus is not None:
            clicks.update(_closing_clicks(focus, default_open, expand))
        views[name] = {"svg": svg_text(scene), "keys": _keys(scene, index), "clicks": clicks,
                       "boxes": dict(scene.box_path), "focus": focus}
    if len(wanted) >= max_views:
        notes.append(too_many_views(max_views))
    return views, notes


def too_many_views(max_views: int) -> str:
    """The note of a page whose module states were cut at `max_views`, with what gives more."""
    return (f"only {max_views} module states were laid out, so some boxes do not open: lay out more with "
            f"--max-views {2 * max_views} (explore(..., max_views={2 * max_views}) in Python; the page grows with "
            "each), or open the module you want from the start with --expand PATH (expand=[PATH])")


def _closing_clicks(focus: str, tree, expand) -> dict:
    """Frame title -> view: closing an opened module shows its parent's view (or the default)."""
    clicks, path = {}, focus
    while path is not None and not _open_anyway(tree, path, expand):
        parent = tree.parent[path]
        closes_to = DEFAULT if parent is None or _open_anyway(tree, parent, expand) else view_id(parent)
        clicks[_cluster_title(path)] = closes_to
        path = parent
    return clicks


def _open_anyway(tree, path: str, expand) -> bool:
    """Open in the default view: by depth, as a container, or named by --expand."""
    return tree.is_open(path) or path in tree.forced_open or path in expand
